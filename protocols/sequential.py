"""Stop adding rollouts once a ranking is decided: sequential tests valid under optional stopping.

Paired trials: trial ``t`` of pi_1 and pi_2 start from the same initial
condition, so the data are pairs ``(x1_t, x2_t)`` of successes. Concordant pairs
(both succeed or both fail) say nothing about which policy is better; of the
``D`` discordant pairs, ``S`` favour pi_1 (``x1 = 1, x2 = 0``) and ``F = D - S``
favour pi_2. Under "no difference" (``P(1, 0) = P(0, 1)``, which includes
``p1 = p2`` with any dependence between the two policies) each discordant pair
favours pi_1 with probability ``theta = 1/2`` independently of the past: the
sequential version of the exact McNemar test.

Two one-sided e-processes, each run at level ``alpha / 2``:

* ``E+`` (pi_1 better) and ``E-`` (pi_2 better) are likelihood ratios of
  ``theta`` against 1/2, mixed over ``theta`` in ``(1/2, 1)`` (resp. ``(0, 1/2)``).
  Method ``"mixture"``: a uniform mixing distribution on that half (no effect
  size to choose; closed form with the incomplete Beta function). Method
  ``"sprt"``: Wald's likelihood ratio against one alternative
  ``theta = 1/2 +- effect`` (more power near that effect, less elsewhere).
* Each factor ``E[(theta'/ (1/2))^X ((1 - theta') / (1/2))^(1 - X)] =
  1 + (2 theta - 1)(2 theta' - 1)`` is ``<= 1`` whenever the truth ``theta`` lies
  on the other side of 1/2 than ``theta'`` (equality at 1/2), so ``E+`` is a
  non-negative supermartingale under every ``theta <= 1/2``, and by Ville's
  inequality ``P(sup_t E+_t >= 2 / alpha) <= alpha / 2``; the same for ``E-``.

**Guarantee.** The rule "decide pi_1 better once ``E+ >= 2/alpha``, pi_2
better once ``E- >= 2/alpha``", checked after every batch, at any data-
dependent time, and after every look, has

* ``P(any decision) <= alpha`` when the policies do not differ, and
* ``P(deciding the wrong order) <= alpha / 2`` when they do,

no matter how often one looks or when one stops (this is what "valid under
optional stopping" means; a fixed-n Fisher test re-run after every batch is not).
Pairs that reach ``max_trials`` undecided stay undecided: the sequential design
never runs more than the fixed design and saves rollouts only where the
difference is clear. ``min_trials`` delays the first look, ``batch_size`` sets
how often one looks; neither affects the guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIXTURE = "mixture"
SPRT = "sprt"
#: Registry of the sequential methods: name -> what it is (one table; variants are entries).
METHODS: dict[str, str] = {
    MIXTURE: "uniform mixture over theta in each half (no effect size needed)",
    SPRT: "Wald likelihood ratio against theta = 1/2 +- effect",
}
PI1 = "pi_1"
PI2 = "pi_2"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class SequentialConfig:
    """The ``sequential`` key of a study spec (its single source of defaults).

    Attributes:
        method: ``"mixture"`` or ``"sprt"`` (see :data:`METHODS`).
        max_trials: Cap on paired trials per policy pair; None uses the study's ``trials``.
        min_trials: Paired trials before the first look.
        batch_size: Paired trials added between looks.
        alpha: Error level: P(any decision | no difference) <= alpha.
        effect: SPRT only: the alternative is ``theta = 1/2 + effect`` (0 < effect < 1/2),
            theta the chance that a discordant pair favours the better policy.
    """

    method: str = MIXTURE
    max_trials: int | None = None
    min_trials: int = 10
    batch_size: int = 5
    alpha: float = 0.05
    effect: float = 0.25

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"sequential method {self.method!r} is unknown; use one of "
                             f"{sorted(METHODS)}")
        for name in ("min_trials", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"sequential {name} must be an integer >= 1, got {value!r}")
        if self.max_trials is not None and (
                isinstance(self.max_trials, bool) or not isinstance(self.max_trials, int)
                or self.max_trials < self.min_trials):
            raise ValueError(f"sequential max_trials must be an integer >= min_trials "
                             f"({self.min_trials}) or null, got {self.max_trials!r}")
        if not 0.0 < float(self.alpha) < 1.0:
            raise ValueError(f"sequential alpha must be in (0, 1), got {self.alpha!r}")
        if not 0.0 < float(self.effect) < 0.5:
            raise ValueError(f"sequential effect must be in (0, 0.5), got {self.effect!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SequentialConfig:
        """Build from the spec's JSON object; unknown keys are refused by name."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sequential keys {unknown}; valid keys: {sorted(known)}")
        return cls(**dict(data))

    def looks(self, max_trials: int) -> list[int]:
        """Trial counts at which the test looks: min, min + batch, ..., and always the max."""
        points = list(range(self.min_trials, max_trials + 1, self.batch_size))
        if not points or points[-1] != max_trials:
            points.append(max_trials)
        return [p for p in points if p <= max_trials]


