"""Rope routing (``splatbench/Rope-v0``): route a spring-mass rope between the posts of a clip.

World: the scene's table (a MuJoCo box), the floating gripper (:mod:`bench.sim.robot`), a
clip of two static posts on the table, and a 30 cm rope of 31 spring-mass nodes (springs to
the two nearest neighbours on each side: stretch + bending) simulated in Warp and coupled to
MuJoCo by :mod:`.coupling` (pads, fingers and posts collide; reactions go back to the hand;
frictional force-threshold grasp). The rope is drawn as Gaussians bound to its nodes by LBS,
rendered together with the background and composited with MuJoCo's robot by depth (the same
``bench.render`` path as Cup/Tape/Pen).

Success (after the paper's routing rule, scaled to this rope): at least ``MIN_CROSSINGS``
spring segments cross the clip's opening (the vertical plane between the posts, below their
tops), the gripper has let go, held for 3 frames. Progress stages (weights): reach the rope
end 0.1, grasp 0.2, lift 6 cm 0.2, over the clip 0.2, routed 0.3 (each stage's credit is
kept once earned). Gymnasium contract as :class:`bench.sim.env.SplatBenchEnv`: same action
rows, ``proprio``, ``wrist_rgb`` / ``object_state`` (here the rope nodes, [93]).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from bench.geometry import (
    interpolate_pose,
    mat_to_quat,
    pose,
    rotvec_to_mat,
    top_down_mat,
    yaw_quat,
)
from bench.sim.config import EnvConfig
from bench.sim.env import ACTION_DIM, PROPRIO_DIM, check_table_registration, resolve_scene
from bench.sim.env_render import EnvRendering
from bench.sim.grasp import GraspConfig
from bench.sim.parallel_jaw import HAND_BODY
from bench.sim.robot import FloatingGripper
from bench.sim.softbody.coupling import GeomColliders, SoftGrasp, SoftGraspConfig
from bench.sim.softbody.model import SpringMassConfig, SpringMassModel, neighbour_springs
from bench.sim.softbody.task import ROPE_GRID, ROPE_TASK, RopeTask  # noqa: F401 - re-export
from bench.sim.state import FrameState
from bench.sim.world import TABLE_THICKNESS, TableGeometry

ROPE_NODES = 31
ROPE_LENGTH = 0.30  # m
ROPE_MASS = 0.03  # kg
ROPE_STIFFNESS = 300.0  # N/m per spring
ROPE_DAMPING = 0.05  # N s/m
ROPE_RADIUS = 0.005  # m
CLIP_XY = (0.0, 0.10)  # table frame, m
CLIP_GAP = 0.04  # m between the posts' inner faces
POST_SIZE = (0.01, 0.01, 0.02)  # half extents, m
MIN_CROSSINGS = 3
STAGES = (("reach", 0.1), ("grasp", 0.2), ("lift", 0.2), ("over_clip", 0.2), ("routed", 0.3))


def rope_model(start: np.ndarray, direction: np.ndarray) -> SpringMassModel:  # [3], [3]
    """The rope's spring-mass model: nodes from ``start`` along ``direction``, neighbour springs."""
    nodes = start + np.outer(np.linspace(0.0, ROPE_LENGTH, ROPE_NODES), direction)
    springs, lengths = neighbour_springs(nodes, radius=2.05 * ROPE_LENGTH / (ROPE_NODES - 1),
                                         max_neighbors=4)
    return SpringMassModel(nodes, np.full(ROPE_NODES, ROPE_MASS / ROPE_NODES), springs, lengths,
                           ROPE_STIFFNESS, ROPE_DAMPING)


def rope_gaussians(nodes: np.ndarray, *, per_node: int = 6):  # [N, 3] -> GaussianSplats
    """Gaussians on the rope's surface (red ends, white middle), bound later by LBS."""
    from bench.scene.gaussians import SH_C0, GaussianSplats

    angles = np.linspace(0, 2 * np.pi, per_node, endpoint=False)
    ring = np.stack([np.zeros_like(angles), np.cos(angles), np.sin(angles)], 1) * ROPE_RADIUS
    direction = nodes[-1] - nodes[0]
    direction /= np.linalg.norm(direction)
    side = np.cross([0, 0, 1.0], direction)
    frame = np.stack([direction, side / np.linalg.norm(side), [0, 0, 1.0]], 1)
    means = (nodes[:, None, :] + (ring @ frame.T)[None]).reshape(-1, 3)
    n = len(means)
    t = np.repeat(np.arange(len(nodes)), per_node)
    red = (t < 4) | (t >= len(nodes) - 4)
    rgb = np.where(red[:, None], [0.8, 0.1, 0.1], [0.92, 0.9, 0.85])
    return GaussianSplats(
        means=means.astype(np.float32), quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.full((n, 3), np.log(0.004), np.float32),
        opacity_logits=np.full(n, 4.0, np.float32),
        sh_dc=((rgb - 0.5) / SH_C0).astype(np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))


