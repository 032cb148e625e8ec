"""Robots: a small protocol the environment drives, and the default floating gripper.

The environment talks to a robot only in tool-centre-point (TCP) terms: "move
the TCP towards this world pose, set this finger opening". A floating gripper
does that with a mocap body welded to a free 6-DoF hand; an MJCF arm (e.g. a
Franka FR3 from MuJoCo Menagerie) would implement the same protocol with a
differential-IK controller in :meth:`Robot.command`, leaving the environment,
tasks, grasping and rendering unchanged. The jaw both mount, and the body names of a
robot's hand, pads and wrist camera, are in :mod:`bench.sim.parallel_jaw`; the robot
registry here (:data:`ROBOTS`, :func:`make_robot`) builds the floating gripper or an arm
(:mod:`bench.sim.arm`).

TCP frame: origin between the fingertip pads, +z the approach direction, +x the
finger opening axis, +y = z x x. The wrist camera uses OpenCV axes (+z forward,
+y down) and is rigidly mounted on the hand.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import mujoco
import numpy as np

from bench.geometry import mat_to_quat, pose
from bench.registry import Registry
from bench.sim.parallel_jaw import (
    CAMERA_BODY,
    HAND_BODY,
    GripperConfig,
    add_jaw_actuator,
    add_parallel_jaw,
)


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

    def mocap_layout(self) -> dict[str, int]:
        """Indices :meth:`command` writes and :meth:`opening` reads, for batched stepping.

        ``mocap`` (row of ``mocap_pos`` / ``mocap_quat``), ``left_qpos`` / ``right_qpos``
        (the opening is their sum) and ``actuator`` (the finger servo's ``ctrl``). A robot
        whose command is only "mocap pose + finger servo" exposes it, so the world may
        hand a frame's interpolated targets to MuJoCo in one call
        (:meth:`bench.sim.world.World.step_frame`).
        """
        return {k: self._ids[k] for k in ("mocap", "left_qpos", "right_qpos", "actuator")}

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
