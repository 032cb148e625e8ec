"""The study verdicts on a hand-built results store, against values computed by hand.

Two scenes (a, b), tasks cup and tape, conditions clean, warp and hole-54, 4
trials per cell in both domains. The counts are chosen so that every outcome
appears: a real tie (a/tape), simulated ties, a reversal, Fisher significance
lost and gained, a corrected comparison. Every expected number below is worked
out by hand in the comments (Fisher p of 4/4 vs 0/4 is 2/70 = 0.029, of 3/4 vs
0/4 is 0.14: only 4-0 splits are significant with 4 trials).
"""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest

from bench.study.analysis import analyse, condition_pairs, reliability_labels, success_counts
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore, RolloutRow
from protocols.reliability import ALL_THREE

SPEC = StudySpec(name="hand", sample_scenes={"a": 0, "b": 1},
                 conditions=("clean", "warp", "hole-54"), tasks=("cup", "tape"),
                 policies={"cup": ("p1", "p2"), "tape": ("p1", "p2")}, trials=4, real_trials=4,
                 metrics=("psnr", "lpips"), include_clean=True)

# (scene, task) -> real (k1, k2), then per condition the sim (k1, k2); n = 4 everywhere
COUNTS = {
    ("a", "cup"): {"real": (4, 1), "clean": (4, 0), "warp": (2, 2), "hole-54": (1, 3)},
    ("a", "tape"): {"real": (2, 2), "clean": (3, 1), "warp": (1, 1), "hole-54": (0, 4)},
    ("b", "cup"): {"real": (0, 3), "clean": (1, 2), "warp": (0, 4), "hole-54": (2, 2)},
    ("b", "tape"): {"real": (3, 1), "clean": (2, 2), "warp": (3, 1), "hole-54": (1, 0)},
}

# LPIPS is high exactly where the cup ranking fails (H = 1); PSNR mirrors it
LPIPS = {("a", "clean"): 0.1, ("a", "warp"): 0.5, ("a", "hole-54"): 0.6,
         ("b", "clean"): 0.1, ("b", "warp"): 0.2, ("b", "hole-54"): 0.7}


def _rows():
    for (scene, task), cells in COUNTS.items():
        for cell, (k1, k2) in cells.items():
            domain, cond = ("real", "clean") if cell == "real" else ("sim", cell)
            for policy, k in (("p1", k1), ("p2", k2)):
                for trial in range(4):
                    yield RolloutRow(
                        study="hand", scene=scene, condition=cond, task=task, policy=policy,
                        domain=domain, trial=trial, init_index=trial, success=trial < k,
                        progress_final=1.0, progress_max=1.0, frames=10, failure="",
                        truncated=False, first_grasp_frame=-1, manifest_sha256="0" * 64)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis")
    with ResultsStore(out) as store:
        for row in _rows():
            store.add_rollout(row)
        quality = []
        for (scene, cond), lpips in LPIPS.items():
            for frame in ("v0", "v1"):  # two frames; the mean is the value
                for metric, value in (("lpips", lpips), ("psnr", 40.0 - 50.0 * lpips)):
                    shift = 0.01 if frame == "v0" else -0.01
                    quality.append(SimpleNamespace(scene=scene, variant=cond,
                                                   view_protocol="test", metric=metric,
                                                   frame=frame, value=value + shift))
        store.add_quality("hand", quality)
        summary = analyse(SPEC, store, out / "tables")
        counts = success_counts(store, "hand")
    return out / "tables", summary, counts


def _csv(path):
    with open(path, newline="") as f:
        return {r[next(iter(r))]: r for r in csv.DictReader(f)}


def test_ranking_by_hand(tables):
    folder, _, _ = tables
    ranking = _csv(folder / "ranking.csv")
    # eligible: a/cup, b/cup, b/tape (a/tape real 2/4 vs 2/4 is unrankable)
    # clean: a/cup correct, b/cup correct, b/tape sim tie (wrong)
    # warp: a/cup sim tie, b/cup correct, b/tape correct
    # hole-54: a/cup reversed, b/cup sim tie, b/tape correct
    expected = {"clean": (2, 3, 0, 1, 1), "warp": (2, 3, 0, 1, 1), "hole-54": (1, 3, 1, 1, 1)}
    for cond, (correct, eligible, rev, sim_ties, real_ties) in expected.items():
        row = ranking[cond]
        assert (int(row["correct"]), int(row["eligible"]), int(row["reversed"]),
                int(row["sim_ties"]), int(row["real_ties"])) == (
                    correct, eligible, rev, sim_ties, real_ties)
        assert float(row["accuracy"]) == pytest.approx(correct / eligible, abs=1e-6)
    # MAE over the 3 eligible pairs x 2 policies of |real - sim|:
    # clean   a/cup 0, .25; b/cup .25, .25; b/tape .25, .25 -> 1.25 / 6
    # warp    a/cup .5, .25; b/cup 0, .25; b/tape 0, 0      -> 1.00 / 6
    # hole-54 a/cup .75, .5; b/cup .5, .25; b/tape .5, .25  -> 2.75 / 6
    for cond, total in (("clean", 1.25), ("warp", 1.0), ("hole-54", 2.75)):
        assert float(ranking[cond]["mae_pp"]) == pytest.approx(100 * total / 6, abs=1e-4)


