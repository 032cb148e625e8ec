"""The rollout plan (bench.study.plan): one definition of a study's rollouts and starts."""

from __future__ import annotations

import time

import pytest

from bench.errors import BenchError
from bench.study.plan import (
    CLEAN,
    count_rollouts,
    domain_trials,
    init_index,
    rollout_cells,
    rollout_plan,
)
from bench.study.spec import StudySpec

SPEC = StudySpec(name="plan", sample_scenes={"a": 0, "b": 1},
                 conditions=("clean", "warp", "hole-54"), tasks=("cup", "tape"), trials=3,
                 real_trials=2, sim_condition_offset=5, real_condition_offset=500)


def test_plan_order_and_counts():
    plan = rollout_plan(SPEC)
    # per scene: the real blocks (clean, each task), then each condition x task
    assert plan[:4] == [("real", "a", CLEAN, "cup", 0), ("real", "a", CLEAN, "cup", 1),
                        ("real", "a", CLEAN, "tape", 0), ("real", "a", CLEAN, "tape", 1)]
    assert plan[4:7] == [("sim", "a", "clean", "cup", t) for t in range(3)]
    assert plan[-1] == ("sim", "b", "hole-54", "tape", 2)
    assert len(plan) == 2 * 2 * (3 * 3 + 2)
    # 2 scenes x 2 tasks x 2 policies x (3 conditions x 3 sim trials + 2 real trials)
    assert count_rollouts(SPEC) == 2 * len(plan) == 88
    assert count_rollouts(SPEC, "sim") == 72 and count_rollouts(SPEC, "real") == 16
    assert sum(c.rollouts for c in rollout_cells(SPEC)) == count_rollouts(SPEC)
    assert (init_index(SPEC, "sim", 2), init_index(SPEC, "real", 1)) == (7, 501)
    with pytest.raises(ValueError, match="unknown rollout domain"):
        domain_trials(SPEC, "hardware")


def test_real_results_plan_no_real_rollouts():
    spec = SPEC.replace(real_results="real.csv", real_domain=None)
    assert spec.real_domain == "results" and domain_trials(spec, "real") == 0
    assert {d for d, *_ in rollout_plan(spec)} == {"sim"}
    assert count_rollouts(spec) == count_rollouts(spec, "sim") == 72
    # no "real" starts are taken, so they cannot overlap the simulated ones
    assert spec.replace(real_condition_offset=6).real_condition_offset == 6
    with pytest.raises(BenchError, match="disjoint"):
        SPEC.replace(real_condition_offset=6)


def test_huge_plan_counted_without_listing():
    spec = SPEC.replace(trials=10**9, real_condition_offset=2 * 10**9)
    started = time.perf_counter()
    assert count_rollouts(spec) == 2 * 2 * 2 * (3 * 10**9 + 2)
    assert time.perf_counter() - started < 1.0
