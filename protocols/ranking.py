"""Does the simulator pick the same policy as the real robot? Pairwise ranking agreement.

One *pair* is one scene-task comparison of two candidate policies pi_1 and pi_2
with success counts in both domains. Following YUBI-Real2Sim (Eqs. 3-5):

* ``d_real = r_1 - r_2`` and ``d_sim = s_1 - s_2``;
* a pair is *eligible* when ``d_real != 0`` (a real tie is *unrankable*);
* an eligible pair is *correct* iff ``d_real * d_sim > 0``; a simulated tie
  (``d_sim == 0``) and a reversal both count as wrong and are reported apart;
* ``Acc_rank = k / |M|`` over the eligible set ``M``;
* ``MAE`` (percentage points) = mean over eligible pairs and both policies of
  ``|q_real - q_sim|``.

Rate comparisons use exact integer cross-multiplication (``k1 * n2`` vs
``k2 * n1``), so 14/20 vs 56/80 is a tie, not a float accident.

Also here: SIMPLER's mean maximum rank violation (MMRV) and the Pearson,
Spearman and Kendall correlations over many policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from protocols._validate import check_successes, paired_vectors

CORRECT = "correct"
REVERSED = "reversed"
SIM_TIE = "sim_tie"
REAL_TIE = "real_tie"
OUTCOMES = (CORRECT, REVERSED, SIM_TIE, REAL_TIE)


def order_sign(k1: int, n1: int, k2: int, n2: int) -> int:
    """Sign of ``k1/n1 - k2/n2`` computed exactly in integers (+1, 0 or -1)."""
    diff = k1 * n2 - k2 * n1
    return (diff > 0) - (diff < 0)


@dataclass(frozen=True)
class PolicyPair:
    """Success counts of pi_1 and pi_2 on one scene-task, in the real and simulated domains.

    Attributes:
        label: Free-form name of the comparison, e.g. ``"Duo/Cup"``.
        real_k1: Real successes of pi_1.
        real_n1: Real trials of pi_1.
        real_k2: Real successes of pi_2.
        real_n2: Real trials of pi_2.
        sim_k1: Simulated successes of pi_1.
        sim_n1: Simulated trials of pi_1.
        sim_k2: Simulated successes of pi_2.
        sim_n2: Simulated trials of pi_2.
    """

    label: str
    real_k1: int
    real_n1: int
    real_k2: int
    real_n2: int
    sim_k1: int
    sim_n1: int
    sim_k2: int
    sim_n2: int

    def __post_init__(self) -> None:
        for domain in ("real", "sim"):
            for policy in ("1", "2"):
                k_name, n_name = f"{domain}_k{policy}", f"{domain}_n{policy}"
                k, n = check_successes(
                    getattr(self, k_name), getattr(self, n_name), k_name=k_name, n_name=n_name
                )
                if n == 0:
                    raise ValueError(
                        f"pair {self.label!r}: {n_name} = 0 trials; "
                        "every policy cell needs >= 1 trial"
                    )
                object.__setattr__(self, k_name, k)
                object.__setattr__(self, n_name, n)

    @property
    def real_rates(self) -> tuple[float, float]:
        """``(r_1, r_2)``."""
        return (self.real_k1 / self.real_n1, self.real_k2 / self.real_n2)

    @property
    def sim_rates(self) -> tuple[float, float]:
        """``(s_1, s_2)``."""
        return (self.sim_k1 / self.sim_n1, self.sim_k2 / self.sim_n2)

    @property
    def real_sign(self) -> int:
        """Sign of ``d_real`` (+1: pi_1 better on the real robot)."""
        return order_sign(self.real_k1, self.real_n1, self.real_k2, self.real_n2)

    @property
    def sim_sign(self) -> int:
        """Sign of ``d_sim`` (+1: pi_1 better in simulation)."""
        return order_sign(self.sim_k1, self.sim_n1, self.sim_k2, self.sim_n2)

    @property
    def outcome(self) -> str:
        """One of ``correct``, ``reversed``, ``sim_tie``, ``real_tie``."""
        if self.real_sign == 0:
            return REAL_TIE
        if self.sim_sign == 0:
            return SIM_TIE
        return CORRECT if self.real_sign == self.sim_sign else REVERSED


@dataclass(frozen=True)
class RankAgreement:
    """Pairwise ranking agreement over a fixed set of comparisons.

    Attributes:
        outcomes: ``(label, outcome)`` per input pair, in input order.
        correct: ``k``, eligible pairs whose simulated order matches the real one.
        eligible: ``|M|``, pairs with a strict real ranking.
        reversed: Eligible pairs with the opposite simulated order.
        sim_ties: Eligible pairs with a simulated tie.
        real_ties: Unrankable pairs (real tie), excluded from ``eligible``.
        accuracy: ``correct / eligible`` (NaN when nothing is eligible).
    """

    outcomes: tuple[tuple[str, str], ...]
    correct: int
    eligible: int
    reversed: int
    sim_ties: int
    real_ties: int
    accuracy: float


def _as_pairs(pairs: Iterable[PolicyPair]) -> list[PolicyPair]:
    items = list(pairs)
    for item in items:
        if not isinstance(item, PolicyPair):
            raise ValueError(
                f"expected PolicyPair items, got {type(item).__name__}; "
                "build each comparison with protocols.ranking.PolicyPair(...)"
            )
    return items


def rank_agreement(pairs: Iterable[PolicyPair]) -> RankAgreement:
    """Classify every pair and compute ``Acc_rank = k / |M|`` (see module docstring)."""
    items = _as_pairs(pairs)
    outcomes = tuple((p.label, p.outcome) for p in items)
    counts = {name: sum(1 for _, o in outcomes if o == name) for name in OUTCOMES}
    eligible = len(items) - counts[REAL_TIE]
    accuracy = counts[CORRECT] / eligible if eligible else float("nan")
    return RankAgreement(
        outcomes=outcomes,
        correct=counts[CORRECT],
        eligible=eligible,
        reversed=counts[REVERSED],
        sim_ties=counts[SIM_TIE],
        real_ties=counts[REAL_TIE],
        accuracy=accuracy,
    )


def mae(pairs: Iterable[PolicyPair], *, eligible_only: bool = True) -> float:
    """Mean absolute success-rate error in percentage points.

    ``100 / (2 |M|) * sum_{i in M} sum_{p in {1, 2}} |q_real - q_sim|`` (YUBI Eq. 5).

    Args:
        pairs: The comparisons.
        eligible_only: Average over eligible pairs only (the paper's definition);
            False averages over every pair (real ties included).

    Returns:
        The MAE in percentage points (NaN when no pair is used).
    """
    items = [p for p in _as_pairs(pairs) if not eligible_only or p.real_sign != 0]
    if not items:
        return float("nan")
    # per-cell error in percentage points, then the mean (the order the published mae.csv used,
    # so regenerated values are byte-identical to it)
    errors = [
        abs(real - sim) * 100.0
        for p in items
        for real, sim in zip(p.real_rates, p.sim_rates, strict=True)
    ]
    return float(np.mean(errors))


def mmrv(sim: Sequence[float], real: Sequence[float]) -> float:
    """Mean maximum rank violation, exactly as SIMPLER defines it.

    For each policy ``i``: the largest *real* gap ``|real_i - real_j|`` over the
    policies ``j`` whose simulated order relative to ``i`` differs from their real
    order, where "order" is the strict comparison ``x_i > x_j`` (so a tie on one
    side and a strict order on the other counts as a violation); 0 when there is
    none. MMRV is the mean of these maxima over ``i``. Lower is better; 0 means
    the simulator orders every policy as the real robot does.

    Argument order: ``mmrv(sim, real)``. The metric is *not* symmetric: the
    violation size is always measured on ``real``, so swapping the vectors gives
    another number (SIMPLER's own README once called its helper with the two
    vectors swapped); pass them by keyword (``mmrv(sim=..., real=...)``) to make a
    call site self-checking.

    Args:
        sim: Simulated success rates, one per policy.
        real: Real success rates of the same policies in the same order.

    Returns:
        MMRV in the units of ``real`` (rates in [0, 1] give MMRV in [0, 1]).
    """
    s, r = paired_vectors(sim, real, names=("sim", "real"), min_len=1)
    sim_greater = s[:, None] > s[None, :]  # [P, P]
    real_greater = r[:, None] > r[None, :]  # [P, P]
    gaps = np.abs(r[:, None] - r[None, :])  # [P, P]
    violations = np.where(sim_greater != real_greater, gaps, 0.0)
    return float(np.mean(violations.max(axis=1)))


def mmrv_reference(sim: Sequence[float], real: Sequence[float]) -> float:
    """Plain double-loop MMRV: the readable reference :func:`mmrv` is tested against."""
    s, r = paired_vectors(sim, real, names=("sim", "real"), min_len=1)
    maxima = []
    for i in range(s.size):
        worst = 0.0
        for j in range(s.size):
            if (s[i] > s[j]) != (r[i] > r[j]):
                worst = max(worst, abs(r[i] - r[j]))
        maxima.append(worst)
    return float(sum(maxima) / len(maxima))


def _correlation(kind: str, sim: Sequence[float], real: Sequence[float]) -> float:
    from scipy import stats

    s, r = paired_vectors(sim, real, names=("sim", "real"), min_len=2)
    if np.all(s == s[0]) or np.all(r == r[0]):
        return float("nan")  # undefined for a constant vector; never a warning
    if kind == "pearson":
        return float(stats.pearsonr(s, r).statistic)
    if kind == "spearman":
        return float(stats.spearmanr(s, r).statistic)
    return float(stats.kendalltau(s, r).statistic)  # tau-b (tie-corrected)


def pearson(sim: Sequence[float], real: Sequence[float]) -> float:
    """Pearson r between simulated and real rates (NaN if either is constant)."""
    return _correlation("pearson", sim, real)


def spearman(sim: Sequence[float], real: Sequence[float]) -> float:
    """Spearman rank correlation (NaN if either is constant)."""
    return _correlation("spearman", sim, real)


def kendall(sim: Sequence[float], real: Sequence[float]) -> float:
    """Kendall tau-b (NaN if either is constant)."""
    return _correlation("kendall", sim, real)


__all__ = [
    "CORRECT",
    "OUTCOMES",
    "REAL_TIE",
    "REVERSED",
    "SIM_TIE",
    "PolicyPair",
    "RankAgreement",
    "kendall",
    "mae",
    "mmrv",
    "mmrv_reference",
    "order_sign",
    "pearson",
    "rank_agreement",
    "spearman",
]