def test_transitions_by_hand(tables):
    folder, _, _ = tables
    rows = _csv(folder / "transitions.csv")
    assert list(rows) == ["warp", "hole-54"]  # clean is the reference, not a row
    # warp: a/cup 4-0 -> 2-2 loses significance, b/cup 1-2 -> 0-4 gains it; a/cup and a/tape
    # become ties (a/tape is a real tie but still a simulated transition); b/tape clean tie ->
    # correct is corrected; agree 2 of 3 eligible
    # hole-54: a/cup 4-0 -> 1-3 lost + reversed, a/tape 3-1 -> 0-4 gained + reversed, b/cup
    # 1-2 -> 2-2 tied, b/tape 2-2 -> 1-0 corrected; agree 1 of 3
    expected = {"warp": (1, 1, 0, 2, 2, 3, 1), "hole-54": (1, 1, 2, 1, 1, 3, 1)}
    for cond, values in expected.items():
        row = rows[cond]
        got = tuple(int(row[k]) for k in ("sig_lost", "sig_gained", "reversed", "tied", "agree",
                                          "total", "corrected"))
        assert got == values, cond


def test_success_rates_and_pairs(tables):
    folder, _, counts = tables
    pairs = condition_pairs(SPEC, counts, "warp")
    pair = pairs[("a", "cup")]
    assert (pair.real_k1, pair.real_n1, pair.real_k2, pair.sim_k1, pair.sim_k2) == (4, 4, 1, 2, 2)
    with open(folder / "success_rates.csv", newline="") as f:
        rates = list(csv.DictReader(f))
    # 2 scenes x 2 tasks x (real + 3 sim conditions) x 2 policies
    assert len(rates) == 2 * 2 * 4 * 2
    row = next(r for r in rates if (r["scene"], r["task"], r["condition"], r["domain"],
                                    r["role"]) == ("b", "tape", "clean", "real", "pi_1"))
    # Wilson 95% for 3/4, closed form: centre (3 + z^2/2) / (4 + z^2), z = 1.959964
    # -> [0.300642, 0.954413]
    assert (int(row["successes"]), int(row["trials"])) == (3, 4)
    assert float(row["wilson_low"]) == pytest.approx(0.300642, abs=1e-6)
    assert float(row["wilson_high"]) == pytest.approx(0.954413, abs=1e-6)


def test_reliability_labels_and_oriented_scores(tables):
    folder, summary, counts = tables
    by_condition = {c: condition_pairs(SPEC, counts, c) for c in SPEC.all_conditions}
    labels = reliability_labels(SPEC, by_condition)
    # cup: H = 1 for the a/warp sim tie, the a/hole reversal and the b/hole sim tie
    assert labels["cup"] == {("a", "clean"): 0, ("a", "warp"): 1, ("a", "hole-54"): 1,
                             ("b", "clean"): 0, ("b", "warp"): 0, ("b", "hole-54"): 1}
    # tape: a is a real tie everywhere (no label); b/clean is a sim tie (H = 1)
    assert labels["tape"] == {("b", "clean"): 1, ("b", "warp"): 0, ("b", "hole-54"): 0}
    # All-three only where both tasks are rankable: scene b; H = 1 unless both agree
    assert labels[ALL_THREE] == {("b", "clean"): 1, ("b", "warp"): 0, ("b", "hole-54"): 1}
    # only cup is labelled in two scenes, so only cup is a classifier target
    methods = summary["reliability"]["methods"]
    assert set(next(iter(methods.values()))) == {"cup"}
    # LPIPS separates the cup labels once negated (tau between -0.5 and -0.2 on either fold):
    # all 6 held-out decisions right (raw, not negated, it gets 2 of 6)
    assert methods["test:lpips"]["cup"] == [6, 6]
    assert methods["test:psnr"]["cup"] == [6, 6]
    assert methods["Always reliable"]["cup"] == [3, 6]
    with open(folder / "reliability_labels.csv", newline="") as f:
        assert {r["target"] for r in csv.DictReader(f)} == {"cup"}


def test_all_three_needs_two_tasks(tables):
    _, _, counts = tables
    one = SPEC.replace(tasks=("cup",), policies={"cup": ("p1", "p2")})
    by_condition = {c: condition_pairs(one, counts, c) for c in one.all_conditions}
    assert set(reliability_labels(one, by_condition)) == {"cup"}


def test_yubi_variant_set_excludes_clean(tables):
    _, _, counts = tables
    yubi = SPEC.replace(include_clean=False)
    assert yubi.reliability_conditions == ["warp", "hole-54"]
    by_condition = {c: condition_pairs(yubi, counts, c) for c in yubi.all_conditions}
    labels = reliability_labels(yubi, by_condition)
    assert labels["cup"] == {("a", "warp"): 1, ("a", "hole-54"): 1, ("b", "warp"): 0,
                             ("b", "hole-54"): 1}
    only = SPEC.replace(include_clean=False, reliability_variants=("warp",))
    by_condition = {c: condition_pairs(only, counts, c) for c in only.all_conditions}
    assert set(reliability_labels(only, by_condition)["cup"]) == {("a", "warp"), ("b", "warp")}


def test_mmrv_and_pearson_per_condition(tables):
    import numpy as np

    folder, summary, _ = tables
    clean = next(r for r in summary["ranking"] if r["condition"] == "clean")
    # MMRV per comparison (SIMPLER, 2 policies): a/cup, b/cup agree -> 0; a/tape is a real tie
    # (gap 0) -> 0; b/tape sim tie vs real 3/4 > 1/4: pi_1's max violation 0.5, pi_2's 0 -> 0.25
    assert clean["mmrv"] == pytest.approx((0 + 0 + 0 + 0.25) / 4)
    # Pearson over the 8 clean policy cells (closed form: numpy's correlation coefficient)
    sim = [1, 0, .75, .25, .25, .5, .5, .5]
    real = [1, .25, .5, .5, 0, .75, .75, .25]
    assert clean["pearson"] == pytest.approx(np.corrcoef(sim, real)[0, 1])
    assert clean["real_source"] == "simulated-real"
    with open(folder / "ranking.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["real_source"] for r in rows} == {"simulated-real"}
    assert "simulated-real" in (folder / "ranking.md").read_text()
