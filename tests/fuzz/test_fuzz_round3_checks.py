"""Issue 30, item 6: everything is checked before ``--out`` exists, in dry runs too.

One named regression test per defect: each input was accepted (exit 0, a wrong result or an
unbounded run) and is now a one-line refusal, exit 2, with the workspace byte-identical
(conftest ``run_refused``). Size caps show their arithmetic. Also: argparse usage errors are
one line, and the policy server bounds its message size (an oversize request closes that
connection with code 1009, the server keeps serving).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from bench.cli import main

TASK_FILE = Path(__file__).resolve().parents[2] / "bench" / "sim" / "task_files" / "cup.json"
SPEC = {"name": "fz", "sample_scenes": {"a": 0}, "sample_gaussians": 3000, "tasks": ["cup"],
        "conditions": ["clean"], "trials": 1, "real_trials": 1, "metrics": ["psnr"],
        "image_size": [16, 16], "max_frames": 20, "real_domain": "simulated"}


def write_spec(ws: Path, **changes) -> Path:
    path = ws / "spec.json"
    data = {**SPEC, **changes}
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return path


def dry_run(*argv) -> list[str]:
    return ["study", "run", "--spec", "spec.json", "--out", "out", "--dry-run", "--no-progress",
            *argv]


def write_task(ws: Path, name: str = "task.json", **changes) -> Path:
    data = json.loads(TASK_FILE.read_text())
    data.update(changes)
    path = ws / "victim" / name  # beside the user's data: it must stay unchanged
    path.write_text(json.dumps(data))
    return path


# ----------------------------------------------------------------------------- 1. dry run


def test_dry_run_applies_the_real_runs_name_checks(workspace, refused):
    """`--dry-run` printed a plan for scene '../../victim' ("nothing written", exit 0)."""
    write_spec(workspace, sample_scenes={"../../victim": 0})
    refused(dry_run(), fragment="scene name '../../victim' is not a safe name")


# ----------------------------------------------------------------------------- 2. size caps


def test_task_grid_of_1e9_starts_refused_with_the_arithmetic(workspace, refused):
    """A 1000 x 1000 x 1000 grid (10^9 starts, tens of GB to enumerate) was accepted."""
    axis = {"range": [-0.1, 0.1], "count": 1000}
    task = write_task(workspace, grid={"x": axis, "y": axis, "yaw_deg": {"range": [0, 90],
                                                                           "count": 1000}})
    refused(["task", "show", task, "--out", "shown"],
            fragment="a grid of 1,000,000,000 starts (1,000 x 1,000 x 1,000) exceeds the cap "
            "of 1,000,000")
    one_axis = write_task(workspace, "axis.json", grid={"x": {"range": [-0.1, 0.1],
                                                              "count": 10**9},
                                                        "y": [0.0], "yaw_deg": [0.0]})
    started = time.perf_counter()  # refused before np.linspace allocates 8 GB
    refused(["task", "validate", one_axis], fragment="grid.x.count: 1,000,000,000 values")
    assert time.perf_counter() - started < 5.0


def test_study_max_frames_1e12_refused_in_a_dry_run(workspace, refused):
    """max_frames 10^12 passed the dry run (which then timed a rollout with that limit)."""
    write_spec(workspace, max_frames=10**12)
    refused(dry_run(), fragment="exceeds the cap of 36,000 frames")


def test_task_time_limit_1e12_refused_in_a_rollout_run(workspace, refused):
    """time_limit_frames 10^12 was accepted by `bench rollout` (an unbounded episode)."""
    task = write_task(workspace, time_limit_frames=10**12)
    refused(["rollout", "--scene", "scene", "--task", task, "--policy", "expert",
             "--obs-mode", "state", "--episodes", "1", "--out", "out"],
            fragment="1,000,000,000,000 / 36,000 = 27,777,777.8 h")
    refused(["rollout", "--scene", "scene", "--policy", "expert", "--obs-mode", "state",
             "--max-frames", 10**12, "--out", "out"], fragment="--max-frames of 1,000,000,000,000")


def test_softbody_rollout_episodes_1e9_refused(workspace, refused):
    """`softbody rollout --episodes 10^9` created --out and ran without end."""
    refused(["softbody", "rollout", "--scene", "scene", "--episodes", 10**9, "--out", "out"],
            fragment="--episodes 1,000,000,000 is above the limit of 100,000")


def test_plan_trials_grids_of_999_rates_or_50k_pilot_pairs_refused(workspace, refused):
    """999 rates (498,501 pairs) or 50,000 pilot pairs ran for hours."""
    rates = ",".join(f"{i / 998:.6f}" for i in range(999))
    refused(["plan", "trials", "--grid", rates, "--out", "plan"],
            fragment="--grid of 999 rates plans 498,501 pairs (999 x 998 / 2), above the cap "
            "of 5,000")
    pilot = workspace / "victim" / "pilot.csv"
    rows = ["scene,task,policy,successes,trials"]
    rows += [f"s{i},cup,{p},{k},10" for i in range(50_000) for p, k in (("a", 7), ("b", 3))]
    pilot.write_text("\n".join(rows) + "\n")
    refused(["plan", "trials", "--pilot", pilot, "--out", "plan"],
            fragment="--pilot holds 50,000 pilot pairs")


def test_threads_per_worker_1e6_refused(workspace, refused):
    """`--threads-per-worker 1000000` was accepted (a pool of a million torch threads)."""
    write_spec(workspace)
    refused(dry_run("--executor", "process", "--threads-per-worker", 1_000_000),
            fragment="--threads-per-worker) 1,000,000 exceeds the cap of 1,024")


def test_real_results_with_1e22_trials_refused(workspace, refused):
    """A per-cell real_results CSV with 10^22 trials passed (exact tests over 10^22)."""
    csv_path = workspace / "victim" / "real.csv"
    csv_path.write_text("scene,task,policy,successes,trials\n"
                        "a,cup,expert,5,1e22\na,cup,hold,1,10\n")
    write_spec(workspace, real_domain=None, real_results=str(csv_path),
               policies={"cup": ["expert", "hold"]})
    refused(dry_run(), fragment="trials 1e22 exceeds the cap of 1,000,000 real trials")


# ----------------------------------------------------------------------------- 3. values


def test_scene_crop_to_zero_gaussians_refused(workspace, refused):
    """Cropping every Gaussian wrote a bundle that `bench scene info` then refused."""
    refused(["scene", "crop", "scene", "--box", 0, 0, 0, 1000, 1000, 1000, "--no-previews",
             "--out", "cropped"], fragment="the boxes remove all 3,000 Gaussians")


def _results_db(root: Path, study: str, success: int = 1) -> Path:
    from bench.study.store import ResultsStore, RolloutRow

    root.mkdir(parents=True)
    with ResultsStore(root) as store:
        for trial in range(3):
            store.add_rollout(RolloutRow(
                study=study, scene="a", condition="clean", task="cup", policy="expert",
                domain="sim", trial=trial, manifest_sha256="0" * 64, init_index=trial,
                success=bool(trial % 2), progress_final=0.5, progress_max=0.5, frames=10,
                failure="", truncated=False, first_grasp_frame=-1))
    if success != 1:  # a hand-edited or foreign database
        db = sqlite3.connect(root / "results.sqlite", isolation_level=None)
        db.execute("UPDATE rollouts SET success = ? WHERE trial = 1", (success,))
        db.close()  # the last connection: the WAL is checkpointed into the file and removed
    assert not Path(f"{root / 'results.sqlite'}-wal").exists()
    return root


def test_study_compare_refuses_success_7_and_mixed_studies(workspace, refused):
    """success=7 counted as a success; rows of two different studies were paired."""
    base = _results_db(workspace / "victim" / "base", "dep")
    bad = _results_db(workspace / "victim" / "bad", "dep", success=7)
    other = _results_db(workspace / "victim" / "other", "another")
    refused(["study", "compare", "--base", base, "--variant", bad, "--out", "cmp"],
            fragment="has success 7; success must be 0/1 (or true/false)")
    refused(["study", "compare", "--base", base, "--variant", other, "--out", "cmp"],
            fragment="--base holds study 'dep' but --variant holds study 'another'")


def test_plan_trials_equal_rates_refused(workspace, refused):
    """`--p1 0.5 --p2 0.5` wrote a plan with power nan."""
    refused(["plan", "trials", "--p1", 0.5, "--p2", 0.5, "--out", "plan"],
            fragment="--p1 0.5 equals --p2 0.5")


def test_align_pose_inlier_distance_nan_refused(workspace, refused):
    """`--inlier-distance nan` passed the `<= 0` check."""
    import trimesh

    trimesh.creation.box(extents=(0.2, 0.2, 0.2)).export(workspace / "victim" / "box.obj")
    refused(["align", "pose", "--splats", "scene/background.ply", "--mesh", "victim/box.obj",
             "--inlier-distance", "nan", "--out", "aligned"],
            fragment="--inlier-distance must be a finite number, got nan")


def test_world_from_splat_json_booleans_refused(workspace, refused):
    """[[true, 0, 0, 0], ...] was read as the identity (true = 1.0)."""
    matrix = [[True if i == j else 0 for j in range(4)] for i in range(4)]
    (workspace / "victim" / "wfs.json").write_text(json.dumps(matrix))
    refused(["scene", "edit", "scene", "--world-from-splat", "victim/wfs.json", "--no-previews",
             "--out", "edited"], fragment="row 0 column 0 is true (a JSON boolean)")


def test_fifo_task_file_is_not_a_regular_file(workspace, refused, tmp_path):
    """A FIFO task file was reported "not found" (it exists)."""
    fifo = tmp_path / "pipe.json"  # outside the workspace: the snapshot would block on it
    os.mkfifo(fifo)
    refused(["task", "validate", fifo], fragment="is not a regular file")


def test_scene_edit_scale_1e300_refused_without_numpy_warnings(workspace, refused):
    """Two `warning: overflow encountered` lines came before the error."""
    refused(["scene", "edit", "scene", "--scale", 1e300, "--no-previews", "--out", "edited"],
            fragment="--scale must be in [1e-06, 1e+06], got 1e+300")


def test_serve_max_message_bytes_flag_is_bounded(workspace, refused):
    refused(["serve", "--policy", "hold", "--max-message-bytes", 10**12],
            fragment="--max-message-bytes must be in [1024, 1,073,741,824]")


def test_policy_server_closes_an_oversize_message_and_keeps_serving(capsys):
    """max_size=None let one request of any size in; now the limit closes that connection."""
    import numpy as np
    from websockets.exceptions import ConnectionClosedError
    from websockets.sync.client import connect

    from bench.policies import wire
    from bench.policies.serve import PolicyService, serve, server_env

    env = server_env("cup")
    box: dict = {}
    thread = threading.Thread(target=serve, args=(PolicyService("hold", env),), daemon=True,
                              kwargs={"port": 0, "max_message_bytes": 64 << 10,
                                      "ready": lambda server: box.setdefault("server", server)})
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while "server" not in box and time.monotonic() < deadline:
            time.sleep(0.02)
        uri = f"ws://127.0.0.1:{box['server'].socket.getsockname()[1]}"
        with connect(uri, max_size=None) as ws:
            wire.unpackb(ws.recv(timeout=30))  # metadata
            ws.send(b"\0" * ((64 << 10) + 1))
            with pytest.raises(ConnectionClosedError) as closed:
                ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1009
        assert "exceeds limit of 65536 bytes" in closed.value.rcvd.reason
        with connect(uri, max_size=None) as ws:  # the server still serves
            assert wire.unpackb(ws.recv(timeout=30))["policy"] == "hold"
            ws.send(wire.packb({"observation/state": np.zeros(8, np.float32),
                                "bench/query_index": 0, "bench/episode_seed": 0}))
            reply = wire.unpackb(ws.recv(timeout=30))
        assert np.asarray(reply["actions"]).shape[1] == 7
    finally:
        if "server" in box:
            box["server"].shutdown()
        thread.join(timeout=10)
        env.close()
    assert "closed a connection: frame with 65537 bytes exceeds limit" in capsys.readouterr().err


# ----------------------------------------------------------------------------- 4. argparse


@pytest.mark.parametrize(("argv", "line"), [
    (["study", "run", "--spec", "x.json"],
     "bench study run: error: the following arguments are required: --out; see 'bench study "
     "run --help'"),
    (["plan", "trials", "--p1", "x", "--out", "o"],
     "bench plan trials: error: argument --p1: invalid float value: 'x'; see 'bench plan "
     "trials --help'"),
    (["nope"], "bench: error: argument COMMAND: invalid choice: 'nope'"),
    # argparse names the top-level parser for unknown flags; the subcommand that does not
    # know them is the one whose --help lists what it does know
    (["study", "run", "--spec", "x.json", "--out", "o", "--bogus", "1"],
     "bench study run: error: unrecognized arguments: --bogus 1; see 'bench study run --help'"),
    (["--bogus"], "bench: error: unrecognized arguments: --bogus; see 'bench --help'"),
], ids=["missing-flag", "bad-float", "bad-command", "unknown-flag-subcommand",
        "unknown-flag-top"])
def test_argparse_errors_are_one_line(workspace, capsys, argv, line):
    """argparse printed 2-7 lines of usage before its error."""
    def snapshot(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*"))

    before = snapshot(workspace)
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith(line), err
    assert err.rstrip().endswith("--help'")
    assert snapshot(workspace) == before


def test_every_subparser_is_one_line():
    """argparse gives subparsers their parent's class: every `bench` parser is one-line."""
    import argparse

    from bench.cli import OneLineParser, build_parser

    def walk(parser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from walk(sub)

    parsers = list(walk(build_parser()))
    assert len(parsers) > 20 and all(isinstance(p, OneLineParser) for p in parsers)
