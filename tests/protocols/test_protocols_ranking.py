"""protocols.ranking and protocols.transitions: hand-checked examples, brute force, YUBI numbers."""

import itertools

import numpy as np
import pytest

from protocols.ranking import (
    PolicyPair,
    kendall,
    mae,
    mmrv,
    mmrv_reference,
    order_sign,
    pearson,
    rank_agreement,
    spearman,
)
from protocols.transitions import condition_transitions


def pair(label, real, sim):
    (rk1, rn1, rk2, rn2), (sk1, sn1, sk2, sn2) = real, sim
    return PolicyPair(label, rk1, rn1, rk2, rn2, sk1, sn1, sk2, sn2)


# YUBI-Real2Sim clean counts (success_rate_overall/*.csv x num_trials), Fig. 4
CLEAN = [
    pair("Duo/Cup", (18, 20, 19, 20), (21, 80, 78, 80)),
    pair("Duo/Tape", (14, 20, 6, 20), (20, 80, 2, 80)),
    pair("Duo/Pen", (17, 20, 6, 20), (25, 80, 1, 80)),
    pair("Flat/Cup", (8, 20, 7, 20), (30, 80, 59, 80)),
    pair("Flat/Tape", (19, 20, 1, 20), (50, 80, 14, 80)),
    pair("Flat/Pen", (4, 20, 0, 20), (12, 80, 0, 80)),
    pair("G2/Cup", (8, 20, 16, 20), (18, 80, 47, 80)),
    pair("G2/Tape", (20, 20, 16, 20), (15, 80, 14, 80)),
    pair("G2/Pen", (19, 20, 7, 20), (48, 80, 0, 80)),
]


def test_yubi_clean_agreement_and_mae_match_paper():
    result = rank_agreement(CLEAN)
    # paper: 8 of 9 agree (88.9%), the single inversion is Flat Cup; clean MAE 31.3889 pp
    assert (result.correct, result.eligible) == (8, 9)
    assert result.accuracy == pytest.approx(8 / 9)
    assert dict(result.outcomes)["Flat/Cup"] == "reversed"
    assert (result.reversed, result.sim_ties, result.real_ties) == (1, 0, 0)
    assert round(mae(CLEAN), 4) == 31.3889


def test_outcomes_ties_and_exact_rate_comparison():
    # 14/20 and 56/80 are the same rate: exact integer comparison must call it a tie
    assert order_sign(14, 20, 56, 80) == 0
    sim_tie = pair("a", (10, 20, 5, 20), (56, 80, 14, 20))
    real_tie = pair("b", (10, 20, 40, 80), (5, 80, 9, 80))
    result = rank_agreement([sim_tie, real_tie, CLEAN[0]])
    assert [o for _, o in result.outcomes] == ["sim_tie", "real_tie", "correct"]
    assert (result.correct, result.eligible, result.sim_ties, result.real_ties) == (1, 2, 1, 1)
    # MAE over eligible pairs only: the real tie is left out (hand: |0.5-0.7|,|0.25-0.7| -> 32.5 pp)
    assert mae([sim_tie, real_tie]) == pytest.approx(32.5)


def test_mmrv_hand_example_and_argument_order():
    # hand: only policies 1 and 2 are swapped; the violation size is the real gap |0.8 - 0.6|
    sim, real = [0.1, 0.5, 0.9], [0.2, 0.8, 0.6]
    assert mmrv(sim=sim, real=real) == pytest.approx((0 + 0.2 + 0.2) / 3)
    # swapped arguments measure the gap on the other vector: |0.5 - 0.9| -> a different number
    assert mmrv(sim=real, real=sim) == pytest.approx((0 + 0.4 + 0.4) / 3)
    # SIMPLER compares with strict '>': a sim tie against a strict real order is a violation
    assert mmrv(sim=[0.5, 0.5], real=[0.2, 0.6]) == pytest.approx(0.4 / 2)
    # the documented positional order is (sim, real), as in the issue's `mmrv(sim, real)`
    assert mmrv(sim, real) == mmrv(sim=sim, real=real)
    assert mmrv(real, sim) == mmrv(sim=real, real=sim)


