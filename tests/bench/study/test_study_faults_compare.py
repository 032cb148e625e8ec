"""Policy faults in a study (server killed mid-rollout -> error -> resume), and study compare."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.errors import BenchError

POLICY_DIR = Path(__file__).parents[1] / "policies"
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(POLICY_DIR), *sys.path])}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "--policy",
                             "bench_test_policies:make_servo", "--port", str(port), *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None or extra, "server exited at start"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise TimeoutError("server did not start")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=30)


def _spec(port: int):
    from bench.study.spec import spec_from_dict

    served = {"factory": "openpi", "name": "served",
              "kwargs": {"port": port, "retries": 1, "backoff_s": 0.05, "timeout_s": 20}}
    return spec_from_dict({
        "name": "faults", "sample_scenes": {"a": 0, "b": 1}, "sample_gaussians": 3000,
        "conditions": ["clean"], "tasks": ["cup"], "policies": {"cup": [served, "hold"]},
        "trials": 2, "real_trials": 1, "max_frames": 40, "metrics": ["psnr"],
        "image_size": [24, 24]})


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """(killed-then-resumed output, uninterrupted output, error rows seen before resume)."""
    from bench.study.faults import RolloutLog
    from bench.study.runner import run_study
    from bench.study.store import ResultsStore

    root = tmp_path_factory.mktemp("faults")
    port = _free_port()
    spec = _spec(port)
    # 3 queries per rollout (40 frames / 16 executed): dies on the 3rd query of rollout 2
    server = _serve(port, "--exit-after", "5")
    try:
        with pytest.raises(BenchError) as err:
            run_study(spec, root / "resumed", progress=False)
    finally:
        _stop(server)
    message = str(err.value)
    with ResultsStore(root / "resumed") as store:
        stored_before = [r.key for r in store.rollouts()]
    with RolloutLog(root / "resumed" / "results.sqlite") as log:
        errors_before = log.errors()
    server = _serve(port)
    try:
        run_study(spec, root / "resumed", resume=True, progress=False)
        run_study(spec, root / "fresh", progress=False)
    finally:
        _stop(server)
    return SimpleNamespace(root=root, message=message, stored_before=stored_before,
                           errors_before=errors_before, spec=spec)


@pytest.mark.slow
def test_killed_server_marks_rollouts_error_not_failure(studies):
    assert "rollouts ended in a policy fault" in studies.message
    assert "--resume" in studies.message and "\n" not in studies.message
    errors = studies.errors_before
    assert errors and all(e["policy"] == "served" for e in errors)
    assert all("ws://127.0.0.1" in e["reason"] for e in errors)
    stored = set(studies.stored_before)
    assert not stored & {tuple(e[k] for k in ("study", "scene", "condition", "task", "policy",
                                               "domain", "trial")) for e in errors}
    served_ok = [k for k in stored if k[4] == "served"]
    assert len(served_ok) == 1  # only the first served rollout finished before the kill
    assert len([k for k in stored if k[4] == "hold"]) == 6  # the other policy is unaffected
    assert (studies.root / "resumed" / "tables" / "errors.csv").is_file()


def test_resume_reruns_errors_only_zero_lost_zero_duplicated(studies):
    from bench.study.faults import RolloutLog
    from bench.study.store import ResultsStore

    with ResultsStore(studies.root / "resumed") as store:
        resumed = store.rollouts()
    with ResultsStore(studies.root / "fresh") as store:
        fresh = store.rollouts()
    keys = [r.key for r in resumed]
    assert len(keys) == len(set(keys)) == 12  # 2 scenes x 3 trials x 2 policies
    assert resumed == fresh  # bit-identical to an uninterrupted run
    with RolloutLog(studies.root / "resumed" / "results.sqlite") as log:
        assert log.errors() == []
        latency = log.latency()
    assert len({tuple(r[k] for k in ("scene", "domain", "trial", "policy")) for r in latency}) == 12
    assert all(r["p95_ms"] >= r["p50_ms"] > 0 for r in latency if r["queries"])
    assert (studies.root / "resumed" / "tables" / "ranking.csv").is_file()


def test_compare_identical_runs_gives_zero_ci(studies, tmp_path):
    out = tmp_path / "cmp"
    cmd = [sys.executable, "-m", "bench.cli", "study", "compare", "--base",
           str(studies.root / "fresh"), "--variant", str(studies.root / "resumed"), "--out",
           str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import csv

    deltas = list(csv.DictReader(open(out / "deltas.csv")))
    assert len(deltas) == 1 and deltas[0]["pairs"] == "8"
    for key in ("delta_success", "success_ci_low", "success_ci_high", "delta_progress",
                "progress_ci_low", "progress_ci_high"):
        assert float(deltas[0][key]) == 0.0
    for name in ("deltas.md", "policies.csv", "policies.md", "correlation.csv", "compare.png",
                 "compare.pdf"):
        assert (out / name).is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["pairs"] == 8 and manifest["tool"] == "study-compare/1"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "exists" in again.stderr


def _row(task, policy, trial, success, progress, grasp):
    return SimpleNamespace(key=("s", "scene", "clean", task, policy, "sim", trial), task=task,
                           policy=policy, domain="sim", success=success, progress_final=progress,
                           first_grasp_frame=grasp)


def test_compare_statistics_against_scipy():
    from scipy import stats

    from bench.study.compare import compare, paired_bootstrap_ci, rank_correlations

    rng = np.random.default_rng(0)
    base, variant = [], []
    for p, policy in enumerate(["p0", "p1", "p2", "p3"]):
        for t in range(10):
            base.append(_row("cup", policy, t, bool(rng.random() < 0.2 + 0.2 * p),
                             float(rng.random()), int(rng.integers(-1, 60))))
            variant.append(_row("cup", policy, t, bool(rng.random() < 0.15 + 0.2 * p),
                                float(rng.random()), int(rng.integers(-1, 60))))
    tables = compare(list(zip(base, variant, strict=True)))
    d = tables["deltas"][0]
    diffs = np.array([float(v.success) - float(b.success) for b, v in zip(base, variant,
                                                                          strict=True)])
    assert d["delta_success"] == pytest.approx(diffs.mean())
    assert d["success_ci_low"] <= d["delta_success"] <= d["success_ci_high"]
    ref = stats.bootstrap((diffs,), np.mean, n_resamples=9999, method="percentile",
                          random_state=np.random.default_rng(0)).confidence_interval
    assert (d["success_ci_low"], d["success_ci_high"]) == (ref.low, ref.high)
    rates_b = [r["base_success"] for r in tables["policies"]]
    rates_v = [r["variant_success"] for r in tables["policies"]]
    corr = {r["statistic"]: r["value"] for r in tables["correlation"]}
    assert corr["kendall"] == pytest.approx(stats.kendalltau(rates_b, rates_v)[0])
    assert corr["spearman"] == pytest.approx(stats.spearmanr(rates_b, rates_v)[0])
    assert corr["pearson"] == pytest.approx(stats.pearsonr(rates_b, rates_v)[0])
    p0 = tables["policies"][0]
    grasps = [b.first_grasp_frame / 10.0 for b in base if b.policy == "p0"
              and b.first_grasp_frame >= 0]
    assert p0["base_grasp_s_median"] == pytest.approx(np.median(grasps))
    assert paired_bootstrap_ci(np.zeros(7)) == (0.0, 0.0)
    assert all(math.isnan(v) for v in rank_correlations(np.ones(4), np.arange(4)).values())


def test_spec_policy_refs_round_trip_and_errors(tmp_path, monkeypatch):
    from bench.study.spec import StudySpec, spec_from_dict

    monkeypatch.syspath_prepend(str(POLICY_DIR))
    spec = spec_from_dict({"sample_scenes": {"a": 0}, "tasks": ["cup"], "policies": {"cup": [
        "bench_test_policies:make_servo",
        {"factory": "bench_test_policies:make_servo", "kwargs": {"chunk": 8}, "name": "short"}]},
        "deployment": {"execution": "async", "latency_ms": "p50", "controller_gains": "soft"}})
    assert spec.policies["cup"] == ("bench_test_policies.make_servo", "short")
    assert spec.policy_refs["short"]["kwargs"] == {"chunk": 8}
    spec.validate_registries()
    again = spec_from_dict(json.loads(json.dumps(spec.to_json())))
    assert again == spec and isinstance(again, StudySpec)
    for bad, needle in (
            ({"policies": {"cup": ["nope_mod_x:f", "hold"]}}, "cannot import"),
            ({"policies": {"cup": [{"factory": 3}, "hold"]}}, "needs a string"),
            ({"deployment": {"latency_ms": 50}}, "needs execution='async'"),
            ({"deployment": {"controller_gains": "wobbly"}}, "controller_gains"),
            ({"deployment": {"speed": 1}}, "unknown deployment keys")):
        with pytest.raises(BenchError, match=needle):
            s = spec_from_dict({"sample_scenes": {"a": 0}, "tasks": ["cup"], **bad})
            s.validate_registries()


@pytest.mark.slow
def test_deployment_variant_study_and_compare(tmp_path):
    """A base study and an async (measured p50 + 400 ms think time) + soft-gains variant."""
    import csv

    from bench.study.compare import write_comparison
    from bench.study.faults import RolloutLog
    from bench.study.runner import run_study
    from bench.study.spec import spec_from_dict

    base = {"name": "dep", "sample_scenes": {"a": 0, "b": 1}, "sample_gaussians": 3000,
            "conditions": ["clean"], "tasks": ["cup"], "policies": {"cup": ["expert", "hold"]},
            "trials": 2, "real_trials": 1, "max_frames": 200, "metrics": ["psnr"],
            "image_size": [24, 24]}
    run_study(spec_from_dict(base), tmp_path / "base", progress=False)
    variant = {**base, "deployment": {"execution": "async", "latency_ms": 400.0,
                                      "controller_gains": "soft"}}
    run_study(spec_from_dict(variant), tmp_path / "variant", progress=False)
    measured = {**base, "deployment": {"execution": "async", "latency_ms": "p50"}}
    run_study(spec_from_dict(measured), tmp_path / "measured", progress=False)
    with RolloutLog(tmp_path / "measured" / "results.sqlite") as log:
        p50 = log.policy_latency("dep", "cup", "expert")
    assert p50 is not None and p50 > 0
    tables = write_comparison(tmp_path / "base", tmp_path / "variant", tmp_path / "cmp")
    expert = next(r for r in tables["policies"] if r["policy"] == "expert")
    hold = next(r for r in tables["policies"] if r["policy"] == "hold")
    assert hold["base_success"] == hold["variant_success"] == 0.0
    # the latency + soft gains change the expert's rollouts (paired: same starts)
    changed = [(expert[f"base_{k}"], expert[f"variant_{k}"]) for k in ("progress",
                                                                       "grasp_s_median")]
    assert any(a != b for a, b in changed)
    rows = list(csv.DictReader(open(tmp_path / "cmp" / "deltas.csv")))
    d = rows[0]
    assert float(d["success_ci_low"]) <= float(d["delta_success"]) <= float(d["success_ci_high"])
