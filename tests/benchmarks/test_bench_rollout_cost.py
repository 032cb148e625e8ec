"""benchmarks/bench_rollout_cost.py: phase attribution and the projection arithmetic."""

from __future__ import annotations

import cProfile

import pytest


def test_phase_of_files_and_c_functions(load_benchmark):
    bench = load_benchmark("bench_rollout_cost")
    assert bench._phase_of("/x/bench/policies/learned.py", "act") == "policy"
    assert bench._phase_of("/x/bench/render/composite.py", "composite") == "composite"
    assert bench._phase_of("/x/bench/render/warp_backend.py", "render") == "gaussian render"
    assert bench._phase_of("/v/site-packages/mujoco/renderer.py", "render") == "mujoco render"
    assert bench._phase_of("~", "<built-in method mujoco._functions.mj_step>") == "physics"
    assert bench._phase_of("~", "<built-in method mujoco._render.mjr_readPixels>") == \
        "mujoco render"
    assert bench._phase_of("/x/bench/sim/grasp.py", "update") == "per-step python"
    assert bench._phase_of("/x/bench/study/store.py", "add_rollout") == "store"
    assert bench._phase_of("~", "<built-in method builtins.sorted>") is None  # -> its callers


def test_phases_split_c_time_over_callers(load_benchmark):
    """A C function's self time goes to the phase of the Python function that called it."""
    bench = load_benchmark("bench_rollout_cost")
    profile = cProfile.Profile()
    profile.enable()
    sorted(range(200_000), key=lambda v: -v)  # C (sorted) called from this test file: "other"
    profile.disable()
    phases = bench._phases(profile)
    assert set(phases) == set(bench.PHASE_NAMES)
    assert phases["other"] > 0 and phases["physics"] == phases["policy"] == 0.0


def test_projection_arithmetic(load_benchmark):
    bench = load_benchmark("bench_rollout_cost")
    # 4 rollouts, 2 succeeded at 100 and 500 frames: at a 300-frame limit the expected length
    # is (100 + 300 + 2 x 300) / 4; failures run to the limit
    cell = {"rollouts": 4, "success_frames": [100, 500], "cpu_s": 2.0, "frames": 200.0}
    assert bench._frames_expected(cell, 300) == pytest.approx(250.0)
    cells = {("paper", t, d): dict(cell) for t in ("cup", "tape", "pen") for d in ("sim", "real")}
    limits = {s: {t: 300 for t in ("cup", "tape", "pen")} for s in ("duo", "flat", "g2")}
    design = {"conditions": 11, "trials": 80, "real_trials": 20, "tasks": ("cup", "tape", "pen")}
    per_rollout = 2.0 / 200.0 * 250.0  # CPU per frame x expected frames
    rollouts = 3 * 3 * 2 * (11 * 80 + 20)  # scenes x tasks x policies x (sim + real trials)
    assert bench._project(cells, design, "paper", limits) == pytest.approx(
        rollouts * per_rollout)
