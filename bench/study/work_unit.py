"""The unit of work every study executor runs: a few rollouts of one cell, in a worker.

A :class:`RolloutChunk` is a few rollouts of one (scene, condition, task, domain);
:func:`run_chunk` runs it inside a :class:`WorkerState` (the last loaded background and
one env + policies, reused while the chunk's cell stays the same) and yields a
:class:`MeasuredLatency` (first, when the deployment measures policy latency) then one
:class:`RolloutOutcome` per rollout, for the driver to commit
(:func:`bench.study.rollouts.commit_outcome`). Trial ``t`` starts from
:func:`bench.study.plan.init_index`, so a rollout depends only on its bundle, task, policy
and initial condition (``env.reset`` and ``policy.reset`` are seeded per episode): the rows
are the same bytes whichever executor (:mod:`bench.study.executors`) ran it.
:func:`make_study_env` builds the env of a (scene, task, domain) as every worker does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class RolloutChunk:
    """Rollouts of one (scene, condition, task, domain), run in order by one worker.

    ``latencies`` holds the measured policy latency (ms) of each policy already known
    to the store (``deployment.latency_ms = "measured"``); None: measure it first.
    """

    scene: str
    condition: str
    task: str
    domain: str
    items: tuple[tuple[str, int], ...]  # (policy, trial)
    bundle: str  # bundle directory
    manifest_sha256: str
    latencies: tuple[tuple[str, float | None], ...] = ()
    envs: int = 1  # sub-envs run at once in the worker (ExecutorConfig.envs_per_worker)

    @property
    def group(self) -> tuple[str, str, str]:
        """(scene, condition, task): the chunks that share one env."""
        return (self.scene, self.condition, self.task)


@dataclass
class RolloutOutcome:
    """What one rollout produced, for the driver to commit.

    Attributes:
        key: (study, scene, condition, task, policy, domain, trial).
        row: The row to store (None when the rollout ended in a policy fault).
        error: The policy fault ("" when none).
        latencies: Per-query latency (ms) of the rollout.
        frames: OBS-Policy frames to keep (F arrays ``[H, W, 3]`` uint8), or None.
        replies: (query, JSON) reply extras of a policy that keeps them (``episode_extras``:
            a remote policy), stored in ``policy_replies``; None for other policies.
    """

    key: tuple
    row: Any
    error: str
    latencies: list[float]
    frames: list[np.ndarray] | None = None
    replies: list[tuple[int, str]] | None = None


@dataclass
class MeasuredLatency:
    """A policy latency a worker measured (``deployment.latency_ms = "measured"``)."""

    task: str
    policy: str
    p50_ms: float


class WorkerState:
    """What a worker keeps between chunks: the last background, one env + policies.

    Args:
        spec: The study.
        keep_env: Keep the env of the last (scene, condition, task) open for the next
            chunk of the same group (workers); False closes it after every chunk (serial).
    """

    def __init__(self, spec: Any, *, keep_env: bool = True) -> None:
        self.spec = spec
        self.keep_env = keep_env
        self._bundle: tuple[tuple[str, str], Any] | None = None
        self._env: tuple[tuple[str, str, str, str], Any, dict] | None = None
        # the chunk's cell as N envs (--envs-per-worker): the vector env, policies per sub-env
        self._vector: tuple[tuple[str, str, str, str, int], Any, list[dict]] | None = None

    def background(self, scene: str, condition: str, path: str) -> Any:
        """The condition's scene bundle (one kept in memory at a time)."""
        from bench.scene.bundle import load_scene

        if self._bundle is None or self._bundle[0] != (scene, condition):
            self._bundle = None  # keep one background in memory
            self._bundle = ((scene, condition), load_scene(Path(path)))
        return self._bundle[1]

    def env_and_policies(self, chunk: RolloutChunk) -> tuple[Any, dict]:
        """The env and policies of a chunk's cell (the env is reused while the cell is the same)."""
        if self._env is not None and self._env[0] == (*chunk.group, chunk.domain):
            return self._env[1], self._env[2]
        self.close()
        env, policies = self._build(chunk)
        self._env = ((*chunk.group, chunk.domain), env, policies)
        return env, policies

    def vector_and_policies(self, chunk: RolloutChunk) -> tuple[Any, list[dict]]:
        """The chunk's cell as ``chunk.envs`` sub-envs (a vector env) + policies per sub-env.

        Every sub-env and policy is built exactly as :meth:`env_and_policies` builds its one
        (policies may keep per-episode state and read their env); the background is shared.
        """
        from bench.sim.vector_env import SplatBenchVectorEnv

        key = (*chunk.group, chunk.domain, chunk.envs)
        if self._vector is not None and self._vector[0] == key:
            return self._vector[1], self._vector[2]
        self.close()
        built: list[tuple[Any, dict]] = []
        try:
            for _ in range(chunk.envs):
                built.append(self._build(chunk))
            vec = SplatBenchVectorEnv([env for env, _ in built], copy=False)
        except BaseException:
            for env, _ in built:
                env.close()
            raise
        self._vector = (key, vec, [policies for _, policies in built])
        return vec, self._vector[2]

    def _build(self, chunk: RolloutChunk) -> tuple[Any, dict]:
        """A fresh env of the chunk's cell and its policies (one of each)."""
        import bench.policies.visual  # noqa: F401 - registers the visual policies
        from bench.policies import make_policy
        from bench.policies.entry import build_ref

        spec = self.spec
        bundle = self.background(chunk.scene, chunk.condition, chunk.bundle)
        env = make_study_env(spec, scene=chunk.scene, task=chunk.task, domain=chunk.domain,
                             bundle=bundle)
        try:
            policies = {p: (build_ref(spec.policy_refs[p], env, seed=spec.seed)
                            if p in spec.policy_refs else make_policy(p, env, seed=spec.seed))
                        for p in spec.policies[chunk.task]}
        except BaseException:
            env.close()
            raise
        return env, policies

    def close(self) -> None:
        """Close the cached env (or vector env)."""
        if self._env is not None:
            env, self._env = self._env[1], None
            env.close()
        if self._vector is not None:
            vec, self._vector = self._vector[1], None
            vec.close()