def clip_crossings(nodes: np.ndarray, springs: np.ndarray, clip: np.ndarray, *,
                   table_height: float) -> int:
    """Springs that cross the clip opening (plane y = 0 of the clip frame, between the posts)."""
    local = (nodes - clip[:3, 3]) @ clip[:3, :3]
    a, b = local[springs[:, 0]], local[springs[:, 1]]
    cross = (a[:, 1] * b[:, 1]) < 0
    t = a[:, 1] / np.where(cross, a[:, 1] - b[:, 1], 1.0)
    hit = a + t[:, None] * (b - a)
    inside = (np.abs(hit[:, 0]) < CLIP_GAP / 2) & (hit[:, 2] < 2 * POST_SIZE[2] + 0.005)
    return int((cross & inside).sum())


class RopeWorld:
    """MuJoCo table + gripper + clip posts, and the Warp rope coupled to it."""


    def __init__(self, table: TableGeometry, *, physics_dt: float = 0.002) -> None:
        self.table, self.physics_dt = table, physics_dt
        self.world_from_table = table.world_from_table()
        self.robot = FloatingGripper()
        self.home = pose(top_down_mat(table.yaw),
                         np.array([*table.center, table.height + 0.25]))
        spec = mujoco.MjSpec()
        spec.modelname = "splatbench_rope"
        spec.option.timestep = physics_dt
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.visual.global_.offwidth = 1024
        spec.visual.global_.offheight = 1024
        spec.visual.quality.shadowsize = 0
        spec.visual.map.znear = 0.002
        spec.visual.headlight.ambient = [0.45, 0.45, 0.45]
        spec.worldbody.add_geom(
            name="table", type=mujoco.mjtGeom.mjGEOM_BOX, group=3,
            size=[table.size[0] / 2, table.size[1] / 2, TABLE_THICKNESS / 2],
            pos=[*table.center, table.height - TABLE_THICKNESS / 2],
            quat=yaw_quat(table.yaw), rgba=[0.55, 0.45, 0.35, 1])
        self.clip = self.world_from_table @ pose(np.eye(3), np.array([*CLIP_XY, 0.0]))
        for side in (-1, 1):
            offset = side * (CLIP_GAP / 2 + POST_SIZE[0])
            centre = self.clip @ np.array([offset, 0, POST_SIZE[2], 1])
            spec.worldbody.add_geom(
                name=f"clip_post_{'left' if side < 0 else 'right'}",
                type=mujoco.mjtGeom.mjGEOM_BOX, size=list(POST_SIZE), pos=centre[:3],
                quat=list(mat_to_quat(self.clip[:3, :3])), rgba=[0.2, 0.25, 0.3, 1])
        spec.worldbody.add_camera(name="render_cam", fovy=90.0)
        self.robot.build(spec, home=self.home)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.robot.bind(self.model)
        self.hand = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, HAND_BODY)
        self.geoms = GeomColliders(self.model, ["left_pad", "right_pad", "left_finger",
                                                "right_finger", "clip_post_left",
                                                "clip_post_right"], friction=1.2)
        self.sm_config = SpringMassConfig(
            dt=2e-4, substeps=500, ground_height=table.height, ground_friction=0.6,
            collider_friction=1.2, particle_radius=ROPE_RADIUS, drag=0.5)
        self.grasp = SoftGrasp((0, 1), SoftGraspConfig())
        self.sim = None
        mujoco.mj_forward(self.model, self.data)

    def reset(self, xy_yaw: tuple[float, float, float]) -> None:
        """Reset MuJoCo and the rope to the start ``(x, y, yaw)`` (table frame, yaw in radians)."""
        from bench.sim.softbody.sim import SpringMassSim

        mujoco.mj_resetData(self.model, self.data)
        self.robot.reset(self.data, world_from_tcp=self.home, opening=self.robot.max_opening)
        mujoco.mj_forward(self.model, self.data)
        x, y, yaw = xy_yaw
        direction = self.world_from_table[:3, :3] @ np.array([np.cos(yaw), np.sin(yaw), 0.0])
        centre = self.world_from_table @ np.array([x, y, ROPE_RADIUS + 1e-4, 1.0])
        model = rope_model(centre[:3] - direction * ROPE_LENGTH / 2, direction)
        if self.sim is None:
            self.sim = SpringMassSim(model, self.sm_config, self.geoms.colliders,
                                     num_bodies=len(self.geoms.body_ids))
        self.sim.set_state(model.positions)
        self.sim.set_attachment(np.full(ROPE_NODES, -1), np.zeros((ROPE_NODES, 3)))
        self.rest_nodes = model.positions
        self.grasp.reset()
        self.data.xfrc_applied[:] = 0.0

    def run_frame(self, start: np.ndarray, goal: np.ndarray, opening_cmd: float, steps: int):
        """Move the hand from ``start`` to ``goal`` over ``steps`` physics steps, rope coupled."""
        positions, quaternions = interpolate_pose(start, goal, steps)
        before = self.geoms.poses(self.data)
        measured = self.robot.opening(self.data)
        target = self.grasp.finger_target(opening_cmd)
        for position, quaternion in zip(positions, quaternions, strict=True):
            self.robot.command(self.data, position=position, quaternion=quaternion,
                               opening=target)
            mujoco.mj_step(self.model, self.data)
        frame = self.geoms.frame(before, self.data, steps * self.physics_dt)
        reactions = self.sim.step(frame)
        self.geoms.apply_reactions(self.data, reactions)
        self.grasp.update(self.sim, frame, reactions, commanded=opening_cmd, measured=measured)


