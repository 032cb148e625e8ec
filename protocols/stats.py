"""Binomial intervals, Fisher's exact test, Beta posteriors and the paired bootstrap.

Every function validates its counts (``0 <= k <= n``, whole numbers) and raises
a ``ValueError`` that says how to fix the call. Results are small frozen
dataclasses so that a table writer can read fields by name.

Conventions (as in the YUBI-Real2Sim and Real-to-Sim GS papers):

* success-rate bars: 95% Wilson score interval per rate;
* significance of a policy difference: two-sided Fisher exact test on the
  2x2 table ``[[k1, n1 - k1], [k2, n2 - k2]]``, ``p < 0.05``;
* exact intervals: Clopper-Pearson (Beta quantiles);
* posteriors: ``Beta(k + 1, n - k + 1)`` under a uniform ``Beta(1, 1)`` prior.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from protocols._validate import check_confidence, check_count, check_successes, paired_vectors


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval.

    Attributes:
        estimate: Point estimate (for a rate: ``k / n``).
        low: Lower bound.
        high: Upper bound.
        confidence: Nominal coverage, e.g. 0.95.
        method: How the interval was computed ("wilson", "clopper-pearson", ...).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    method: str

    def as_tuple(self) -> tuple[float, float]:
        """``(low, high)``."""
        return (self.low, self.high)

    @property
    def width(self) -> float:
        """``high - low``."""
        return self.high - self.low


def _z_value(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(k: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial rate ``k / n``.

    Closed form: centre ``(k + z^2/2) / (n + z^2)``, half width
    ``z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)``.

    Args:
        k: Successes (0 <= k <= n).
        n: Trials (n >= 1).
        confidence: Two-sided coverage in (0, 1).

    Returns:
        An :class:`Interval` with ``method="wilson"``.

    Raises:
        ValueError: on negative counts, ``k > n``, ``n == 0`` or a bad confidence.
    """
    k, n = check_successes(k, n)
    confidence = check_confidence(confidence)
    if n == 0:
        raise ValueError("n = 0 trials: a rate needs at least one trial; pass n >= 1")
    low, high = wilson_bounds(np.array([k]), n, confidence=confidence)
    return Interval(k / n, float(low[0]), float(high[0]), confidence, "wilson")


