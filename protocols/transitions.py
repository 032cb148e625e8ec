"""What a counterfactual condition changes relative to clean, comparison by comparison.

For each scene-task comparison present in both the clean and the counterfactual
(CF) condition (YUBI-Real2Sim Table I):

* significance *lost* / *gained*: the two-sided Fisher exact test on the
  simulated 2x2 counts of pi_1 vs pi_2 crosses ``p < alpha`` (0.05) from clean
  to CF (crossing the threshold is not itself a test that the gap changed);
* *reversed*: the CF simulated order is the opposite of the clean simulated order
  (both strict);
* *tied*: the CF simulation ties where clean did not;
* *agree*: the CF simulated order matches the real order (``Acc_rank``
  numerator), out of ``total`` eligible (real-rankable) comparisons;
* *corrected*: clean disagreed with real and CF agrees.

A drop in both policies' success rates is a rate change only, not a ranking failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protocols.ranking import CORRECT, REAL_TIE, PolicyPair
from protocols.stats import fisher_exact_p


@dataclass(frozen=True)
class PairTransition:
    """One comparison, clean vs counterfactual.

    Attributes:
        label: Comparison name (e.g. ``"G2/Tape"``).
        clean_outcome: Ranking outcome under clean (see :mod:`protocols.ranking`).
        cf_outcome: Ranking outcome under the counterfactual condition.
        clean_p: Fisher p-value of the clean simulated counts.
        cf_p: Fisher p-value of the CF simulated counts.
        sig_lost: Significant under clean, not under CF.
        sig_gained: Not significant under clean, significant under CF.
        reversed: CF simulated order is opposite to the clean simulated order.
        tied: CF simulation ties where clean did not.
        corrected: Clean disagreed with real and CF agrees.
    """

    label: str
    clean_outcome: str
    cf_outcome: str
    clean_p: float
    cf_p: float
    sig_lost: bool
    sig_gained: bool
    reversed: bool
    tied: bool
    corrected: bool


@dataclass(frozen=True)
class ConditionTransitions:
    """Counts of one counterfactual condition (one row of Table I).

    Attributes:
        condition: Condition name as given.
        sig_lost: Comparisons whose Fisher significance is lost.
        sig_gained: Comparisons whose Fisher significance is gained.
        reversed: Comparisons reversed relative to clean.
        tied: Comparisons newly tied relative to clean.
        agree: Eligible comparisons whose CF simulated order matches real.
        total: Eligible comparisons (strict real order).
        corrected: Clean-incorrect comparisons that CF gets right.
        pairs: Per-comparison details, in clean order.
    """

    condition: str
    sig_lost: int
    sig_gained: int
    reversed: int
    tied: int
    agree: int
    total: int
    corrected: int
    pairs: tuple[PairTransition, ...]


def _sim_p(pair: PolicyPair) -> float:
    return fisher_exact_p(pair.sim_k1, pair.sim_n1, pair.sim_k2, pair.sim_n2)


def _by_label(pairs: Iterable[PolicyPair], what: str) -> dict[str, PolicyPair]:
    table: dict[str, PolicyPair] = {}
    for pair in pairs:
        if pair.label in table:
            raise ValueError(
                f"{what}: comparison {pair.label!r} appears twice; give each pair a unique label"
            )
        table[pair.label] = pair
    return table


def pair_transition(clean: PolicyPair, cf: PolicyPair, *, alpha: float = 0.05) -> PairTransition:
    """Compare one comparison's clean and CF results (see module docstring)."""
    if (clean.real_k1, clean.real_n1, clean.real_k2, clean.real_n2) != (
        cf.real_k1,
        cf.real_n1,
        cf.real_k2,
        cf.real_n2,
    ):
        raise ValueError(
            f"comparison {clean.label!r}: real counts differ between clean and counterfactual; "
            "both conditions must be scored against the same real evaluation"
        )
    clean_p, cf_p = _sim_p(clean), _sim_p(cf)
    clean_sig, cf_sig = clean_p < alpha, cf_p < alpha
    clean_sign, cf_sign = clean.sim_sign, cf.sim_sign
    return PairTransition(
        label=clean.label,
        clean_outcome=clean.outcome,
        cf_outcome=cf.outcome,
        clean_p=clean_p,
        cf_p=cf_p,
        sig_lost=clean_sig and not cf_sig,
        sig_gained=cf_sig and not clean_sig,
        reversed=clean_sign != 0 and cf_sign == -clean_sign,
        tied=clean_sign != 0 and cf_sign == 0,
        corrected=clean.outcome not in (CORRECT, REAL_TIE) and cf.outcome == CORRECT,
    )


def condition_transitions(
    condition: str,
    clean: Iterable[PolicyPair],
    counterfactual: Iterable[PolicyPair],
    *,
    alpha: float = 0.05,
) -> ConditionTransitions:
    """Table I row for one CF condition over the same comparisons as clean.

    Args:
        condition: Name of the counterfactual condition.
        clean: Clean comparisons (labels must be unique).
        counterfactual: The same comparisons under the CF condition (same labels).
        alpha: Significance threshold for the two-sided Fisher test.

    Returns:
        A :class:`ConditionTransitions`.

    Raises:
        ValueError: when the two sets of labels differ or real counts disagree.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}; the paper uses 0.05")
    clean_map = _by_label(clean, "clean")
    cf_map = _by_label(counterfactual, condition)
    if set(clean_map) != set(cf_map):
        missing = sorted(set(clean_map) - set(cf_map))
        extra = sorted(set(cf_map) - set(clean_map))
        raise ValueError(
            f"condition {condition!r} must cover the same comparisons as clean "
            f"(missing {missing}, extra {extra}); a CF row is only defined on the clean set"
        )
    details = tuple(pair_transition(clean_map[k], cf_map[k], alpha=alpha) for k in clean_map)
    eligible = [d for d in details if d.cf_outcome != REAL_TIE]
    return ConditionTransitions(
        condition=condition,
        sig_lost=sum(d.sig_lost for d in details),
        sig_gained=sum(d.sig_gained for d in details),
        reversed=sum(d.reversed for d in details),
        tied=sum(d.tied for d in details),
        agree=sum(d.cf_outcome == CORRECT for d in eligible),
        total=len(eligible),
        corrected=sum(d.corrected for d in details),
        pairs=details,
    )


__all__ = ["ConditionTransitions", "PairTransition", "condition_transitions", "pair_transition"]
