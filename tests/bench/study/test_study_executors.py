"""Study executors: serial, process and ray give the same rows and tables; a killed pool
worker's rollouts are retried; a SIGKILLed driver resumes with the process executor."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.study.executors import EXECUTORS, ExecutorConfig
from bench.study.runner import run_study
from bench.study.spec import StudySpec, spec_from_dict
from bench.study.spec_file import spec_file_from_dict
from bench.study.store import ResultsStore

SPEC = StudySpec(name="tiny", sample_scenes={"a": 0, "b": 1}, sample_gaussians=3000,
                 conditions=("clean", "floaters-mid"), tasks=("cup",), trials=1, real_trials=1,
                 max_frames=120, metrics=("psnr", "nvs-sqa"), obs_policy_every=10)
#: Every table that is a function of the results (latency.csv holds wall-clock times).
TABLES = ("rollouts.csv", "success_rates.csv", "ranking.csv", "transitions.csv",
          "quality.csv", "conditions.csv", "errors.csv", "ranking.md", "success_rates.md")


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "out"
    run_study(SPEC, out, progress=False)
    return out


def _same_results(a: Path, b: Path) -> None:
    for name in TABLES:
        assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
    with ResultsStore(a) as sa, ResultsStore(b) as sb:
        assert sa.rollouts() == sb.rollouts()  # bit-identical outcomes, same manifest sha256
        assert sa.conditions() == sb.conditions()
    frames = sorted(p.relative_to(a) for p in (a / "obs_policy").rglob("*.npz"))
    assert frames and frames == sorted(p.relative_to(b) for p in (b / "obs_policy").rglob("*.npz"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in frames)


def test_config_validation_and_registry():
    assert EXECUTORS.names() == ["serial", "process", "ray"]
    assert EXECUTORS.entry("ray").meta["needs"] == "ray"
    with pytest.raises(BenchError, match="did you mean 'process'"):
        ExecutorConfig(kind="proces")
    with pytest.raises(BenchError, match="workers must be an integer >= 0"):
        ExecutorConfig(kind="process", workers=-1)
    with pytest.raises(BenchError, match="--address is for --executor ray"):
        ExecutorConfig(kind="process", address="auto")
    with pytest.raises(BenchError, match="unknown executor keys"):
        ExecutorConfig.from_dict({"kind": "process", "cores": 2})
    assert ExecutorConfig.from_dict("process").resolved_workers() == os.cpu_count()
    threads = ExecutorConfig(kind="process", workers=2).resolved_threads()
    assert threads == max(1, os.cpu_count() // 2)
    # the spec key is validated but kept out of the spec (and its hash): resume may switch
    data = {**SPEC.to_json(), "executor": {"kind": "process", "workers": 2}}
    spec, executor = spec_file_from_dict(data)
    assert spec == spec_from_dict(data) == spec_from_dict(SPEC.to_json())
    assert executor == ExecutorConfig(kind="process", workers=2)
    assert spec_file_from_dict(SPEC.to_json()).executor == ExecutorConfig()
    with pytest.raises(BenchError, match="unknown executor"):
        spec_file_from_dict({**SPEC.to_json(), "executor": "threads"})


def test_cli_flags_override_spec_key(tmp_path):
    import argparse

    from bench.study.executors import add_executor_arguments, config_from_args
    from bench.study.spec_file import load_spec

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**SPEC.to_json(), "executor": {"kind": "process",
                                                                    "retries": 5}}))
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    spec, executor = load_spec(spec_file)  # the file read once: study and executor
    assert spec == SPEC
    config = config_from_args(parser.parse_args(["--num-workers", "3"]), executor)
    assert config == ExecutorConfig(kind="process", workers=3, retries=5)


@pytest.mark.slow
def test_process_pool_matches_serial(serial, tmp_path):
    out = tmp_path / "process"
    result = run_study(SPEC, out, progress=False,
                       executor=ExecutorConfig(kind="process", workers=2))
    assert result.new_rollouts == 12
    _same_results(serial, out)


@pytest.mark.slow
def test_killed_pool_worker_is_retried(serial, tmp_path, monkeypatch):
    import multiprocessing

    import bench.study.rollouts as rollouts

    commit, killed = rollouts.commit_outcome, []

    def commit_then_kill(*args):  # after the second stored row, SIGKILL one pool worker
        stored = commit(*args)
        children = multiprocessing.active_children()
        if stored and not killed and len(list((tmp_path / "k" / "obs_policy").rglob("*.npz"))) \
                >= 2 and children:
            os.kill(children[0].pid, signal.SIGKILL)
            killed.append(children[0].pid)
        return stored

    monkeypatch.setattr(rollouts, "commit_outcome", commit_then_kill)
    out = tmp_path / "k"
    result = run_study(SPEC, out, progress=False,
                       executor=ExecutorConfig(kind="process", workers=2, retries=3))
    assert killed and result.new_rollouts == 12
    _same_results(serial, out)
    db = sqlite3.connect(out / "results.sqlite")
    reasons = [r[0] for r in db.execute("SELECT reason FROM rollout_attempts")]
    db.close()
    assert reasons and all("BrokenProcessPool" in r or "worker's death" in r for r in reasons)
    assert (out / "tables" / "attempts.csv").is_file()
    assert not (serial / "tables" / "attempts.csv").exists()


def _rollouts(out: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_sigkill_driver_then_resume_with_process(serial, tmp_path):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC.to_json()))
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "bench.cli", "study", "run", "--spec", str(spec_file),
           "--out", str(out), "--no-progress", "--executor", "process", "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while _rollouts(out) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)  # the driver only
    proc.wait()
    time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # then its orphaned pool workers (ours)
    except ProcessLookupError:
        pass
    stored = _rollouts(out)
    assert 3 <= stored < 12
    resumed = run_study(SPEC, out, resume=True, progress=False,
                        executor=ExecutorConfig(kind="process", workers=2))
    assert resumed.new_rollouts == 12 - stored  # 0 lost, 0 duplicated
    _same_results(serial, out)


@pytest.mark.slow
def test_ray_local_cluster_matches_serial(serial, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        out = tmp_path / "ray"
        result = run_study(SPEC, out, progress=False,
                           executor=ExecutorConfig(kind="ray", workers=2))
        assert result.new_rollouts == 12
        _same_results(serial, out)
    finally:
        ray.shutdown()


def _ray_task_pids() -> list[int]:
    """Ray worker processes running a rollout chunk now (Ray titles them ray::worker_run)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(b"ray::worker_run"):
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_killed_ray_worker_is_retried(serial, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    import bench.study.rollouts as rollouts

    commit, killed = rollouts.commit_outcome, []

    def commit_then_kill(*args):  # after the second stored row, SIGKILL a busy ray worker
        stored = commit(*args)
        if stored and not killed and _rollouts(tmp_path / "r") >= 2:
            for _ in range(100):
                pids = _ray_task_pids()
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                    break
                time.sleep(0.05)
        return stored

    monkeypatch.setattr(rollouts, "commit_outcome", commit_then_kill)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        out = tmp_path / "r"
        result = run_study(SPEC, out, progress=False,
                           executor=ExecutorConfig(kind="ray", workers=2, retries=3))
    finally:
        ray.shutdown()
    assert killed and result.new_rollouts == 12
    _same_results(serial, out)
    db = sqlite3.connect(out / "results.sqlite")
    reasons = [r[0] for r in db.execute("SELECT reason FROM rollout_attempts")]
    db.close()
    assert reasons and all("Worker" in r or "Died" in r or "Crash" in r for r in reasons), reasons


def test_serial_exception_is_retried_not_a_failure(serial, tmp_path, monkeypatch):
    import shutil

    import bench.sim.rollout as rollout

    out = tmp_path / "copy"
    shutil.copytree(serial, out)
    db = sqlite3.connect(out / "results.sqlite")
    with db:
        db.execute("DELETE FROM rollouts WHERE scene = 'b' AND domain = 'sim'")
    db.close()
    episode, raised = rollout.run_episode, []

    def flaky(*args, **kwargs):  # the first rollout raises once (a transient worker error)
        if not raised:
            raised.append(1)
            raise RuntimeError("transient renderer failure")
        return episode(*args, **kwargs)

    monkeypatch.setattr(rollout, "run_episode", flaky)
    result = run_study(SPEC, out, resume=True, progress=False)
    assert raised and result.new_rollouts == 4
    _same_results(serial, out)
    attempts = (out / "tables" / "attempts.csv").read_text().splitlines()
    assert len(attempts) == 2 and "RuntimeError: transient renderer failure" in attempts[1]
    # past the retries a failed execution is a rollout error, not a failure; --resume reruns it
    db = sqlite3.connect(out / "results.sqlite")
    with db:
        db.execute("DELETE FROM rollouts WHERE scene = 'a' AND domain = 'real'")
    db.close()
    monkeypatch.setattr(rollout, "run_episode", lambda *a, **k: 1 / 0)
    with pytest.raises(BenchError, match="failed to execute"):
        run_study(SPEC, out, resume=True, progress=False,
                  executor=ExecutorConfig(retries=1))
    errors = (out / "tables" / "errors.csv").read_text()
    assert errors.count("execution failed 2 times, last: ZeroDivisionError") == 2
    monkeypatch.setattr(rollout, "run_episode", episode)
    assert run_study(SPEC, out, resume=True, progress=False).new_rollouts == 2
    _same_results(serial, out)
