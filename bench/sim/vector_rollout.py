"""Run many policy episodes on a :class:`~bench.sim.vector_env.SplatBenchVectorEnv` at once.

:func:`run_episodes` keeps the vector's N sub-envs busy with a queue of episodes
(:class:`EpisodeJob`: policy, initial condition, index): every round it asks the policies for
the chunks of all running episodes, steps the running sub-envs together, and restarts a
sub-env on the next queued episode as soon as its episode ends. Each episode is exactly
:func:`bench.sim.rollout.run_episode`'s (blocking execution): the same reset order (env,
then policy, both seeded with the initial condition), the same queries, chunks and record -
:func:`run_episode` is the plain reference this is tested against
(tests/bench/sim/test_vector_env.py), record for record.

The policy of an episode is asked through its own instance (``policies[slot][name]``: a
policy may keep per-episode state and may read its env). ``batch_act`` (opt-in) maps a
policy name to a callable ``f(observations, infos) -> chunks`` that answers all the round's
queries of that policy at once (one CNN forward for the batch). It is *not* the default:
on this CPU a batched convolution / linear layer differs from the single-sample one in the
last bits (oneDNN and BLAS pick other kernels for other batch sizes; max |diff| 1e-4 - 1e-3 of
the standardised output of the shipped BC networks), and a rollout is chaotic enough for
such a difference to change an outcome; see docs/executors.md.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.sim.rollout import EpisodeRecord, seen_camera_key
from bench.sim.state import FrameState


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: ``policy`` (a key of each slot's policies) from ``init_index``.

    Attributes:
        policy: Policy name (key of ``policies[slot]``; also written into the record).
        init_index: Initial-condition index of the task's grid (``reset(seed=init_index)``).
        episode: Index written into the record.
    """

    policy: str
    init_index: int
    episode: int = 0


@dataclass
class EpisodeResult:
    """What :func:`run_episodes` hands back per job (in job order).

    Attributes:
        job: Index of the job in the list given.
        record: The episode's :class:`~bench.sim.rollout.EpisodeRecord`.
        frames: Wrist frames ``[H, W, 3]`` uint8 the policy saw (``record_frames``), else [].
        latencies: Wall time of each policy query, ms (a batched query: the batch's time).
        states: Every control frame's state row (frame 0 included).
    """

    job: int
    record: EpisodeRecord
    frames: list[np.ndarray] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    states: list[FrameState] = field(default_factory=list)


@dataclass
class _Running:
    """A sub-env's running episode."""

    index: int
    job: EpisodeJob
    obs: dict[str, Any]
    info: dict[str, Any]
    reward: float
    rows: list[FrameState]
    frames: list[np.ndarray]
    latencies: list[float] = field(default_factory=list)
    queries: int = 0
    truncated: bool = False
    status: str = "ok"
    error: str = ""
    seen: str | None = None  # the image key recorded in frames (rollout.seen_camera_key)


def run_episodes(vec: Any, policies: Sequence[Mapping[str, Any]], jobs: Sequence[EpisodeJob],
                 *, record_frames: bool = False, video: bool = False,
                 batch_act: Mapping[str, Callable[[list, list], list]] | None = None
                 ) -> Iterator[EpisodeResult]:
    """Run ``jobs`` on the sub-envs of ``vec``; yields one :class:`EpisodeResult` per job, in order.

    Args:
        vec: A :class:`~bench.sim.vector_env.SplatBenchVectorEnv`.
        policies: Per sub-env, ``{name: policy}`` built for that sub-env.
        jobs: The episodes, run in this order as sub-envs become free.
        record_frames: Also keep the wrist frames each policy saw.
        video: Render every step's images (as ``run_episode(video=True)``); otherwise, as
            there, the observation of an episode's last step holds ``proprio`` only (the
            env's ``observe_terminal``; no policy reads it).
        batch_act: Opt-in batched answers per policy name (module docstring; not exact).
    """
    from bench.sim.policy_io import PolicyError

    n = vec.num_envs
    if len(policies) != n:
        raise ValueError(f"policies has {len(policies)} entries for {n} sub-envs; give one "
                         "{name: policy} per sub-env")
    batch_act = batch_act or {}
    queue = deque(enumerate(jobs))
    slots: list[_Running | None] = [None] * n
    finished: dict[int, EpisodeResult] = {}
    action = np.zeros((n, *vec.single_action_space.shape), dtype=np.float32)

    def finish(i: int) -> None:
        run = slots[i]
        slots[i] = None
        end = getattr(policies[i][run.job.policy], "end_episode", None)  # as run_episode
        if run.status == "ok" and callable(end):
            try:
                end(success=bool(run.info["success"]))
            except PolicyError as exc:
                run.status, run.error = "error", str(exc).splitlines()[0]
        finished[run.index] = EpisodeResult(run.index, _record(vec.envs[i], run), run.frames,
                                            run.latencies, run.rows)

    # render only what a policy query reads, unless the frames are kept (run_episode's rule)
    unwrapped = [env.unwrapped for env in vec.envs]
    saved = [getattr(u, "observe_terminal", None) for u in unwrapped]
    if not (record_frames or video):
        for u, value in zip(unwrapped, saved, strict=True):
            if value is not None:
                u.observe_terminal = False
    try:
        yield from _loop(vec, policies, queue, slots, finished, finish, action,
                         record_frames=record_frames, batch_act=batch_act)
    finally:
        for u, value in zip(unwrapped, saved, strict=True):
            if value is not None:
                u.observe_terminal = value


