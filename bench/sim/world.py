"""The MuJoCo world of one task: table, task objects, robot, grasp welds, built with ``MjSpec``.

The model is compiled once per environment; resets only rewrite ``qpos`` (so a
reset is cheap and the renderer's GL context stays valid). The table is a
collision box whose top is the bundle's ``TableSpec`` (centre, size, yaw,
height); it lives in :data:`~bench.sim.objects.TABLE_GROUP`, hidden in the wrist
observation because the Gaussian background already shows the real table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from bench.errors import BenchError
from bench.geometry import mat_to_quat, pose, top_down_mat, yaw_mat, yaw_quat
from bench.sim.grasp import CLOSING_EPS, Grasp, GraspConfig, add_grasp_welds
from bench.sim.objects import TABLE_GROUP, add_object
from bench.sim.parallel_jaw import HAND_BODY, LEFT_PAD, RIGHT_PAD
from bench.sim.robot import FloatingGripper, Robot
from bench.sim.state import ObjectState, TaskState
from bench.sim.task_spec import TaskSpec

TABLE_THICKNESS = 0.04  # m; only the top face matters
FELL_THROUGH_DEPTH = 0.03  # m below the table top, inside the footprint -> fell through
WORKSPACE_MARGIN = 0.10  # m beyond the table edge -> left the workspace
HOME_HEIGHT = 0.25  # m above the table for the TCP at reset
TCP_CEILING = 0.6  # m above the table: the TCP target is clipped below this
_OBJ_BODY = int(mujoco.mjtObj.mjOBJ_BODY)  # read once: no enum lookup per frame


def add_scene_lights(spec: mujoco.MjSpec, table: Any) -> None:
    """The light every task world adds: a "sun" 2 m above ``table``'s centre, no shadow.

    ``table``: anything with ``center`` (x, y) and ``height`` (a :class:`TableGeometry` or
    a bundle's ``TableSpec``). A ground-truth room decorating the world keeps this light, so
    a capture of that room adds it too (:func:`bench.worlds.rooms.build_room_model`).
    """
    spec.worldbody.add_light(
        name="sun",
        pos=[*table.center, table.height + 2.0],
        dir=[0.2, 0.3, -1],
        castshadow=False,
        diffuse=[0.4, 0.4, 0.4],
        specular=[0.05, 0.05, 0.05],
    )


@dataclass(frozen=True)
class TableGeometry:
    """Tabletop in the world frame: centre (x, y) m, size (x, y) m, yaw degrees, top height m."""

    center: tuple[float, float]
    size: tuple[float, float]
    yaw_deg: float
    height: float

    @classmethod
    def from_scene_table(cls, table: object | None) -> TableGeometry:
        """Read a ``bench.scene.bundle.TableSpec`` (or anything with the same fields)."""
        if table is None:
            raise BenchError(
                "scene bundle has no table spec; add a 'table' entry "
                "({center, size, yaw_deg, height}) to scene.json"
            )
        try:
            geometry = cls(
                center=tuple(map(float, table.center)),
                size=tuple(map(float, table.size)),
                yaw_deg=float(table.yaw_deg),
                height=float(table.height),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise BenchError(
                f"scene table spec is malformed ({exc}); it needs center [x, y], "
                "size [sx, sy], yaw_deg and height"
            ) from None
        values = (*geometry.center, *geometry.size, geometry.yaw_deg, geometry.height)
        if not np.all(np.isfinite(values)) or min(geometry.size) <= 0:
            raise BenchError(
                f"scene table spec has non-finite values or a non-positive size: "
                f"{geometry}; fix scene.json"
            )
        return geometry

    @property
    def yaw(self) -> float:
        """Table yaw, radians."""
        return float(np.deg2rad(self.yaw_deg))

    def world_from_table(self) -> np.ndarray:  # [4, 4]
        """World pose [4, 4] of the table frame (centre at table height, yawed)."""
        return pose(yaw_mat(self.yaw), np.array([*self.center, self.height]))

    def to_table_xy(self, points: np.ndarray) -> np.ndarray:  # [M, >=2] world -> [M, 2] table frame
        """World points in the table frame (xy only)."""
        local = np.atleast_2d(points)[:, :2] - np.asarray(self.center)
        return local @ yaw_mat(self.yaw)[:2, :2]


def check_layout_fits(task: TaskSpec, table: TableGeometry, *, margin: float = 0.02) -> None:
    """Refuse a table too small for the task's objects at every grid pose."""
    need_x, need_y = task.required_half_extent()
    if need_x + margin > table.size[0] / 2 or need_y + margin > table.size[1] / 2:
        raise BenchError(
            f"table {table.size[0]:.2f} x {table.size[1]:.2f} m is too small for task "
            f"{task.name!r} "
            f"(needs at least {2 * (need_x + margin):.2f} x {2 * (need_y + margin):.2f} m); "
            "fix the table size in scene.json"
        )


class World:
    """A compiled MuJoCo world plus the bookkeeping the environment needs.

    Args:
        task: Task definition.
        table: Tabletop geometry (world frame).
        robot: Robot implementation (default: :class:`FloatingGripper`).
        grasp: Grasp rule settings.
        physics_dt: Physics time step, seconds.
        decorate: Optional ``f(spec)`` called on the ``MjSpec`` after the task and robot are
            added, before compiling: adds scenery (e.g. a ground-truth room of
            :mod:`bench.worlds.rooms`). It must add visual-only geoms (contype = conaffinity = 0)
            so the physics is unchanged.
    """

    def __init__(
        self,
        task: TaskSpec,
        table: TableGeometry,
        *,
        robot: Robot | None = None,
        grasp: GraspConfig | None = None,
        physics_dt: float = 0.002,
        decorate: Callable[[mujoco.MjSpec], None] | None = None,
    ) -> None:
        check_layout_fits(task, table)
        self.task, self.table = task, table
        self.robot = robot or FloatingGripper()
        self.grasp_config = grasp or GraspConfig()
        self.physics_dt = physics_dt
        self._decorate = decorate
        self.world_from_table = table.world_from_table()
        if hasattr(self.robot, "world_from_table"):  # arms are mounted in the table frame
            self.robot.world_from_table = self.world_from_table
        # contact label -> geom name of the finger pads (a model's own gripper names its own)
        self._pads = dict(getattr(self.robot, "pad_geoms", {LEFT_PAD: LEFT_PAD,
                                                            RIGHT_PAD: RIGHT_PAD}))
        spec = self._build_spec()
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.robot.bind(self.model)
        self.grasp = Grasp(
            self.model,
            self.grasp_config,
            hand_body=HAND_BODY,
            objects=[task.actor.name],
            left_pad=self._pads[LEFT_PAD],
            right_pad=self._pads[RIGHT_PAD],
            finger_kp=getattr(
                self.robot,
                "finger_kp",
                getattr(getattr(self.robot, "config", None), "finger_kp", 1000.0),
            ),
        )
        self._object_ids = {
            o.name: mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, o.name)
            for o in task.objects
        }
        self._object_qpos = {
            o.name: int(
                self.model.jnt_qposadr[
                    mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f"{o.name}_free")
                ]
            )
            for o in task.objects
        }
        self._geom_label = self._label_geoms()
        self.home = self.home_pose()
        mujoco.mj_forward(self.model, self.data)  # valid kinematics before the first reset

    # -- construction ---------------------------------------------------------------------
    def _build_spec(self) -> mujoco.MjSpec:
        spec = mujoco.MjSpec()
        spec.modelname = f"splatbench_{self.task.name}"
        spec.option.timestep = self.physics_dt
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.impratio = 10.0  # stiffer friction: pinched objects do not creep
        spec.visual.global_.offwidth = 1024
        spec.visual.global_.offheight = 1024
        spec.visual.quality.shadowsize = 0  # shadows off: they cost ~20x in software GL
        spec.visual.map.znear = 0.002
        spec.visual.headlight.ambient = [0.45, 0.45, 0.45]
        spec.visual.headlight.diffuse = [0.5, 0.5, 0.5]
        spec.visual.headlight.specular = [0.05, 0.05, 0.05]
        table = self.table
        add_scene_lights(spec, table)
        spec.worldbody.add_geom(
            name="table",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            group=TABLE_GROUP,
            size=[table.size[0] / 2, table.size[1] / 2, TABLE_THICKNESS / 2],
            pos=[*table.center, table.height - TABLE_THICKNESS / 2],
            quat=yaw_quat(table.yaw),
            friction=[0.8, 0.005, 0.0001],
            rgba=[0.55, 0.45, 0.35, 1],
        )
        x, y, yaw = self.task.grid.condition(0)
        for obj, (ox, oy, oyaw) in zip(
            self.task.objects,
            ((x, y, yaw), (*self.task.receptacle_xy, np.deg2rad(self.task.receptacle_yaw_deg))),
            strict=True,
        ):
            world = self.world_from_table @ np.array([ox, oy, obj.resting_height(), 1.0])
            add_object(spec.worldbody, obj, pos=world[:3], yaw=oyaw + table.yaw, spec=spec)
        # one free camera for every rendered view: its pose and fov are set before each draw
        spec.worldbody.add_camera(name="render_cam", fovy=90.0)
        self.robot.build(spec, home=self.home_pose())
        add_grasp_welds(
            spec, hand_body=HAND_BODY, objects=[self.task.actor.name], config=self.grasp_config
        )
        if self._decorate is not None:  # scenery hook (visual only), see the class docstring
            self._decorate(spec)
        return spec

    def home_pose(self) -> np.ndarray:  # [4, 4]
        """TCP home: above the table centre, pointing down, fingers at the task's home yaw.

        The yaw is the table's plus the task's ``home_yaw_deg`` (0 by default: fingers along
        the table's x axis).
        """
        centre = np.array([*self.table.center, self.table.height + HOME_HEIGHT])
        return pose(top_down_mat(self.table.yaw + np.deg2rad(self.task.home_yaw_deg)), centre)

    def _label_geoms(self) -> list[str]:
        """Contact label per geom: 'table', 'left_pad', 'right_pad', or its body name."""
        labels = []
        pad_label = {geom: label for label, geom in self._pads.items()}
        for geom in range(self.model.ngeom):
            name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_GEOM, geom) or ""
            if name == "table":
                labels.append(name)
            elif name in pad_label:
                labels.append(pad_label[name])
            else:
                body = int(self.model.geom_bodyid[geom])
                labels.append(
                    mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, body) or "world"
                )
        return labels

    # -- runtime --------------------------------------------------------------------------
    def reset(self, actor_xy_yaw: tuple[float, float, float], *, settle_steps: int = 100) -> None:
        """Put the actor at a table-frame (x, y, yaw), everything else at its home, and settle."""
        model, data = self.model, self.data
        mujoco.mj_resetData(model, data)
        self.grasp.reset(data)
        rec = (*self.task.receptacle_xy, np.deg2rad(self.task.receptacle_yaw_deg))
        for obj, (ox, oy, oyaw) in zip(self.task.objects, (actor_xy_yaw, rec), strict=True):
            world = self.world_from_table @ np.array([ox, oy, obj.resting_height(), 1.0])
            adr = self._object_qpos[obj.name]
            yaw = oyaw + self.table.yaw
            data.qpos[adr : adr + 3] = world[:3]
            data.qpos[adr + 3 : adr + 7] = yaw_quat(yaw)
        self.robot.reset(data, world_from_tcp=self.home, opening=self.robot.max_opening)
        mujoco.mj_forward(model, data)
        for _ in range(settle_steps):
            mujoco.mj_step(model, data)

    def step_frame(  # positions [n, 3], quaternions [n, 4]
        self, positions: np.ndarray, quaternions: np.ndarray, *, commanded_opening: float,
        batched: bool = True,
    ) -> None:
        """One control frame: per physics step, the grasp rule, the TCP command, ``mj_step``.

        The fast path (``batched``, a mocap robot, a grasp rule that is idle this frame:
        :meth:`~bench.sim.grasp.Grasp.idle_from`) hands the frame's interpolated mocap
        targets to MuJoCo's ``rollout`` in one call, then checks from the recorded finger
        opening that the rule would have stayed idle at every step; if not, it restores the
        frame's starting state and runs :meth:`step_frame_reference`. Either way the states
        are bit-identical to the reference (tests/bench/sim/test_sim_physics_batch.py and the
        golden digests of test_sim_task_files.py).
        """
        stepper = self._stepper if batched else None
        if stepper is None:
            self.step_frame_reference(positions, quaternions, commanded_opening=commanded_opening)
            return
        idle = self.grasp.idle_from(commanded_opening, self.robot.opening(self.data))
        if idle is None or not stepper.run(positions, quaternions, commanded_opening,
                                           check_open=idle == "while_open"):
            self.step_frame_reference(positions, quaternions, commanded_opening=commanded_opening)
            return
        self.grasp.skip_idle()

    def step_frame_reference(  # positions [n, 3], quaternions [n, 4]
        self, positions: np.ndarray, quaternions: np.ndarray, *, commanded_opening: float
    ) -> None:
        """The plain loop: grasp rule, robot command and ``mj_step`` once per physics step."""
        model, data, robot, grasp = self.model, self.data, self.robot, self.grasp
        for position, quaternion in zip(positions, quaternions, strict=True):
            opening = grasp.update(
                model, data, commanded_opening=commanded_opening,
                measured_opening=robot.opening(data),
            )
            robot.command(data, position=position, quaternion=quaternion, opening=opening)
            mujoco.mj_step(model, data)

    @functools.cached_property
    def _stepper(self) -> _FrameStepper | None:
        layout = getattr(self.robot, "mocap_layout", None)
        return None if layout is None else _FrameStepper(self, layout())

    def contacts(self) -> frozenset[tuple[str, str]]:
        """Sorted label pairs of all current contacts."""
        if self.data.ncon == 0:
            return frozenset()
        pairs = set()
        for g1, g2 in self.data.contact.geom:
            a, b = self._geom_label[g1], self._geom_label[g2]
            if a != b:
                pairs.add((a, b) if a < b else (b, a))
        return frozenset(pairs)

    def object_state(self, name: str) -> ObjectState:
        """Pose and velocity of one object from the MuJoCo data."""
        body = self._object_ids[name]
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, self.data, _OBJ_BODY, body, velocity, 0)
        return ObjectState(
            pos=self.data.xpos[body].copy(),
            quat=self.data.xquat[body].copy(),
            linvel=velocity[3:].copy(),
            angvel=velocity[:3].copy(),
        )

    def task_state(self, frame: int = 0) -> TaskState:
        """The privileged snapshot of the world at ``frame`` (objects, TCP, gripper, contacts)."""
        tcp = self.robot.tcp_pose(self.data)
        return TaskState(
            objects={o.name: self.object_state(o.name) for o in self.task.objects},
            contacts=self.contacts(),
            attached=self.grasp.attached_name,
            tcp_pos=tcp[:3, 3].copy(),
            tcp_quat=mat_to_quat(tcp[:3, :3]),
            opening=self.robot.opening(self.data),
            table_height=self.table.height,
            frame=frame,
        )

    def failure(self, state: TaskState) -> str | None:
        """Why the episode cannot continue, or None: an object fell through the table / left."""
        half = np.asarray(self.table.size) / 2
        for name, obj in state.objects.items():
            if not np.all(np.isfinite(obj.pos)):
                return f"physics_diverged:{name}"
            local = self.table.to_table_xy(obj.pos)[0]
            on_footprint = bool(np.all(np.abs(local) <= half))
            below = obj.pos[2] < self.table.height - FELL_THROUGH_DEPTH
            if on_footprint and below:
                return f"fell_through_table:{name}"
            if not np.all(np.abs(local) <= half + WORKSPACE_MARGIN) or below:
                return f"left_workspace:{name}"
        return None

    def clip_target(  # [4, 4] -> ([4, 4], clipped)
        self, world_from_tcp: np.ndarray
    ) -> tuple[np.ndarray, bool]:
        """Clip a TCP target into the workspace box above the table; returns (target, clipped)."""
        local = np.linalg.inv(self.world_from_table) @ np.append(world_from_tcp[:3, 3], 1.0)
        half = np.asarray(self.table.size) / 2 + WORKSPACE_MARGIN
        low = np.array([-half[0], -half[1], 0.005])
        high = np.array([half[0], half[1], TCP_CEILING])
        clipped = np.clip(local[:3], low, high)
        out = world_from_tcp.copy()
        out[:3, 3] = (self.world_from_table @ np.append(clipped, 1.0))[:3]
        return out, bool(np.any(clipped != local[:3]))