def log_e_values(s: np.ndarray, f: np.ndarray, *, method: str = MIXTURE,
                 effect: float = 0.25) -> tuple[np.ndarray, np.ndarray]:  # ([...], [...])
    """``(log E+, log E-)`` after ``s`` discordant pairs favouring pi_1 and ``f`` favouring pi_2.

    Mixture: ``E+ = 2^(D + 1) B(s + 1, f + 1) I_{1/2}(f + 1, s + 1)`` (uniform density 2 on
    theta in (1/2, 1); ``1 - I_{1/2}(a, b) = I_{1/2}(b, a)`` keeps the tail accurate), ``E-``
    with ``s`` and ``f`` swapped. SPRT: ``s log(2 theta1) + f log(2 (1 - theta1))``.
    """
    from scipy.special import betainc, betaln

    s = np.asarray(s, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    if method == MIXTURE:
        base = (s + f + 1.0) * math.log(2.0) + betaln(s + 1.0, f + 1.0)
        with np.errstate(divide="ignore"):
            return base + np.log(betainc(f + 1.0, s + 1.0, 0.5)), \
                base + np.log(betainc(s + 1.0, f + 1.0, 0.5))
    if method == SPRT:
        up, down = math.log(2.0 * (0.5 + effect)), math.log(2.0 * (0.5 - effect))
        return s * up + f * down, s * down + f * up
    raise ValueError(f"sequential method {method!r} is unknown; use one of {sorted(METHODS)}")


@dataclass(frozen=True)
class SequentialDecision:
    """What the sequential test says for one policy pair in one condition.

    Attributes:
        decision: ``"pi_1"``, ``"pi_2"`` (that policy is better) or ``"undecided"``.
        decided_at: Paired trials at the deciding look (None when undecided).
        trials: Paired trials used (the deciding look, or the last look).
        favour_pi1: Discordant pairs favouring pi_1 up to ``trials``.
        favour_pi2: Discordant pairs favouring pi_2 up to ``trials``.
        log_e_pi1: ``log E+`` at ``trials``.
        log_e_pi2: ``log E-`` at ``trials``.
    """

    decision: str
    decided_at: int | None
    trials: int
    favour_pi1: int
    favour_pi2: int
    log_e_pi1: float
    log_e_pi2: float


def decide(x1: Sequence[int], x2: Sequence[int], config: SequentialConfig, *,
           max_trials: int) -> SequentialDecision:
    """Run the sequential test over paired outcomes, looking at ``config.looks(max_trials)``.

    Args:
        x1: Successes (0/1) of pi_1 per paired trial, in trial order.  # [T]
        x2: Successes of pi_2 on the same trials.  # [T]
        config: The sequential design.
        max_trials: The design's cap (``len(x1)`` may be smaller: looks past it are skipped).

    Returns:
        The first decision (frozen at its look), or the state at the last available look.
    """
    a = np.asarray(x1, dtype=np.int64)
    b = np.asarray(x2, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1 or not np.all(np.isin(a, (0, 1))) or not np.all(
            np.isin(b, (0, 1))):
        raise ValueError("x1 and x2 must be equal-length 0/1 sequences of paired trials")
    threshold = math.log(2.0 / config.alpha)
    s_cum = np.concatenate([[0], np.cumsum(a * (1 - b))])
    f_cum = np.concatenate([[0], np.cumsum((1 - a) * b)])
    last = None
    for look in config.looks(max_trials):
        if look > a.size:
            break
        s, f = int(s_cum[look]), int(f_cum[look])
        up, down = log_e_values(np.array(s), np.array(f), method=config.method,
                                effect=config.effect)
        last = (look, s, f, float(up), float(down))
        if up >= threshold or down >= threshold:
            return SequentialDecision(PI1 if up >= threshold else PI2, look, look, s, f,
                                      float(up), float(down))
    if last is None:
        return SequentialDecision(UNDECIDED, None, int(a.size), int(s_cum[-1]),
                                  int(f_cum[-1]), 0.0, 0.0)
    return SequentialDecision(UNDECIDED, None, *last)


def simulate(p_pi1: float, p_pi2: float, config: SequentialConfig, *, max_trials: int,
             sequences: int, seed: int, correlation_pi1_given_pi2: float | None = None
             ) -> dict[str, np.ndarray]:
    """Vectorised Monte Carlo of the sequential design over many independent sequences.

    Args:
        p_pi1: Success rate of pi_1.
        p_pi2: Success rate of pi_2.
        config: The sequential design.
        max_trials: Cap on paired trials.
        sequences: Number of simulated studies.
        seed: Seed of the ``numpy.random.Generator``.
        correlation_pi1_given_pi2: None draws the two policies independently; a value
            ``c`` in [0, 1] copies pi_2's outcome into pi_1 with probability ``c`` (shared
            difficulty of the initial condition) and otherwise draws pi_1 afresh with a rate
            chosen so that pi_1's marginal rate stays ``p_pi1``.

    Returns:
        ``decision`` ([sequences] int: +1 pi_1, -1 pi_2, 0 undecided) and ``trials``
        ([sequences] paired trials used).
    """
    rng = np.random.default_rng(seed)
    x2 = rng.random((sequences, max_trials)) < p_pi2
    if correlation_pi1_given_pi2 is None:
        x1 = rng.random((sequences, max_trials)) < p_pi1
    else:
        c = float(correlation_pi1_given_pi2)
        fresh = (p_pi1 - c * p_pi2) / (1.0 - c) if c < 1.0 else 0.0
        if not 0.0 <= fresh <= 1.0:
            raise ValueError("this correlation cannot keep pi_1's marginal rate; lower it")
        copy = rng.random((sequences, max_trials)) < c
        x1 = np.where(copy, x2, rng.random((sequences, max_trials)) < fresh)
    s_cum = np.cumsum(x1 & ~x2, axis=1)  # [R, T]
    f_cum = np.cumsum(~x1 & x2, axis=1)
    threshold = math.log(2.0 / config.alpha)
    decision = np.zeros(sequences, dtype=np.int64)
    trials = np.full(sequences, max_trials, dtype=np.int64)
    open_ = np.ones(sequences, dtype=bool)
    for look in config.looks(max_trials):
        up, down = log_e_values(s_cum[:, look - 1], f_cum[:, look - 1], method=config.method,
                                effect=config.effect)
        hit_up = open_ & (up >= threshold)
        hit_down = open_ & ~hit_up & (down >= threshold)
        decision[hit_up], decision[hit_down] = 1, -1
        trials[hit_up | hit_down] = look
        open_ &= ~(hit_up | hit_down)
    return {"decision": decision, "trials": trials}


__all__ = [
    "METHODS",
    "MIXTURE",
    "PI1",
    "PI2",
    "SPRT",
    "UNDECIDED",
    "SequentialConfig",
    "SequentialDecision",
    "decide",
    "log_e_values",
    "simulate",
]
