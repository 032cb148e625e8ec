"""Typed configuration of a simulator environment (written as JSON next to rollout results)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.sim.grasp import GraspConfig

OBS_MODES = ("rgb", "state")
CONTROL_MODES = ("chunk", "single")
BACKGROUNDS = ("gaussian", "none")
FISHEYE_MODES = ("cubemap", "direct")


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines an environment apart from the scene.

    ``None`` fields take the task's default (see :mod:`bench.sim.tasks`).

    Attributes:
        task: Task name: "cup", "tape" or "pen".
        obs_mode: "rgb" (wrist fisheye image + proprioception) or "state" (no rendering:
            proprioception + privileged object state; for fast tests and experts).
        control: "chunk" (``step`` takes a [chunk_size, 7] chunk and executes its first
            ``execute`` rows) or "single" (``step`` takes one [7] action).
        chunk_size: Rows per action chunk (YUBI: 32).
        execute: Rows executed per ``step`` in chunk mode (YUBI: 16 Cup, 8 Tape/Pen).
        max_frames: Time limit in 10 Hz control frames (YUBI: 600).
        control_hz: Policy/action rate, Hz.
        physics_dt: Physics step, seconds.
        image_size: Wrist image (height, width) in pixels.
        fisheye_fov_deg: Full field of view of the wrist fisheye, degrees.
        fisheye_distortion: Kannala-Brandt k1..k4 of the wrist lens (zeros: equidistant); the
            focal length is set so the ``fisheye_fov_deg`` circle fits the shorter image side.
        fisheye_mode: How bench.render draws the background fisheye: "cubemap" or "direct".
        cube_face_px: Side of each MuJoCo cubemap face, pixels (0 = derived from the image size).
        background: "gaussian" (the scene's splats) or "none" (black; MuJoCo objects only).
        render_backend: bench.render backend ("auto", "cpu", "gsplat", "reference").
        exterior_size: (height, width) of ``render()``'s fixed exterior camera, pixels.
        grasp: Grasp rule settings.
        success_hold_frames: Consecutive frames the success predicate must hold.
        max_delta_pos: Per-frame translation bound of an action, metres (actions are clipped).
        max_delta_rot: Per-frame rotation-vector bound of an action, radians (clipped).
        min_table_gaussians: Fewest background Gaussians that must lie on the tabletop; fewer
            means the registration put the table out of view (0 disables the check).
        robot: Embodiment: "floating-gripper" (default), "arm6" (the shipped 6-DoF arm with
            differential IK), a robot JSON file or an MJCF/URDF path (see
            :func:`bench.sim.robot.make_robot`).
        cameras: Camera rig: "wrist" (one wrist fisheye, ``wrist_rgb``), "yubi-dual"
            (``wrist_left_rgb`` + ``wrist_right_rgb``) or a rig JSON file
            (:mod:`bench.sim.camera_rig`).
    """

    task: str = "cup"
    obs_mode: str = "rgb"
    control: str = "chunk"
    chunk_size: int | None = None
    execute: int | None = None
    max_frames: int | None = None
    control_hz: float = 10.0
    physics_dt: float = 0.002
    image_size: tuple[int, int] = (128, 128)
    fisheye_fov_deg: float = 200.0
    fisheye_distortion: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    fisheye_mode: str = "cubemap"
    cube_face_px: int = 0
    background: str = "gaussian"
    render_backend: str = "auto"
    exterior_size: tuple[int, int] = (240, 320)
    grasp: GraspConfig = field(default_factory=GraspConfig)
    success_hold_frames: int = 3
    max_delta_pos: float = 0.05
    max_delta_rot: float = 0.5
    min_table_gaussians: int = 50
    robot: str = "floating-gripper"
    cameras: str = "wrist"

    def __post_init__(self) -> None:
        checks = (
            ("obs_mode", OBS_MODES),
            ("control", CONTROL_MODES),
            ("background", BACKGROUNDS),
            ("fisheye_mode", FISHEYE_MODES),
        )
        for name, allowed in checks:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {allowed}")
        if isinstance(self.grasp, dict):
            object.__setattr__(self, "grasp", GraspConfig(**self.grasp))
        object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        object.__setattr__(
            self, "fisheye_distortion", tuple(float(k) for k in self.fisheye_distortion)
        )
        if len(self.fisheye_distortion) != 4:
            raise ValueError("fisheye_distortion must be 4 numbers (Kannala-Brandt k1..k4)")
        object.__setattr__(self, "exterior_size", tuple(int(v) for v in self.exterior_size))
        for name in ("chunk_size", "execute", "max_frames"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if min(self.image_size) < 8 or min(self.exterior_size) < 8:
            raise ValueError("image_size and exterior_size must be at least 8 x 8 pixels")
        if not 0 < self.fisheye_fov_deg <= 270:
            raise ValueError(f"fisheye_fov_deg must be in (0, 270], got {self.fisheye_fov_deg}")
        steps = self.frame_seconds / self.physics_dt
        if self.physics_dt <= 0 or abs(steps - round(steps)) > 1e-6:
            raise ValueError(
                f"1 / control_hz ({self.frame_seconds} s) must be a whole number of "
                f"physics steps ({self.physics_dt} s)"
            )
        if self.success_hold_frames < 1:
            raise ValueError("success_hold_frames must be >= 1")
        if self.cameras not in ("wrist", "yubi-dual") and not str(self.cameras).endswith(".json"):
            raise ValueError(
                f"cameras={self.cameras!r} is neither 'wrist', 'yubi-dual' nor a rig .json file"
            )

    @property
    def frame_seconds(self) -> float:
        return 1.0 / self.control_hz

    @property
    def substeps(self) -> int:
        """Physics steps per control frame (10 Hz / 2 ms -> 50)."""
        return int(round(self.frame_seconds / self.physics_dt))

    def replace(self, **changes) -> EnvConfig:
        return dataclasses.replace(self, **changes)