class _FrameStepper:
    """A frame's physics steps in one ``mujoco.rollout`` call (:meth:`World.step_frame`).

    Buffers are allocated once per world; each frame writes the control rows (the robot's
    finger command and the world's other controls, the mocap target of every step),
    rolls out, and reads the finger opening before every step from the recorded states.
    """

    # enum values read once (an enum attribute lookup per frame is what issue 32 removed)
    _CONTROL = int(mujoco.mjtState.mjSTATE_CTRL) | int(mujoco.mjtState.mjSTATE_EQ_ACTIVE) \
        | int(mujoco.mjtState.mjSTATE_MOCAP_POS) | int(mujoco.mjtState.mjSTATE_MOCAP_QUAT)
    _FULL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
    _SAVE = int(mujoco.mjtState.mjSTATE_INTEGRATION)

    def __init__(self, world: World, layout: dict[str, int]) -> None:
        from mujoco.rollout import Rollout

        model = world.model
        self.world, self.layout = world, layout
        self._rollout = Rollout(nthread=0)  # no pool: this thread steps
        self._models, self._datas = [model], [world.data]
        # control vector = ctrl, eq_active, mocap_pos, mocap_quat (mjtState bit order)
        self._pos_at = model.nu + model.neq + 3 * layout["mocap"]
        self._quat_at = model.nu + model.neq + 3 * model.nmocap + 4 * layout["mocap"]
        self._start = np.empty((1, mujoco.mj_stateSize(model, self._FULL)))
        self._warm = np.empty((1, model.nv))
        self._saved = np.empty(mujoco.mj_stateSize(model, self._SAVE))
        self._control_row = np.empty(mujoco.mj_stateSize(model, self._CONTROL))
        self._buffers: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        #: Frames stepped in one call, and frames replayed step by step after one.
        self.counts = {"batched": 0, "replayed": 0}
        # opening = qpos[left] + qpos[right]; qpos starts after time in a FULLPHYSICS state
        self._left, self._right = 1 + layout["left_qpos"], 1 + layout["right_qpos"]

    def _arrays(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if n not in self._buffers:
            model = self.world.model
            self._buffers[n] = (np.empty((1, n, self._control_row.size)),
                                np.empty((1, n, self._start.shape[1])),
                                np.empty((1, n, model.nsensordata)))
        return self._buffers[n]

    def run(self, positions: np.ndarray, quaternions: np.ndarray, commanded: float, *,
            check_open: bool) -> bool:
        """Step the frame; False (state restored, nothing stepped) if the rule would have acted."""
        world = self.world
        model, data = world.model, world.data
        n = len(positions)
        control, states, sensors = self._arrays(n)
        if check_open:
            mujoco.mj_getState(model, data, self._saved, self._SAVE)
        # the robot's own command of the first step gives the ctrl row (finger servo)
        world.robot.command(data, position=positions[0], quaternion=quaternions[0],
                            opening=commanded)
        mujoco.mj_getState(model, data, self._control_row, self._CONTROL)
        control[0] = self._control_row
        control[0, :, self._pos_at:self._pos_at + 3] = positions
        control[0, :, self._quat_at:self._quat_at + 4] = quaternions
        mujoco.mj_getState(model, data, self._start[0], self._FULL)
        self._warm[0] = data.qacc_warmstart
        self._rollout.rollout(self._models, self._datas, self._start, control,
                              control_spec=self._CONTROL, skip_checks=True, nstep=n,
                              initial_warmstart=self._warm, state=states, sensordata=sensors)
        if check_open and n > 1:
            # the rule's reading before steps 1..n-1: the opening after steps 0..n-2
            measured = states[0, :-1, self._left] + states[0, :-1, self._right]
            if not bool(np.all(commanded >= measured - CLOSING_EPS)):
                mujoco.mj_setState(model, data, self._saved, self._SAVE)  # the rule acts
                self.counts["replayed"] += 1
                return False
        self.counts["batched"] += 1
        return True
