"""The bench's parallel jaw and the body names every robot's hand exposes.

One job: build the jaw. :func:`add_parallel_jaw` adds the palm, wrist-camera body, ``tcp``
site and two coupled sliding fingers with pads to a hand body whose frame is the TCP;
:func:`add_jaw_actuator` adds its finger servo; :class:`GripperConfig` holds its geometry and
gains. The floating gripper (:class:`bench.sim.robot.FloatingGripper`) and the arms
(:class:`bench.sim.arm.ArmRobot`) both mount it, and the world, grasp and rope code find a
robot's hand, pads and camera by :data:`HAND_BODY`, :data:`LEFT_PAD`, :data:`RIGHT_PAD` and
:data:`CAMERA_BODY`. It imports no robot, so both robots can import it.

TCP frame: origin between the fingertip pads, +z the approach direction, +x the finger
opening axis, +y = z x x. The wrist camera uses OpenCV axes (+z forward, +y down) and is
rigidly mounted on the hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from bench.geometry import mat_to_quat
from bench.sim.objects import ROBOT_GROUP

HAND_BODY = "hand"
LEFT_PAD = "left_pad"
RIGHT_PAD = "right_pad"
CAMERA_BODY = "wrist_camera"


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
