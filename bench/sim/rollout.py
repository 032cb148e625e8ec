"""Run policy episodes in a simulator environment and collect per-trial records.

One :class:`EpisodeRecord` per episode holds everything a study needs to
recompute rates and intervals (success and progress under separate names,
failure reason, frames, first-grasp frame, the initial condition). Wall-clock
time is kept out of the record so that result files are byte-identical across
runs; :func:`run_episode` returns it separately (and the per-query latencies through
``latencies=``).

The policy sees :func:`bench.sim.policy_io.policy_observation` (named camera images,
proprio, prompt, time stamp) and its chunk goes through
:func:`bench.sim.policy_io.to_env_chunk` (validated, absolute rows turned into deltas,
fitted to the env's chunk). A :class:`~bench.sim.policy_io.PolicyError` (a dead, slow
or malformed policy server, a malformed chunk) ends the rollout with
``status="error"`` and the reason: a fault, not a task failure.

Execution (:class:`Execution`): ``blocking`` (default; the simulator waits for the
policy) or ``async`` with an injected latency of L ms of *simulated* time: while the
policy thinks, the robot keeps executing the previous chunk; the answer arrives
``k = ceil(L / frame time)`` control frames after the observation it was computed
from, and its row ``k`` (the row meant for that frame) is the first one executed.
The next query is issued ``max(execute, k)`` frames after the previous one.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bench.sim.state import FrameState

EXECUTION_MODES = ("blocking", "async")


@dataclass(frozen=True)
class Execution:
    """How policy time relates to simulated time.

    Attributes:
        mode: "blocking" (the world waits for every query) or "async" (it does not).
        latency_ms: Think time injected in async mode, milliseconds of simulated time.
    """

    mode: str = "blocking"
    latency_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in EXECUTION_MODES:
            raise ValueError(f"execution mode {self.mode!r} is not one of {EXECUTION_MODES}")
        if not (self.latency_ms >= 0 and math.isfinite(self.latency_ms)):
            raise ValueError(f"latency_ms must be a finite number >= 0, got {self.latency_ms}")

    def delay_frames(self, frame_seconds: float) -> int:
        """Control frames between a query and its answer: ceil(L / frame time)."""
        if self.mode == "blocking":
            return 0
        return int(math.ceil(self.latency_ms / 1000.0 / frame_seconds - 1e-9))


@dataclass(frozen=True)
class EpisodeRecord:
    """Outcome of one rollout (JSON/CSV row).

    Attributes:
        episode: Index of the episode within the run.
        init_index: Initial-condition index of the task's grid (``reset(seed=init_index)``).
        task: Task name.
        policy: Policy name.
        scene: Scene name.
        success: Strict success predicate held (episode terminated successfully).
        progress_final: Progress score (``bench.sim.progress``) at the last frame, in [0, 1].
        progress_max: Highest progress score reached.
        failure: Failure reason ("fell_through_table:<obj>", "left_workspace:<obj>") or "".
        truncated: Hit the time limit.
        frames: Control frames executed (10 Hz).
        policy_queries: Times the policy was asked for a chunk.
        first_grasp_frame: First frame at which the actor was held (welded, or squeezed by
            both pads in the frictional mode), -1 if never.
        init_x: Actor start x in the table frame, metres.
        init_y: Actor start y in the table frame, metres.
        init_yaw_deg: Actor start yaw, degrees.
        status: "ok", or "error" when a policy fault ended the rollout (not a failure).
        error: One-line reason of the fault, "" when none.
    """

    episode: int
    init_index: int
    task: str
    policy: str
    scene: str
    success: bool
    progress_final: float
    progress_max: float
    failure: str
    truncated: bool
    frames: int
    policy_queries: int
    first_grasp_frame: int
    init_x: float
    init_y: float
    init_yaw_deg: float
    status: str = "ok"
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (field order kept)."""
        return asdict(self)


