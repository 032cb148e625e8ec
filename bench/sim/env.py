"""Gymnasium environments: ``splatbench/Cup-v0``, ``splatbench/Tape-v0``, ``splatbench/Pen-v0``.

Usage::

    import gymnasium, bench.sim
    env = gymnasium.make("splatbench/Cup-v0", scene="path/to/scene_dir")
    obs, info = env.reset(seed=3)          # initial condition 3 of the fixed grid
    obs, reward, terminated, truncated, info = env.step(chunk)   # chunk: [32, 7]

Actions (one row, float): ``(dx, dy, dz, rx, ry, rz, opening)`` - a TCP delta pose
expressed in the current *commanded* TCP frame (metres; rotation vector in
radians), composed as ``target <- target @ delta`` so tracking error never
accumulates, plus the absolute gripper opening in metres (0 closed,
``max_opening`` open). Rows are clipped to the action space. Each row is one
10 Hz control frame of 50 physics steps of 2 ms; the mocap target moves
linearly (position) and geodesically (rotation) within the frame.

``control="chunk"`` (default): ``step`` takes a ``[chunk_size, 7]`` chunk and
executes its first ``execute`` rows (YUBI: chunk 32, execute 16 for Cup and 8
for Tape/Pen), stopping early on termination; the observation is rendered once
per ``step`` (chunk rate). ``control="single"``: ``step`` takes one ``[7]`` row.
A caller that will not look at a step's images may say so (``observe_terminal``,
``observe_steps``; :func:`bench.sim.rollout.run_episode` does): that step's observation
then holds black images (one read-only buffer) and nothing is rendered.

Physics: the frame's 50 steps go to MuJoCo in one call wherever the grasp rule is idle
(:meth:`bench.sim.world.World.step_frame`; ``batched_physics = False`` runs the per-step
reference loop), with bit-identical states.

Observation (``obs_mode="rgb"``): one ``<camera>_rgb`` uint8 ``[H, W, 3]`` per camera of
the rig (default: ``wrist_rgb``, the wrist fisheye; ``cameras="yubi-dual"``:
``wrist_left_rgb`` + ``wrist_right_rgb``; see :mod:`bench.sim.camera_rig`), each the
Gaussian background composited with MuJoCo objects by depth, and ``proprio``
float32 ``[8]`` = TCP position (3, m, world), TCP quaternion (4, w x y z),
finger opening (1, m). ``obs_mode="state"`` renders nothing and returns
``proprio`` plus ``object_state`` float32 ``[15]`` (actor pose 7, receptacle
pose 7, attached flag).

Reward: the task's RobotArena-inf progress score in [0, 1]
(``bench.sim.progress``) at the last executed frame; ``info["success"]`` is
the separate, strict success predicate. The env's success is the scorer's
authoritative terminal signal, so the reward is 1.0 from the frame the episode
succeeds (the frame it terminates) and below 1 in an episode that does not.
``terminated``: success, or a failure
(object fell through the table or left the workspace; reason in
``info["failure"]``). ``truncated``: the time limit in frames.

Info (privileged, for experts, progress scoring and records): ``condition``,
``initial_pose``, ``frame``, ``frames_executed``, ``success``, ``progress``,
``failure``, ``objects`` (pose and velocity per object), ``contacts`` (sorted
body-label pairs), ``grasp`` (mode, attached object, measured and commanded
opening), ``tcp_target``, ``target_clipped``, ``robot`` (an arm's IK counters:
solves, unreachable, fallbacks, clipped targets; empty for the floating gripper), ``state`` (a
:class:`~bench.sim.state.TaskState`) and ``frame_states``: one row per control
frame executed by this call (``reset`` gives frame 0) - the state stream
(ee pose, normalised gripper, object poses, ``success_now`` = the predicate in
that frame, ``success`` = the episode's declared success so far, progress) that
``bench.sim.progress.score_stream`` rescores offline, given
``success=`` the recorded ``success`` flags.

Initial conditions: ``reset(seed=i)`` uses condition ``i`` of the task's fixed
grid (``options={"condition": i}`` overrides; ``reset()`` without either takes
the next condition). Physics is deterministic: the same scene, condition and
actions give identical states and images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from bench.errors import BenchError, count_noun
from bench.geometry import interpolate_pose, rotvec_to_mat
from bench.sim.config import EnvConfig
from bench.sim.env_render import EnvRendering
from bench.sim.state import FrameState, TaskState
from bench.sim.task_progress import make_progress_scorer, step_state
from bench.sim.task_spec import TaskSpec
from bench.sim.tasks import get_task
from bench.sim.world import TableGeometry, World

ACTION_DIM = 7
PROPRIO_DIM = 8


def resolve_scene(scene: Any) -> Any:
    """A :class:`bench.scene.bundle.SceneBundle` from a bundle, a directory or None."""
    if scene is None:
        raise BenchError(
            "no scene given; pass scene=SCENE_DIR (see `bench scene sample --out DIR`) "
            "or a SceneBundle"
        )
    if isinstance(scene, str | Path):
        from bench.scene.bundle import load_scene

        return load_scene(scene)
    if not hasattr(scene, "table") or not hasattr(scene, "background"):
        raise BenchError(
            f"scene must be a scene directory or a SceneBundle, got {type(scene).__name__}"
        )
    return scene


def check_table_registration(
    scene: Any, table: TableGeometry, *, minimum: int, band: float = 0.03
) -> int:
    """Count background Gaussians on the tabletop; too few means the table is out of view.

    A wrong ``world_from_splat`` (wrong scale, flipped axis, offset) moves the
    reconstructed table away from the simulated one, so the wrist camera would
    see objects floating over nothing. Returns the count.
    """
    means = np.asarray(scene.background.means, dtype=np.float64)
    if means.size == 0:
        count = 0
    else:
        local = table.to_table_xy(means)
        half = np.asarray(table.size) / 2
        on_top = np.all(np.abs(local) <= half, axis=1) & (
            np.abs(means[:, 2] - table.height) <= band
        )
        count = int(on_top.sum())
    if count < minimum:
        raise BenchError(
            f"scene {getattr(scene, 'name', '?')!r}: only "
            f"{count_noun(count, 'background Gaussian')} {'lies' if count == 1 else 'lie'} within "
            f"{band * 100:.0f} cm of the table top (need >= {minimum}), so the registration "
            "puts the "
            "table out of view; fix world_from_splat / the table spec in scene.json "
            "(or skip this check: bench rollout --min-table-gaussians 0, "
            "EnvConfig(min_table_gaussians=0) in Python)"
        )
    return count


class SplatBenchEnv(EnvRendering, gym.Env):
    """One task in one scene (see the module docstring for the full contract).

    Args:
        task: Task name ("cup", "tape", "pen"), a task-file path (.json / .toml), the name of
            a task file in the scene bundle (``tasks/NAME.json``), or a
            :class:`~bench.sim.task_spec.TaskSpec`; registered ids fix it.
        scene: Scene directory or :class:`~bench.scene.bundle.SceneBundle`.
        render_mode: None or "rgb_array" (``render()`` returns the exterior camera view).
        config: An :class:`EnvConfig`; keyword arguments override its fields.
        robot: A :class:`~bench.sim.robot.Robot` instance (default: built from
            ``config.robot``, the floating gripper unless set).
        world_decorator: Optional ``f(spec)`` handed to :class:`~bench.sim.world.World` as
            ``decorate``: visual-only scenery added to the MuJoCo model (the ground-truth
            rooms of :mod:`bench.worlds.rooms` use it with ``background="none"``).
        **overrides: Any :class:`EnvConfig` field, e.g. ``obs_mode="state"``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    #: Step a frame's physics in one MuJoCo call where the grasp rule allows it
    #: (:meth:`bench.sim.world.World.step_frame`, bit-identical); False = the plain
    #: per-step loop (the reference, and "before issue 32" in benchmarks).
    batched_physics = True
    #: Render the camera images of a step that ends the episode (Gymnasium's contract).
    #: :func:`bench.sim.rollout.run_episode` turns it off when it records no video: no
    #: policy ever sees that frame. Off, such a step's images are black (not rendered).
    observe_terminal = True
    #: Render the camera images of every step; False = black images (the asynchronous
    #: rollout's steps whose observation no policy query reads).
    observe_steps = True

    def __init__(
        self,
        task: str | TaskSpec = "cup",
        scene: Any = None,
        *,
        render_mode: str | None = None,
        config: EnvConfig | None = None,
        robot: Any = None,
        world_decorator: Any = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        if isinstance(robot, str):  # a robot name / file is a config field
            overrides["robot"], robot = robot, None
        spec = task if isinstance(task, TaskSpec) else None
        task_key = (spec.source or spec.name) if spec is not None else str(task)
        base = config or EnvConfig(task=task_key)
        self.config = (
            base.replace(task=task_key, **overrides)
            if (overrides or task_key != base.task)
            else base
        )
        self.scene = resolve_scene(scene)
        self.task: TaskSpec = spec or get_task(
            self.config.task, scene_root=getattr(self.scene, "root", None)
        )
        if not isinstance(self.task, TaskSpec):  # the deformable rope has its own env
            raise ValueError(f"task {self.task.name!r} is not a rigid task; make it with "
                             f"bench.sim.make_env({self.task.name!r}, scene) "
                             f"({getattr(self.task, 'env_id', 'its own env id')})")
        self.table = TableGeometry.from_scene_table(self.scene.table)
        if self.config.background == "gaussian" and self.config.min_table_gaussians > 0:
            check_table_registration(
                self.scene, self.table, minimum=self.config.min_table_gaussians
            )
        if robot is None:
            from bench.sim.robot import make_robot

            robot = make_robot(self.config.robot)
        self.world = World(
            self.task,
            self.table,
            robot=robot,
            grasp=self.config.grasp,
            physics_dt=self.config.physics_dt,
            decorate=world_decorator,
        )
        if self.config.controller_gains != "default":  # deployment fidelity: EE gain profile
            hook = getattr(self.world.robot, "set_tracking_gains", None)
            if hook is None:
                raise ValueError(f"robot {self.world.robot.name!r} has no controller gain hook; "
                                 "use controller_gains='default'")
            hook(self.world.model, self.config.controller_solref)
        self.chunk_size = int(self.config.chunk_size or self.task.chunk_size)
        self.execute = int(self.config.execute or self.task.execute)
        self.max_frames = int(self.config.max_frames or self.task.max_frames)
        if self.config.control == "chunk" and self.execute > self.chunk_size:
            raise ValueError(
                f"execute ({self.execute}) cannot exceed chunk_size ({self.chunk_size})"
            )
        self.action_space = self._make_action_space()
        from bench.sim.camera_rig import make_rig

        self.rig = make_rig(self.config, self.world.robot)
        self.observation_space = self._make_observation_space()
        self._success_fn = self.task.success_for(self.world.world_from_table)
        self._progress = make_progress_scorer(
            self.task, dt=self.config.frame_seconds, world_from_table=self.world.world_from_table
        )
        self._renderer = None
        self._next_condition = 0
        self._state: TaskState | None = None
        self.condition = -1

    # -- spaces ---------------------------------------------------------------------------
    def _row_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        p, r = self.config.max_delta_pos, self.config.max_delta_rot
        low = np.array([-p, -p, -p, -r, -r, -r, 0.0], dtype=np.float32)
        high = np.array([p, p, p, r, r, r, self.world.robot.max_opening], dtype=np.float32)
        return low, high

    def _make_action_space(self) -> gym.spaces.Box:
        low, high = self._row_bounds()
        if self.config.control == "chunk":
            low, high = np.tile(low, (self.chunk_size, 1)), np.tile(high, (self.chunk_size, 1))
        return gym.spaces.Box(low=low, high=high, dtype=np.float32)

    def _make_observation_space(self) -> gym.spaces.Dict:
        spaces: dict[str, gym.spaces.Space] = {
            "proprio": gym.spaces.Box(-np.inf, np.inf, shape=(PROPRIO_DIM,), dtype=np.float32)
        }
        if self.config.obs_mode == "rgb":
            for camera in self.rig:
                h, w = camera.intrinsics.height, camera.intrinsics.width
                spaces[camera.key] = gym.spaces.Box(0, 255, shape=(h, w, 3), dtype=np.uint8)
        else:
            spaces["object_state"] = gym.spaces.Box(-np.inf, np.inf, shape=(15,), dtype=np.float32)
        return gym.spaces.Dict(spaces)

    # -- gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode at grid condition ``seed`` (or ``options["condition"]``)."""
        super().reset(seed=seed)
        options = options or {}
        if "condition" in options:
            condition = int(options["condition"])
        elif seed is not None:
            condition = int(seed)
        else:
            condition = self._next_condition
        if condition < 0:
            raise ValueError(f"initial condition must be >= 0, got {condition}; use reset(seed=i)")
        self.condition = condition
        self._next_condition = condition + 1
        self.initial_pose = self.task.grid.condition(condition)
        self.world.reset(self.initial_pose)
        self._target = self.world.home.copy()
        self._opening_cmd = self.world.robot.max_opening
        self._frame = 0
        self._success_run = 0
        self._success = False
        self._failure: str | None = None
        self._clipped = False
        if self._progress is not None:
            self._progress.reset()
        self._state = self.world.task_state(frame=0)
        self._progress_value = self._score_progress(self._state, success=False)
        self._frame_rows = [self._frame_row(self._state, success_now=False)]
        return self._observation(), self._info(executed=0)

    def step(self, action):
        """Execute an action chunk (or one action): Gymnasium's 5-tuple."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        rows = self._validate_action(action)
        self._frame_rows = []
        executed = 0
        for row in rows:
            if self._frame >= self.max_frames or self._success or self._failure:
                break
            self._run_frame(row)
            executed += 1
        terminated = bool(self._success or self._failure)
        truncated = bool(not terminated and self._frame >= self.max_frames)
        reward = float(self._progress_value)
        images = self.observe_steps and (self.observe_terminal or not (terminated or truncated))
        return (self._observation(images=images), reward, terminated, truncated,
                self._info(executed=executed))

    def wrist_camera(self):
        """The wrist fisheye :class:`~bench.scene.cameras.Camera` at its current pose.

        Needs no GL context, so vision policies can back-project wrist pixels in any
        ``obs_mode``.
        """
        from bench.sim.camera_rig import wrist_camera_model

        return wrist_camera_model(self.config).with_pose(
            self.world.robot.camera_pose(self.world.data)
        )

    def cameras(self) -> dict:
        """Every rig camera (``{name: Camera}``) at its current pose; no GL context needed."""
        data = self.world.data
        tcp = self.world.robot.tcp_pose(data)
        body = self.world.robot.camera_pose(data)
        return {c.name: c.intrinsics.with_pose(c.world_pose(tcp, body)) for c in self.rig}

    def robot_stats(self) -> dict[str, int]:
        """The robot's counters this episode (arms: IK solves, unreachable, fallbacks)."""
        stats = getattr(self.world.robot, "stats", None)
        return dict(stats()) if callable(stats) else {}

    @property
    def tcp_from_camera(self) -> np.ndarray:  # [4, 4]
        """Fixed hand-eye transform: wrist camera (OpenCV axes) in the TCP frame."""
        data = self.world.data
        tcp = self.world.robot.tcp_pose(data)
        return np.linalg.inv(tcp) @ self.world.robot.camera_pose(data)

    # -- internals ------------------------------------------------------------------------
    def _validate_action(self, action) -> np.ndarray:  # -> [n, 7] float64, clipped
        try:
            arr = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"action must be numeric, got {type(action).__name__}") from None
        expected = (
            (self.chunk_size, ACTION_DIM) if self.config.control == "chunk" else (ACTION_DIM,)
        )
        if arr.shape != expected:
            hint = (
                "pass a [chunk_size, 7] chunk or make the env with control='single'"
                if self.config.control == "chunk"
                else "pass one [7] row or make the env with control='chunk'"
            )
            raise ValueError(
                f"action has shape {arr.shape}, expected {expected} "
                f"(dx, dy, dz, rx, ry, rz, opening); {hint}"
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError("action contains NaN or inf; check the policy output")
        low, high = self._row_bounds()
        rows = np.atleast_2d(arr)
        if self.config.control == "chunk":
            rows = rows[: self.execute]
        return np.clip(rows, low, high)

    def _run_frame(self, row: np.ndarray) -> None:
        world = self.world
        delta = np.eye(4)
        delta[:3, :3] = rotvec_to_mat(row[3:6])
        delta[:3, 3] = row[:3]
        start = self._target
        goal, clipped = world.clip_target(start @ delta)
        self._clipped = clipped
        self._opening_cmd = float(row[6])
        positions, quaternions = interpolate_pose(start, goal, self.config.substeps)
        world.step_frame(positions, quaternions, commanded_opening=self._opening_cmd,
                         batched=self.batched_physics)
        self._target = goal
        self._frame += 1
        state = world.task_state(frame=self._frame)
        self._state = state
        self._failure = world.failure(state)
        success_now = bool(self._success_fn(state))
        self._success_run = self._success_run + 1 if success_now else 0
        self._success = self._success_run >= self.config.success_hold_frames
        # the env's own success is authoritative for the scorer's terminal channel
        self._progress_value = self._score_progress(state, success=self._success)
        self._frame_rows.append(self._frame_row(state, success_now=success_now))

    def _frame_row(self, state: TaskState, *, success_now: bool) -> FrameState:
        """One frame of the recorded state stream (see ``info["frame_states"]``)."""
        return FrameState(
            frame=state.frame,
            ee_pose=[*state.tcp_pos.tolist(), *state.tcp_quat.tolist()],
            gripper=min(max(state.opening / self.world.robot.max_opening, 0.0), 1.0),
            opening_m=state.opening,
            attached=state.attached or "",
            held=state.held(self.task.actor.name),
            success_now=success_now,
            success=self._success,
            progress=self._progress_value,
            objects={n: [*o.pos.tolist(), *o.quat.tolist()] for n, o in state.objects.items()},
        )

    def _score_progress(self, state: TaskState, *, success: bool) -> float:
        if self._progress is None:
            return 0.0
        frame_state = step_state(state, max_opening=self.world.robot.max_opening)
        return float(self._progress.update(frame_state, success=success))

    def _proprio(self) -> np.ndarray:
        s = self._state
        return np.concatenate([s.tcp_pos, s.tcp_quat, [s.opening]]).astype(np.float32)

    def _blank_images(self) -> dict[str, np.ndarray]:
        """Read-only black images of the observation space's shapes, made once.

        An observation keeps every key of the space (Gymnasium's contract; its env checker
        asserts it) even when its images were not rendered.
        """
        blank = getattr(self, "_blank", None)
        if blank is None:
            blank = {}
            for key, space in self.observation_space.spaces.items():
                if key != "proprio":
                    blank[key] = np.zeros(space.shape, space.dtype)
                    blank[key].flags.writeable = False
            self._blank = blank
        return dict(blank)

    def _observation(self, *, images: bool = True) -> dict[str, np.ndarray]:
        obs = {"proprio": self._proprio()}
        if self.config.obs_mode == "rgb":
            if images:
                obs.update(self._get_renderer().render_cameras())
            else:  # nobody looks (observe_terminal, observe_steps): black, nothing rendered
                obs.update(self._blank_images())
        else:
            s = self._state
            parts = [
                np.concatenate([s.objects[o.name].pos, s.objects[o.name].quat])
                for o in self.task.objects
            ]
            obs["object_state"] = np.concatenate([*parts, [float(s.attached is not None)]]).astype(
                np.float32
            )
        return obs

    def _info(self, *, executed: int) -> dict[str, Any]:
        s = self._state
        return {
            "condition": self.condition,
            "initial_pose": {
                "x": self.initial_pose[0],
                "y": self.initial_pose[1],
                "yaw_deg": float(np.rad2deg(self.initial_pose[2])),
            },
            "frame": self._frame,
            "frames_executed": executed,
            "success": self._success,
            "progress": self._progress_value,
            "failure": self._failure,
            "objects": {
                name: {"pos": o.pos.copy(), "quat": o.quat.copy(), "linvel": o.linvel.copy()}
                for name, o in s.objects.items()
            },
            "contacts": sorted(s.contacts),
            "grasp": {
                "mode": self.config.grasp.mode,
                "attached": s.attached,
                "opening": s.opening,
                "commanded_opening": self._opening_cmd,
            },
            "tcp_target": self._target.copy(),
            "target_clipped": self._clipped,
            "robot": self.robot_stats(),
            "state": s,
            "frame_states": list(self._frame_rows),
        }

    def _get_renderer(self):
        if self._renderer is None:
            from bench.sim.observation import ObservationRenderer

            self._renderer = ObservationRenderer(self.world, self.scene, self.config, rig=self.rig)
        return self._renderer
