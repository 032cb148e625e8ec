"""Run policy episodes in a simulator environment and collect per-trial records.

One :class:`EpisodeRecord` per episode holds everything a study needs to
recompute rates and intervals (success and progress under separate names,
failure reason, frames, first-grasp frame, the initial condition). Wall-clock
time is kept out of the record so that result files are byte-identical across
runs; :func:`run_episode` returns it separately.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EpisodeRecord:
    """Outcome of one rollout (JSON/CSV row).

    Attributes:
        episode: Index of the episode within the run.
        condition: Initial-condition index (``reset(seed=condition)``).
        task: Task name.
        policy: Policy name.
        scene: Scene name.
        success: Strict success predicate held (episode terminated successfully).
        progress_final: Progress score (``protocols.progress``) at the last frame, in [0, 1].
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
    """

    episode: int
    condition: int
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_episode(
    env: Any,
    policy: Any,
    *,
    condition: int,
    episode: int = 0,
    policy_name: str = "",
    record_frames: bool = False,
    states: list[dict[str, Any]] | None = None,
) -> tuple[EpisodeRecord, list[np.ndarray], float]:
    """Roll ``policy`` out in ``env`` from initial condition ``condition``.

    Args:
        env: A splatbench Gymnasium environment (wrapped or not).
        policy: A :class:`~bench.policies.base.Policy`.
        condition: Initial-condition index (``reset(seed=condition)``).
        episode: Index written into the record.
        policy_name: Name written into the record (default: the policy's ``name``).
        record_frames: Also return the wrist frames the policy saw.
        states: If a list is given, every control frame's state row
            (``info["frame_states"]``, frame 0 included) is appended to it.

    Returns:
        (record, wrist frames [H, W, 3] uint8 seen by the policy if ``record_frames``,
        wall-clock seconds).
    """
    start = time.perf_counter()
    obs, info = env.reset(seed=condition)
    policy.reset(seed=condition)
    frames = [obs["wrist_rgb"]] if record_frames and "wrist_rgb" in obs else []
    rows = list(info["frame_states"])
    queries, reward, terminated, truncated = 0, float(info["progress"]), False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        queries += 1
        rows.extend(info["frame_states"])
        if frames:
            frames.append(obs["wrist_rgb"])
    if states is not None:
        states.extend(rows)
    grasped = [r["frame"] for r in rows if r["held"]]
    unwrapped = env.unwrapped
    x, y, yaw = unwrapped.initial_pose
    record = EpisodeRecord(
        episode=episode,
        condition=condition,
        task=unwrapped.task.name,
        policy=policy_name or getattr(policy, "name", type(policy).__name__),
        scene=str(getattr(unwrapped.scene, "name", "")),
        success=bool(info["success"]),
        progress_final=round(float(reward), 6),
        progress_max=round(max(r["progress"] for r in rows), 6),
        failure=info["failure"] or "",
        truncated=bool(truncated),
        frames=int(info["frame"]),
        policy_queries=queries,
        first_grasp_frame=grasped[0] if grasped else -1,
        init_x=round(x, 6),
        init_y=round(y, 6),
        init_yaw_deg=round(float(np.rad2deg(yaw)), 6),
    )
    return record, frames, time.perf_counter() - start


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


def state_stream_rows(frame_states: list[dict[str, Any]]) -> list[list[Any]]:
    """Flatten ``info["frame_states"]`` rows into CSV rows (see :func:`state_stream_columns`)."""
    rows = []
    for row in frame_states:
        flat = [
            row["frame"],
            *row["ee_pose"],
            row["gripper"],
            row["opening_m"],
            row["attached"],
            int(row["held"]),
            int(row["success_now"]),
            int(row["success"]),
            row["progress"],
        ]
        for pose in row["objects"].values():
            flat += pose
        rows.append(flat)
    return rows


def progress_frames(frame_states: list[dict[str, Any]]):
    """A ``protocols.progress.Frames`` block of a recorded stream (for ``score_stream``)."""
    from protocols.progress import Frames

    names = list(frame_states[0]["objects"])
    return Frames(
        objects={n: np.array([r["objects"][n] for r in frame_states]) for n in names},
        ee_pose=np.array([r["ee_pose"] for r in frame_states]),
        gripper=np.array([r["gripper"] for r in frame_states]),
    )


def progress_success(frame_states: list[dict[str, Any]]) -> np.ndarray:  # [T] bool
    """The env's declared success per frame of a recorded stream (``score_stream(success=)``).

    The environment passes the same flags to its online scorer, so
    ``score_stream(spec, progress_frames(rows), dt=dt, success=progress_success(rows))``
    reproduces the recorded progress exactly.
    """
    return np.array([bool(r["success"]) for r in frame_states], dtype=bool)