def wilson_bounds(
    k: np.ndarray, n: int, *, confidence: float = 0.95  # k: [M] successes
) -> tuple[np.ndarray, np.ndarray]:  # ([M], [M])
    """Vectorised Wilson bounds of many success counts out of the same ``n`` trials.

    The one definition behind :func:`wilson_interval` (which validates its
    counts); here ``k`` must already hold whole numbers in ``0..n``.

    Returns:
        ``(low, high)`` arrays; exactly 0 at ``k = 0`` and 1 at ``k = n``.
    """
    counts = np.asarray(k, dtype=np.float64)
    if n < 1 or np.any(counts < 0) or np.any(counts > n):
        raise ValueError(f"Wilson bounds need 0 <= k <= n and n >= 1, got n = {n}")
    z = _z_value(check_confidence(confidence))
    z2 = z * z
    centre = (counts + z2 / 2.0) / (n + z2)
    half = z / (n + z2) * np.sqrt(counts * (n - counts) / n + z2 / 4.0)
    # the exact bounds at k = 0 / k = n are 0 and 1; clip float round-off
    low = np.where(counts == 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(counts == n, 1.0, np.minimum(1.0, centre + half))
    return low, high


def clopper_pearson_interval(k: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Exact (Clopper-Pearson) interval from Beta quantiles.

    ``low = Beta(alpha/2; k, n - k + 1)`` (0 when k = 0) and
    ``high = Beta(1 - alpha/2; k + 1, n - k)`` (1 when k = n).

    Args:
        k: Successes (0 <= k <= n).
        n: Trials (n >= 1).
        confidence: Two-sided coverage in (0, 1).

    Returns:
        An :class:`Interval` with ``method="clopper-pearson"``.
    """
    from scipy.stats import beta

    k, n = check_successes(k, n)
    confidence = check_confidence(confidence)
    if n == 0:
        raise ValueError("n = 0 trials: a rate needs at least one trial; pass n >= 1")
    alpha = 1.0 - confidence
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2.0, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1.0 - alpha / 2.0, k + 1, n - k))
    return Interval(k / n, low, high, confidence, "clopper-pearson")


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value for two success counts.

    The 2x2 table is ``[[k1, n1 - k1], [k2, n2 - k2]]`` (rows: policies,
    columns: success / failure); computed by ``scipy.stats.fisher_exact``.

    Args:
        k1: Successes of the first policy.
        n1: Trials of the first policy.
        k2: Successes of the second policy.
        n2: Trials of the second policy.

    Returns:
        The two-sided p-value in [0, 1].
    """
    from scipy.stats import fisher_exact

    k1, n1 = check_successes(k1, n1, k_name="k1", n_name="n1")
    k2, n2 = check_successes(k2, n2, k_name="k2", n_name="n2")
    if n1 == 0 or n2 == 0:
        raise ValueError("each policy needs at least one trial; pass n1 >= 1 and n2 >= 1")
    result = fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided")
    return float(min(1.0, result.pvalue))



def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts of two paired classifiers.

    ``b``: decisions only the first gets right; ``c``: only the second. Under the null each
    discordant decision goes either way with probability 1/2, so the test is
    ``scipy.stats.binomtest(b, b + c, 0.5)``; no discordant decision gives p = 1.
    """
    from scipy.stats import binomtest

    return 1.0 if b + c == 0 else float(min(1.0, binomtest(b, b + c, 0.5).pvalue))

@dataclass(frozen=True)
class BetaPosterior:
    """Beta posterior of a success rate.

    Attributes:
        alpha: First shape parameter (``prior_alpha + k``).
        beta: Second shape parameter (``prior_beta + n - k``).
    """

    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        """Posterior mean ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)

    def credible_interval(self, confidence: float = 0.95) -> Interval:
        """Equal-tailed credible interval (estimate = posterior mean)."""
        from scipy.stats import beta

        confidence = check_confidence(confidence)
        tail = (1.0 - confidence) / 2.0
        low, high = beta.ppf([tail, 1.0 - tail], self.alpha, self.beta)
        return Interval(self.mean, float(low), float(high), confidence, "beta-posterior")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:  # [size]
        """Draw ``size`` rates with an explicit generator (never the global RNG)."""
        return rng.beta(self.alpha, self.beta, size=int(size))


def beta_posterior(k: int, n: int, *, prior: tuple[float, float] = (1.0, 1.0)) -> BetaPosterior:
    """Posterior of a success rate after ``k`` of ``n`` successes (uniform prior by default)."""
    k, n = check_successes(k, n)
    prior_alpha, prior_beta = (float(p) for p in prior)
    if not (prior_alpha > 0 and prior_beta > 0):
        raise ValueError(f"prior parameters must be > 0, got {prior}; use (1, 1) for uniform")
    return BetaPosterior(prior_alpha + k, prior_beta + n - k)


@dataclass(frozen=True)
class BootstrapCI:
    """Paired-bootstrap percentile interval of a statistic of two paired samples.

    Attributes:
        estimate: The statistic on the original (unresampled) pairs.
        low: Lower percentile bound.
        high: Upper percentile bound.
        confidence: Nominal coverage.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the ``numpy.random.Generator`` used.
        statistic: Name of the statistic.
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int
    statistic: str


def _mean_difference(a: np.ndarray, b: np.ndarray) -> float:  # [N] x [N]
    return float(np.mean(a - b))


def _mse(a: np.ndarray, b: np.ndarray) -> float:  # [N] x [N]
    return float(np.mean((a - b) ** 2))


def _named_statistic(name: str) -> Callable[[np.ndarray, np.ndarray], float]:
    from protocols import ranking

    table: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
        "mean_diff": _mean_difference,
        "mse": _mse,
        "pearson": lambda a, b: ranking.pearson(sim=a, real=b),
        "spearman": lambda a, b: ranking.spearman(sim=a, real=b),
        "kendall": lambda a, b: ranking.kendall(sim=a, real=b),
    }
    if name not in table:
        raise ValueError(f"unknown statistic {name!r}; use one of {sorted(table)} or a callable")
    return table[name]


def paired_bootstrap_ci(
    a: Sequence[float],  # [N]
    b: Sequence[float],  # [N]
    stat: str | Callable[[np.ndarray, np.ndarray], float] = "mean_diff",
    *,
    n_resamples: int = 10_000,
    seed: int,
    confidence: float = 0.95,
) -> BootstrapCI:
    """Percentile bootstrap CI of ``stat(a, b)``, resampling the pairs ``(a_i, b_i)`` jointly.

    Args:
        a: First sample (e.g. per-task scores under condition A).
        b: Second sample, paired with ``a`` index by index.
        stat: ``"mean_diff"`` (mean of a - b), ``"mse"``, ``"pearson"``, ``"spearman"``,
            ``"kendall"``, or a callable ``(a, b) -> float``.
        n_resamples: Number of resamples (>= 100).
        seed: Seed for ``numpy.random.default_rng``; same seed -> same interval.
        confidence: Two-sided coverage in (0, 1).

    Returns:
        A :class:`BootstrapCI`. Resamples whose statistic is NaN (e.g. a constant
        resample for a correlation) are dropped before taking percentiles.
    """
    a_arr, b_arr = paired_vectors(a, b, names=("a", "b"), min_len=2)
    confidence = check_confidence(confidence)
    n_resamples = check_count("n_resamples", n_resamples)
    if n_resamples < 100:
        raise ValueError(f"n_resamples={n_resamples} is too few for a percentile CI; pass >= 100")
    func = _named_statistic(stat) if isinstance(stat, str) else stat
    name = stat if isinstance(stat, str) else getattr(stat, "__name__", "custom")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, a_arr.size, size=(n_resamples, a_arr.size))  # [R, N]
    values = np.array([func(a_arr[row], b_arr[row]) for row in index], dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("the statistic was NaN on every resample; check that the data vary")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return BootstrapCI(
        float(func(a_arr, b_arr)), float(low), float(high), confidence, n_resamples, int(seed), name
    )


__all__ = [
    "BetaPosterior",
    "BootstrapCI",
    "Interval",
    "beta_posterior",
    "check_count",
    "clopper_pearson_interval",
    "fisher_exact_p",
    "paired_bootstrap_ci",
    "wilson_bounds",
    "wilson_interval",
]