def make_study_env(spec: Any, *, scene: str, task: str, domain: str, bundle: Any,
                   **extra: Any) -> Any:
    """The env a study's rollouts of (scene, task, domain) run in, on ``bundle``.

    Image size, time limit, backend and deployment settings come from ``spec``; with
    ``real_domain: "world"`` the domain's env of :mod:`bench.study.world_domain`.
    ``extra``: further EnvConfig fields (e.g. ``obs_mode="state"`` for a caller that
    renders the observations itself, :mod:`bench.demo.visibility`).
    """
    import bench.sim
    from bench.study.deployment import Deployment

    deployment = Deployment.from_dict(spec.deployment)
    overrides = {"image_size": spec.image_size, "max_frames": spec.frames_limit(scene, task),
                 "render_backend": spec.render_backend, **deployment.env_overrides(), **extra}
    if spec.real_domain == "world":  # "real" trials in the ground-truth world
        from bench.study.world_domain import make_domain_env

        return make_domain_env(spec, scene=scene, task=task, domain=domain, bundle=bundle,
                               overrides=overrides)
    return bench.sim.make_env(task, bundle, **overrides)


def run_chunk(state: WorkerState, chunk: RolloutChunk) -> Iterator[Any]:
    """Run ``chunk``; yields :class:`MeasuredLatency` (first, if any) then one outcome each."""
    from bench.sim.rollout import run_episode
    from bench.study.deployment import Deployment, measure_latency_ms
    from bench.study.obs_policy import obs_policy_enabled
    from bench.study.plan import init_index
    from bench.study.store import RolloutRow

    spec = state.spec
    deployment = Deployment.from_dict(spec.deployment)
    keep = obs_policy_enabled(spec) and chunk.domain == "sim"
    vec = slot_policies = None
    if chunk.envs > 1:  # N sub-envs (kept for the cell's next chunk); sub-env 0 measures
        vec, slot_policies = state.vector_and_policies(chunk)
        env, policies = vec.envs[0], slot_policies[0]
    else:
        env, policies = state.env_and_policies(chunk)
    try:
        known = dict(chunk.latencies)
        executions = {}
        for p, policy in policies.items():
            measured = None
            if deployment.measured:
                measured = known.get(p)
                if measured is None:
                    start = init_index(spec, chunk.domain, chunk.items[0][1], chunk.condition)
                    measured = measure_latency_ms(env, policy, init_index=start)
                    yield MeasuredLatency(chunk.task, p, measured)
            executions[p] = deployment.execution_for(measured)
        if vec is not None and all(e.mode == "blocking" for e in executions.values()):
            yield from _run_vector(spec, chunk, vec, slot_policies, keep)
            return
        for policy, trial in chunk.items:
            start = init_index(spec, chunk.domain, trial, chunk.condition)
            key = (spec.name, chunk.scene, chunk.condition, chunk.task, policy, chunk.domain,
                   trial)
            latencies: list[float] = []
            extra = {"record_frames": True} if keep else {}
            record, frames, _ = run_episode(env, policies[policy], init_index=start,
                                            episode=trial, policy_name=policy,
                                            latencies=latencies,
                                            execution=executions[policy], **extra)
            if record.status == "error":
                yield RolloutOutcome(key, None, record.error, latencies)
                continue
            kept = None
            if keep:
                kept = list(frames[:record.policy_queries][::spec.obs_policy_every])
            row = RolloutRow.from_episode(record, study=spec.name, scene=chunk.scene,
                                          condition=chunk.condition, task=chunk.task,
                                          policy=policy, domain=chunk.domain,
                                          trial=trial, manifest_sha256=chunk.manifest_sha256)
            yield RolloutOutcome(key, row, "", latencies, kept,
                                 _replies([policies[policy]], start))
    finally:
        if not state.keep_env:
            state.close()


