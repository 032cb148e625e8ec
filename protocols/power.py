"""How many rollouts does a ranking need? Exact trial planning for two success rates.

Three questions, each answered for ``n`` trials per policy (equal allocation) by
enumerating every pair of binomial outcomes ``(K1, K2)``, never by a normal
approximation:

* **Fisher power**: ``P(two-sided Fisher exact p < alpha)`` when
  ``K1 ~ Bin(n, p1)`` and ``K2 ~ Bin(n, p2)``. The rejection region of every
  table ``[[k1, n - k1], [k2, n - k2]]`` is computed once per ``(n, alpha)`` with
  scipy's own two-sided rule (sum the hypergeometric probabilities that do not
  exceed the observed one, relative tolerance ``1e-14``), so the decisions are
  those of :func:`protocols.stats.fisher_exact_p` (tested table by table). The
  bench calls a difference significant when ``p < alpha`` (as
  :mod:`protocols.transitions` does); a p-value that equals ``alpha`` exactly
  (within a relative 1e-10, where the order of summation decides the last bit)
  is not significant.
* **Sign probability**: ``P(sign(K1 - K2) = sign(p1 - p2))``, the chance that
  the simulated ranking of the two policies comes out the right way round;
  a tie ``K1 = K2`` counts as wrong, as in :mod:`protocols.ranking`.
* **Wilson half-width**: the expected half-width ``E[(high - low) / 2]`` of the
  95% Wilson interval (:func:`protocols.stats.wilson_bounds`) of one policy's
  rate, the expectation over ``K ~ Bin(n, p)``.

``trials_needed`` scans ``n = 1, 2, ...`` and returns the smallest ``n`` that meets
the target. Fisher power is not monotone in ``n`` (the test is discrete, its size
jumps as ``n`` grows), so a few ``n`` above the returned one can fall back below
the target; :func:`fisher_power_curve` shows the whole curve.

Pilot counts enter either as point estimates (``p = k / n``) or through the
posterior predictive: with a uniform prior the rate after ``k`` of ``m`` pilot
successes is ``Beta(k + 1, m - k + 1)``, the future count ``K`` is beta-binomial,
and the same enumeration gives the *assurance* (the expected power over what the
pilot leaves uncertain).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from protocols._validate import check_confidence, check_count
from protocols.stats import wilson_bounds

#: scipy.stats.fisher_exact's relative tolerance for "as or less probable" tables.
FISHER_GAMMA = 1.0 + 1e-14
DEFAULT_MAX_TRIALS = 2000
#: p-values within this relative distance below alpha count as equal to alpha (not significant).
ALPHA_MARGIN = 1e-10


def _check_rate(name: str, value: float) -> float:
    rate = float(value)
    if not 0.0 <= rate <= 1.0:  # also refuses NaN
        raise ValueError(f"{name} = {value!r} is not a success rate; pass a fraction in [0, 1]")
    return rate


def _check_alpha(alpha: float) -> float:
    value = float(alpha)
    if not 0.0 < value < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}; e.g. 0.05")
    return value


def _check_n(n: int) -> int:
    value = check_count("n", n)
    if value < 1:
        raise ValueError("n must be >= 1 trial per policy")
    return value


@lru_cache(maxsize=256)
def _fisher_region_cached(n1: int, n2: int, alpha: float) -> np.ndarray:
    p = fisher_p_table(n1, n2)
    # p exactly at alpha (e.g. 0/3 vs 3/3 at alpha = 0.1) is not significant; summation order
    # moves such a p by an ulp either way, so compare with a relative margin of 1e-10
    region = p < alpha * (1.0 - ALPHA_MARGIN)
    region.setflags(write=False)
    return region


def fisher_p_table(n1: int, n2: int) -> np.ndarray:  # [n1 + 1, n2 + 1]
    """Two-sided Fisher p of every table ``[[k1, n1 - k1], [k2, n2 - k2]]`` at once.

    Conditional on the total ``m = k1 + k2``, ``k1`` is hypergeometric; the
    two-sided p sums the probabilities of the tables with the same margins that
    are at most ``pmf(k1) * (1 + 1e-14)`` (scipy's rule; a table as probable as
    the mode gets p = 1, and so does a table with an empty column).

    Args:
        n1: Trials of the first policy (>= 1).
        n2: Trials of the second policy (>= 1).

    Returns:
        ``p[k1, k2]``, float64.
    """
    n1, n2 = _check_n(n1), _check_n(n2)
    if n1 == n2:
        return _fisher_p_equal_rows(n1)
    from scipy.stats import hypergeom

    k1_all, k2_all = np.arange(n1 + 1), np.arange(n2 + 1)
    totals = k1_all[:, None] + k2_all[None, :]  # [n1 + 1, n2 + 1]
    # one vectorised call: the probabilities scipy.stats.fisher_exact uses per table
    pmf_table = hypergeom.pmf(k1_all[:, None], n1 + n2, n1, totals)
    p = np.ones((n1 + 1, n2 + 1), dtype=np.float64)
    for m in range(1, n1 + n2):  # m = 0 and m = n1 + n2 have an empty column: p = 1
        k1 = np.arange(max(0, m - n2), min(n1, m) + 1)
        pmf = pmf_table[k1, m - k1]  # [S]
        ordered = np.sort(pmf)
        cumulative = np.cumsum(ordered)
        index = np.searchsorted(ordered, pmf * FISHER_GAMMA, side="right") - 1
        values = np.minimum(cumulative[index], 1.0)
        # scipy: a table as probable as its mode (scipy's formula for it) has p = 1 exactly
        pmode = pmf_table[(mode := (m + 1) * (n1 + 1) // (n1 + n2 + 2)), m - mode]
        values[np.abs(pmf - pmode) / np.maximum(pmf, pmode) <= 1e-14] = 1.0
        p[k1, m - k1] = values
    return p


def _fisher_p_equal_rows(n: int) -> np.ndarray:  # [n + 1, n + 1]
    """Equal rows: ``p = min(1, 2 P(K1 <= min(k1, k2) | m))``, every table in O(n^2).

    With ``n`` trials in both rows the hypergeometric law of ``K1`` given
    ``m = k1 + k2`` is symmetric (``pmf(j) = pmf(m - j)``) and unimodal, so the
    tables at most as probable as the observed one are exactly the two tails beyond
    it: the two-sided p is twice the smaller tail (capped at 1; a table at the mode
    gets 1), the same set scipy's relative-tolerance rule selects.
    """
    k = np.arange(n + 1)
    log_rows = _log_choose(n, k)  # [n + 1]
    m = np.arange(2 * n + 1)[:, None]  # [2n + 1, 1]
    k2 = m - k[None, :]  # [2n + 1, n + 1]
    inside = (k2 >= 0) & (k2 <= n)
    log_pmf = log_rows[None, :] + log_rows[np.clip(k2, 0, n)] - _log_choose(2 * n, m)
    by_total = np.where(inside, np.exp(log_pmf), 0.0)  # [m, k1]: P(K1 = k1 | m)
    lower_tail = np.cumsum(by_total, axis=1)  # P(K1 <= k1 | m)
    totals = k[:, None] + k[None, :]
    smaller = np.minimum(k[:, None], k[None, :])
    return np.minimum(1.0, 2.0 * lower_tail[totals, smaller])


def _log_choose(n: int, k: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def fisher_p_table_reference(n1: int, n2: int) -> np.ndarray:  # [n1 + 1, n2 + 1]
    """Plain reference: ``scipy.stats.fisher_exact`` called on every table."""
    from scipy.stats import fisher_exact

    p = np.empty((n1 + 1, n2 + 1), dtype=np.float64)
    for k1 in range(n1 + 1):
        for k2 in range(n2 + 1):
            p[k1, k2] = fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
    return p


def fisher_rejection_region(n1: int, n2: int, *, alpha: float = 0.05) -> np.ndarray:
    """Boolean ``[n1 + 1, n2 + 1]``: tables with two-sided Fisher ``p < alpha`` (cached)."""
    return _fisher_region_cached(_check_n(n1), _check_n(n2), _check_alpha(alpha))


def binomial_pmf(n: int, rates: Sequence[float]) -> np.ndarray:  # [n + 1, G]
    """``P(K = k)`` for ``K ~ Bin(n, p)``, one column per rate."""
    from scipy.stats import binom

    r = np.asarray(rates, dtype=np.float64)
    return binom.pmf(np.arange(n + 1)[:, None], n, r[None, :])


def beta_binomial_pmf(n: int, successes: Sequence[int], trials: Sequence[int]
                      ) -> np.ndarray:  # [n + 1, G]
    """Posterior predictive of ``K`` in ``n`` new trials after ``k`` of ``m`` pilot successes.

    Uniform prior: the rate is ``Beta(k + 1, m - k + 1)`` and ``K`` beta-binomial.
    """
    from scipy.stats import betabinom

    k = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    return betabinom.pmf(np.arange(n + 1)[:, None], n, (k + 1.0)[None, :],
                         (m - k + 1.0)[None, :])


def _pair_probability(region: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``sum_{k1, k2} region[k1, k2] first[k1, g] second[k2, g]`` per column g."""
    return np.einsum("ig,ij,jg->g", first, region.astype(np.float64), second)


