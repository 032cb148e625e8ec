"""protocols.stats: golden values from independent sources, properties, bad input."""

import math

import numpy as np
import pytest

from protocols.stats import (
    beta_posterior,
    clopper_pearson_interval,
    fisher_exact_p,
    paired_bootstrap_ci,
    wilson_interval,
)

# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Stat. Med. 17,
# Table I: method 3 (Wilson score, no continuity correction) and method 5 (Clopper-Pearson exact),
# 95%, printed to 4 decimals.
NEWCOMBE = [
    # k, n, wilson_low, wilson_high, exact_low, exact_high
    (81, 263, 0.2553, 0.3662, 0.2527, 0.3676),
    (15, 148, 0.0624, 0.1605, 0.0578, 0.1617),
    (0, 20, 0.0000, 0.1611, 0.0000, 0.1684),
    (1, 29, 0.0061, 0.1718, 0.0009, 0.1776),
    (29, 29, 0.8830, 1.0000, 0.8806, 1.0000),
]


@pytest.mark.parametrize(("k", "n", "wl", "wh", "el", "eh"), NEWCOMBE)
def test_intervals_match_newcombe_table(k, n, wl, wh, el, eh):
    wilson = wilson_interval(k, n)
    exact = clopper_pearson_interval(k, n)
    assert (round(wilson.low, 4), round(wilson.high, 4)) == (wl, wh)
    assert (round(exact.low, 4), round(exact.high, 4)) == (el, eh)
    assert wilson.method == "wilson" and exact.method == "clopper-pearson"


def test_wilson_closed_form_by_hand():
    # closed form with z = 1.959963984540054 (the 0.975 normal quantile), written out here
    k, n, z = 8, 20, 1.959963984540054
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
    ci = wilson_interval(k, n)
    assert ci.low == pytest.approx(centre - half, abs=1e-12)
    assert ci.high == pytest.approx(centre + half, abs=1e-12)


def _binom_tail_ge(k, n, p):
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _bisect(f, lo=0.0, hi=1.0):
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize(("k", "n"), [(3, 17), (12, 20), (47, 80)])
def test_clopper_pearson_inverts_binomial_tails(k, n):
    # brute force: low solves P(X >= k | p) = 0.025, high solves P(X <= k | p) = 0.025
    low = _bisect(lambda p: _binom_tail_ge(k, n, p) - 0.025)
    high = _bisect(lambda p: 0.025 - (1 - _binom_tail_ge(k + 1, n, p)))
    ci = clopper_pearson_interval(k, n)
    assert ci.low == pytest.approx(low, abs=1e-9)
    assert ci.high == pytest.approx(high, abs=1e-9)


def _fisher_brute_force(k1, n1, k2, n2):
    # two-sided: sum of hypergeometric probabilities not larger than the observed table's
    total_k, total_n = k1 + k2, n1 + n2
    denom = math.comb(total_n, total_k)
    probs = {
        a: math.comb(n1, a) * math.comb(n2, total_k - a) / denom
        for a in range(max(0, total_k - n2), min(n1, total_k) + 1)
    }
    observed = probs[k1]
    return min(1.0, sum(p for p in probs.values() if p <= observed * (1 + 1e-7)))


@pytest.mark.parametrize(
    ("counts", "paper_p"),
    [
        # p-values printed in YUBI-Real2Sim Sec. V-B (Duo Pen Hole 90, G2 Tape clean,
        # G2 Tape Hole 54, G2 Tape Warping)
        ((7, 80, 4, 80), 0.534),
        ((15, 80, 14, 80), 1.0),
        ((1, 80, 9, 80), 0.018),
        ((14, 80, 5, 80), 0.048),
    ],
)
def test_fisher_matches_paper_and_brute_force(counts, paper_p):
    p = fisher_exact_p(*counts)
    assert round(p, 3) == paper_p
    assert p == pytest.approx(_fisher_brute_force(*counts), rel=1e-9)


def test_fisher_paper_tiny_p():
    # YUBI-Real2Sim: Duo Pen clean 25/80 vs 1/80 has p < 0.001
    assert fisher_exact_p(25, 80, 1, 80) < 0.001


def test_wilson_contains_rate_and_narrows_with_n():
    for k, n in [(0, 5), (1, 5), (5, 5), (7, 20), (33, 80)]:
        ci = wilson_interval(k, n)
        assert ci.low <= k / n <= ci.high
        assert 0.0 <= ci.low <= ci.high <= 1.0
    widths = [wilson_interval(3 * m, 10 * m).width for m in (1, 2, 4, 8, 16)]
    assert all(a > b for a, b in zip(widths, widths[1:], strict=False))


def test_confidence_widens_interval():
    assert wilson_interval(7, 20, confidence=0.99).width > wilson_interval(7, 20).width
    assert (
        clopper_pearson_interval(7, 20, confidence=0.8).width
        < clopper_pearson_interval(7, 20).width
    )


def test_beta_posterior_uniform_prior():
    post = beta_posterior(3, 10)
    assert (post.alpha, post.beta) == (4.0, 8.0)
    assert post.mean == pytest.approx(1 / 3)
    ci = post.credible_interval(0.95)
    assert ci.low < post.mean < ci.high
    draws = post.sample(np.random.default_rng(0), 20000)
    assert draws.mean() == pytest.approx(1 / 3, abs=0.01)


def test_paired_bootstrap_deterministic_and_exact_for_constant_shift():
    rng = np.random.default_rng(1)
    a = rng.normal(size=30)
    first = paired_bootstrap_ci(a, a - 0.5, n_resamples=500, seed=3)
    assert first.estimate == pytest.approx(0.5)
    assert first.low == pytest.approx(0.5) and first.high == pytest.approx(0.5)
    b = a + rng.normal(scale=0.3, size=30)
    one = paired_bootstrap_ci(a, b, "pearson", n_resamples=400, seed=7)
    two = paired_bootstrap_ci(a, b, "pearson", n_resamples=400, seed=7)
    assert one == two
    assert one.low <= one.estimate <= one.high


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: wilson_interval(5, 3), "exceed"),
        (lambda: wilson_interval(-1, 3), ">= 0"),
        (lambda: wilson_interval(1.5, 3), "whole number"),
        (lambda: wilson_interval(0, 0), "at least one trial"),
        (lambda: wilson_interval(1, 3, confidence=95), "between 0 and 1"),
        (lambda: clopper_pearson_interval(4, 2), "exceed"),
        (lambda: fisher_exact_p(3, 2, 1, 2), "exceed"),
        (lambda: fisher_exact_p(0, 0, 1, 2), "at least one trial"),
        (lambda: beta_posterior(1, 2, prior=(0, 1)), "> 0"),
        (lambda: paired_bootstrap_ci([1, 2], [1], seed=0), "pass one value"),
        (lambda: paired_bootstrap_ci([1, 2, 3], [1, 2, 3], n_resamples=10, seed=0), ">= 100"),
        (lambda: paired_bootstrap_ci([1, 2, 3], [1, 2, 3], "median", seed=0), "unknown statistic"),
    ],
)
def test_bad_input_raises_value_error_with_fix(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_numpy_integer_counts_accepted():
    assert wilson_interval(np.int64(3), np.int32(10)) == wilson_interval(3, 10)
