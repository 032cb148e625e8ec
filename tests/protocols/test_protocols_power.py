"""Exact trial planning: vectorised Fisher p against scipy, enumeration against Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from protocols import power
from protocols.stats import wilson_interval


@pytest.mark.parametrize("n", [1, 2, 3, 7, 12, 20, 33])
def test_fisher_p_table_equals_scipy_table_by_table(n):
    fast = power.fisher_p_table(n, n)
    reference = power.fisher_p_table_reference(n, n)
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12)
    for alpha in (0.01, 0.05, 0.1):
        region = power.fisher_rejection_region(n, n, alpha=alpha)
        # p == alpha exactly (within 1e-10) is not significant; elsewhere scipy's decision
        clear = np.abs(reference - alpha) > 1e-10 * alpha
        assert np.array_equal(region[clear], (reference < alpha)[clear])


@pytest.mark.parametrize(("n1", "n2"), [(5, 9), (12, 7), (20, 20)])
def test_unequal_rows_also_match_scipy(n1, n2):
    np.testing.assert_allclose(power.fisher_p_table(n1, n2),
                               power.fisher_p_table_reference(n1, n2), atol=1e-12)


def test_boundary_p_equal_to_alpha_is_not_significant():
    # 0/3 vs 3/3: two-sided Fisher p = 2 / C(6, 3) = 0.1 exactly
    assert not power.fisher_rejection_region(3, 3, alpha=0.1)[0, 3]
    assert power.fisher_rejection_region(3, 3, alpha=0.1 + 1e-6)[0, 3]


def _monte_carlo(p1, p2, n, draws, seed):
    rng = np.random.default_rng(seed)
    k1 = rng.binomial(n, p1, draws)
    k2 = rng.binomial(n, p2, draws)
    p = power.fisher_p_table_reference(n, n)  # scipy decisions, table by table
    return k1, k2, p[k1, k2]


@pytest.mark.parametrize(("p1", "p2", "n"), [(0.8, 0.5, 20), (0.9, 0.3, 12), (0.5, 0.5, 15)])
def test_power_and_sign_probability_match_brute_force_simulation(p1, p2, n):
    draws = 40_000
    k1, k2, p = _monte_carlo(p1, p2, n, draws, seed=7)
    exact_power = float(power.fisher_power(p1, p2, n))
    sim_power = float(np.mean(p < 0.05))
    se = math.sqrt(exact_power * (1 - exact_power) / draws) + 1e-9
    assert abs(sim_power - exact_power) < 4.5 * se + 1e-4
    if p1 != p2:
        exact_sign = float(power.sign_probability(p1, p2, n))
        sim_sign = float(np.mean(np.sign(k1 - k2) == np.sign(p1 - p2)))
        assert abs(sim_sign - exact_sign) < 4.5 * math.sqrt(exact_sign * (1 - exact_sign)
                                                             / draws)
    else:
        assert math.isnan(float(power.sign_probability(p1, p2, n)))
        # under equal rates the power is the test's size: at most alpha
        assert exact_power <= 0.05


def test_sign_probability_closed_forms():
    # n = 1: right order iff K1 = 1 and K2 = 0 -> p1 (1 - p2)
    assert float(power.sign_probability(0.7, 0.2, 1)) == pytest.approx(0.7 * 0.8, abs=1e-15)
    # n = 2: P(K1 > K2) = P(K1 >= 1) P(K2 = 0) + P(K1 = 2) P(K2 = 1)
    p1, p2 = 0.6, 0.3
    expected = (1 - 0.4**2) * 0.7**2 + 0.6**2 * 2 * 0.3 * 0.7
    assert float(power.sign_probability(p1, p2, 2)) == pytest.approx(expected, abs=1e-15)
    assert float(power.sign_probability(p2, p1, 2)) == pytest.approx(expected, abs=1e-15)


def test_fisher_power_closed_form_small_n():
    # n = 3 at alpha = 0.1 + 1e-6: only 0/3 vs 3/3 (either way) is significant
    region = power.fisher_rejection_region(3, 3, alpha=0.1 + 1e-6)
    assert sorted(map(tuple, np.argwhere(region))) == [(0, 3), (3, 0)]
    p1, p2 = 0.9, 0.2
    expected = p1**3 * (1 - p2) ** 3 + (1 - p1) ** 3 * p2**3
    assert float(power.fisher_power(p1, p2, 3, alpha=0.1 + 1e-6)) == pytest.approx(expected)


def test_expected_wilson_half_width_is_the_binomial_average_of_wilson_interval():
    n, p = 17, 0.35
    expected = sum(binom.pmf(k, n, p) * wilson_interval(k, n).width / 2 for k in range(n + 1))
    assert float(power.expected_wilson_half_width(p, n)) == pytest.approx(expected, abs=1e-14)
    # p = 0 and p = 1: K is certain, the half-width is that of 0/n
    assert float(power.expected_wilson_half_width(0.0, n)) == pytest.approx(
        wilson_interval(0, n).width / 2, abs=1e-15)


def test_plan_is_the_smallest_n_reaching_each_target():
    targets = power.PlanTargets(max_trials=150)
    plan = power.plan_pairs([0.8], [0.5], targets)[0]
    curve = power.fisher_power_curve([0.8], [0.5], range(1, 60))[:, 0]
    assert plan.fisher_trials == 1 + int(np.argmax(curve >= 0.8)) == 44
    assert plan.fisher_power == pytest.approx(curve[43])
    sign = power.sign_probability_curve([0.8], [0.5], range(1, 30))[:, 0]
    assert plan.sign_trials == 1 + int(np.argmax(sign >= 0.9))
    widths = [float(power.expected_wilson_half_width(0.5, n)) for n in range(1, 150)]
    assert plan.wilson_trials == 1 + int(np.argmax(np.array(widths) <= 0.1))
    tie = power.plan_pairs([0.5], [0.5], targets)[0]
    assert (tie.fisher_trials, tie.sign_trials) == (0, 0)  # no difference to find


def test_assurance_tends_to_plug_in_power_for_a_large_pilot():
    n = 30
    plug = float(power.fisher_power(0.8, 0.4, n))
    big = float(power.fisher_assurance(([8000], [10000]), ([4000], [10000]), n)[0])
    small = float(power.fisher_assurance(([8], [10]), ([4], [10]), n)[0])
    assert big == pytest.approx(plug, abs=5e-3)
    assert small < plug  # pilot uncertainty lowers the expected power here


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"alpha": 0.0}, "alpha"), ({"power": 1.0}, "power"), ({"max_trials": 0}, "max_trials"),
])
def test_bad_targets(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        power.PlanTargets(**kwargs)
    with pytest.raises(ValueError, match="success rate"):
        power.fisher_power(1.2, 0.5, 10)