def run_episode(
    env: Any,
    policy: Any,
    *,
    init_index: int,
    episode: int = 0,
    policy_name: str = "",
    record_frames: bool = False,
    states: list[FrameState] | None = None,
    latencies: list[float] | None = None,
    execution: Execution | None = None,
    video: bool = False,
) -> tuple[EpisodeRecord, list[np.ndarray], float]:
    """Roll ``policy`` out in ``env`` from the task grid's initial condition ``init_index``.

    Args:
        env: A splatbench Gymnasium environment (wrapped or not).
        policy: A :class:`~bench.policies.base.Policy`.
        init_index: Initial-condition index of the task's grid (``reset(seed=init_index)``).
        episode: Index written into the record.
        policy_name: Name written into the record (default: the policy's ``name``).
        record_frames: Also return the wrist frames the policy saw.
        states: If a list is given, every control frame's state row
            (``info["frame_states"]``, frame 0 included) is appended to it.
        latencies: If a list is given, the wall time of every policy query (ms) is
            appended to it (not part of the record: it is not deterministic).
        execution: Blocking (default) or asynchronous with injected latency.
        video: Render every step's camera images (a caller or wrapper records the episode
            as a video); ``record_frames`` implies it. Otherwise only the observations a
            policy query reads are rendered: not the one of the episode's last step, nor
            those of the asynchronous loop's steps between queries (the env's
            ``observe_terminal`` / ``observe_steps``). Records are the same either way.

    Returns:
        (record, wrist frames [H, W, 3] uint8 seen by the policy if ``record_frames``,
        wall-clock seconds).
    """
    from bench.sim.policy_io import PolicyError, policy_observation, to_env_chunk

    execution = execution or Execution()
    start = time.perf_counter()
    obs, info = env.reset(seed=init_index)
    policy.reset(seed=init_index)
    seen = seen_camera_key(obs)
    frames = [obs[seen]] if record_frames and seen is not None else []
    rows = list(info["frame_states"])
    name = policy_name or getattr(policy, "name", type(policy).__name__)
    mode = getattr(policy, "action_mode", "delta")
    timings = latencies if latencies is not None else []
    counter = [0]

    def query(obs: dict[str, Any], info: dict[str, Any]) -> np.ndarray:  # -> env chunk
        observation = policy_observation(obs, env, frame=int(info["frame"]))
        tick = time.perf_counter()
        try:
            raw = policy.act(observation, info)
        finally:
            timings.append((time.perf_counter() - tick) * 1000.0)
            counter[0] += 1
        return to_env_chunk(raw, env, info, mode=mode, source=f"policy {name!r}")

    def step(action: np.ndarray):
        out = env.step(action)
        rows.extend(out[4]["frame_states"])
        if frames:
            frames.append(out[0][seen])
        return out

    status, error = "ok", ""
    reward, terminated, truncated = float(info["progress"]), False, False
    unwrapped = env.unwrapped
    # render only what a policy query reads, unless the frames are recorded (a video)
    every_frame = record_frames or video
    observe_terminal = getattr(unwrapped, "observe_terminal", None)
    if observe_terminal is not None and not every_frame:
        unwrapped.observe_terminal = False
    try:
        if execution.mode == "blocking":
            while not (terminated or truncated):
                obs, reward, terminated, truncated, info = step(query(obs, info))
        else:
            obs, reward, terminated, truncated, info = _run_async(
                env, obs, info, query, step, execution, every_frame=every_frame)
    except PolicyError as exc:
        status, error = "error", str(exc).splitlines()[0]
    finally:
        if observe_terminal is not None:
            unwrapped.observe_terminal = observe_terminal
    end = getattr(policy, "end_episode", None)  # e.g. a remote policy's episode_end message
    if status == "ok" and callable(end):
        try:
            end(success=bool(info["success"]))
        except PolicyError as exc:
            status, error = "error", str(exc).splitlines()[0]
    queries = counter[0]
    if states is not None:
        states.extend(rows)
    grasped = [r.frame for r in rows if r.held]
    x, y, yaw = unwrapped.initial_pose
    record = EpisodeRecord(
        episode=episode,
        init_index=init_index,
        task=unwrapped.task.name,
        policy=name,
        scene=str(getattr(unwrapped.scene, "name", "")),
        success=bool(info["success"]),
        progress_final=round(float(reward), 6),
        progress_max=round(max(r.progress for r in rows), 6),
        failure=info["failure"] or "",
        truncated=bool(truncated),
        frames=int(info["frame"]),
        policy_queries=queries,
        first_grasp_frame=grasped[0] if grasped else -1,
        init_x=round(x, 6),
        init_y=round(y, 6),
        init_yaw_deg=round(float(np.rad2deg(yaw)), 6),
        status=status,
        error=error,
    )
    return record, frames, time.perf_counter() - start


def seen_camera_key(obs: dict[str, Any]) -> str | None:
    """The image key whose frames a recorded episode keeps (what OBS-Policy scores).

    The wrist camera, or a multi-camera rig's first (yubi-dual: ``wrist_left_rgb``), so
    OBS-Policy has frames whichever rig runs; None for a state-only observation.
    """
    if "wrist_rgb" in obs:
        return "wrist_rgb"
    return next((k for k in sorted(obs) if k.endswith("_rgb")), None)


