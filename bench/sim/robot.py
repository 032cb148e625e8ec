"""Robots: a small protocol the environment drives, and the default floating gripper.

The environment talks to a robot only in tool-centre-point (TCP) terms: "move
the TCP towards this world pose, set this finger opening". A floating gripper
does that with a mocap body welded to a free 6-DoF hand; an MJCF arm (e.g. a
Franka FR3 from MuJoCo Menagerie) would implement the same protocol with a
differential-IK controller in :meth:`Robot.command`, leaving the environment,
tasks, grasping and rendering unchanged.

TCP frame: origin between the fingertip pads, +z the approach direction, +x the
finger opening axis, +y = z x x. The wrist camera uses OpenCV axes (+z forward,
+y down) and is rigidly mounted on the hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import mujoco
import numpy as np

from bench.geometry import mat_to_quat, pose
from bench.registry import Registry
from bench.sim.objects import ROBOT_GROUP

HAND_BODY = "hand"
LEFT_PAD = "left_pad"
RIGHT_PAD = "right_pad"
CAMERA_BODY = "wrist_camera"


@runtime_checkable
class Robot(Protocol):
    """What the environment needs from a robot (all poses are world-frame [4, 4])."""

    name: str
    max_opening: float  # metres between the finger pads when fully open

    def build(self, spec: mujoco.MjSpec, *, home: np.ndarray) -> None:  # home [4, 4]
        """Add bodies, joints, actuators and the wrist camera body to ``spec``."""

    def bind(self, model: mujoco.MjModel) -> None:
        """Cache ids after compilation."""

    def reset(  # world_from_tcp [4, 4]
        self, data: mujoco.MjData, *, world_from_tcp: np.ndarray, opening: float
    ) -> None:
        """Place the robot at a TCP pose with a finger opening (before ``mj_forward``)."""

    def command(  # position [3], quaternion [4] (w, x, y, z)
        self, data: mujoco.MjData, *, position: np.ndarray, quaternion: np.ndarray, opening: float
    ) -> None:
        """Track a TCP pose and finger opening; called every physics step.

        Args:
            data: Simulation state to write controls into.
            position: TCP target position [3], metres.
            quaternion: TCP target orientation [4] (w, x, y, z).
            opening: Finger opening target, metres.
        """

    def tcp_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """Measured TCP pose [4, 4]."""

    def opening(self, data: mujoco.MjData) -> float:
        """Measured finger opening, metres."""

    def camera_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """World-from-wrist-camera [4, 4] in OpenCV axes."""


@dataclass(frozen=True)
class GripperConfig:
    """Geometry and gains of the floating parallel-jaw gripper (UMI / YUBI handheld shape).

    Attributes:
        max_opening: Pad-to-pad distance when fully open, metres.
        finger_length: Finger length along the approach axis, metres.
        tip_beyond_tcp: How far the fingertips reach past the TCP, metres.
        finger_kp: Finger position-servo stiffness, N/m.
        finger_force: Finger force limit, N.
        hand_mass: Hand mass, kg (gravity-compensated: the mocap weld holds pose, not weight).
        weld_timeconst: Time constant of the mocap weld, s (>= 2 physics steps for stability;
            0.004 s keeps the lag at 0.3 m/s near 2.4 mm with no ringing after a stop).
        camera_offset: Wrist-camera position in the TCP frame, metres (above, behind the fingers).
        camera_pitch_deg: Camera tilt towards the fingers about the TCP x axis, degrees.
        pad_friction: Sliding friction of the finger pads.
    """

    max_opening: float = 0.11
    finger_length: float = 0.06
    tip_beyond_tcp: float = 0.01
    finger_kp: float = 1000.0
    finger_force: float = 40.0
    hand_mass: float = 0.6
    weld_timeconst: float = 0.004
    camera_offset: tuple[float, float, float] = (0.0, -0.06, -0.10)
    camera_pitch_deg: float = 0.0
    pad_friction: float = 1.5


def add_parallel_jaw(spec: mujoco.MjSpec, hand: mujoco.MjsBody, cfg: GripperConfig) -> None:
    """The bench's parallel jaw on ``hand`` (whose frame is the TCP).

    Palm, camera mount and wrist-camera body, the ``tcp`` site, two sliding fingers
    with pads, the finger coupling.

    Used by the floating gripper and by arms that take the bench's jaw.
    """
    palm_z = -(cfg.finger_length - cfg.tip_beyond_tcp) - 0.015
    half_width = cfg.max_opening / 2 + 0.02
    hand.add_geom(
        name="palm",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[half_width, 0.022, 0.015],
        pos=[0, 0, palm_z],
        mass=cfg.hand_mass,
        group=ROBOT_GROUP,
        rgba=[0.25, 0.25, 0.28, 1],
    )
    cam_x, cam_y, cam_z = cfg.camera_offset
    # Camera mount: a short arm from the palm to just behind the lens (never in front of it).
    hand.add_geom(
        name="camera_mount",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[0.015, abs(cam_y) / 2, 0.01],
        pos=[cam_x, cam_y / 2, cam_z - 0.012],
        contype=0,
        conaffinity=0,
        density=0,
        group=ROBOT_GROUP,
        rgba=[0.2, 0.2, 0.22, 1],
    )
    pitch = np.deg2rad(cfg.camera_pitch_deg)
    cam_rot = np.array(
        [[1, 0, 0], [0, np.cos(pitch), -np.sin(pitch)], [0, np.sin(pitch), np.cos(pitch)]]
    )
    hand.add_body(name=CAMERA_BODY, pos=[cam_x, cam_y, cam_z], quat=list(mat_to_quat(cam_rot)))
    hand.add_site(name="tcp", pos=[0, 0, 0], size=[0.004, 0, 0], group=5)
    finger_z = cfg.tip_beyond_tcp - cfg.finger_length / 2
    for side, sign in (("left", -1.0), ("right", 1.0)):
        finger = hand.add_body(name=f"{side}_finger", gravcomp=1.0)
        finger.add_joint(
            name=f"{side}_finger_joint",
            type=mujoco.mjtJoint.mjJNT_SLIDE,
            axis=[sign, 0, 0],
            range=[0, cfg.max_opening / 2],
            damping=8.0,
            armature=0.01,
        )
        finger.add_geom(
            name=f"{side}_finger",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.005, 0.012, cfg.finger_length / 2],
            pos=[sign * 0.009, 0, finger_z],
            mass=0.05,
            group=ROBOT_GROUP,
            rgba=[0.3, 0.3, 0.33, 1],
        )
        pad = finger.add_geom(
            name=f"{side}_pad",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.002, 0.011, 0.018],
            pos=[sign * 0.002, 0, cfg.tip_beyond_tcp - 0.018],
            mass=0.005,
            group=ROBOT_GROUP,
            rgba=[0.85, 0.45, 0.1, 1],
            friction=[cfg.pad_friction, 0.005, 0.0001],
        )
        pad.condim = 4
    spec.add_exclude(bodyname1="left_finger", bodyname2="right_finger")
    eq = spec.add_equality(
        name="finger_coupling",
        type=mujoco.mjtEq.mjEQ_JOINT,
        name1="right_finger_joint",
        name2="left_finger_joint",
        objtype=mujoco.mjtObj.mjOBJ_JOINT,
    )
    eq.data[:5] = [0, 1, 0, 0, 0]


def add_jaw_actuator(spec: mujoco.MjSpec, cfg: GripperConfig) -> None:
    """The position servo on the left finger's half opening (the right one is coupled)."""
    actuator = spec.add_actuator(
        name="fingers", target="left_finger_joint", trntype=mujoco.mjtTrn.mjTRN_JOINT
    )
    actuator.set_to_position(kp=cfg.finger_kp)
    actuator.ctrlrange = [0, cfg.max_opening / 2]
    actuator.ctrllimited = True
    actuator.forcerange = [-cfg.finger_force, cfg.finger_force]
    actuator.forcelimited = True