#: EnvConfig fields the rope cannot vary, with the only value it has and why.
ROPE_FIXED_FIELDS = {
    "robot": ("floating-gripper", "the rope world builds the floating gripper"),
    "cameras": ("wrist", "the rope renders the wrist_rgb view only"),
    "grasp": (GraspConfig(), "the rope uses its own frictional spring-mass grasp"),
    "control_hz": (10.0, "the spring-mass frame is 0.1 s"),
}


def _shown(value: Any) -> str:
    """A short form of a config value for one-line errors (dataclasses by class name)."""
    return f"{type(value).__name__}(...)" if dataclasses.is_dataclass(value) else repr(value)


def rope_config(config: EnvConfig | None, overrides: dict[str, Any]) -> EnvConfig:
    """The rope's EnvConfig from ``config`` and keyword overrides; one-line ValueErrors.

    Every EnvConfig field is honoured (``obs_mode``, ``image_size``, ``max_frames``,
    ``render_backend``, ``fisheye_mode``, ``shadows``, ``controller_gains`` ...) except the
    :data:`ROPE_FIXED_FIELDS`, which must keep their one value; ``None`` means the task's
    default (as the study runner passes ``max_frames=None``).
    """
    known = {f.name for f in dataclasses.fields(EnvConfig)} - {"task"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{ROPE_TASK.env_id} has no option {unknown[0]!r}; use EnvConfig "
                         f"fields ({', '.join(sorted(known))})")
    base = config or EnvConfig(task="rope", execute=ROPE_TASK.execute,
                               max_frames=ROPE_TASK.max_frames)
    resolved = base.replace(task="rope", **overrides)
    for name, (value, why) in ROPE_FIXED_FIELDS.items():
        if getattr(resolved, name) != value:
            default = "the default GraspConfig()" if name == "grasp" else repr(value)
            raise ValueError(f"{ROPE_TASK.env_id} does not support {name}="
                             f"{_shown(getattr(resolved, name))} ({why}); leave {name} at "
                             f"{default}")
    return resolved


