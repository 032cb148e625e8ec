"""`bench plan trials`: outputs, determinism, one-line errors with nothing written."""

from __future__ import annotations

import csv

import pytest


@pytest.fixture
def bench_plan(monkeypatch):
    import bench.cli

    monkeypatch.setattr(bench.cli, "CLI_MODULES", ("protocols.cli", "protocols.plan_cli"))
    return bench.cli.main


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_single_pair_and_grid(bench_plan, tmp_path, capsys):
    assert bench_plan(["plan", "trials", "--p1", "0.8", "--p2", "0.5", "--out",
                       str(tmp_path / "one")]) == 0
    row = _rows(tmp_path / "one" / "trials.csv")[0]
    # 44 per policy: the exact Fisher power first reaches 0.8 there (tests/test_protocols_power)
    assert (row["fisher_trials"], row["sign_trials"], row["wilson_trials"]) == ("44", "11", "92")
    assert (tmp_path / "one" / "manifest.json").is_file()
    assert bench_plan(["plan", "trials", "--grid", "0.9,0.5,0.2", "--out",
                       str(tmp_path / "grid")]) == 0
    rows = _rows(tmp_path / "grid" / "trials.csv")
    assert [(r["p1"], r["p2"]) for r in rows] == [("0.5", "0.2"), ("0.9", "0.2"), ("0.9", "0.5")]
    for ext in ("png", "pdf"):
        assert (tmp_path / "grid" / "figures" / f"trials_grid.{ext}").stat().st_size > 1000
    assert bench_plan(["plan", "trials", "--grid", "0.9,0.5,0.2", "--out",
                       str(tmp_path / "again")]) == 0
    for name in ("trials.csv", "trials.md", "figures/trials_grid.png"):
        assert (tmp_path / "grid" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_pilot_counts(bench_plan, tmp_path):
    pilot = tmp_path / "pilot.csv"
    pilot.write_text("scene,task,policy,successes,trials\nlab,cup,a,9,10\nlab,cup,b,3,10\n"
                     "lab,pen,a,5,10\nlab,pen,b,5,10\n")
    assert bench_plan(["plan", "trials", "--pilot", str(pilot), "--max-trials", "60",
                       "--out", str(tmp_path / "out")]) == 0
    rows = _rows(tmp_path / "out" / "trials.csv")
    assert rows[0]["fisher_trials"] == "12"  # plan for 0.9 vs 0.3, as --p1 0.9 --p2 0.3
    assert 0 < float(rows[0]["fisher_assurance"]) < float(rows[0]["fisher_power"])
    assert rows[1]["fisher_trials"] == "0"  # a pilot tie: no difference to find
    assert (tmp_path / "out" / "figures" / "power_curves.pdf").is_file()


@pytest.mark.parametrize(("argv", "content", "fragment"), [
    (["--p1", "0.8"], None, "go together"),
    (["--p1", "1.5", "--p2", "0.2"], None, "not a success rate"),
    (["--grid", "0.5"], None, "at least two"),
    (["--p1", "0.8", "--p2", "0.5", "--power", "80"], None, "power must lie"),
    (["--pilot", "PILOT"], "scene,task,policy,successes\n", "lacks columns"),
    (["--pilot", "PILOT"], "scene,task,policy,successes,trials\ns,t,a,5,4\ns,t,b,1,4\n",
     "exceed"),
    (["--pilot", "PILOT"], "scene,task,policy,successes,trials\ns,t,a,1,4\n", "exactly two"),
])
def test_bad_input_one_line_nothing_written(bench_plan, tmp_path, capsys, argv, content,
                                            fragment):
    if content is not None:
        (tmp_path / "pilot.csv").write_text(content)
        argv = [str(tmp_path / "pilot.csv") if a == "PILOT" else a for a in argv]
    out = tmp_path / "out"
    assert bench_plan(["plan", "trials", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_reliability_method_errors(bench_plan, tmp_path, capsys):
    scores, labels = tmp_path / "s.csv", tmp_path / "l.csv"
    scores.write_text("scene,variant,method,quality\na,x,psnr,1\nb,x,psnr,2\n")
    labels.write_text("target,scene,variant,label\ncup,a,x,0\ncup,b,x,1\n")
    assert bench_plan(["reliability", "--scores", str(scores), "--labels", str(labels),
                       "--method", "forest", "--out", str(tmp_path / "o")]) == 2
    assert "unknown --method" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert bench_plan(["reliability", "--scores", str(scores), "--labels", str(labels),
                       "--method", "logistic", "--out", str(tmp_path / "o")]) == 2
    assert "clean variant" in capsys.readouterr().err
