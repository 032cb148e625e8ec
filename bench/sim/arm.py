"""Arm embodiments: an MJCF / URDF arm whose TCP tracks targets by differential IK (mink).

:class:`ArmRobot` implements the :class:`~bench.sim.robot.Robot` protocol, so
tasks, grasping, rendering and policies do not change: the environment still
commands a TCP pose and a finger opening every physics step. The arm model is
loaded with ``mujoco.MjSpec.from_file`` (MJCF or URDF: a Franka FR3 / Panda /
xArm from MuJoCo Menagerie, or the bench's own ``arm6``), mounted at a pose in
the table frame, its own actuators replaced by one position servo per joint
under gravity compensation, and the bench's parallel jaw
(:func:`~bench.sim.parallel_jaw.add_parallel_jaw`) attached to its end-effector body.

IK (``mink``): every ``ik_every`` physics steps a :class:`mink.FrameTask` on
the hand body (the TCP frame) plus a light posture task are solved as one QP
with the joint limits (:class:`mink.ConfigurationLimit`) and Levenberg-Marquardt
damping, on a kinematics-only copy of the arm; the commanded joint positions
are integrated and sent to the servos. If the QP fails, a damped least-squares
step (:func:`damped_least_squares_step`, clipped to the limits) is taken
instead. A target farther than ``reach`` from the shoulder is clipped onto that
sphere first; any solve that leaves more than ``position_tolerance`` /
``rotation_tolerance`` of error is counted as unreachable. Nothing raises
during a rollout: counts are in :meth:`ArmRobot.stats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from bench.errors import BenchError
from bench.geometry import mat_to_quat, mat_to_rotvec, pose, quat_to_mat, yaw_mat, yaw_quat
from bench.sim.parallel_jaw import (
    CAMERA_BODY,
    HAND_BODY,
    GripperConfig,
    add_jaw_actuator,
    add_parallel_jaw,
)

ROBOT_DIR = Path(__file__).with_name("robots")
BUILTIN_ARMS = {"arm6": ROBOT_DIR / "arm6.xml"}
PREFIX = "arm/"
MODEL_SUFFIXES = (".xml", ".mjcf", ".urdf")


@dataclass(frozen=True)
class ModelGripper:
    """A gripper that comes with the arm model (e.g. the Franka hand), instead of the bench jaw.

    Attributes:
        hand_body: Model body the fingers hang from.
        tcp_offset: TCP position in ``hand_body``'s frame, metres (between the fingertips).
        tcp_yaw_deg: TCP rotation about ``hand_body``'s z axis, degrees (TCP +x = finger axis).
        left_pad: Geom of the left finger's inner surface (the contact-attach rule reads it).
        right_pad: Geom of the right finger's inner surface.
        finger_joints: Joints whose positions sum to the opening (times ``opening_scale``).
        opening_scale: Metres of opening per unit of the summed finger joints.
        actuator: The model's gripper actuator (kept; every other model actuator is dropped).
        ctrl_open: Actuator control at ``max_opening``.
        ctrl_closed: Actuator control at opening 0.
        max_opening: Largest opening, metres.
        camera_offset: Wrist-camera position in the TCP frame, metres.
    """

    hand_body: str
    left_pad: str
    right_pad: str
    finger_joints: tuple[str, ...]
    actuator: str
    ctrl_open: float
    ctrl_closed: float
    max_opening: float
    tcp_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    tcp_yaw_deg: float = 0.0
    opening_scale: float = 1.0
    camera_offset: tuple[float, float, float] = (0.0, -0.06, -0.10)

    def __post_init__(self) -> None:
        for key in ("tcp_offset", "finger_joints", "camera_offset"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        if self.max_opening <= 0 or self.ctrl_open == self.ctrl_closed:
            raise ValueError("model gripper needs max_opening > 0 and ctrl_open != ctrl_closed")


@dataclass(frozen=True)
class ArmConfig:
    """An arm embodiment (metres, radians unless named ``_deg``).

    Attributes:
        model: "arm6" (shipped) or a path to an MJCF (.xml) / URDF (.urdf) file.
        ee_body: Body of the model the jaw is attached to (its +z = approach axis).
        ee_offset: TCP position in the ``ee_body`` frame, metres (the jaw's palm sits
            0.08 m behind the TCP; flange-to-TCP distance).
        ee_yaw_deg: Jaw rotation about the approach axis relative to ``ee_body``, degrees.
        base_xy: Arm base position in the table frame, metres.
        base_z: Base height above the table top, metres.
        base_yaw_deg: Base yaw in the table frame, degrees.
        joints: Joints driven by IK (model names; default: every hinge/slide joint of the arm).
        seed_joints: IK seed (one value per joint; default: the model's first keyframe, e.g.
            Menagerie's "home", else mid-range; arm6: a bent pose). A straight, singular seed
            makes the reset IK fail: give a bent pose near your task.
        kp: Joint servo stiffness, N m / rad.
        kv: Joint servo damping, N m s / rad.
        ik_every: Physics steps per IK solve (5 = 100 Hz at 2 ms physics; the servos
            interpolate between solves).
        damping: Levenberg-Marquardt damping of the frame task and of the fallback.
        posture_cost: Weight of the posture task that keeps the arm near its seed.
        solver: QP solver name for ``mink.solve_ik`` (``daqp`` ships with mink).
        reach: Largest shoulder-to-TCP distance, metres; None = from the model (sum of the
            link offsets beyond the shoulder + ``ee_offset``).
        position_tolerance: IK error above which a target counts as unreachable, metres.
        rotation_tolerance: Orientation error above which it counts as unreachable, radians.
        gripper: The bench jaw's geometry and finger servo.
        model_gripper: Use the model's own gripper instead of the bench jaw (None = the jaw).
    """

    model: str = "arm6"
    ee_body: str = "flange"
    ee_offset: tuple[float, float, float] = (0.0, 0.0, 0.08)
    ee_yaw_deg: float = 0.0
    base_xy: tuple[float, float] = (0.0, -0.5)
    base_z: float = 0.0
    base_yaw_deg: float = 90.0
    joints: tuple[str, ...] | None = None
    seed_joints: tuple[float, ...] | None = None
    kp: float = 3000.0
    kv: float = 120.0
    ik_every: int = 5
    damping: float = 1e-4
    posture_cost: float = 1e-3
    solver: str = "daqp"
    reach: float | None = None
    position_tolerance: float = 0.002
    rotation_tolerance: float = 0.02
    gripper: GripperConfig = field(default_factory=GripperConfig)
    model_gripper: ModelGripper | None = None

    def __post_init__(self) -> None:
        if isinstance(self.gripper, dict):
            object.__setattr__(self, "gripper", GripperConfig(**self.gripper))
        if isinstance(self.model_gripper, dict):
            object.__setattr__(self, "model_gripper", ModelGripper(**self.model_gripper))
        if self.ik_every < 1 or self.kp <= 0 or self.kv < 0:
            raise ValueError("arm ik_every must be >= 1, kp > 0 and kv >= 0")

    def model_path(self) -> Path:
        """The model file (shipped arms by name, else a path)."""
        if self.model in BUILTIN_ARMS:
            return BUILTIN_ARMS[self.model]
        path = Path(self.model)
        if path.suffix.lower() not in MODEL_SUFFIXES:
            raise BenchError(f"arm model {self.model!r} is neither a shipped arm "
                             f"({sorted(BUILTIN_ARMS)}) nor an MJCF/URDF file (.xml/.urdf)")
        if not path.is_file():
            raise BenchError(f"arm model file {path} not found; pass an MJCF/URDF path")
        return path


def _load_arm_spec(path: Path, *, keep_actuator: str | None = None) -> mujoco.MjSpec:
    try:
        child = mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # mujoco raises ValueError with the parser message
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BenchError(f"cannot load arm model {path} ({first}); check the MJCF/URDF and "
                         "its mesh paths") from None
    for actuator in list(child.actuators):  # the bench drives the joints with its own servos
        if actuator.name != keep_actuator:
            child.delete(actuator)
    for key in list(child.keys):
        child.delete(key)
    return child


def keyframe_joints(path: Path) -> dict[str, float]:
    """Joint name -> value of the model's first keyframe (e.g. Menagerie's "home"), or {}."""
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        if not spec.keys:
            return {}
        model = spec.compile()
    except Exception:  # no keyframe seed then; the model itself is validated by _load_arm_spec
        return {}
    qpos = np.asarray(model.key_qpos[0])
    out = {}
    for joint in range(model.njnt):
        if int(model.jnt_type[joint]) in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                         int(mujoco.mjtJoint.mjJNT_SLIDE)):
            out[model.joint(joint).name] = float(qpos[model.jnt_qposadr[joint]])
    return out


def damped_least_squares_step(  # -> [n] joint step
    jacobian: np.ndarray, error: np.ndarray, damping: float
) -> np.ndarray:
    """``J^T (J J^T + damping I)^-1 e`` for a [6, n] Jacobian and a [6] pose error."""
    jjt = jacobian @ jacobian.T
    return jacobian.T @ np.linalg.solve(jjt + damping * np.eye(jjt.shape[0]), error)


class ArmRobot:
    """An arm + the bench's parallel jaw, TCP targets tracked by differential IK.

    Args:
        config: The embodiment.
        world_from_table: [4, 4] table placement (set by the world before ``build``; the
            base pose in :class:`ArmConfig` is in the table frame).
    """

    def __init__(self, config: ArmConfig | None = None) -> None:
        self.config = config or ArmConfig()
        self.name = f"arm:{self.config.model}"
        model_gripper = self.config.model_gripper
        self.max_opening = (model_gripper or self.config.gripper).max_opening
        self.finger_kp = self.config.gripper.finger_kp
        if model_gripper is not None:  # contact labels of the model's own pads
            self.pad_geoms = {"left_pad": PREFIX + model_gripper.left_pad,
                              "right_pad": PREFIX + model_gripper.right_pad}
        self.world_from_table = np.eye(4)
        self._path = self.config.model_path()
        self.unreachable = 0
        self.fallbacks = 0
        self.solves = 0
        self.target_clipped = 0
        self.ik_seconds = 0.0  # wall time spent in track() (benchmarks; not in stats())

    # -- model construction -------------------------------------------------------------
    @property
    def world_from_base(self) -> np.ndarray:  # [4, 4]
        """World pose [4, 4] of the arm base (table frame offset by the base's xy, z and yaw)."""
        cfg = self.config
        local = pose(yaw_mat(np.deg2rad(cfg.base_yaw_deg)), [*cfg.base_xy, cfg.base_z])
        return self.world_from_table @ local

    def _attach(self, spec: mujoco.MjSpec) -> None:
        """Mount the arm, the jaw and the joint servos into ``spec``."""
        cfg = self.config
        own = cfg.model_gripper
        child = _load_arm_spec(self._path, keep_actuator=own.actuator if own else None)
        base = self.world_from_base
        frame = spec.worldbody.add_frame(pos=list(base[:3, 3]),
                                         quat=list(mat_to_quat(base[:3, :3])))
        spec.attach(child, prefix=PREFIX, frame=frame)
        ee = spec.body(PREFIX + cfg.ee_body)
        if ee is None:
            names = [b.name.removeprefix(PREFIX) for b in spec.bodies if b.name.startswith(PREFIX)]
            raise BenchError(f"arm model {self._path.name} has no body {cfg.ee_body!r}; set "
                             f"ee_body to one of {names}")
        if own is None:
            yaw = np.deg2rad(cfg.ee_yaw_deg)
            hand = ee.add_body(name=HAND_BODY, pos=list(cfg.ee_offset),
                               quat=yaw_quat(yaw), gravcomp=1.0)
            add_parallel_jaw(spec, hand, cfg.gripper)
        else:
            self._add_tcp_frame(spec, own)
        for body in spec.bodies:
            if body.name.startswith(PREFIX):
                body.gravcomp = 1.0
        fingers = {PREFIX + n for n in own.finger_joints} if own is not None else set()
        joints = [j for j in spec.joints if j.name.startswith(PREFIX) and j.name not in fingers
                  and j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)]
        wanted = cfg.joints
        if wanted is not None:
            by_name = {j.name.removeprefix(PREFIX): j for j in joints}
            missing = [n for n in wanted if n not in by_name]
            if missing:
                raise BenchError(f"arm model has no joints {missing}; joints: {sorted(by_name)}")
            joints = [by_name[n] for n in wanted]
        if len(joints) < 6:
            raise BenchError(f"arm model {self._path.name} drives {len(joints)} joints; a TCP "
                             "pose needs at least 6 (check `joints`)")
        self.joint_names = [j.name for j in joints]
        for joint in joints:
            actuator = spec.add_actuator(name=f"servo_{joint.name}", target=joint.name,
                                         trntype=mujoco.mjtTrn.mjTRN_JOINT)
            actuator.set_to_position(kp=cfg.kp, kv=cfg.kv)
        if own is None:
            add_jaw_actuator(spec, cfg.gripper)

    def _add_tcp_frame(self, spec: mujoco.MjSpec, own: ModelGripper) -> None:
        """A massless ``hand`` body at the model gripper's TCP (+ the wrist-camera body)."""
        model_hand = spec.body(PREFIX + own.hand_body)
        if model_hand is None:
            raise BenchError(f"arm model {self._path.name} has no body {own.hand_body!r} "
                             "(model_gripper.hand_body)")
        names = {g.name for g in spec.geoms}
        for pad in (own.left_pad, own.right_pad):
            if PREFIX + pad not in names:
                raise BenchError(f"arm model {self._path.name} has no geom {pad!r} "
                                 "(model_gripper pads)")
        joints = {j.name for j in spec.joints}
        missing = [n for n in own.finger_joints if PREFIX + n not in joints]
        if missing or not own.finger_joints:
            raise BenchError(f"arm model {self._path.name} lacks finger joints {missing} "
                             "(model_gripper.finger_joints)")
        if spec.actuator(PREFIX + own.actuator) is None:
            raise BenchError(f"arm model {self._path.name} has no actuator {own.actuator!r} "
                             "(model_gripper.actuator)")
        yaw = np.deg2rad(own.tcp_yaw_deg)
        hand = model_hand.add_body(name=HAND_BODY, pos=list(own.tcp_offset),
                                   quat=yaw_quat(yaw))
        hand.add_site(name="tcp", pos=[0, 0, 0], size=[0.004, 0, 0], group=5)
        hand.add_body(name=CAMERA_BODY, pos=list(own.camera_offset))

    def build(self, spec: mujoco.MjSpec, *, home: np.ndarray) -> None:  # home [4, 4]
        """Add the arm to ``spec``, compile a private IK model of it; ``home``: the TCP pose."""
        self._attach(spec)
        ik_spec = mujoco.MjSpec()
        ik_spec.option.timestep = spec.option.timestep
        self._attach(ik_spec)
        self.ik_model = ik_spec.compile()
        self.home = np.asarray(home, np.float64)

    def bind(self, model: mujoco.MjModel) -> None:
        """Resolve joint, actuator and body ids in the compiled ``model``; set up the IK."""
        import mink

        jnt = mujoco.mjtObj.mjOBJ_JOINT
        ids = [mujoco.mj_name2id(model, jnt, n) for n in self.joint_names]
        ik_ids = [mujoco.mj_name2id(self.ik_model, jnt, n) for n in self.joint_names]
        self._qpos = np.array([model.jnt_qposadr[i] for i in ids])
        self._dof = np.array([model.jnt_dofadr[i] for i in ids])
        self._ik_qpos = np.array([self.ik_model.jnt_qposadr[i] for i in ik_ids])
        self._ik_dof = np.array([self.ik_model.jnt_dofadr[i] for i in ik_ids])
        self._limits = np.array([self.ik_model.jnt_range[i] for i in ik_ids])  # [n, 2]
        limited = np.array([bool(self.ik_model.jnt_limited[i]) for i in ik_ids])
        self._limits[~limited] = (-np.inf, np.inf)
        act = mujoco.mjtObj.mjOBJ_ACTUATOR
        self._servos = np.array([mujoco.mj_name2id(model, act, f"servo_{n}")
                                 for n in self.joint_names])
        own = self.config.model_gripper
        self._fingers = mujoco.mj_name2id(
            model, act, PREFIX + own.actuator if own is not None else "fingers")
        body = mujoco.mjtObj.mjOBJ_BODY
        self._hand = mujoco.mj_name2id(model, body, HAND_BODY)
        self._camera = mujoco.mj_name2id(model, body, "wrist_camera")
        self._ik_hand = mujoco.mj_name2id(self.ik_model, body, HAND_BODY)
        finger_names = ([PREFIX + n for n in own.finger_joints] if own is not None
                        else ["left_finger_joint", "right_finger_joint"])
        self._finger_qpos = np.array([model.jnt_qposadr[mujoco.mj_name2id(model, jnt, n)]
                                      for n in finger_names])
        self._opening_scale = own.opening_scale if own is not None else 1.0
        self._ik_data = mujoco.MjData(self.ik_model)
        self.configuration = mink.Configuration(self.ik_model)
        self._frame_task = mink.FrameTask(HAND_BODY, "body", position_cost=1.0,
                                          orientation_cost=1.0, lm_damping=self.config.damping)
        self._posture = mink.PostureTask(self.ik_model, cost=self.config.posture_cost)
        self._ik_limits = [mink.ConfigurationLimit(self.ik_model)]
        self._seed = self._seed_joints()
        self._shoulder = self._shoulder_position()
        self._reach = self.config.reach or self._model_reach()
        self._q_cmd = self._seed.copy()
        self._step = 0

    def _seed_joints(self) -> np.ndarray:  # [n]
        cfg = self.config
        if cfg.seed_joints is not None:
            seed = np.asarray(cfg.seed_joints, np.float64)
            if seed.shape != (len(self.joint_names),):
                raise BenchError(f"seed_joints has {seed.size} values; the arm drives "
                                 f"{len(self.joint_names)} joints")
            return seed
        if cfg.model == "arm6":  # elbow up, wrist pointing down
            return np.array([0.0, 0.5, 1.6, 0.0, 1.0, 0.0])
        key = keyframe_joints(self._path)
        names = [n.removeprefix(PREFIX) for n in self.joint_names]
        if key and all(n in key for n in names):
            return np.array([key[n] for n in names])
        low, high = self._limits[:, 0], self._limits[:, 1]
        return np.where(np.isfinite(low) & np.isfinite(high), (low + high) / 2, 0.0)

    def _fk(self, q: np.ndarray) -> np.ndarray:  # [n] -> [4, 4] world_from_tcp (IK model)
        data = self._ik_data
        data.qpos[:] = 0.0
        data.qpos[self._ik_qpos] = q
        mujoco.mj_kinematics(self.ik_model, data)
        return pose(data.xmat[self._ik_hand].reshape(3, 3), data.xpos[self._ik_hand])

    def _shoulder_position(self) -> np.ndarray:  # [3] world: the first joint's anchor
        data = self._ik_data
        mujoco.mj_kinematics(self.ik_model, data)
        joint = mujoco.mj_name2id(self.ik_model, mujoco.mjtObj.mjOBJ_JOINT, self.joint_names[1])
        return data.xanchor[joint].copy()

    def _model_reach(self) -> float:
        """Shoulder-to-TCP distance with every joint at zero (a straight arm: the longest)."""
        return float(np.linalg.norm(self._fk(np.zeros(len(self.joint_names)))[:3, 3]
                                    - self._shoulder))

    # -- IK -------------------------------------------------------------------------------
    def _clip_to_reach(self, position: np.ndarray) -> tuple[np.ndarray, bool]:
        offset = position - self._shoulder
        dist = float(np.linalg.norm(offset))
        limit = 0.98 * self._reach
        if dist <= limit:
            return position, False
        return self._shoulder + offset * (limit / dist), True

    def _pose_error(self, q: np.ndarray, target: np.ndarray) -> tuple[float, float]:
        tcp = self._fk(q)
        pos_err = float(np.linalg.norm(target[:3, 3] - tcp[:3, 3]))
        rot_err = float(np.linalg.norm(mat_to_rotvec(tcp[:3, :3].T @ target[:3, :3])))
        return pos_err, rot_err

    def _fallback(self, q: np.ndarray, target: np.ndarray) -> np.ndarray:
        """One damped least-squares step towards ``target`` (world-frame Jacobian), clipped."""
        tcp = self._fk(q)
        error = np.concatenate([target[:3, 3] - tcp[:3, 3],
                                tcp[:3, :3] @ mat_to_rotvec(tcp[:3, :3].T @ target[:3, :3])])
        jacp = np.zeros((3, self.ik_model.nv))
        jacr = np.zeros((3, self.ik_model.nv))
        mujoco.mj_comPos(self.ik_model, self._ik_data)
        mujoco.mj_jacBody(self.ik_model, self._ik_data, jacp, jacr, self._ik_hand)
        jac = np.vstack([jacp, jacr])[:, self._ik_dof]
        step = damped_least_squares_step(jac, error, max(self.config.damping, 1e-6))
        return np.clip(q + step, self._limits[:, 0], self._limits[:, 1])

    def solve(self, target: np.ndarray, q: np.ndarray, *, dt: float) -> np.ndarray:
        """One differential-IK step from joints ``q`` [n] towards a world TCP pose [4, 4]."""
        import mink

        config = self.configuration
        full = np.zeros(self.ik_model.nq)
        full[self._ik_qpos] = q
        config.update(full)
        self._frame_task.set_target(mink.SE3.from_matrix(target))
        if self._posture.target_q is None:
            seed = np.zeros(self.ik_model.nq)
            seed[self._ik_qpos] = self._seed
            self._posture.set_target(seed)
        try:
            velocity = mink.solve_ik(config, [self._frame_task, self._posture], dt,
                                     self.config.solver, damping=self.config.damping,
                                     limits=self._ik_limits)
            new = config.integrate(velocity, dt)[self._ik_qpos]
            if not np.all(np.isfinite(new)):
                raise FloatingPointError("non-finite IK step")
        except Exception:  # QP infeasible / solver failure: the damped fallback, never a crash
            self.fallbacks += 1
            new = self._fallback(q, target)
        return np.clip(new, self._limits[:, 0], self._limits[:, 1])

    def track(self, target: np.ndarray, *, dt: float) -> np.ndarray:  # [4, 4] -> [n]
        """Clip a target to the reach, solve one IK step, count it if unreachable."""
        import time

        start = time.perf_counter()
        position, clipped = self._clip_to_reach(np.asarray(target[:3, 3], np.float64))
        goal = np.array(target, np.float64)
        goal[:3, 3] = position
        self.target_clipped += int(clipped)
        self._q_cmd = self.solve(goal, self._q_cmd, dt=dt)
        self.solves += 1
        pos_err, rot_err = self._pose_error(self._q_cmd, np.asarray(target, np.float64))
        if pos_err > self.config.position_tolerance or rot_err > self.config.rotation_tolerance:
            self.unreachable += 1
        self.ik_seconds += time.perf_counter() - start
        return self._q_cmd

    def solve_pose(self, target: np.ndarray, *, iterations: int = 200) -> np.ndarray:
        """Joints [n] that put the TCP at ``target`` [4, 4], iterated from the seed (resets)."""
        q = self._seed.copy()
        for _ in range(iterations):
            q = self.solve(target, q, dt=1.0)
            pos_err, rot_err = self._pose_error(q, target)
            if pos_err < 1e-6 and rot_err < 1e-6:
                break
        return q

    # -- runtime --------------------------------------------------------------------------
    def reset(  # world_from_tcp [4, 4]
        self, data: mujoco.MjData, *, world_from_tcp: np.ndarray, opening: float
    ) -> None:
        """Put the arm at the IK solution of ``world_from_tcp``, the jaw at ``opening`` m."""
        self._q_cmd = self.solve_pose(np.asarray(world_from_tcp, np.float64))
        self.unreachable = self.fallbacks = self.solves = self.target_clipped = 0
        data.qpos[self._qpos] = self._q_cmd
        data.qvel[self._dof] = 0.0
        opening = float(np.clip(opening, 0.0, self.max_opening))
        data.qpos[self._finger_qpos] = opening / self._opening_scale / len(self._finger_qpos)
        data.ctrl[self._servos] = self._q_cmd
        data.ctrl[self._fingers] = self._finger_ctrl(opening)
        self._step = 0

    def _finger_ctrl(self, opening: float) -> float:
        """Actuator control for an opening (bench jaw: half opening; model: linear map)."""
        opening = min(max(float(opening), 0.0), self.max_opening)
        own = self.config.model_gripper
        if own is None:
            return opening / 2
        return own.ctrl_closed + (own.ctrl_open - own.ctrl_closed) * opening / own.max_opening

    def command(  # position [3], quaternion [4] (w, x, y, z)
        self, data: mujoco.MjData, *, position: np.ndarray, quaternion: np.ndarray, opening: float
    ) -> None:
        """Set the TCP target (IK every ``ik_every`` steps) and the jaw opening, metres."""
        if self._step % self.config.ik_every == 0:
            target = pose(quat_to_mat(quaternion), position)
            dt = self.ik_model.opt.timestep * self.config.ik_every
            data.ctrl[self._servos] = self.track(target, dt=dt)
        self._step += 1
        data.ctrl[self._fingers] = self._finger_ctrl(opening)

    def tcp_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """World pose [4, 4] of the tool centre point."""
        return pose(data.xmat[self._hand].reshape(3, 3), data.xpos[self._hand])

    def opening(self, data: mujoco.MjData) -> float:
        """Jaw opening, metres."""
        return float(data.qpos[self._finger_qpos].sum() * self._opening_scale)

    def camera_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """World pose [4, 4] of the wrist camera body."""
        return pose(data.xmat[self._camera].reshape(3, 3), data.xpos[self._camera])

    def joint_positions(self, data: mujoco.MjData) -> np.ndarray:  # -> [n]
        """Joint angles of the arm, radians."""
        return data.qpos[self._qpos].copy()

    @property
    def joint_limits(self) -> np.ndarray:  # [n, 2]
        """Joint limits [n, 2] (low, high), radians."""
        return self._limits.copy()

    def stats(self) -> dict[str, int]:
        """IK counters of the episode so far (reset by :meth:`reset`)."""
        return {"ik_solves": self.solves, "ik_unreachable": self.unreachable,
                "ik_fallbacks": self.fallbacks, "ik_target_clipped": self.target_clipped}