def test_mmrv_zero_for_identical_orderings():
    rng = np.random.default_rng(0)
    for _ in range(20):
        real = rng.random(6)
        sim = np.sqrt(real) * 0.5 + 0.1  # strictly increasing map keeps the order
        assert mmrv(sim=sim, real=real) == 0.0


def test_mmrv_vectorised_equals_double_loop():
    rng = np.random.default_rng(1)
    for size in (2, 3, 7, 12):
        for _ in range(10):
            # rounded so that ties occur
            sim, real = np.round(rng.random(size), 1), np.round(rng.random(size), 1)
            # equal up to summation order of the final mean
            assert mmrv(sim=sim, real=real) == pytest.approx(
                mmrv_reference(sim=sim, real=real), abs=1e-12
            )


def _kendall_brute(x, y):
    pairs = list(itertools.combinations(range(len(x)), 2))
    s = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs)
    return s / len(pairs)


def test_correlations_against_hand_formulas():
    x = np.array([0.1, 0.4, 0.35, 0.8, 0.62])
    y = np.array([0.2, 0.3, 0.5, 0.9, 0.7])
    xc, yc = x - x.mean(), y - y.mean()
    assert pearson(sim=x, real=y) == pytest.approx((xc @ yc) / np.sqrt((xc @ xc) * (yc @ yc)))
    # no ties: Spearman = 1 - 6 sum d^2 / (n (n^2 - 1)); Kendall = (C - D) / (n choose 2)
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    n = len(x)
    assert spearman(sim=x, real=y) == pytest.approx(
        1 - 6 * np.sum((rx - ry) ** 2) / (n * (n * n - 1))
    )
    assert kendall(sim=x, real=y) == pytest.approx(_kendall_brute(x, y))
    assert np.isnan(pearson(sim=[0.5, 0.5, 0.5], real=[0.1, 0.2, 0.3]))


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: mmrv(sim=[0.1, 0.2], real=[0.1]), "pass one value"),
        (lambda: mmrv(sim=[0.1, float("nan")], real=[0.1, 0.2]), "finite"),
        (lambda: pearson(sim=[0.1], real=[0.2]), "at least 2"),
        (lambda: pair("x", (21, 20, 1, 20), (1, 80, 1, 80)), "exceed"),
        (lambda: pair("x", (1, 0, 1, 20), (1, 80, 1, 80)), "exceed"),
        (lambda: pair("x", (0, 0, 1, 20), (1, 80, 1, 80)), ">= 1 trial"),
        (lambda: rank_agreement([(1, 2, 3)]), "PolicyPair"),
    ],
)
def test_bad_input(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_transitions_hand_example():
    clean = [
        pair("s/a", (15, 20, 5, 20), (40, 80, 10, 80)),  # significant, correct
        pair("s/b", (15, 20, 5, 20), (12, 80, 10, 80)),  # not significant, correct
        pair("s/c", (5, 20, 15, 20), (30, 80, 20, 80)),  # reversed vs real
    ]
    cf = [
        pair("s/a", (15, 20, 5, 20), (12, 80, 10, 80)),  # loses significance, keeps order
        pair("s/b", (15, 20, 5, 20), (10, 80, 10, 80)),  # becomes a sim tie
        pair(
            "s/c", (5, 20, 15, 20), (10, 80, 40, 80)
        ),  # reversed vs clean -> now agrees, gains sig
    ]
    row = condition_transitions("cf", clean, cf)
    assert (row.sig_lost, row.sig_gained, row.reversed, row.tied) == (1, 1, 1, 1)
    assert (row.agree, row.total, row.corrected) == (2, 3, 1)


def test_transitions_require_same_comparisons_and_real_counts():
    with pytest.raises(ValueError, match="same comparisons"):
        condition_transitions("cf", CLEAN[:2], CLEAN[:1])
    other_real = [pair("Duo/Cup", (10, 20, 19, 20), (21, 80, 78, 80))]
    with pytest.raises(ValueError, match="real counts differ"):
        condition_transitions("cf", CLEAN[:1], other_real)