class FloatingGripper:
    """A free-floating parallel-jaw gripper driven through a mocap weld.

    One finger DoF is actuated (a position servo on the left finger's half
    opening); the right finger follows through a joint equality, so the jaw
    stays centred on the TCP.
    """

    name = "floating-gripper"

    def __init__(self, config: GripperConfig | None = None) -> None:
        self.config = config or GripperConfig()
        self.max_opening = self.config.max_opening
        self._ids: dict[str, int] = {}

    # -- model construction -------------------------------------------------------------
    def build(self, spec: mujoco.MjSpec, *, home: np.ndarray) -> None:  # home [4, 4]
        """Add the floating gripper (mocap hand, two fingers, camera) to ``spec`` at ``home``."""
        cfg = self.config
        home_quat = list(mat_to_quat(home[:3, :3]))
        home_pos = list(map(float, home[:3, 3]))
        spec.worldbody.add_body(name="tcp_target", mocap=True, pos=home_pos, quat=home_quat)
        hand = spec.worldbody.add_body(name=HAND_BODY, pos=home_pos, quat=home_quat, gravcomp=1.0)
        hand.add_freejoint(name="hand_free")
        add_parallel_jaw(spec, hand, cfg)
        spec.add_equality(
            name="mocap_weld",
            type=mujoco.mjtEq.mjEQ_WELD,
            name1="tcp_target",
            name2=HAND_BODY,
            solref=[cfg.weld_timeconst, 1.0],
            solimp=[0.99, 0.999, 0.001, 0.5, 2.0],
            objtype=mujoco.mjtObj.mjOBJ_BODY,
        )
        add_jaw_actuator(spec, cfg)

    def bind(self, model: mujoco.MjModel) -> None:
        """Resolve body, joint and actuator ids in the compiled ``model``."""
        body = mujoco.mjtObj.mjOBJ_BODY
        self._ids = {
            "mocap": int(model.body_mocapid[mujoco.mj_name2id(model, body, "tcp_target")]),
            "hand": mujoco.mj_name2id(model, body, HAND_BODY),
            "camera": mujoco.mj_name2id(model, body, CAMERA_BODY),
            "hand_qpos": int(
                model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "hand_free")]
            ),
            "left_qpos": int(
                model.jnt_qposadr[
                    mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "left_finger_joint")
                ]
            ),
            "right_qpos": int(
                model.jnt_qposadr[
                    mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "right_finger_joint")
                ]
            ),
            "actuator": mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "fingers"),
        }

    # -- runtime --------------------------------------------------------------------------
    def reset(  # world_from_tcp [4, 4]
        self, data: mujoco.MjData, *, world_from_tcp: np.ndarray, opening: float
    ) -> None:
        """Put the hand at ``world_from_tcp`` and the fingers at ``opening`` metres."""
        ids = self._ids
        quat = mat_to_quat(world_from_tcp[:3, :3])
        data.qpos[ids["hand_qpos"] : ids["hand_qpos"] + 3] = world_from_tcp[:3, 3]
        data.qpos[ids["hand_qpos"] + 3 : ids["hand_qpos"] + 7] = quat
        half = float(np.clip(opening, 0.0, self.max_opening)) / 2
        data.qpos[ids["left_qpos"]] = half
        data.qpos[ids["right_qpos"]] = half
        self.command(data, position=world_from_tcp[:3, 3], quaternion=quat, opening=opening)

    def command(  # position [3], quaternion [4] (w, x, y, z)
        self, data: mujoco.MjData, *, position: np.ndarray, quaternion: np.ndarray, opening: float
    ) -> None:
        """Set the mocap target pose of the hand and the finger opening in metres."""
        ids = self._ids
        data.mocap_pos[ids["mocap"]] = position
        data.mocap_quat[ids["mocap"]] = quaternion
        data.ctrl[ids["actuator"]] = min(max(float(opening), 0.0), self.max_opening) / 2

    def set_tracking_gains(self, model: mujoco.MjModel, solref: tuple[float, float]) -> None:
        """Gains of the TCP tracking weld (``EnvConfig.controller_solref``; issue-13 hook)."""
        weld = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, "mocap_weld")
        model.eq_solref[weld] = solref

    def tcp_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """World pose [4, 4] of the tool centre point."""
        hand = self._ids["hand"]
        return pose(data.xmat[hand].reshape(3, 3), data.xpos[hand])

    def opening(self, data: mujoco.MjData) -> float:
        """Finger opening, metres (sum of both finger joints)."""
        return float(data.qpos[self._ids["left_qpos"]] + data.qpos[self._ids["right_qpos"]])

    def camera_pose(self, data: mujoco.MjData) -> np.ndarray:  # -> [4, 4]
        """World pose [4, 4] of the wrist camera body."""
        cam = self._ids["camera"]
        return pose(data.xmat[cam].reshape(3, 3), data.xpos[cam])


