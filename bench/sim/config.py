"""Typed configuration of a simulator environment (written as JSON next to rollout results)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.render import FISHEYE_MODES

OBS_MODES = ("rgb", "state")
CONTROL_MODES = ("chunk", "single")
BACKGROUNDS = ("gaussian", "none")
#: End-effector controller gain profiles: the mocap weld's MuJoCo ``solref``. ``default``
#: is the stock (time constant 0.004 s, damping ratio 1) form; the others are direct
#: (-kp, -kd) gains: stiff = 2x the stock stiffness and sqrt(2)x its damping, soft = 1/4
#: and 1/2 (both keep the damping ratio at 1; the stock equivalent is kp = 1 / 0.004^2 =
#: 62500 s^-2, kd = 2 / 0.004 = 500 s^-1, reference accelerations per metre / per m/s;
#: the direct form of the stock gains reproduces it exactly). Stiffer than
#: kp * physics_dt^2 = 0.6 (1.5e5 at 2 ms) the weld goes unstable, hence stiff = 2x.
GAIN_PROFILES: dict[str, tuple[float, float]] = {
    "default": (0.004, 1.0),
    "stiff": (-125000.0, -707.1),
    "soft": (-15625.0, -250.0),
}
MAX_KP_DT2 = 0.6
GRASP_MODES = ("contact", "friction")


@dataclass(frozen=True)
class GraspConfig:
    """Grasp rule settings.

    Attributes:
        mode: "contact" (YUBI attach rule) or "friction" (force-threshold squeeze).
        release_margin: Opening beyond the attach opening that releases a welded object, metres.
        force_threshold: Total pad normal force that stops closing (friction mode), newtons.
        weld_timeconst: Time constant of the attach weld, seconds.
    """

    mode: str = field(default="contact", metadata={
        "help": "YUBI contact-attach rule or frictional grasp with a force threshold",
        "choices": GRASP_MODES})
    release_margin: float = 0.01
    force_threshold: float = field(default=15.0, metadata={
        "help": "frictional grasp: total pad force at which the fingers stop closing",
        "unit": "newtons"})
    weld_timeconst: float = 0.004

    def __post_init__(self) -> None:
        if self.mode not in GRASP_MODES:
            raise ValueError(
                f"grasp mode {self.mode!r} is not one of {GRASP_MODES}; "
                "use 'contact' (YUBI attach rule) or 'friction'"
            )
        if self.force_threshold <= 0 or self.release_margin < 0:
            raise ValueError("grasp force_threshold must be > 0 N and release_margin >= 0 m")


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
        controller_gains: End-effector controller profile (:data:`GAIN_PROFILES`:
            "default", "stiff", "soft"), or "custom" with ``controller_kp`` / ``controller_kd``.
        controller_kp: Custom stiffness of the TCP tracking constraint, s^-2 (reference
            acceleration per metre of error); only with ``controller_gains="custom"``.
        controller_kd: Custom damping, s^-1 (reference acceleration per m/s).
        shadows: Cast shadows in the MuJoCo layer (robot and objects; the reconstructed
            table is Gaussian, so it receives none). Off by default (~20x cost in software GL).
        mesh_msaa: Multisample the MuJoCo layer that is composited over Gaussians. Off by
            default: MSAA resolves a silhouette pixel to a mix of the mesh and the black
            clear colour at full alpha, a dark fringe around every object
            (:class:`bench.sim.observation.MujocoPinhole`). On reproduces the renders made
            before 2026-12-06. A mesh-only env (``background="none"``) always multisamples.
    """

    task: str = field(default="cup", metadata={
        "help": "task: cup, tape, pen, rope (deformable; policies rope-expert, "
        "rope-expert-hasty), a task file (.json/.toml) or the name of a task file in the scene "
        "bundle's tasks/"})
    obs_mode: str = field(default="rgb", metadata={
        "help": "rgb renders the wrist fisheye; state skips rendering (fast)",
        "choices": OBS_MODES})
    control: str = "chunk"
    chunk_size: int | None = None
    execute: int | None = field(default=None, metadata={
        "help": "actions executed per chunk", "unit": "frames",
        "default_help": "the task's, 16 cup / 8 tape, pen"})
    max_frames: int | None = field(default=None, metadata={
        "help": "time limit in 10 Hz frames", "default_help": "the task's, 600"})
    control_hz: float = 10.0
    physics_dt: float = 0.002
    image_size: tuple[int, int] = field(default=(128, 128), metadata={
        "help": "wrist image height and width", "unit": "pixels", "metavar": ("H", "W")})
    fisheye_fov_deg: float = 200.0
    fisheye_distortion: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    fisheye_mode: str = field(default="cubemap", metadata={
        "help": "how the Gaussian background is projected into the fisheye",
        "choices": FISHEYE_MODES})
    cube_face_px: int = 0
    background: str = field(default="gaussian", metadata={
        "help": "draw the scene's Gaussians behind the objects, or black",
        "choices": BACKGROUNDS})
    render_backend: str = field(default="auto", metadata={
        "help": "bench.render backend: auto (gsplat on CUDA, else cpu), cpu, gsplat, torch, "
        "reference"})
    exterior_size: tuple[int, int] = (240, 320)
    grasp: GraspConfig = field(default_factory=GraspConfig)
    success_hold_frames: int = 3
    max_delta_pos: float = 0.05
    max_delta_rot: float = 0.5
    min_table_gaussians: int = field(default=50, metadata={
        "help": "fewest background Gaussians that must lie on the table top (0 skips the "
        "registration check)", "unit": "count"})
    robot: str = field(default="floating-gripper", metadata={
        "help": "embodiment: floating-gripper, arm6 (6-DoF arm, differential IK), a robot .json "
        "or an MJCF/URDF path"})
    cameras: str = field(default="wrist", metadata={
        "help": "camera rig: wrist (wrist_rgb), yubi-dual (wrist_left_rgb + wrist_right_rgb) or "
        "a rig .json with calibrations"})
    controller_gains: str = field(default="default", metadata={
        "help": "end-effector controller gain profile",
        "choices": tuple(p for p in GAIN_PROFILES)})
    controller_kp: float | None = None
    controller_kd: float | None = None
    shadows: bool = field(default=False, metadata={"help": "MuJoCo-layer shadows on"})
    mesh_msaa: bool = field(default=False, metadata={
        "help": "draw the MuJoCo layer under Gaussians with MSAA (dark silhouette fringes at "
        "full alpha; the renders before 2026-12-06)"})

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
        self._check_gains()

    def _check_gains(self) -> None:
        custom = self.controller_kp is not None or self.controller_kd is not None
        if self.controller_gains == "custom":
            if self.controller_kp is None or self.controller_kd is None:
                raise ValueError("controller_gains='custom' needs controller_kp and controller_kd")
            if not (self.controller_kp > 0 and self.controller_kd >= 0):
                raise ValueError("controller_kp must be > 0 and controller_kd >= 0")
            if self.controller_kp * self.physics_dt**2 > MAX_KP_DT2:
                raise ValueError(f"controller_kp={self.controller_kp:g} is unstable at "
                                 f"physics_dt={self.physics_dt} (kp * dt^2 > {MAX_KP_DT2}); "
                                 "lower kp or physics_dt")
        elif self.controller_gains not in GAIN_PROFILES:
            raise ValueError(f"controller_gains={self.controller_gains!r} is not one of "
                             f"{(*GAIN_PROFILES, 'custom')}")
        elif custom:
            raise ValueError("controller_kp / controller_kd need controller_gains='custom'")

    @property
    def controller_solref(self) -> tuple[float, float]:
        """MuJoCo ``solref`` of the TCP tracking constraint for the chosen gains."""
        if self.controller_gains == "custom":
            return (-float(self.controller_kp), -float(self.controller_kd))
        return GAIN_PROFILES[self.controller_gains]

    @property
    def frame_seconds(self) -> float:
        """Duration of one control frame, seconds (1 / control_hz)."""
        return 1.0 / self.control_hz

    @property
    def substeps(self) -> int:
        """Physics steps per control frame (10 Hz / 2 ms -> 50)."""
        return int(round(self.frame_seconds / self.physics_dt))

    def replace(self, **changes) -> EnvConfig:
        """A copy with the given fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
