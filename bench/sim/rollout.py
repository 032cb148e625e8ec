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
        first_grasp_frame: Frame at which the actor was first held, -1 if never.
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
) -> tuple[EpisodeRecord, list[np.ndarray], float]:
    """Roll ``policy`` out in ``env`` from initial condition ``condition``.

    Returns:
        (record, wrist frames [H, W, 3] uint8 seen by the policy if ``record_frames``,
        wall-clock seconds).
    """
    start = time.perf_counter()
    obs, info = env.reset(seed=condition)
    policy.reset(seed=condition)
    frames = [obs["wrist_rgb"]] if record_frames and "wrist_rgb" in obs else []
    queries, first_grasp, progress_max = 0, -1, float(info["progress"])
    reward, terminated, truncated = float(info["progress"]), False, False
    while not (terminated or truncated):
        action = policy.act(obs, info)
        queries += 1
        obs, reward, terminated, truncated, info = env.step(action)
        progress_max = max(progress_max, float(reward))
        if first_grasp < 0 and info["grasp"]["attached"] is not None:
            first_grasp = int(info["frame"])
        if frames:
            frames.append(obs["wrist_rgb"])
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
        progress_max=round(progress_max, 6),
        failure=info["failure"] or "",
        truncated=bool(truncated),
        frames=int(info["frame"]),
        policy_queries=queries,
        first_grasp_frame=first_grasp,
        init_x=round(x, 6),
        init_y=round(y, 6),
        init_yaw_deg=round(float(np.rad2deg(yaw)), 6),
    )
    return record, frames, time.perf_counter() - start
