"""``--envs-per-worker N``: a worker steps N envs as one vector env, rows identical to 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.study.executors import MAX_ENVS_PER_WORKER, ExecutorConfig
from bench.study.runner import run_study
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore

# Both domains (world-free "real" = the sample scene), two conditions, obs_policy frames kept,
# and 3 trials per cell so 4 sub-envs run episodes of different lengths and refill.
SPEC = StudySpec(name="vec", sample_scenes={"a": 0}, sample_gaussians=3000,
                 conditions=("clean", "floaters-mid"), tasks=("cup",), trials=3, real_trials=2,
                 max_frames=60, metrics=("psnr", "nvs-sqa"), obs_policy_every=3)
TABLES = ("rollouts.csv", "success_rates.csv", "ranking.csv", "transitions.csv",
          "errors.csv")


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "out"
    run_study(SPEC, out, progress=False)
    return out


def _same_results(a: Path, b: Path) -> None:
    for name in TABLES:
        assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
    with ResultsStore(a) as sa, ResultsStore(b) as sb:
        assert sa.rollouts() == sb.rollouts() and len(sa.rollouts()) == 16
    frames = sorted(p.relative_to(a) for p in (a / "obs_policy").rglob("*.npz"))
    assert frames and frames == sorted(p.relative_to(b) for p in (b / "obs_policy").rglob("*.npz"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in frames)


def test_serial_with_four_envs_matches_serial(serial, tmp_path):
    out = tmp_path / "vec4"
    run_study(SPEC, out, progress=False, executor=ExecutorConfig(envs_per_worker=4))
    _same_results(serial, out)


@pytest.mark.slow
def test_process_pool_with_four_envs_matches_serial(serial, tmp_path):
    out = tmp_path / "process-vec4"
    result = run_study(SPEC, out, progress=False,
                       executor=ExecutorConfig(kind="process", workers=2, envs_per_worker=4))
    assert result.new_rollouts == 16
    _same_results(serial, out)


def test_envs_per_worker_config_checks():
    assert ExecutorConfig().to_json() == {"kind": "serial", "workers": 0, "address": "",
                                          "retries": 2, "chunk_size": 1, "threads": 0}
    assert ExecutorConfig(envs_per_worker=4).to_json()["envs_per_worker"] == 4
    for bad in (0, -1, True, "4"):
        with pytest.raises(BenchError, match="envs_per_worker must be an integer >= 1"):
            ExecutorConfig(kind="process", envs_per_worker=bad)
    with pytest.raises(BenchError, match=f"exceeds the cap of {MAX_ENVS_PER_WORKER}"):
        ExecutorConfig(kind="process", envs_per_worker=MAX_ENVS_PER_WORKER + 1)


@pytest.mark.parametrize(("value", "message"), [
    ("0", "executor envs_per_worker must be an integer >= 1, got 0"),
    ("65", "executor envs_per_worker (--envs-per-worker) 65 exceeds the cap of 64"),
    ("four", "argument --envs-per-worker: invalid int value: 'four'"),
])
def test_cli_flag_refused_in_one_line(tmp_path, capsys, value, message):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({"name": "cli", "sample_scenes": {"a": 0},
                                     "sample_gaussians": 3000, "tasks": ["cup"],
                                     "conditions": ["clean"], "trials": 1, "real_trials": 1,
                                     "metrics": ["psnr"]}))
    try:  # argparse's own refusals leave by SystemExit(2), the bench's by the return code
        code = main(["study", "run", "--spec", str(spec_path), "--out", str(tmp_path / "out"),
                     "--no-progress", "--executor", "process", "--envs-per-worker", value])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("bench study run: error:") and message in err, err
    assert not (tmp_path / "out").exists()
