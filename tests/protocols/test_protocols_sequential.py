"""Sequential e-value tests: error level under optional stopping, savings under a difference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from protocols import sequential as sq

CONFIG = sq.SequentialConfig(min_trials=10, batch_size=5, alpha=0.05)
SEQUENCES = 10_000


@pytest.mark.parametrize("method", [sq.MIXTURE, sq.SPRT])
@pytest.mark.parametrize(("rate", "copy"), [(0.5, None), (0.2, None), (0.6, 0.5)])
def test_false_decisions_under_no_difference_stay_below_alpha(method, rate, copy):
    config = sq.SequentialConfig(method=method, min_trials=1, batch_size=1, alpha=0.05)
    result = sq.simulate(rate, rate, config, max_trials=200, sequences=SEQUENCES, seed=11,
                         correlation_pi1_given_pi2=copy)
    false_rate = float(np.mean(result["decision"] != 0))
    mc_error = 3 * math.sqrt(0.05 * 0.95 / SEQUENCES)
    # looking after every single pair, 200 times: a repeated fixed test would exceed alpha
    assert false_rate <= 0.05 + mc_error


def test_repeated_fisher_looks_would_not_be_valid():
    """The reason for the e-value: re-testing a fixed-n Fisher after every batch inflates alpha."""
    from protocols.power import fisher_p_table

    rng = np.random.default_rng(3)
    x1 = rng.random((2000, 80)) < 0.5
    x2 = rng.random((2000, 80)) < 0.5
    rejected = np.zeros(2000, dtype=bool)
    for look in range(10, 81, 5):
        p = fisher_p_table(look, look)
        rejected |= p[x1[:, :look].sum(1), x2[:, :look].sum(1)] < 0.05
    assert rejected.mean() > 0.06  # well above the nominal 0.05


@pytest.mark.parametrize("method", [sq.MIXTURE, sq.SPRT])
@pytest.mark.parametrize(("p1", "p2"), [(0.8, 0.3), (0.8, 0.5), (0.3, 0.9)])
def test_expected_trials_below_the_fixed_design_and_wrong_order_rare(method, p1, p2):
    config = sq.SequentialConfig(method=method, min_trials=10, batch_size=5, alpha=0.05)
    result = sq.simulate(p1, p2, config, max_trials=80, sequences=SEQUENCES, seed=5)
    assert result["trials"].mean() < 80
    wrong = -1 if p1 > p2 else 1
    assert np.mean(result["decision"] == wrong) <= 0.025 + 3 * math.sqrt(0.025 / SEQUENCES)
    if abs(p1 - p2) >= 0.5:
        assert result["trials"].mean() < 40


def test_mixture_e_value_equals_numerical_integral():
    for s, f in [(0, 0), (5, 1), (2, 7), (30, 25)]:
        up, down = sq.log_e_values(np.array(s), np.array(f))
        integrand = lambda t, a=s, b=f: 2.0 * (2 * t) ** a * (2 * (1 - t)) ** b  # noqa: E731
        assert float(np.exp(up)) == pytest.approx(quad(integrand, 0.5, 1)[0], rel=1e-9)
        assert float(np.exp(down)) == pytest.approx(quad(integrand, 0, 0.5)[0], rel=1e-9)


def test_decide_matches_the_vectorised_simulation():
    rng = np.random.default_rng(2)
    x1 = (rng.random((300, 60)) < 0.7).astype(int)
    x2 = (rng.random((300, 60)) < 0.45).astype(int)
    config = sq.SequentialConfig(min_trials=5, batch_size=5)
    for i in range(300):
        d = sq.decide(x1[i], x2[i], config, max_trials=60)
        code = {sq.PI1: 1, sq.PI2: -1, sq.UNDECIDED: 0}[d.decision]
        s_cum = np.cumsum(x1[i] * (1 - x2[i]))
        f_cum = np.cumsum((1 - x1[i]) * x2[i])
        # plain loop over the looks, the readable reference
        expected, at = 0, 60
        for look in config.looks(60):
            up, down = sq.log_e_values(s_cum[look - 1], f_cum[look - 1])
            if max(up, down) >= math.log(40):
                expected, at = (1 if up >= math.log(40) else -1), look
                break
        assert (code, d.trials) == (expected, at)


def test_looks_and_config_errors():
    assert sq.SequentialConfig(min_trials=10, batch_size=5).looks(27) == [10, 15, 20, 25, 27]
    with pytest.raises(ValueError, match="unknown"):
        sq.SequentialConfig(method="pocock")
    with pytest.raises(ValueError, match="batch_size"):
        sq.SequentialConfig(batch_size=0)
    with pytest.raises(ValueError, match="equal-length"):
        sq.decide([1, 0], [1], CONFIG, max_trials=10)