def _loop(vec: Any, policies: Sequence[Mapping[str, Any]], queue: deque, slots: list,
          finished: dict, finish: Callable[[int], None], action: np.ndarray, *,
          record_frames: bool, batch_act: Mapping[str, Callable]) -> Iterator[EpisodeResult]:
    """The rounds of :func:`run_episodes`: start, query, step, finish; results in job order."""
    from bench.sim.policy_io import PolicyError, policy_observation, to_env_chunk

    n = vec.num_envs
    emitted = 0
    while queue or any(s is not None for s in slots):
        idle = [i for i in range(n) if slots[i] is None][:len(queue)]
        if idle:  # start the next episodes: env first, then its policy (as run_episode)
            mask = np.zeros(n, dtype=bool)
            mask[idle] = True
            starts = [queue.popleft() for _ in idle]
            seeds: list[int | None] = [None] * n
            for i, (_, job) in zip(idle, starts, strict=True):
                seeds[i] = job.init_index
            vec.reset(seed=seeds, options={"reset_mask": mask})
            for i, (index, job) in zip(idle, starts, strict=True):
                policies[i][job.policy].reset(seed=job.init_index)
                obs, info = vec.env_observations[i], vec.env_infos[i]
                run_seen = seen_camera_key(obs)  # the key run_episode records
                frames = [obs[run_seen]] if record_frames and run_seen is not None else []
                slots[i] = _Running(index, job, obs, info, float(info["progress"]),
                                    list(info["frame_states"]), frames, seen=run_seen)
        running = [i for i in range(n) if slots[i] is not None]
        observations = {i: policy_observation(slots[i].obs, vec.envs[i],
                                              frame=int(slots[i].info["frame"]))
                        for i in running}
        answers: dict[int, Any] = {}
        by_policy: dict[str, list[int]] = {}
        for i in running:
            by_policy.setdefault(slots[i].job.policy, []).append(i)
        for name, members in by_policy.items():
            if name in batch_act:
                tick = time.perf_counter()
                try:
                    chunks = batch_act[name]([observations[i] for i in members],
                                             [slots[i].info for i in members])
                    answers.update(zip(members, chunks, strict=True))
                except PolicyError as exc:
                    answers.update((i, exc) for i in members)
                spent = (time.perf_counter() - tick) * 1000.0
                for i in members:
                    slots[i].latencies.append(spent)
                    slots[i].queries += 1
                continue
            for i in members:
                run = slots[i]
                tick = time.perf_counter()
                try:
                    answers[i] = policies[i][name].act(observations[i], run.info)
                except PolicyError as exc:
                    answers[i] = exc
                finally:
                    run.latencies.append((time.perf_counter() - tick) * 1000.0)
                    run.queries += 1
        active = np.zeros(n, dtype=bool)
        for i in running:
            run, answer = slots[i], answers[i]
            policy = policies[i][run.job.policy]
            if not isinstance(answer, PolicyError):
                mode = getattr(policy, "action_mode", "delta")
                try:
                    action[i] = to_env_chunk(answer, vec.envs[i], run.info, mode=mode,
                                             source=f"policy {run.job.policy!r}")
                    active[i] = True
                    continue
                except PolicyError as exc:
                    answer = exc
            run.status, run.error = "error", str(answer).splitlines()[0]
            finish(i)
        if active.any():
            _, rewards, terminated, truncated, _ = vec.step(action, active=active)
            for i in np.flatnonzero(active):
                run = slots[i]
                run.obs, run.info = vec.env_observations[i], vec.env_infos[i]
                run.reward, run.truncated = float(rewards[i]), bool(truncated[i])
                run.rows.extend(run.info["frame_states"])
                if run.frames:
                    run.frames.append(run.obs[run.seen])
                if terminated[i] or truncated[i]:
                    finish(i)
        while emitted in finished:  # in job order
            yield finished.pop(emitted)
            emitted += 1


def _record(env: Any, run: _Running) -> EpisodeRecord:
    """The record :func:`bench.sim.rollout.run_episode` writes for this episode."""
    rows, info = run.rows, run.info
    grasped = [r.frame for r in rows if r.held]
    unwrapped = env.unwrapped
    x, y, yaw = unwrapped.initial_pose
    return EpisodeRecord(
        episode=run.job.episode,
        init_index=run.job.init_index,
        task=unwrapped.task.name,
        policy=run.job.policy,
        scene=str(getattr(unwrapped.scene, "name", "")),
        success=bool(info["success"]),
        progress_final=round(float(run.reward), 6),
        progress_max=round(max(r.progress for r in rows), 6),
        failure=info["failure"] or "",
        truncated=bool(run.truncated),
        frames=int(info["frame"]),
        policy_queries=run.queries,
        first_grasp_frame=grasped[0] if grasped else -1,
        init_x=round(x, 6),
        init_y=round(y, 6),
        init_yaw_deg=round(float(np.rad2deg(yaw)), 6),
        status=run.status,
        error=run.error,
    )
