"""Reliability predictors: McNemar closed form, rank and logistic rules, committed YUBI results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from protocols import predictors as pr
from protocols.reliability import ScoredCondition

ROOT = Path(__file__).resolve().parents[2]


def test_mcnemar_exact_is_the_binomial_tail():
    a = [True] * 8 + [False] * 1 + [True] * 5  # predictor right on 8 + 5 shared
    z = [False] * 8 + [True] * 1 + [True] * 5
    result = pr.mcnemar_exact(a, z)
    assert (result.b, result.c, result.decisions) == (8, 1, 14)
    # two-sided exact: 2 * P(X <= 1 | Bin(9, 1/2)) = 2 * 10 / 512
    assert result.p_value == pytest.approx(20 / 512, abs=1e-15)
    assert pr.mcnemar_exact([True, False], [True, False]).p_value == 1.0  # no discordance


def test_within_scene_ranks_remove_scene_offsets():
    rows = [ScoredCondition("a", v, q, 0) for v, q in (("x", 10.0), ("y", 12.0), ("z", 11.0))]
    rows += [ScoredCondition("b", v, q, 0) for v, q in (("x", 30.0), ("y", 32.0), ("z", 31.0))]
    ranked = pr.within_scene_ranks(rows, lower_better=False)
    assert [r.quality for r in ranked] == [0.0, 1.0, 0.5, 0.0, 1.0, 0.5]
    flipped = pr.within_scene_ranks(rows, lower_better=True)
    assert [r.quality for r in flipped] == [1.0, 0.0, 0.5, 1.0, 0.0, 0.5]


def _synthetic(offset_b: float):
    """Three scenes; the worst two variants of each are unreliable; scene b is shifted."""
    scores, labels = {"m": {}}, {"task": {}}
    for scene, shift in (("a", 0.0), ("b", offset_b), ("c", 0.5)):
        scores["m"][(scene, "clean")] = 20.0 + shift
        for i, variant in enumerate(("v1", "v2", "v3", "v4")):
            scores["m"][(scene, variant)] = 20.0 + shift - 2.0 * (i + 1)
            labels["task"][(scene, variant)] = int(i >= 2)
    return scores, labels


def test_rank_and_logistic_recover_a_rule_that_scene_offsets_hide_from_the_threshold():
    scores, labels = _synthetic(offset_b=-9.0)
    run = pr.run_predictors(scores, labels, methods=["threshold", "rank", "logistic"],
                            lower_better={"m": False}, clean_variant="clean")
    correct = {r.method: r.correct["task"] for r in run.results}
    assert correct["rank:m"] == 12 and correct["logistic"] == 12  # dQ and ranks see through it
    assert correct["threshold:m"] < 12  # the raw threshold from a, c misjudges shifted b
    assert correct["Always reliable"] == 6
    assert run.logistic_features == ["m"]


def test_logistic_single_class_fold_predicts_that_class():
    scores, labels = _synthetic(offset_b=0.0)
    labels["task"] = {k: 0 for k in labels["task"]}
    run = pr.run_predictors(scores, labels, methods=["logistic"], lower_better={"m": False},
                            clean_variant="clean")
    preds = run.predictions[("logistic", "task")]
    assert {p.fit_status for p in preds} == {"training_class_constant"}
    assert all(p.prediction == 0 for p in preds)


def test_parse_methods():
    assert pr.parse_methods("all") == ["threshold", "rank", "logistic"]
    with pytest.raises(ValueError, match="unknown --method"):
        pr.parse_methods("forest")


def test_committed_yubi_predictor_tables_regenerate(tmp_path):
    import bench.cli

    inputs, out = tmp_path / "inputs", tmp_path / "predictors"
    assert bench.cli.main(["reliability-inputs", "--yubi", str(ROOT / "results/yubi/data"),
                           "--out", str(inputs)]) == 0
    for name in ("scores.csv", "labels.csv"):
        assert (inputs / name).read_bytes() == (
            ROOT / "results/yubi/predictor_inputs" / name).read_bytes()
    assert bench.cli.main(["reliability", "--scores", str(inputs / "scores.csv"), "--labels",
                           str(inputs / "labels.csv"), "--method", "all", "--out",
                           str(out)]) == 0  # the labels' own All-three target is kept
    committed = ROOT / "results/yubi/predictors"
    for path in sorted(committed.glob("*.csv")) + sorted(committed.glob("*.md")):
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
    # the threshold rows are the paper's table; always-reliable 35/45
    table = (committed / "predictors.csv").read_text()
    assert "threshold:SSIM Test,8/15,9/15,15/15,32/45,7/15" in table
    assert "Always reliable,8/15,12/15,15/15,35/45,6/15" in table
    assert (committed / "reliability.csv").read_bytes() == (
        ROOT / "results/yubi/tables/reliability.csv").read_bytes()


def test_committed_demo_predictor_tables_regenerate(tmp_path):
    # results/demo-predictors is derived from the committed results/demo-cup/tables: it must be
    # regenerated whenever the demo is (it was stale once, from an older demo).
    import bench.cli

    inputs, out = tmp_path / "inputs", tmp_path / "predictors"
    assert bench.cli.main(["reliability-inputs", "--study-tables",
                           str(ROOT / "results/demo-cup/tables"), "--out", str(inputs)]) == 0
    committed = ROOT / "results/demo-predictors"
    for name in ("scores.csv", "labels.csv"):
        assert (inputs / name).read_bytes() == (committed / "inputs" / name).read_bytes(), name
    assert bench.cli.main(["reliability", "--scores", str(inputs / "scores.csv"), "--labels",
                           str(inputs / "labels.csv"), "--method", "all", "--out",
                           str(out)]) == 0
    tables = committed / "predictors"
    for path in sorted(tables.glob("*.csv")) + sorted(tables.glob("*.md")):
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
    # its threshold rows count what the demo's own reliability table counts
    own = {row.split(",")[0]: row.split(",")[1] for row in
           (ROOT / "results/demo-cup/tables/reliability.csv").read_text().splitlines()[1:]}
    for row in (tables / "reliability.csv").read_text().splitlines()[1:]:
        method, cup = row.split(",")[:2]
        name = method if method == "Always reliable" else "test:" + method.split()[0]
        assert own[name] == cup, method


def test_yubi_pilot_file_holds_the_published_real_counts():
    from protocols.yubi import load_yubi

    data = load_yubi(ROOT / "results/yubi/data")
    lines = (ROOT / "results/yubi/plan_inputs/pilot_real.csv").read_text().splitlines()[1:]
    counts = {tuple(line.split(",")[:3]): tuple(map(int, line.split(",")[3:])) for line in lines}
    assert len(counts) == 18
    for (scene, task), pair in data.clean.items():
        assert counts[(scene, task, "pi_1")] == (pair.real_k1, pair.real_n1)
        assert counts[(scene, task, "pi_2")] == (pair.real_k2, pair.real_n2)
    assert not math.isnan(float((ROOT / "results/yubi/plan/trials.csv").read_text()
                                .splitlines()[1].split(",")[7]))


def test_new_protocol_modules_run_without_torch_mujoco_warp():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import protocols.power, protocols.sequential, protocols.predictors, "
        "protocols.predictor_report, protocols.plan_cli, protocols.plan_figures\n"
        "from protocols import power, predictors, sequential\n"
        "power.plan_pairs([0.9], [0.2], power.PlanTargets(max_trials=30))\n"
        "sequential.simulate(0.8, 0.2, sequential.SequentialConfig(), max_trials=20, "
        "sequences=10, seed=0)\n"
        "s = {'m': {(sc, v): float(i + j) for i, sc in enumerate('abc') "
        "for j, v in enumerate(['clean', 'x', 'y'])}}\n"
        "l = {'t': {(sc, v): int(v == 'y') for sc in 'abc' for v in ['x', 'y']}}\n"
        "predictors.run_predictors(s, l, methods=['logistic', 'rank'], "
        "lower_better={'m': False}, clean_variant='clean')\n"
        "heavy = [m for m in ('torch', 'mujoco', 'warp') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr


def test_holm_adjustment_closed_form():
    # p sorted: 0.01, 0.02, 0.04 with M = 3 -> 0.03, max(0.03, 0.04) = 0.04, max(0.04, 0.04)
    adjusted = pr.holm_adjusted([0.04, 0.01, 0.02])
    assert adjusted.tolist() == pytest.approx([0.04, 0.03, 0.04])
    assert pr.holm_adjusted([0.5, 0.9]).tolist() == [1.0, 1.0]