def load_robot_file(path: str | Path) -> ArmConfig:
    """An :class:`ArmConfig` from a robot JSON file (its ``model`` relative to the file).

    Example ``fr3.json``: ``{"model": "franka_fr3/fr3.xml", "ee_body": "fr3_link7",
    "ee_offset": [0, 0, 0.19], "ee_yaw_deg": -45, "base_xy": [0, -0.5], "base_yaw_deg": 90}``.
    """
    import dataclasses

    from bench.provenance import read_json
    from bench.sim.meshes import resolve_relative

    path = Path(path)
    data = read_json(path, what="robot file", fix="fix the JSON")
    if not isinstance(data, dict) or "model" not in data:
        raise BenchError(f"{path}: a robot file is a JSON object with at least 'model'")
    allowed = {f.name for f in dataclasses.fields(ArmConfig)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise BenchError(f"{path}: unknown keys {unknown}; allowed: {sorted(allowed)}")
    if data["model"] not in BUILTIN_ARMS:
        data["model"] = str(resolve_relative(path.parent, data["model"], what=f"{path}: model"))
    for key in ("ee_offset", "base_xy", "joints", "seed_joints"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    if isinstance(data.get("model_gripper"), dict):
        gripper_keys = {f.name for f in dataclasses.fields(ModelGripper)}
        unknown = sorted(set(data["model_gripper"]) - gripper_keys)
        if unknown:
            raise BenchError(f"{path}: model_gripper has unknown keys {unknown}; allowed: "
                             f"{sorted(gripper_keys)}")
    try:
        return ArmConfig(**data)
    except (TypeError, ValueError) as exc:
        raise BenchError(f"{path}: {exc}") from None