class RopeEnv(EnvRendering, gym.Env):
    """``splatbench/Rope-v0``: route the rope through the clip (module doc for the contract)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, scene: Any = None, *, render_mode: str | None = None,
                 config: EnvConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.render_mode = render_mode
        self.config = rope_config(config, overrides)
        self.scene = resolve_scene(scene)
        self.table = TableGeometry.from_scene_table(self.scene.table)
        if self.config.background == "gaussian" and self.config.min_table_gaussians > 0:
            check_table_registration(self.scene, self.table,
                                     minimum=self.config.min_table_gaussians)
        self.task = ROPE_TASK
        self.world = RopeWorld(self.table, physics_dt=self.config.physics_dt)
        if self.config.controller_gains != "default":  # deployment fidelity: EE gain profile
            self.world.robot.set_tracking_gains(self.world.model, self.config.controller_solref)
        from bench.sim.camera_rig import make_rig

        self.rig = make_rig(self.config, self.world.robot)  # the wrist camera (manifests)
        self.chunk_size = int(self.config.chunk_size or 32)
        self.execute = int(self.config.execute or 8)
        self.max_frames = int(self.config.max_frames or 600)
        p, r = self.config.max_delta_pos, self.config.max_delta_rot
        self._low = np.array([-p, -p, -p, -r, -r, -r, 0.0], np.float32)
        self._high = np.array([p, p, p, r, r, r, self.world.robot.max_opening], np.float32)
        shape = (self.chunk_size, 1) if self.config.control == "chunk" else (1,)
        low, high = np.tile(self._low, shape), np.tile(self._high, shape)
        self.action_space = gym.spaces.Box(low=low, high=high, dtype=np.float32)
        spaces = {"proprio": gym.spaces.Box(-np.inf, np.inf, (PROPRIO_DIM,), np.float32)}
        if self.config.obs_mode == "rgb":
            h, w = self.config.image_size
            spaces["wrist_rgb"] = gym.spaces.Box(0, 255, (h, w, 3), np.uint8)
        else:
            spaces["object_state"] = gym.spaces.Box(-np.inf, np.inf, (3 * ROPE_NODES,), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self._renderer = None
        self._binding = None
        self._next = 0

    # -- gymnasium ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode at grid condition ``seed`` (or ``options["condition"]``)."""
        super().reset(seed=seed)
        options = options or {}
        condition = int(options.get("condition", seed if seed is not None else self._next))
        if condition < 0:
            raise ValueError(f"initial condition must be >= 0, got {condition}")
        self.condition, self._next = condition, condition + 1
        self.initial_pose = ROPE_GRID.condition(condition)
        self.world.reset(self.initial_pose)
        self._target = self.world.home.copy()
        self._opening = self.world.robot.max_opening
        self._frame, self._run, self._success, self._failure = 0, 0, False, None
        self._stages = dict.fromkeys((name for name, _ in STAGES), False)
        self._update_progress()
        self._rows = [self._frame_row(False)]
        return self._observation(), self._info(0)

    def step(self, action):
        """Execute an action chunk; returns (obs, reward, terminated, truncated, info)."""
        rows = self._validate(action)
        self._rows = []
        executed = 0
        for row in rows:
            if self._frame >= self.max_frames or self._success or self._failure:
                break
            self._run_frame(row)
            executed += 1
        terminated = bool(self._success or self._failure)
        truncated = bool(not terminated and self._frame >= self.max_frames)
        return self._observation(), float(self._progress), terminated, truncated, \
            self._info(executed)

    # -- internals ------------------------------------------------------------------------------
    def _validate(self, action) -> np.ndarray:
        try:
            arr = np.asarray(action, np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"action must be numeric, got {type(action).__name__}") from None
        expected = (self.chunk_size, ACTION_DIM) if self.config.control == "chunk" else (7,)
        if arr.shape != expected:
            raise ValueError(f"action has shape {arr.shape}, expected {expected} "
                             "(dx, dy, dz, rx, ry, rz, opening)")
        if not np.all(np.isfinite(arr)):
            raise ValueError("action contains NaN or inf; check the policy output")
        rows = np.atleast_2d(arr)[: self.execute if self.config.control == "chunk" else 1]
        return np.clip(rows, self._low, self._high)

    def _run_frame(self, row: np.ndarray) -> None:
        delta = pose(rotvec_to_mat(row[3:6]), row[:3])
        goal = self._target @ delta
        local = np.linalg.inv(self.world.world_from_table) @ np.append(goal[:3, 3], 1.0)
        half = np.asarray(self.table.size) / 2 + 0.1
        local[:3] = np.clip(local[:3], [-half[0], -half[1], 0.005], [half[0], half[1], 0.6])
        goal[:3, 3] = (self.world.world_from_table @ local)[:3]
        self._opening = float(row[6])
        self.world.run_frame(self._target, goal, self._opening, self.config.substeps)
        self._target = goal
        self._frame += 1
        nodes = self.world.sim.positions()
        if not np.all(np.isfinite(nodes)):
            self._failure = "physics_diverged:rope"
        elif np.abs(self.table.to_table_xy(nodes)).max() > max(self.table.size) / 2 + 0.1:
            self._failure = "left_workspace:rope"
        now = self._success_now(nodes)
        self._run = self._run + 1 if now else 0
        self._success = self._run >= self.config.success_hold_frames
        self._update_progress()
        self._rows.append(self._frame_row(now))

    def _frame_row(self, success_now: bool) -> FrameState:
        """One frame of the state stream, in the rigid envs' format (``info["frame_states"]``)."""
        tcp = self.world.robot.tcp_pose(self.world.data)
        opening = self.world.robot.opening(self.world.data)
        nodes = self.world.sim.positions()
        identity = [1.0, 0.0, 0.0, 0.0]
        return FrameState(
            frame=self._frame,
            ee_pose=[*tcp[:3, 3].tolist(), *mat_to_quat(tcp[:3, :3]).tolist()],
            gripper=min(max(opening / self.world.robot.max_opening, 0.0), 1.0),
            opening_m=opening,
            attached="rope" if self.world.grasp.holding else "",
            held=bool(self.world.grasp.holding),
            success_now=bool(success_now),
            success=self._success,
            progress=self._progress,
            objects={"rope_end": [*nodes[0].tolist(), *identity],
                     "rope_middle": [*nodes[ROPE_NODES // 2].tolist(), *identity],
                     "rope_far_end": [*nodes[-1].tolist(), *identity]},
        )

    def crossings(self, nodes: np.ndarray | None = None) -> int:
        """Number of springs crossing the clip opening (0 while the rope is not routed)."""
        nodes = self.world.sim.positions() if nodes is None else nodes
        return clip_crossings(nodes, self.world.sim.model.springs, self.world.clip,
                              table_height=self.table.height)

    def _success_now(self, nodes: np.ndarray) -> bool:
        released = not self.world.grasp.holding
        return released and self.crossings(nodes) >= MIN_CROSSINGS

    def _update_progress(self) -> None:
        nodes = self.world.sim.positions()
        tcp = self.world.robot.tcp_pose(self.world.data)[:3, 3]
        end = nodes[0]
        st = self._stages
        st["reach"] |= bool(np.linalg.norm(tcp - end) < 0.03)
        st["grasp"] |= bool(self.world.grasp.holding)
        st["lift"] |= bool(self.world.grasp.holding and end[2] > self.table.height + 0.06)
        clip_local = (end - self.world.clip[:3, 3]) @ self.world.clip[:3, :3]
        st["over_clip"] |= bool(st["lift"] and clip_local[1] > 0.0
                                and abs(clip_local[0]) < 0.05)
        st["routed"] |= bool(self._success)
        self._progress = 1.0 if self._success else float(
            sum(w for name, w in STAGES if st[name] and name != "routed"))

    def _observation(self) -> dict[str, np.ndarray]:
        tcp = self.world.robot.tcp_pose(self.world.data)
        proprio = np.concatenate([tcp[:3, 3], mat_to_quat(tcp[:3, :3]),
                                  [self.world.robot.opening(self.world.data)]]).astype(np.float32)
        obs = {"proprio": proprio}
        if self.config.obs_mode == "rgb":
            obs["wrist_rgb"] = self._get_renderer().render_wrist()
        else:
            obs["object_state"] = self.world.sim.positions().reshape(-1).astype(np.float32)
        return obs

    def _info(self, executed: int) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "frame": self._frame,
            "frames_executed": executed,
            "success": self._success,
            "progress": self._progress,
            "failure": self._failure,
            "stages": dict(self._stages),
            "crossings": self.crossings(),
            "rope_nodes": self.world.sim.positions(),
            "grasp": {"mode": "friction", "holding": self.world.grasp.holding,
                      "contact_force": self.world.grasp.last_force,
                      "opening": self.world.robot.opening(self.world.data),
                      "commanded_opening": self._opening},
            "tcp_target": self._target.copy(),
            "frame_states": list(self._rows),
        }

    def rope_splats(self):
        """The rope's Gaussians at the current node positions (LBS)."""
        from bench.sim.softbody.lbs import LBSBinding

        if self._binding is None or self._binding.rest_nodes is not self.world.rest_nodes:
            self._rope_rest = rope_gaussians(self.world.rest_nodes)
            self._binding = LBSBinding.bind(self._rope_rest.means, self._rope_rest.quats,
                                            self.world.rest_nodes, k=3)
        return self._binding.apply(self._rope_rest, self.world.sim.positions())

    def _get_renderer(self):
        if self._renderer is None:
            from bench.sim.observation import ObservationRenderer

            self._renderer = ObservationRenderer(self.world, _LiveScene(self), self.config)
        return self._renderer


class _LiveScene:
    """The env's scene with the rope's Gaussians (current node positions) in its background.

    Every render path of :class:`ObservationRenderer` reads ``scene.background``, so all of
    them draw the rope.
    """

    def __init__(self, env: RopeEnv) -> None:
        self._env, self._key, self._merged = env, None, None

    @property
    def background(self):
        from bench.scene.gaussians import GaussianSplats

        env = self._env
        key = (id(env.world.rest_nodes), env.world.sim.frames, env.world.sim.version)
        if key != self._key:
            background = env.scene.background
            rope = env.rope_splats()
            k = background.sh_rest.shape[1]  # view-independent rope: zero SH bands
            rope = rope.replace(sh_rest=np.zeros((len(rope), k, 3), np.float32))
            self._merged, self._key = GaussianSplats.concat(background, rope), key
        return self._merged

    def __getattr__(self, name: str):
        return getattr(self._env.scene, name)


@dataclasses.dataclass(frozen=True)
class RopeExpertConfig:
    """Tuning of the scripted rope expert (metres, frames).

    Attributes:
        speed: Largest TCP translation per frame, m.
        grasp_node: Rope node the fingers close on (0: the very end).
        carry_height: TCP height above the table while carrying over the clip, m.
        beyond: How far past the clip's centre the end is put down, m.
        noise: Standard deviation of seeded Gaussian noise on every translation row, m
            (0: none); reseeded per episode from ``(seed, condition)``.
    """

    speed: float = 0.02
    grasp_node: int = 2
    carry_height: float = 0.10
    beyond: float = 0.07
    noise: float = 0.0

    def __post_init__(self) -> None:
        if not (self.speed > 0 and self.carry_height > 0 and self.beyond > 0
                and self.noise >= 0 and 0 <= self.grasp_node < ROPE_NODES // 2):
            raise ValueError(f"invalid rope expert config {self}: speed, carry_height and "
                             f"beyond must be > 0, noise >= 0, 0 <= grasp_node < "
                             f"{ROPE_NODES // 2}")


#: The second candidate: a lab that runs its script twice as fast, grasps at the very end,
#: carries lower and is less steady (4 mm per-frame noise).
HASTY_EXPERT = RopeExpertConfig(speed=0.04, grasp_node=0, carry_height=0.08, noise=0.004)


def rope_expert(env: RopeEnv, *, seed: int = 0, config: RopeExpertConfig | None = None) -> Any:
    """Privileged scripted expert: grasp near the rope end, lift, carry past the clip, release."""
    return RopeExpert(env.unwrapped, seed=seed, config=config)


class RopeExpert:
    """The scripted rope expert (reads the rope's nodes: privileged).

    Args:
        env: The (unwrapped) :class:`RopeEnv`.
        seed: Base seed of the translation noise (unused when ``config.noise`` is 0).
        config: Tuning (:class:`RopeExpertConfig`; default the clean expert).
    """

    name = "rope-expert"
    privileged = True

    def __init__(self, env: RopeEnv, *, seed: int = 0,
                 config: RopeExpertConfig | None = None) -> None:
        if not isinstance(getattr(env, "unwrapped", env), RopeEnv):
            raise ValueError(f"the rope expert runs on {ROPE_TASK.env_id} only, got "
                             f"{type(env).__name__}; use a rope task")
        self.env = getattr(env, "unwrapped", env)
        self.seed = int(seed)
        self.config = config or RopeExpertConfig()
        self._rng = np.random.default_rng(self.seed)

    def reset(self, seed: int | None = None) -> None:  # positional too (older callers)
        """Restart the script at its first phase; ``seed`` reseeds its noise."""
        self.phase = 0
        self._beyond = None
        self._rng = np.random.default_rng([self.seed, 0 if seed is None else int(seed)])

    def act(self, obs, info) -> np.ndarray:
        """The next action chunk [chunk, 7] of the scripted rope routing."""
        env = self.env
        self._virtual = env._target.copy()  # plan the chunk from the commanded target
        if env.config.control != "chunk":
            return self._noisy(self._row()[None])[0]
        rows, phases = [], []
        for _ in range(env.chunk_size):
            rows.append(self._row())
            phases.append(self.phase)
        self.phase = phases[env.execute - 1]  # only the executed rows really happen
        return self._noisy(np.array(rows))

    def _noisy(self, rows: np.ndarray) -> np.ndarray:  # [T, 7] -> float32 [T, 7]
        if self.config.noise > 0:
            rows = rows.copy()
            rows[:, :3] += self._rng.normal(0.0, self.config.noise, size=(len(rows), 3))
        return rows.astype(np.float32)

    def _row(self) -> np.ndarray:
        env = self.env
        nodes = env.world.sim.positions()
        table_z = env.table.height
        cfg = self.config
        end = nodes[cfg.grasp_node]  # default node 2: both pads reach around the rope
        clip = env.world.clip
        # carry the end past the clip on the line from the rope's far end through the gap,
        # so the rope drapes across the opening when lowered
        far = nodes[-1]
        line = clip[:3, 3] - far
        line[2] = 0.0
        line /= max(np.linalg.norm(line), 1e-9)
        if np.dot(line, clip[:3, 1]) < 0.2:  # far end on the wrong side: go straight through
            line = clip[:3, 1]
        if self.phase >= 4 and getattr(self, "_beyond", None) is not None:
            beyond = self._beyond
        else:
            beyond = clip[:3, 3] + cfg.beyond * line
            self._beyond = beyond if self.phase == 3 else None
        waypoints = {
            0: (np.array([end[0], end[1], table_z + 0.06]), 0.09),
            1: (np.array([end[0], end[1], table_z + 0.004]), 0.09),
            2: (np.array([end[0], end[1], table_z + 0.004]), 0.0),
            3: (np.array([end[0], end[1], table_z + cfg.carry_height]), 0.0),
            4: (np.array([beyond[0], beyond[1], table_z + cfg.carry_height]), 0.0),
            5: (np.array([beyond[0], beyond[1], table_z + 0.01]), 0.0),
            6: (np.array([beyond[0], beyond[1], table_z + 0.01]), 0.09),
            7: (np.array([beyond[0], beyond[1], table_z + 0.12]), 0.09),
        }
        goal, opening = waypoints[min(self.phase, 7)]
        target = self._virtual
        delta = goal - target[:3, 3]
        step = np.clip(delta, -cfg.speed, cfg.speed)
        local = target[:3, :3].T @ step
        turn = 0.0
        if self.phase <= 1:  # fingers across the rope: tool x perpendicular to it
            along = nodes[cfg.grasp_node + 4] - nodes[cfg.grasp_node]
            across = np.array([-along[1], along[0], 0.0])
            a = target[:3, :3].T @ across
            turn = float(np.arctan2(a[1], a[0]))
            turn = (turn + np.pi / 2) % np.pi - np.pi / 2
            turn = float(np.clip(turn, -0.3, 0.3))
        virtual = target.copy()
        virtual[:3, :3] = target[:3, :3] @ rotvec_to_mat(np.array([0.0, 0.0, turn]))
        virtual[:3, 3] += step
        self._virtual = virtual
        done = np.linalg.norm(delta) < 0.003 and abs(turn) < 0.02
        opening_now = env.world.robot.opening(env.world.data)
        if self.phase == 2:  # squeeze until the grasp holds (or the fingers shut on nothing)
            done = env.world.grasp.holding or opening_now < 0.002
        if self.phase == 6:  # let go: wait until the fingers are open again
            done = opening_now > 0.06
        if done and self.phase < 7:
            self.phase += 1
        return np.array([*local, 0.0, 0.0, turn, opening])
