"""Can an image-quality score tell beforehand that the simulated ranking is wrong?

The scene-held-out threshold classifier of YUBI-Real2Sim (Sec. IV-B, Eq. 8):

* label ``H = 1`` when the simulated ranking of a comparison disagrees with the
  real ranking (a simulated tie counts as disagreement); per task, plus the
  scene-level *All-three* label ``H = 1`` unless every task ranking agrees;
* the score is *oriented* so that higher is better (LPIPS negated; directions
  from :mod:`protocols.metric_directions` or given explicitly);
* predict ``H = 1`` iff ``Q < tau``; per target, ``tau`` is chosen on the other
  scenes (all variants of the held-out scene are held out together);
* candidate thresholds: the smallest training value, the midpoints between
  sorted distinct training values, and "just above the largest" (the next
  float up, so every training score is ``< tau``);
* choose the candidate with the highest balanced accuracy on the training rows;
  ties -> higher sensitivity, then the smaller threshold;
* training labels of a single class -> predict that class, no threshold
  (``fit_status = "training_class_constant"``; otherwise
  ``"balanced_accuracy_threshold"``, the names the published data use);
* baseline: *always reliable* (predict 0 everywhere).

Invariance: the partition chosen on the training scores depends only on their
order, so it is unchanged by any strictly increasing transform of the score.
Held-out predictions use the midpoint thresholds, which are preserved by
positive affine maps (``a * q + b``, ``a > 0``) but not by arbitrary monotone
maps when a held-out score falls strictly between two training scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from protocols.metric_directions import is_lower_better
from protocols.ranking import CORRECT, REAL_TIE, PolicyPair
from protocols.stats import mcnemar_exact_p

FIT_THRESHOLD = "balanced_accuracy_threshold"
FIT_CONSTANT = "training_class_constant"
ALWAYS_RELIABLE = "Always reliable"
ALL_THREE = "All-three"


def reliability_label(pair: PolicyPair) -> int:
    """``H`` of one comparison: 1 if the simulated ranking disagrees with real (tie included).

    Raises:
        ValueError: for a real tie, which has no ranking to agree with; leave it out.
    """
    if pair.outcome == REAL_TIE:
        raise ValueError(
            f"comparison {pair.label!r} is a real tie (unrankable); "
            "exclude it from reliability labels"
        )
    return 0 if pair.outcome == CORRECT else 1


def all_tasks_label(task_labels: Iterable[int]) -> int:
    """Scene-level label: 0 only when every task ranking agrees with real."""
    labels = [_check_label(v) for v in task_labels]
    if not labels:
        raise ValueError("all-tasks label needs at least one task label")
    return int(any(labels))


def _check_label(value: object) -> int:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if number not in (0.0, 1.0):
        raise ValueError(f"labels must be 0 (agrees with real) or 1 (disagrees), got {value!r}")
    return int(number)


def candidate_thresholds(values: Sequence[float]) -> np.ndarray:  # [C]
    """Smallest value, midpoints between sorted distinct values, and just above the largest."""
    distinct = np.unique(np.asarray(values, dtype=np.float64))
    if distinct.size == 0:
        raise ValueError("no training scores; a threshold needs at least one value")
    midpoints = (distinct[:-1] + distinct[1:]) / 2.0
    above = np.nextafter(distinct[-1], np.inf)
    return np.concatenate([[distinct[0]], midpoints, [above]])


@dataclass(frozen=True)
class ThresholdFit:
    """A fitted rule ``H_hat = 1[Q < threshold]`` (or a constant class).

    Attributes:
        status: ``"balanced_accuracy_threshold"`` or ``"training_class_constant"``.
        threshold: The chosen ``tau`` (None for a constant fit).
        constant: The predicted class of a constant fit (None otherwise).
        balanced_accuracy: Training balanced accuracy of the chosen rule (NaN if constant).
        sensitivity: Training sensitivity, TP / P (NaN if constant).
        n_train: Number of training rows.
    """

    status: str
    threshold: float | None
    constant: int | None
    balanced_accuracy: float
    sensitivity: float
    n_train: int

    def predict(self, oriented_scores: Sequence[float]) -> np.ndarray:  # [M] -> [M] int
        """Predicted ``H`` for oriented (higher = better) scores."""
        q = np.asarray(oriented_scores, dtype=np.float64)
        if self.constant is not None:
            return np.full(q.shape, self.constant, dtype=np.int64)
        return (q < self.threshold).astype(np.int64)


def fit_threshold(oriented_scores: Sequence[float], labels: Sequence[int]) -> ThresholdFit:
    """Fit ``tau`` by balanced accuracy (ties: higher sensitivity, then smaller ``tau``).

    Args:
        oriented_scores: Training scores, higher = better quality.  # [N]
        labels: Training labels ``H`` (1 = unreliable).  # [N]

    Returns:
        A :class:`ThresholdFit`.
    """
    from sklearn.metrics import balanced_accuracy_score, confusion_matrix  # lazy: import-light

    q, y = _scores_and_labels(oriented_scores, labels)
    positives, negatives = int(y.sum()), int(y.size - y.sum())
    if positives == 0 or negatives == 0:
        return ThresholdFit(FIT_CONSTANT, None, int(y[0]), float("nan"), float("nan"), int(y.size))
    best_key: tuple[int, int, float] | None = None
    best_tau = float("nan")
    for tau in candidate_thresholds(q):
        true_neg, _, _, true_pos = (int(v) for v in confusion_matrix(
            y, (q < tau).astype(np.int64), labels=[0, 1]).ravel())
        # balanced accuracy * 2PN as an exact integer, so ties are exact
        key = (true_pos * negatives + true_neg * positives, true_pos, -float(tau))
        if best_key is None or key > best_key:
            best_key, best_tau = key, float(tau)
    assert best_key is not None
    balanced = float(balanced_accuracy_score(y, (q < best_tau).astype(np.int64)))
    return ThresholdFit(
        FIT_THRESHOLD, best_tau, None, balanced, best_key[1] / positives, int(y.size)
    )


def _scores_and_labels(
    scores: Sequence[float], labels: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    q = np.asarray(scores, dtype=np.float64)
    y_raw = np.asarray(labels)
    if q.ndim != 1 or q.shape != y_raw.shape:
        raise ValueError(
            f"scores and labels must be 1-D of equal length, got {q.shape} and {y_raw.shape}"
        )
    if q.size == 0:
        raise ValueError("no training rows; each fold needs rows from at least one other scene")
    if not np.all(np.isfinite(q)):
        raise ValueError("quality scores must be finite; drop or fix NaN/inf rows")
    if not np.all(np.isin(y_raw, (0, 1))):
        raise ValueError("labels must be 0 (agrees with real) or 1 (disagrees)")
    return q, y_raw.astype(np.int64)


@dataclass(frozen=True)
class Prediction:
    """One held-out decision.

    Attributes:
        scene: The held-out scene.
        variant: Scene variant (condition).
        quality: The score as given (not oriented).
        label: True ``H``.
        prediction: Predicted ``H``.
        correct: ``prediction == label``.
        fit_status: How the fold's rule was fitted.
        threshold: The fold's ``tau`` on the oriented scale (None for a constant fit).
    """

    scene: str
    variant: str
    quality: float
    label: int
    prediction: int
    correct: bool
    fit_status: str
    threshold: float | None


@dataclass(frozen=True)
class ScoredCondition:
    """Input row: a quality score and the reliability label of one (scene, variant)."""

    scene: str
    variant: str
    quality: float
    label: int


def scene_held_out_predictions(
    rows: Iterable[ScoredCondition], *, lower_better: bool
) -> list[Prediction]:
    """Leave-one-scene-out predictions for one method and one target.

    Args:
        rows: One row per (scene, variant); at least two scenes.
        lower_better: True when a lower raw score means better quality (LPIPS).

    Returns:
        Predictions in input order.
    """
    items = list(rows)
    keys = [(r.scene, r.variant) for r in items]
    if len(set(keys)) != len(keys):
        raise ValueError(
            "each (scene, variant) may appear once per method and target; remove duplicates"
        )
    scenes = list(dict.fromkeys(r.scene for r in items))
    if len(scenes) < 2:
        raise ValueError(
            f"scene-held-out evaluation needs at least 2 scenes, got {scenes}; add another scene"
        )
    oriented = np.array(
        [-r.quality if lower_better else r.quality for r in items], dtype=np.float64
    )
    labels = np.array([_check_label(r.label) for r in items], dtype=np.int64)
    scene_of = np.array([r.scene for r in items], dtype=object)
    predictions: list[Prediction | None] = [None] * len(items)
    for scene in scenes:
        held = scene_of == scene
        fit = fit_threshold(oriented[~held], labels[~held])
        for index, predicted in zip(np.flatnonzero(held), fit.predict(oriented[held]), strict=True):
            row = items[index]
            predictions[index] = Prediction(
                scene=row.scene,
                variant=row.variant,
                quality=float(row.quality),
                label=int(labels[index]),
                prediction=int(predicted),
                correct=bool(predicted == labels[index]),
                fit_status=fit.status,
                threshold=fit.threshold,
            )
    return [p for p in predictions if p is not None]


@dataclass(frozen=True)
class MethodResult:
    """Correct held-out decisions of one method per target.

    Attributes:
        method: Quality method name (or ``"Always reliable"``).
        correct: Target -> correct decisions.
        total: Target -> decisions.
    """

    method: str
    correct: Mapping[str, int]
    total: Mapping[str, int]


def evaluate_methods(
    scores: Mapping[str, Mapping[tuple[str, str], float]],
    labels: Mapping[str, Mapping[tuple[str, str], int]],
    *,
    lower_better: Mapping[str, bool] | None = None,
) -> tuple[list[MethodResult], dict[tuple[str, str], list[Prediction]]]:
    """Scene-held-out classification for every method x target, plus the baseline.

    Args:
        scores: Method -> {(scene, variant): raw score}. A method shares its score
            across targets (scene-level quality).
        labels: Target -> {(scene, variant): H}. Only (scene, variant) keys present
            for both the method and the target are used.
        lower_better: Method -> direction; methods not listed use
            :func:`protocols.metric_directions.is_lower_better` on the method name.

    Returns:
        ``(results, predictions)``: one :class:`MethodResult` per method in input
        order then ``"Always reliable"``, and (method, target) -> predictions.
    """
    directions = dict(lower_better or {})
    results: list[MethodResult] = []
    all_predictions: dict[tuple[str, str], list[Prediction]] = {}
    for method, method_scores in scores.items():
        lb = directions[method] if method in directions else is_lower_better(method)
        correct: dict[str, int] = {}
        total: dict[str, int] = {}
        for target, target_labels in labels.items():
            keys = [k for k in target_labels if k in method_scores]
            if not keys:
                raise ValueError(
                    f"method {method!r} has no score for any (scene, variant) labelled for "
                    f"{target!r}; "
                    "check that scene and variant names match between the two files"
                )
            rows = [
                ScoredCondition(k[0], k[1], float(method_scores[k]), target_labels[k]) for k in keys
            ]
            predictions = scene_held_out_predictions(rows, lower_better=lb)
            all_predictions[(method, target)] = predictions
            correct[target] = sum(p.correct for p in predictions)
            total[target] = len(predictions)
        results.append(MethodResult(method, correct, total))
    results.append(always_reliable(labels))
    return results, all_predictions


def always_reliable(labels: Mapping[str, Mapping[tuple[str, str], int]]) -> MethodResult:
    """Baseline that predicts ``H = 0`` (reliable) for every condition."""
    correct = {t: sum(1 for v in m.values() if _check_label(v) == 0) for t, m in labels.items()}
    total = {t: len(m) for t, m in labels.items()}
    return MethodResult(ALWAYS_RELIABLE, correct, total)


#: Fewest discordant decisions for which an exact two-sided McNemar test can reach
#: p < 0.05: with d discordant decisions all in one method's favour, p = 2 * 0.5**d,
#: 0.0625 for d = 5 and 0.031 for d = 6.
MIN_DISCORDANT = 6
#: Significance level of the pooled choice (:func:`pooled_choice`).
CHOICE_ALPHA = 0.05


def pooled_choice(results: Sequence[MethodResult],
                  predictions: Mapping[tuple[str, str], Sequence[Prediction]],
                  targets: Sequence[str], *, all_target: str | None = None) -> str:
    """One line naming the best pooled method only when the decisions can tell.

    Pools each method's held-out decisions over ``targets`` (minus ``all_target``);
    ``results`` ends with the always-reliable baseline, which is not a candidate. Rule:
    the two most correct methods are compared decision by decision (exact two-sided
    McNemar test); a winner is named when p < :data:`CHOICE_ALPHA`, which needs at least
    :data:`MIN_DISCORDANT` decisions where exactly one of them is right. Otherwise the
    line says tied, too few decisions (with the number needed) or not significant.
    """
    methods = [r for r in results if r.method != ALWAYS_RELIABLE]
    pooled = [t for t in targets if t != all_target]
    if not methods or not pooled:
        return "no method to choose"

    def outcomes(method: str) -> dict[tuple[str, str, str], bool]:
        return {(t, p.scene, p.variant): p.correct for t in pooled
                for p in predictions.get((method, t), ())}

    score = {r.method: sum(r.correct[t] for t in pooled) for r in methods}
    total = {r.method: sum(r.total[t] for t in pooled) for r in methods}
    ranked = sorted(methods, key=lambda r: -score[r.method])
    best = ranked[0].method
    if len(ranked) == 1:
        return (f"one method ({best}: {score[best]}/{total[best]} correct), nothing to "
                "compare it with")
    runner = ranked[1].method
    top = [r.method for r in ranked if score[r.method] == score[best]]
    a, o = outcomes(best), outcomes(runner)
    shared = sorted(set(a) & set(o))
    b = sum(1 for k in shared if a[k] and not o[k])
    c = sum(1 for k in shared if o[k] and not a[k])
    if len(top) > 1:
        tie = (f"tied: {', '.join(top)} ({score[best]}/{total[best]} correct each)")
        if b + c < MIN_DISCORDANT:
            return (f"{tie}; too few decisions to choose ({len(shared)} pooled, {b + c} where "
                    f"they differ; an exact McNemar test needs >= {MIN_DISCORDANT})")
        return tie
    counts = (f"{best} {score[best]}/{total[best]} correct vs {runner} "
              f"{score[runner]}/{total[runner]}")
    if b + c < MIN_DISCORDANT:
        return (f"too few decisions to choose ({counts}; they differ on {b + c} of "
                f"{len(shared)} decisions, an exact two-sided McNemar test needs >= "
                f"{MIN_DISCORDANT} to reach p < {CHOICE_ALPHA:g})")
    p = mcnemar_exact_p(b, c)
    if p >= CHOICE_ALPHA:
        return f"no significant best ({counts}; exact McNemar p = {p:.3g})"
    return f"best pooled method: {best} ({counts}; exact McNemar p = {p:.3g})"


__all__ = [
    "ALL_THREE",
    "CHOICE_ALPHA",
    "MIN_DISCORDANT",
    "ALWAYS_RELIABLE",
    "FIT_CONSTANT",
    "FIT_THRESHOLD",
    "MethodResult",
    "Prediction",
    "ScoredCondition",
    "ThresholdFit",
    "all_tasks_label",
    "always_reliable",
    "candidate_thresholds",
    "evaluate_methods",
    "fit_threshold",
    "mcnemar_exact_p",
    "pooled_choice",
    "reliability_label",
    "scene_held_out_predictions",
]
