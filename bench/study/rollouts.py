"""The rollout stage of a study: every rollout of the plan not stored yet, run by an executor.

:func:`run_rollouts` lists what :func:`bench.study.plan.rollout_plan` asks for and the store
lacks, cuts it into work units (:func:`bench.study.executors.chunks_of`) and hands them to
the chosen executor; this process (the driver) alone writes the store, committing each
event as it arrives (:func:`commit_outcome`), so a killed run resumes without losing or
duplicating a rollout whichever executor ran them. The fixed design calls it once
(:func:`bench.study.runner.run_study`), sequential stopping once per look
(:mod:`bench.study.sequential`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.study.plan import rollout_plan
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore


def _log(message: str) -> None:
    print(f"[bench study] {message}", file=sys.stderr)


def _missing_rollouts(spec: StudySpec, store: ResultsStore
                      ) -> dict[tuple[str, str, str, str], list[tuple[str, int]]]:
    """(scene, condition, task, domain) -> [(policy, trial)] not in the store yet, plan order."""
    todo: dict[tuple[str, str, str, str], list[tuple[str, int]]] = {}
    for domain, scene, cond, task, trial in rollout_plan(spec):
        for policy in spec.policies[task]:
            if not store.has_rollout((spec.name, scene, cond, task, policy, domain, trial)):
                todo.setdefault((scene, cond, task, domain), []).append((policy, trial))
    return todo


def run_rollouts(spec: StudySpec, store: ResultsStore, bundles: dict[tuple[str, str], Any], *,
                 progress: bool = True, out: Path | None = None,
                 executor: Any = None) -> int:
    """Run every missing rollout; each is committed as soon as it ends. Returns how many ran.

    ``bundles``: (scene, condition) -> :class:`bench.study.runner.ConditionBundle`. A rollout
    that ends in a policy fault (``status="error"``) is not stored; its reason goes to
    :class:`bench.study.faults.RolloutLog` and ``--resume`` reruns it. OBS-Policy frames
    (every ``obs_policy_every``-th query) are written under ``out`` before the row.
    ``executor`` (:class:`bench.study.executors.ExecutorConfig`, default serial) says where
    the rollouts run; this process alone writes the store, whichever it is.
    """
    from bench.progress import progress as progress_bar
    from bench.study.executors import EXECUTORS, Driver, ExecutorConfig, chunks_of
    from bench.study.faults import RolloutLog

    if out is None:
        out = Path(store.path).parent
    config = executor or ExecutorConfig()
    parallel = EXECUTORS.entry(config.kind).meta["parallel"]
    todo = _missing_rollouts(spec, store)
    envs = config.envs_per_worker  # a parallel work item gives each of a worker's envs one
    chunks = chunks_of(spec, todo, bundles, size=config.chunk_size * envs if parallel else None,
                       envs=envs)
    bar = progress_bar(total=sum(len(v) for v in todo.values()), desc="rollouts",
                       unit="rollout", file=sys.stderr, disable=not progress, smoothing=0.1)
    log = RolloutLog(store.path)
    ran = [0]
    failures: dict[tuple, int] = {}  # executor failures of this run, per rollout

    def commit(event: Any) -> None:
        ran[0] += commit_outcome(spec, store, log, out, event)
        key = getattr(event, "key", None)
        if key is not None:
            bar.set_postfix_str("/".join(map(str, key[1:])))

    def attempt_failed(key: tuple, reason: str) -> bool:
        log.add_attempt(key, reason)
        failures[key] = failures.get(key, 0) + 1
        if failures[key] <= config.retries:
            _log(f"rollout {'/'.join(map(str, key[1:]))} failed to execute ({reason}); "
                 f"retry {failures[key]} of {config.retries}")
            return True
        log.add_error(key, f"execution failed {failures[key]} times, last: {reason}")
        _log(f"rollout {'/'.join(map(str, key[1:]))} failed to execute {failures[key]} times "
             f"({reason}); recorded as a rollout error, --resume reruns it")
        return False

    def latency(task: str, policy: str) -> float | None:
        return log.policy_latency(spec.name, task, policy)

    try:
        EXECUTORS.get(config.kind)(spec, chunks, Driver(commit, attempt_failed, bar, latency),
                                   config)
    finally:
        bar.close()
        log.close()
    return ran[0]


def commit_outcome(spec: StudySpec, store: ResultsStore, log: Any, out: Path, event: Any) -> int:
    """Commit one event of an executor (driver side); 1 when it stored a new rollout row."""
    from bench.study.obs_policy import save_policy_frames
    from bench.study.work_unit import MeasuredLatency

    if isinstance(event, MeasuredLatency):
        log.set_policy_latency(spec.name, event.task, event.policy, event.p50_ms)
        return 0
    key = event.key
    log.add_latency(key, event.latencies)
    if event.row is None:
        log.add_error(key, event.error)
        _log(f"rollout {'/'.join(map(str, key[1:]))} ended in error: {event.error}")
        return 0
    if event.frames is not None:  # written before the row commits: a stored rollout has frames
        _, scene, cond, task, policy, _, trial = key
        save_policy_frames(out, scene, cond, task, policy, trial, event.frames)
    if getattr(event, "replies", None) is not None:  # a remote policy's reply extras, first
        store.set_policy_replies(key, event.replies)
    store.add_rollout(event.row)
    log.clear_error(key)
    return 1