def _run_vector(spec: Any, chunk: RolloutChunk, vec: Any, policies: list[dict], keep: bool
                ) -> Iterator[Any]:
    """The chunk's rollouts on the sub-envs of ``vec``; outcomes in chunk order.

    :func:`bench.sim.vector_rollout.run_episodes` gives record for record what
    :func:`bench.sim.rollout.run_episode` gives.
    """
    from bench.sim.vector_rollout import EpisodeJob, run_episodes
    from bench.study.plan import init_index
    from bench.study.store import RolloutRow

    jobs = [EpisodeJob(policy, init_index(spec, chunk.domain, trial, chunk.condition), trial)
            for policy, trial in chunk.items]
    for result in run_episodes(vec, policies, jobs, record_frames=keep):
        record, (policy, trial) = result.record, chunk.items[result.job]
        key = (spec.name, chunk.scene, chunk.condition, chunk.task, policy, chunk.domain, trial)
        if record.status == "error":
            yield RolloutOutcome(key, None, record.error, result.latencies)
            continue
        kept = (list(result.frames[:record.policy_queries][::spec.obs_policy_every])
                if keep else None)
        replies = _replies([slot[policy] for slot in policies], jobs[result.job].init_index)
        row = RolloutRow.from_episode(record, study=spec.name, scene=chunk.scene,
                                      condition=chunk.condition, task=chunk.task,
                                      policy=policy, domain=chunk.domain, trial=trial,
                                      manifest_sha256=chunk.manifest_sha256)
        yield RolloutOutcome(key, row, "", result.latencies, kept, replies)


def _replies(candidates: list[Any], seed: int) -> list[tuple[int, str]] | None:
    """The stored rows of an ended episode's reply extras (None: the policy keeps none).

    ``candidates``: the policy objects that may have run it (a vector run's sub-envs each
    have their own); the episode is found by its seed, unique among a chunk's rollouts.
    """
    hooks = [getattr(p, "episode_extras", None) for p in candidates]
    hooks = [h for h in hooks if callable(h)]
    if not hooks:
        return None
    from bench.study.store import reply_rows

    for hook in hooks:
        extras = hook(seed=seed)
        if extras:
            return reply_rows(extras)
    return []
