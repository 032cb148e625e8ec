"""Reliability predictors beyond the single threshold, and the paired test against the baseline.

Every predictor is evaluated scene-held-out exactly like the YUBI threshold
classifier (:func:`protocols.reliability.scene_held_out_predictions`): per target,
for each scene, fit on the other scenes' rows (all variants of the held-out scene
held out together) and predict the held-out rows; a single-class training fold
predicts that class. Registry :data:`PREDICTORS`:

* ``threshold``: the paper's rule on each metric's raw score (``H = 1 iff Q < tau``).
* ``rank``: the same threshold rule per metric on *within-scene ranks*: each
  (scene, variant)'s oriented score is ranked among that scene's evaluated
  variants (average ranks, scaled to [0, 1]); scene-level offsets of a metric
  (one room always scores lower) vanish. Only the scores of the held-out scene
  are used, never its labels.
* ``logistic``: scikit-learn ``LogisticRegression`` (L2, ``C = 1``, balanced
  class weights, lbfgs) on the paired changes ``dQ = Q_variant - Q_clean`` of
  every metric that has a clean score in every scene, oriented so that higher is
  better and standardised on the training fold; predict ``H = 1`` iff the fitted
  probability is ``>= 1/2``.

Comparison with always-reliable (predict ``H = 0``): the exact McNemar test on
the paired held-out decisions. Of the decisions where exactly one of the two is
correct, ``b`` favour the predictor and ``c`` the baseline; under "equally
accurate" ``b ~ Bin(b + c, 1/2)`` and the two-sided p is
``scipy.stats.binomtest(b, b + c, 0.5)``. It treats the decisions as independent
pairs, which they are not quite (the same scene's variants share a fold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from protocols.reliability import (
    ALWAYS_RELIABLE,
    FIT_CONSTANT,
    FIT_THRESHOLD,
    MethodResult,
    Prediction,
    ScoredCondition,
    fit_threshold,
    scene_held_out_predictions,
)

THRESHOLD = "threshold"
RANK = "rank"
LOGISTIC = "logistic"
FIT_LOGISTIC = "logistic_regression"
#: Registry of the predictors: name -> (what it is, one row per metric?).
PREDICTORS: dict[str, tuple[str, bool]] = {
    THRESHOLD: ("YUBI threshold on the raw score, per metric", True),
    RANK: ("threshold on within-scene ranks, per metric", True),
    LOGISTIC: ("logistic regression on dQ of all metrics with a clean score", False),
}

Scores = Mapping[str, Mapping[tuple[str, str], float]]
Labels = Mapping[str, Mapping[tuple[str, str], int]]


def parse_methods(text: str) -> list[str]:
    """``"threshold,rank"`` or ``"all"`` -> registry names, validated."""
    names = list(PREDICTORS) if text.strip() == "all" else [
        t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in PREDICTORS]
    if unknown or not names:
        raise ValueError(f"unknown --method {unknown or text!r}; use a comma list of "
                         f"{', '.join(PREDICTORS)} or all")
    return names


def _oriented(value: float, lower_better: bool) -> float:
    return -value if lower_better else value


def within_scene_ranks(rows: Sequence[ScoredCondition], *, lower_better: bool
                       ) -> list[ScoredCondition]:
    """Replace each score by its average rank among its scene's rows, scaled to [0, 1].

    Higher = better after orientation; a scene with a single row gets 1.
    """
    from scipy.stats import rankdata

    ranked = list(rows)
    out: list[ScoredCondition | None] = [None] * len(ranked)
    for scene in dict.fromkeys(r.scene for r in ranked):
        index = [i for i, r in enumerate(ranked) if r.scene == scene]
        values = np.array([_oriented(ranked[i].quality, lower_better) for i in index])
        ranks = rankdata(values)  # 1..n, ties averaged
        scaled = (ranks - 1.0) / (len(index) - 1.0) if len(index) > 1 else np.ones(1)
        for i, value in zip(index, scaled, strict=True):
            out[i] = ScoredCondition(ranked[i].scene, ranked[i].variant, float(value),
                                     ranked[i].label)
    return [r for r in out if r is not None]


def paired_changes(scores: Scores, clean_variant: str) -> tuple[list[str], dict]:
    """``dQ = Q - Q_clean`` per metric that has a clean score in every scene of it.

    Returns:
        ``(metrics used, {metric: {(scene, variant): dQ}})``; metrics lacking a clean
        score in some scene are left out (named in the returned list's complement).
    """
    used, changes = [], {}
    for metric, values in scores.items():
        scenes = {s for s, _ in values}
        clean = {s: values.get((s, clean_variant)) for s in scenes}
        if any(v is None for v in clean.values()):
            continue
        used.append(metric)
        changes[metric] = {(s, v): q - clean[s] for (s, v), q in values.items()}
    return used, changes


def _logistic_fold(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray
                   ) -> tuple[np.ndarray, str]:  # [M] predictions, fit status
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if train_y.min() == train_y.max():
        return np.full(test_x.shape[0], int(train_y[0]), dtype=np.int64), FIT_CONSTANT
    model = make_pipeline(StandardScaler(), LogisticRegression(
        C=1.0, class_weight="balanced", solver="lbfgs", max_iter=1000))
    model.fit(train_x, train_y)
    probability = model.predict_proba(test_x)[:, list(model.classes_).index(1)]
    return (probability >= 0.5).astype(np.int64), FIT_LOGISTIC


def logistic_predictions(changes: Mapping[str, Mapping[tuple[str, str], float]],
                         target_labels: Mapping[tuple[str, str], int],
                         lower_better: Mapping[str, bool]) -> list[Prediction]:
    """Scene-held-out logistic regression on the oriented dQ of every metric in ``changes``."""
    metrics = list(changes)
    keys = [k for k in target_labels if all(k in changes[m] for m in metrics)]
    if not keys:
        raise ValueError("no (scene, variant) has a dQ of every metric; check the clean variant")
    x = np.array([[_oriented(changes[m][k], lower_better[m]) for m in metrics] for k in keys])
    y = np.array([int(target_labels[k]) for k in keys], dtype=np.int64)
    scene_of = np.array([k[0] for k in keys], dtype=object)
    scenes = list(dict.fromkeys(scene_of))
    if len(scenes) < 2:
        raise ValueError("scene-held-out evaluation needs at least 2 scenes; add another scene")
    predictions: list[Prediction | None] = [None] * len(keys)
    for scene in scenes:
        held = scene_of == scene
        predicted, status = _logistic_fold(x[~held], y[~held], x[held])
        for i, value in zip(np.flatnonzero(held), predicted, strict=True):
            predictions[i] = Prediction(keys[i][0], keys[i][1], float("nan"), int(y[i]),
                                        int(value), bool(value == y[i]), status, None)
    return [p for p in predictions if p is not None]


def rank_predictions(values: Mapping[tuple[str, str], float],
                     target_labels: Mapping[tuple[str, str], int], *, lower_better: bool
                     ) -> list[Prediction]:
    """Scene-held-out threshold rule on within-scene ranks of one metric."""
    keys = [k for k in target_labels if k in values]
    rows = [ScoredCondition(k[0], k[1], float(values[k]), int(target_labels[k])) for k in keys]
    ranked = within_scene_ranks(rows, lower_better=lower_better)
    predictions = scene_held_out_predictions(ranked, lower_better=False)
    raw = {(r.scene, r.variant): r.quality for r in rows}
    return [Prediction(p.scene, p.variant, raw[(p.scene, p.variant)], p.label, p.prediction,
                       p.correct, p.fit_status, p.threshold) for p in predictions]


@dataclass(frozen=True)
class PredictorRun:
    """Held-out decisions of every requested predictor.

    Attributes:
        results: One :class:`MethodResult` per predictor row, then always-reliable.
        predictions: (row name, target) -> held-out decisions.
        logistic_features: Metrics the logistic regression used (empty if not run).
        left_out: Metrics left out of the logistic regression (no clean score).
    """

    results: list[MethodResult]
    predictions: dict[tuple[str, str], list[Prediction]]
    logistic_features: list[str]
    left_out: list[str]


def run_predictors(scores: Scores, labels: Labels, *, methods: Sequence[str],
                   lower_better: Mapping[str, bool], clean_variant: str) -> PredictorRun:
    """Every requested predictor, scene-held-out, on every target; plus always-reliable.

    Row names: ``threshold:<metric>``, ``rank:<metric>``, ``logistic``.
    """
    from protocols.reliability import always_reliable

    results: list[MethodResult] = []
    predictions: dict[tuple[str, str], list[Prediction]] = {}
    features: list[str] = []
    left_out: list[str] = []

    def add(row: str, per_target: dict[str, list[Prediction]]) -> None:
        for target, preds in per_target.items():
            predictions[(row, target)] = preds
        results.append(MethodResult(row, {t: sum(p.correct for p in v)
                                          for t, v in per_target.items()},
                                    {t: len(v) for t, v in per_target.items()}))

    for method in methods:
        if method == LOGISTIC:
            features, changes = paired_changes(scores, clean_variant)
            left_out = [m for m in scores if m not in features]
            if not features:
                raise ValueError(f"no metric has a score for the clean variant "
                                 f"{clean_variant!r} in every scene; logistic needs dQ = Q - "
                                 "Q_clean (pass --clean-variant NAME)")
            add(LOGISTIC, {t: logistic_predictions(changes, m, lower_better)
                           for t, m in labels.items()})
            continue
        for metric, values in scores.items():
            if method == THRESHOLD:
                per_target = {}
                for target, target_labels in labels.items():
                    keys = [k for k in target_labels if k in values]
                    rows = [ScoredCondition(k[0], k[1], float(values[k]), target_labels[k])
                            for k in keys]
                    per_target[target] = scene_held_out_predictions(
                        rows, lower_better=lower_better[metric])
            else:
                per_target = {t: rank_predictions(values, m, lower_better=lower_better[metric])
                              for t, m in labels.items()}
            add(f"{method}:{metric}", per_target)
    results.append(always_reliable(labels))
    return PredictorRun(results, predictions, features, left_out)


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar comparison of a predictor with always-reliable on paired decisions.

    Attributes:
        method: Predictor row.
        target: Target name (or ``"Total"`` for the task targets pooled).
        correct: Predictor's correct decisions.
        baseline_correct: Always-reliable's correct decisions.
        decisions: Paired decisions.
        b: Decisions only the predictor gets right.
        c: Decisions only the baseline gets right.
        p_value: Two-sided exact binomial p of ``b`` in ``b + c`` at 1/2 (1 when b + c = 0).
    """

    method: str
    target: str
    correct: int
    baseline_correct: int
    decisions: int
    b: int
    c: int
    p_value: float


def mcnemar_exact(predictor_correct: Sequence[bool], baseline_correct: Sequence[bool], *,
                  method: str = "", target: str = "") -> McNemar:
    """Exact McNemar test of two classifiers' correctness on the same decisions."""
    from protocols.stats import mcnemar_exact_p

    a = np.asarray(predictor_correct, dtype=bool)
    z = np.asarray(baseline_correct, dtype=bool)
    if a.shape != z.shape or a.ndim != 1:
        raise ValueError("McNemar needs the two classifiers' correctness on the same decisions")
    b, c = int(np.sum(a & ~z)), int(np.sum(~a & z))
    return McNemar(method, target, int(a.sum()), int(z.sum()), int(a.size), b, c,
                   mcnemar_exact_p(b, c))


def holm_adjusted(p_values: Sequence[float]) -> np.ndarray:  # [M] -> [M]
    """Holm's step-down adjusted p-values (family-wise error over all ``M`` comparisons).

    Sorted ascending, ``p_(i)`` becomes ``max_{j <= i} min(1, (M - j + 1) p_(j))``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (p.size - np.arange(p.size)) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def compare_with_baseline(run: PredictorRun, *, task_targets: Sequence[str]) -> list[McNemar]:
    """McNemar of every predictor row vs always-reliable, per target and pooled over tasks."""
    rows = []
    for result in run.results:
        if result.method == ALWAYS_RELIABLE:
            continue
        pooled_a: list[bool] = []
        pooled_z: list[bool] = []
        for target in result.correct:
            preds = run.predictions[(result.method, target)]
            a = [p.correct for p in preds]
            z = [p.label == 0 for p in preds]
            rows.append(mcnemar_exact(a, z, method=result.method, target=target))
            if target in task_targets:
                pooled_a += a
                pooled_z += z
        if pooled_a:
            rows.append(mcnemar_exact(pooled_a, pooled_z, method=result.method, target="Total"))
    return rows


__all__ = [
    "FIT_LOGISTIC",
    "FIT_THRESHOLD",
    "LOGISTIC",
    "PREDICTORS",
    "RANK",
    "THRESHOLD",
    "McNemar",
    "PredictorRun",
    "compare_with_baseline",
    "fit_threshold",
    "holm_adjusted",
    "logistic_predictions",
    "mcnemar_exact",
    "paired_changes",
    "parse_methods",
    "rank_predictions",
    "run_predictors",
    "within_scene_ranks",
]