def _sign_region(n: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(n + 1)
    return k[:, None] > k[None, :], k[:, None] < k[None, :]


def fisher_power(p1: Sequence[float] | float, p2: Sequence[float] | float, n: int, *,
                 alpha: float = 0.05) -> np.ndarray:  # [G]
    """Exact power of the two-sided Fisher test with ``n`` trials per policy.

    Args:
        p1: Success rate(s) of the first policy (scalar or ``[G]``).
        p2: Success rate(s) of the second policy, same shape.
        n: Trials per policy.
        alpha: Significance level (``p < alpha`` rejects).

    Returns:
        ``[G]`` probabilities (a 0-d array for scalar rates).
    """
    r1, r2, scalar = _rate_vectors(p1, p2)
    region = fisher_rejection_region(n, n, alpha=alpha)
    power = _pair_probability(region, binomial_pmf(n, r1), binomial_pmf(n, r2))
    return power[0] if scalar else power


def sign_probability(p1: Sequence[float] | float, p2: Sequence[float] | float,
                     n: int) -> np.ndarray:  # [G]
    """``P(sign(K1 - K2) = sign(p1 - p2))`` with ``n`` trials each; NaN where ``p1 == p2``.

    A tie ``K1 = K2`` counts as a wrong sign (as a simulated tie does in the ranking).
    """
    r1, r2, scalar = _rate_vectors(p1, p2)
    n = _check_n(n)
    greater, less = _sign_region(n)
    b1, b2 = binomial_pmf(n, r1), binomial_pmf(n, r2)
    result = np.where(r1 > r2, _pair_probability(greater, b1, b2),
                      _pair_probability(less, b1, b2))
    result = np.where(r1 == r2, np.nan, result)
    return result[0] if scalar else result


def expected_wilson_half_width(p: Sequence[float] | float, n: int, *,
                               confidence: float = 0.95) -> np.ndarray:  # [G]
    """``E[(high - low) / 2]`` of the Wilson interval over ``K ~ Bin(n, p)`` (exact sum)."""
    rates = np.atleast_1d(np.asarray(p, dtype=np.float64))
    for value in rates:
        _check_rate("p", value)
    n = _check_n(n)
    k = np.arange(n + 1)
    low, high = wilson_bounds(k, n, confidence=confidence)  # [n + 1]
    result = ((high - low) / 2.0) @ binomial_pmf(n, rates)
    return result[0] if np.ndim(p) == 0 else result


def _rate_vectors(p1, p2) -> tuple[np.ndarray, np.ndarray, bool]:
    scalar = np.ndim(p1) == 0 and np.ndim(p2) == 0
    r1 = np.atleast_1d(np.asarray(p1, dtype=np.float64))
    r2 = np.atleast_1d(np.asarray(p2, dtype=np.float64))
    if r1.shape != r2.shape or r1.ndim != 1:
        raise ValueError(f"p1 and p2 must have the same length, got {r1.size} and {r2.size}")
    for name, values in (("p1", r1), ("p2", r2)):
        for value in values:
            _check_rate(name, value)
    return r1, r2, scalar


@dataclass(frozen=True)
class PlanTargets:
    """What a plan asks for (one typed config, the single source of the defaults).

    Attributes:
        alpha: Two-sided Fisher significance level.
        power: Target probability that Fisher finds the difference (``p < alpha``).
        sign_probability: Target probability that the simulated order is right.
        half_width: Target expected Wilson half-width of each policy's rate.
        confidence: Confidence of the Wilson interval.
        max_trials: Largest ``n`` per policy searched.
    """

    alpha: float = 0.05
    power: float = 0.8
    sign_probability: float = 0.9
    half_width: float = 0.1
    confidence: float = 0.95
    max_trials: int = 500

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        for name in ("power", "sign_probability", "half_width"):
            value = float(getattr(self, name))
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
        check_confidence(self.confidence)
        if check_count("max_trials", self.max_trials) < 1 or self.max_trials > DEFAULT_MAX_TRIALS:
            raise ValueError(f"max_trials must be in 1..{DEFAULT_MAX_TRIALS}, got "
                             f"{self.max_trials}; larger plans are better done in closed form")


def _first_n(values_of_n, target_met, possible: np.ndarray, max_trials: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Scan n = 1..max_trials; per column the first n where ``target_met(values)`` holds.

    ``values_of_n(n, columns)`` evaluates only the columns still searched;
    columns not ``possible`` are never searched (0 = not reached).
    """
    found = np.zeros(possible.size, dtype=np.int64)
    at_found = np.full(possible.size, np.nan)
    for n in range(1, max_trials + 1):
        columns = np.flatnonzero(possible & (found == 0))
        if columns.size == 0:
            break
        values = values_of_n(n, columns)
        hit = target_met(values)
        found[columns[hit]] = n
        at_found[columns[hit]] = values[hit]
    return found, at_found


@dataclass(frozen=True)
class PairPlan:
    """Trials per policy for one pair of rates (0 = not reached within ``max_trials``).

    Attributes:
        p1: Rate of the first policy.
        p2: Rate of the second policy.
        fisher_trials: Smallest ``n`` with Fisher power >= target.
        fisher_power: Power at that ``n``.
        sign_trials: Smallest ``n`` with sign probability >= target.
        sign_probability: Probability at that ``n``.
        wilson_trials: Smallest ``n`` with both expected Wilson half-widths <= target.
        wilson_half_width: The larger expected half-width at that ``n``.
    """

    p1: float
    p2: float
    fisher_trials: int
    fisher_power: float
    sign_trials: int
    sign_probability: float
    wilson_trials: int
    wilson_half_width: float


def plan_pairs(p1: Sequence[float], p2: Sequence[float], targets: PlanTargets
               ) -> list[PairPlan]:
    """Smallest trials per policy for each ``(p1[g], p2[g])`` and every target.

    Pairs with ``p1 == p2`` have no difference to find: their Fisher and sign
    trials are 0 (never reached) by definition.
    """
    r1, r2, _ = _rate_vectors(p1, p2)
    count, cap = r1.size, targets.max_trials
    differ = r1 != r2
    fisher_n, fisher_at = fisher_trials(r1, r2, alpha=targets.alpha, power=targets.power,
                                        max_trials=cap)
    sign_n, sign_at = _first_n(
        lambda n, c: np.atleast_1d(sign_probability(r1[c], r2[c], n)),
        lambda v: v >= targets.sign_probability, differ, cap)

    def widest(n: int, c: np.ndarray) -> np.ndarray:
        widths = expected_wilson_half_width(np.concatenate([r1[c], r2[c]]), n,
                                            confidence=targets.confidence)
        return np.maximum(widths[:c.size], widths[c.size:])

    wilson_n, wilson_at = _first_n(widest, lambda v: v <= targets.half_width,
                                   np.ones(count, dtype=bool), cap)
    return [PairPlan(float(r1[g]), float(r2[g]), int(fisher_n[g]), float(fisher_at[g]),
                     int(sign_n[g]), float(sign_at[g]), int(wilson_n[g]), float(wilson_at[g]))
            for g in range(count)]


def fisher_trials(p1: Sequence[float], p2: Sequence[float], *, alpha: float = 0.05,
                  power: float = 0.8, max_trials: int = 500
                  ) -> tuple[np.ndarray, np.ndarray]:  # [G] int, [G] float
    """Smallest ``n`` per policy with Fisher power >= ``power`` per rate pair, and that power.

    The scan of ``n = 1..max_trials`` behind ``bench plan trials``' ``fisher_trials`` column
    (:func:`plan_pairs`) and the study's UNDERPOWERED verdict (:func:`power_verdicts`): one
    function, so both say the same. 0 (and NaN power) = not reached by ``max_trials``, or
    equal rates (no difference to find). The first ``n`` found does not depend on
    ``max_trials`` as long as it is within it.
    """
    r1, r2, _ = _rate_vectors(p1, p2)
    return _first_n(lambda n, c: np.atleast_1d(fisher_power(r1[c], r2[c], n, alpha=alpha)),
                    lambda v: v >= power, r1 != r2, max_trials)


#: Verdicts of :func:`power_verdicts`.
POWERED = "powered"
UNDERPOWERED = "UNDERPOWERED"
NO_GAP = "no gap"


@dataclass(frozen=True)
class PowerVerdict:
    """Could a comparison's trials detect its observed gap?

    Attributes:
        power: Exact Fisher power at the observed rates with ``trials`` per policy.
        trials: Trials per policy of the comparison (the smaller of the two).
        trials_needed: Smallest ``n`` with power >= the target (:func:`fisher_trials`, as
            ``bench plan trials`` says), 0 when more than ``trials`` are needed or the rates
            are equal.
        verdict: :data:`POWERED` (``trials_needed <= trials``), :data:`UNDERPOWERED`, or
            :data:`NO_GAP` (equal observed rates: nothing to detect).
    """

    power: float
    trials: int
    trials_needed: int
    verdict: str


def power_verdicts(counts: Sequence[tuple[int, int, int, int]], *, alpha: float = 0.05,
                   power: float = 0.8) -> list[PowerVerdict]:
    """Per ``(k1, n1, k2, n2)``: can the trials detect the observed gap at ``power``?

    The question: does two-sided Fisher (``p < alpha``) with ``min(n1, n2)`` trials per
    policy have at least ``power`` at the rates ``k1/n1`` and ``k2/n2``?
    UNDERPOWERED exactly when ``bench plan trials --p1 k1/n1 --p2 k2/n2 --alpha A --power P``
    needs more than ``min(n1, n2)`` trials per policy: the scan is :func:`fisher_trials`
    with ``max_trials = min(n1, n2)``, the function behind that command's column.
    """
    rows = [(int(k1), int(n1), int(k2), int(n2)) for k1, n1, k2, n2 in counts]
    for k1, n1, k2, n2 in rows:
        if min(n1, n2) < 1 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
            raise ValueError(f"counts {k1}/{n1} vs {k2}/{n2} are not successes out of >= 1 "
                             "trials; pass 0 <= k <= n, n >= 1")
    out: list[PowerVerdict | None] = [None] * len(rows)
    for n in sorted({min(n1, n2) for _, n1, _, n2 in rows}):  # one scan per trial count
        index = [i for i, (_, n1, _, n2) in enumerate(rows) if min(n1, n2) == n]
        r1 = np.array([rows[i][0] / rows[i][1] for i in index])
        r2 = np.array([rows[i][2] / rows[i][3] for i in index])
        needed, _ = fisher_trials(r1, r2, alpha=alpha, power=power, max_trials=n)
        at_n = np.atleast_1d(fisher_power(r1, r2, n, alpha=alpha))
        for j, i in enumerate(index):
            verdict = NO_GAP if r1[j] == r2[j] else (POWERED if needed[j] else UNDERPOWERED)
            out[i] = PowerVerdict(float(at_n[j]), n, int(needed[j]), verdict)
    return out  # type: ignore[return-value]


def fisher_power_curve(p1: Sequence[float], p2: Sequence[float], ns: Sequence[int], *,
                       alpha: float = 0.05) -> np.ndarray:  # [len(ns), G]
    """Fisher power for every ``n`` in ``ns`` (rows) and rate pair (columns)."""
    return np.stack([np.atleast_1d(fisher_power(np.asarray(p1), np.asarray(p2), n, alpha=alpha))
                     for n in ns])


def sign_probability_curve(p1: Sequence[float], p2: Sequence[float],
                           ns: Sequence[int]) -> np.ndarray:  # [len(ns), G]
    """Sign probability for every ``n`` in ``ns`` (rows) and rate pair (columns)."""
    return np.stack([np.atleast_1d(sign_probability(np.asarray(p1), np.asarray(p2), n))
                     for n in ns])


def fisher_assurance(pilot1: tuple[Sequence[int], Sequence[int]],
                     pilot2: tuple[Sequence[int], Sequence[int]], n: int, *,
                     alpha: float = 0.05) -> np.ndarray:  # [G]
    """Expected Fisher power over the pilot posteriors (beta-binomial predictive; exact).

    Args:
        pilot1: ``(successes [G], trials [G])`` of the first policy's pilot.
        pilot2: The same for the second policy.
        n: Trials per policy in the planned study.
        alpha: Significance level.
    """
    region = fisher_rejection_region(n, n, alpha=alpha)
    return _pair_probability(region, beta_binomial_pmf(n, *pilot1),
                             beta_binomial_pmf(n, *pilot2))


def sign_assurance(pilot1: tuple[Sequence[int], Sequence[int]],
                   pilot2: tuple[Sequence[int], Sequence[int]], n: int) -> np.ndarray:  # [G]
    """``P(sign(K1 - K2) = sign(k1/m1 - k2/m2))`` under the predictive (NaN on a pilot tie)."""
    greater, less = _sign_region(_check_n(n))
    b1, b2 = beta_binomial_pmf(n, *pilot1), beta_binomial_pmf(n, *pilot2)
    k1, m1 = (np.asarray(v, dtype=np.int64) for v in pilot1)
    k2, m2 = (np.asarray(v, dtype=np.int64) for v in pilot2)
    order = np.sign(k1 * m2 - k2 * m1)
    result = np.where(order > 0, _pair_probability(greater, b1, b2),
                      _pair_probability(less, b1, b2))
    return np.where(order == 0, np.nan, result)


__all__ = [
    "NO_GAP",
    "POWERED",
    "UNDERPOWERED",
    "PairPlan",
    "PlanTargets",
    "PowerVerdict",
    "beta_binomial_pmf",
    "binomial_pmf",
    "expected_wilson_half_width",
    "fisher_assurance",
    "fisher_p_table",
    "fisher_p_table_reference",
    "fisher_power",
    "fisher_power_curve",
    "fisher_rejection_region",
    "fisher_trials",
    "plan_pairs",
    "power_verdicts",
    "sign_assurance",
    "sign_probability",
    "sign_probability_curve",
]
