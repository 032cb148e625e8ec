"""protocols.reliability: the published YUBI predictions, tie-breaks, invariances, bad input."""

import csv
from pathlib import Path

import numpy as np
import pytest

from protocols.ranking import PolicyPair
from protocols.reliability import (
    FIT_CONSTANT,
    FIT_THRESHOLD,
    ScoredCondition,
    all_tasks_label,
    candidate_thresholds,
    evaluate_methods,
    fit_threshold,
    reliability_label,
    scene_held_out_predictions,
)

DATA = Path(__file__).resolve().parents[2] / "results" / "yubi" / "data"


def _published(name):
    with open(DATA / name, newline="") as handle:
        return list(csv.DictReader(handle))


def _predict_groups(rows, transform=lambda q: q):
    out = {}
    groups = {}
    for r in rows:
        groups.setdefault((r["method"], r["target"]), []).append(r)
    for (method, target), group in groups.items():
        lower = method.startswith("LPIPS")
        items = [
            ScoredCondition(
                r["heldout_scene"], r["variant"], transform(float(r["quality"])), int(r["label"])
            )
            for r in group
        ]
        for r, p in zip(group, scene_held_out_predictions(items, lower_better=lower), strict=True):
            out[(method, target, r["heldout_scene"], r["variant"])] = p
    return out


@pytest.mark.parametrize(
    "name", ["reliability_predictions.csv", "reliability_predictions_crossscore.csv"]
)
def test_recomputed_predictions_match_published(name):
    # predictions recomputed from quality + label only; the published prediction and fit_status
    # columns are read here solely to compare
    rows = _published(name)
    mine = _predict_groups(rows)
    for r in rows:
        p = mine[(r["method"], r["target"], r["heldout_scene"], r["variant"])]
        assert p.prediction == int(r["prediction"]), r
        assert p.fit_status == r["fit_status"], r
        assert int(p.correct) == int(r["correct"])


def test_yubi_predictions_invariant_under_positive_affine_map():
    rows = _published("reliability_predictions.csv")
    base = _predict_groups(rows)
    moved = _predict_groups(rows, lambda q: 3.0 * q - 7.0)
    assert {k: p.prediction for k, p in base.items()} == {k: p.prediction for k, p in moved.items()}


def test_candidate_thresholds():
    cands = candidate_thresholds([2.0, 1.0, 2.0, 4.0])
    assert cands[:3].tolist() == [1.0, 1.5, 3.0]
    assert cands[3] > 4.0 and cands[3] == np.nextafter(4.0, np.inf)


def test_balanced_accuracy_tie_goes_to_higher_sensitivity():
    # hand: tau = 1.5 gives sens 1/2, spec 1 (BA 0.75); tau = 3.5 gives sens 1, spec 1/2 (BA 0.75)
    fit = fit_threshold([1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0])
    assert fit.status == FIT_THRESHOLD
    assert fit.threshold == 3.5
    assert fit.balanced_accuracy == pytest.approx(0.75) and fit.sensitivity == 1.0


def test_fit_finds_perfect_separation_and_predicts_below_threshold():
    fit = fit_threshold([0.1, 0.2, 0.7, 0.9], [1, 1, 0, 0])
    assert fit.threshold == pytest.approx(0.45)
    assert fit.predict([0.0, 0.44, 0.46, 5.0]).tolist() == [1, 1, 0, 0]


def test_single_class_training_predicts_that_class():
    for label in (0, 1):
        fit = fit_threshold([0.1, 0.5, 0.9], [label] * 3)
        assert fit.status == FIT_CONSTANT and fit.threshold is None
        assert fit.predict([-100.0, 100.0]).tolist() == [label, label]


def test_training_partition_invariant_under_monotone_transforms():
    rng = np.random.default_rng(4)
    for _ in range(50):
        q = rng.normal(size=12)
        y = rng.integers(0, 2, size=12)
        if y.min() == y.max():
            continue
        base = fit_threshold(q, y).predict(q)
        for f in (np.exp, lambda v: v**3, lambda v: np.arctan(v) * 10 + 2):
            assert fit_threshold(f(q), y).predict(f(q)).tolist() == base.tolist()


def test_lower_better_orientation_negates():
    rows = [
        ScoredCondition(s, v, q, y)
        for s, v, q, y in [
            ("A", "v1", 0.1, 0),
            ("A", "v2", 0.9, 1),
            ("B", "v1", 0.2, 0),
            ("B", "v2", 0.8, 1),
            ("C", "v1", 0.15, 0),
            ("C", "v2", 0.85, 1),
        ]
    ]
    # LPIPS-like: high raw score = bad = unreliable, so negation makes the rule perfect
    good = scene_held_out_predictions(rows, lower_better=True)
    assert all(p.correct for p in good)
    # with the wrong direction no threshold separates the classes; the BA tie between "none" and
    # "all unreliable" goes to the higher sensitivity: tau = just above the training maximum
    # (0.85 for fold A, 0.9 for B and C), so only A's 0.9 escapes the H = 1 prediction
    bad = scene_held_out_predictions(rows, lower_better=False)
    assert [p.prediction for p in bad] == [1, 0, 1, 1, 1, 1]
    assert sum(p.correct for p in bad) == 2


def test_labels_from_pairs():
    agree = PolicyPair("a", 15, 20, 5, 20, 40, 80, 10, 80)
    tie = PolicyPair("b", 15, 20, 5, 20, 10, 80, 10, 80)
    reverse = PolicyPair("c", 15, 20, 5, 20, 10, 80, 40, 80)
    assert [reliability_label(p) for p in (agree, tie, reverse)] == [0, 1, 1]
    assert all_tasks_label([0, 0, 0]) == 0 and all_tasks_label([0, 1, 0]) == 1
    with pytest.raises(ValueError, match="real tie"):
        reliability_label(PolicyPair("d", 5, 20, 5, 20, 1, 80, 2, 80))


def test_evaluate_methods_and_always_reliable_baseline():
    scores = {"PSNR": {("A", "x"): 20.0, ("A", "y"): 10.0, ("B", "x"): 21.0, ("B", "y"): 11.0}}
    labels = {"Cup": {("A", "x"): 0, ("A", "y"): 1, ("B", "x"): 0, ("B", "y"): 1}}
    results, preds = evaluate_methods(scores, labels)
    assert results[0].correct == {"Cup": 4} and results[0].total == {"Cup": 4}
    assert results[1].method == "Always reliable" and results[1].correct == {"Cup": 2}
    assert len(preds[("PSNR", "Cup")]) == 4


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: fit_threshold([0.1, 0.2], [0, 2]), "labels must be 0"),
        (lambda: fit_threshold([0.1, float("nan")], [0, 1]), "finite"),
        (lambda: fit_threshold([0.1], [0, 1]), "equal length"),
        (
            lambda: scene_held_out_predictions(
                [ScoredCondition("A", "v", 1.0, 0)], lower_better=False
            ),
            "at least 2 scenes",
        ),
        (
            lambda: scene_held_out_predictions(
                [ScoredCondition("A", "v", 1.0, 0), ScoredCondition("A", "v", 2.0, 1)],
                lower_better=False,
            ),
            "once per method",
        ),
        (
            lambda: evaluate_methods({"PSNR": {("A", "x"): 1.0}}, {"Cup": {("B", "x"): 0}}),
            "no score",
        ),
        (
            lambda: evaluate_methods({"mystery": {("A", "x"): 1.0}}, {"Cup": {("A", "x"): 0}}),
            "unknown direction",
        ),
    ],
)
def test_bad_input(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()