def _run_async(env: Any, obs: Any, info: Any, query: Any, step: Any, execution: Execution,
               *, every_frame: bool = True):
    """The asynchronous loop (module docstring); returns the last ``env.step`` result.

    ``every_frame=False``: only the steps whose observation a query reads render images
    (the env's ``observe_steps``); the others return black images (not rendered).
    """
    unwrapped = env.unwrapped
    if unwrapped.config.control != "chunk":
        raise ValueError("asynchronous execution needs an env made with control='chunk'")
    size, execute = int(unwrapped.chunk_size), int(unwrapped.execute)
    delay = execution.delay_frames(unwrapped.config.frame_seconds)

    def hold(opening: float, n: int) -> np.ndarray:  # [n, 7] rows that keep the target
        rows = np.zeros((n, 7), dtype=np.float32)
        rows[:, 6] = opening
        return rows

    selective = not every_frame and hasattr(unwrapped, "observe_steps")

    def run(rows: np.ndarray, *, observed: bool):  # execute exactly len(rows) rows
        saved = unwrapped.execute
        try:
            for begin in range(0, len(rows), size):
                piece = rows[begin:begin + size]
                unwrapped.execute = len(piece)
                if selective:  # images only where the next query looks: the run's last step
                    unwrapped.observe_steps = observed and begin + size >= len(rows)
                out = step(np.concatenate([piece, hold(piece[-1, 6], size - len(piece))]))
                if out[2] or out[3]:
                    break
        finally:
            unwrapped.execute = saved
            if selective:
                unwrapped.observe_steps = True
        return out

    previous = hold(float(info["grasp"]["commanded_opening"]), size)
    cursor = 0
    result = (obs, float(info["progress"]), False, False, info)
    n = max(execute - delay, 0)
    while True:
        chunk = query(obs, info)  # computed from the frame-t observation
        if delay:  # thinking: the robot keeps executing the previous chunk
            rows = previous[cursor:cursor + delay]
            rows = np.concatenate([rows, hold(previous[-1, 6], delay - len(rows))])
            result = run(rows, observed=not n)  # the next query reads it when n = 0
            if result[2] or result[3]:
                return result
        if n:  # the answer is effective from its row `delay` (meant for frame t + delay)
            rows = chunk[delay:delay + n]
            rows = np.concatenate([rows, hold(chunk[-1, 6], n - len(rows))])
            result = run(rows, observed=True)
            if result[2] or result[3]:
                return result
        previous, cursor = chunk, delay + n
        obs, info = result[0], result[4]


def state_stream_columns(objects: list[str]) -> list[str]:
    """CSV header of a recorded state stream (one row per 10 Hz control frame)."""
    pose = ("x", "y", "z", "qw", "qx", "qy", "qz")
    columns = [
        "frame",
        *(f"ee_{p}" for p in pose),
        "gripper",
        "opening_m",
        "attached",
        "held",
        "success_now",
        "success",
        "progress",
    ]
    for name in objects:
        columns += [f"{name}_{p}" for p in pose]
    return columns


def state_stream_rows(frame_states: list[FrameState]) -> list[list[Any]]:
    """Flatten ``info["frame_states"]`` rows into CSV rows (see :func:`state_stream_columns`)."""
    rows = []
    for row in frame_states:
        flat = [
            row.frame,
            *row.ee_pose,
            row.gripper,
            row.opening_m,
            row.attached,
            int(row.held),
            int(row.success_now),
            int(row.success),
            row.progress,
        ]
        for pose in row.objects.values():
            flat += pose
        rows.append(flat)
    return rows


def progress_frames(frame_states: list[FrameState]):
    """A ``bench.sim.progress.Frames`` block of a recorded stream (for ``score_stream``)."""
    from bench.sim.progress import Frames

    names = list(frame_states[0].objects)
    return Frames(
        objects={n: np.array([r.objects[n] for r in frame_states]) for n in names},
        ee_pose=np.array([r.ee_pose for r in frame_states]),
        gripper=np.array([r.gripper for r in frame_states]),
    )


def progress_success(frame_states: list[FrameState]) -> np.ndarray:  # [T] bool
    """The env's declared success per frame of a recorded stream (``score_stream(success=)``).

    The environment passes the same flags to its online scorer, so
    ``score_stream(spec, progress_frames(rows), dt=dt, success=progress_success(rows))``
    reproduces the recorded progress exactly.
    """
    return np.array([bool(r.success) for r in frame_states], dtype=bool)