def _arm6(**kwargs) -> Robot:
    from bench.sim.arm import ArmConfig, ArmRobot

    return ArmRobot(ArmConfig(**kwargs))


ROBOTS: Registry = Registry("robot")
ROBOTS.register(
    "floating-gripper",
    FloatingGripper,
    kind="floating",
    description="free 6-DoF parallel-jaw gripper on a mocap weld, wrist fisheye camera",
)
ROBOTS.register(
    "arm6",
    _arm6,
    kind="arm",
    description="the bench's 6-DoF MJCF arm + parallel jaw, differential IK (mink)",
)


def make_robot(name: str) -> Robot:
    """A robot by registry name ("floating-gripper", "arm6"), robot JSON file or MJCF/URDF path.

    A ``.json`` file holds :class:`bench.sim.arm.ArmConfig` fields (``model`` relative to
    it); an ``.xml`` / ``.urdf`` path is an arm with the default config (``ee_body``
    "flange" must exist: use a robot file to name another end-effector body).
    """
    lowered = str(name).lower()
    if lowered.endswith(".json"):
        from bench.sim.arm import ArmRobot, load_robot_file

        return ArmRobot(load_robot_file(name))
    if lowered.endswith((".xml", ".mjcf", ".urdf")):
        from bench.sim.arm import ArmConfig, ArmRobot

        return ArmRobot(ArmConfig(model=str(name)))
    return ROBOTS.get(name)()
