"""A study driver's death takes its pool workers with it; an unreachable Ray address is refused
before ``--out`` exists (issue 30, defects D3 and D5).

D3: SIGKILL or SIGTERM of ``bench study run --executor process`` left the pool workers running
(about 1 GB each, holding the caller's stdout open, so ``$(bench study run ...)`` hung) in 5 of
11 kills. Each worker now arms ``PR_SET_PDEATHSIG`` and watches ``os.getppid()``; a driver
stopped by SIGTERM kills its workers itself and exits 143. The tests run a small study in its
own session, kill the driver only, and require that within 10 s no process of the session is
left and the stdout pipe reached end of file.

D5: ``--executor ray --address 127.0.0.1:1`` wrote bundles, scores and results.sqlite into
``--out`` and then retried for over 5 minutes. The address is now checked with a TCP connect
(5 s timeout) before anything is written.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
#: A study whose rollouts take long enough to kill the driver mid-way (80 short rollouts).
SPEC = {"name": "sig", "sample_scenes": {"a": 0}, "sample_gaussians": 3000, "tasks": ["cup"],
        "conditions": ["clean"], "trials": 20, "real_trials": 20, "metrics": ["psnr"],
        "image_size": [16, 16], "max_frames": 60, "real_domain": "simulated"}


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _session(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[3] == str(sid) and fields[0] != "Z":
                pids.append(int(entry.name))
    return sorted(pids)


def _workers(driver: int) -> list[int]:
    """The driver's pool workers (spawned interpreters running ``spawn_main``)."""
    found = []
    for pid in _session(driver):
        fields = _stat(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if fields and fields[1] == str(driver) and b"spawn_main" in cmdline \
                and b"resource_tracker" not in cmdline:
            found.append(pid)
    return found


def _rollouts(out: Path) -> int:
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _eof_within(stream, seconds: float) -> bool:
    """Whether ``stream`` (a pipe) reaches end of file within ``seconds`` (data is drained)."""
    deadline = time.monotonic() + seconds
    fd = stream.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if ready and not os.read(fd, 65536):
            return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("moment", ["busy", "starting"])
def test_d3_driver_death_leaves_no_pool_worker(tmp_path, sig, moment):
    """D3: no pool worker outlives a killed driver (10 s), and the caller's stdout closes."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO), SPLATBENCH_DEBUG="", MUJOCO_GL="egl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "study", "run", "--spec", str(spec), "--out",
         str(out), "--no-progress", "--executor", "process", "--workers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:  # "starting": the workers exist; "busy": they have stored a rollout
            assert proc.poll() is None, "the study ended before it could be killed"
            assert time.monotonic() < deadline, "no pool worker started within 240 s"
            if len(_workers(proc.pid)) == 2 and (moment == "starting" or _rollouts(out) >= 1):
                break
            time.sleep(0.05)
        workers = _workers(proc.pid)
        os.kill(proc.pid, sig)  # the driver only, as `kill PID` or the OOM killer does
        code = proc.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert code == 143, code
        deadline = time.monotonic() + 10
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _session(proc.pid)
        assert left == [], f"left running 10 s after the driver's death: {left} (workers were " \
                           f"{workers})"
        assert _eof_within(proc.stdout, 5), "the caller's stdout is still held open"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of this test's session
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stdout.close()


def test_d3_pool_worker_dies_with_its_parent(tmp_path):
    """D3, the mechanism alone: a process that armed die_with_parent dies with its parent."""
    code = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    from bench.study.executors import die_with_parent\n"
        "    die_with_parent(os.getppid())\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            start_new_session=True)
    try:
        child = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while _stat(child) not in (None,) and _stat(child)[0] != "Z" \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        state = _stat(child)
        assert state is None or state[0] == "Z", f"the child {child} outlived its parent"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.stdout.close()


def test_d5_unreachable_ray_address_fails_in_seconds_writing_nothing(tmp_path):
    """D5: --address 127.0.0.1:1 is refused at once, in one line, before --out exists."""
    pytest.importorskip("ray")
    (tmp_path / "spec.json").write_text(json.dumps({**SPEC, "trials": 1, "real_trials": 1}))
    env = dict(os.environ, PYTHONPATH=str(REPO), SPLATBENCH_DEBUG="", MUJOCO_GL="egl")
    for extra in ([], ["--dry-run"]):
        started = time.monotonic()
        try:  # a subprocess: before the fix Ray retried for over 5 minutes
            done = subprocess.run(
                [sys.executable, "-m", "bench.cli", "study", "run", "--spec", "spec.json",
                 "--out", "out", "--no-progress", "--executor", "ray", "--address",
                 "127.0.0.1:1", *extra],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                start_new_session=True)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after 60 s; wrote {sorted(os.listdir(tmp_path))}")
        elapsed = time.monotonic() - started
        lines = [line for line in done.stderr.splitlines()
                 if line.strip() and not line.startswith("[bench")]
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "cannot reach the ray cluster at --address 127.0.0.1:1" in lines[0], lines
        assert elapsed < 15, f"took {elapsed:.1f} s"
        assert sorted(os.listdir(tmp_path)) == ["spec.json"], "something was written"


def test_d5_ray_address_forms(monkeypatch):
    """Malformed addresses are one-line refusals; auto / local are left to Ray."""
    import socket

    from bench.errors import BenchError
    from bench.study.executors import check_ray_address

    for bad in ("127.0.0.1", "host:", ":6379", "host:99999", "host:abc"):
        with pytest.raises(BenchError, match="is not HOST:PORT"):
            check_ray_address(bad)
    check_ray_address("auto")
    check_ray_address("local")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        port = listener.getsockname()[1]
        check_ray_address(f"127.0.0.1:{port}")  # something answers: left to ray.init
        check_ray_address(f"ray://127.0.0.1:{port}")
    finally:
        listener.close()
