"""Tables of the reliability predictors, and their input CSVs from YUBI data or a study.

``bench reliability --method ...`` writes ``predictors.csv/.md`` (correct/total per
predictor row and target), ``predictors_mcnemar.csv/.md`` (exact McNemar vs
always-reliable) and ``predictors_predictions.csv/.md`` (every held-out decision).
``bench reliability-inputs`` turns the YUBI public data or a study's tables into the
long-format ``scores.csv`` / ``labels.csv`` that ``bench reliability`` reads.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.tabular import open_csv_text  # UTF-8 with or without a BOM
from protocols.predictors import McNemar, PredictorRun
from protocols.tablefmt import write_table

SCORE_HEADER = ("scene", "variant", "method", "quality")
LABEL_HEADER = ("target", "scene", "variant", "label")


def write_predictor_tables(out: Path, run: PredictorRun, comparisons: Sequence[McNemar],
                           targets: Sequence[str], *, task_targets: Sequence[str],
                           clean_variant: str) -> list[Path]:
    """The three predictor tables (CSV + Markdown) into ``out``."""
    header = ("method", *task_targets, "Total", *(t for t in targets if t not in task_targets))
    rows = []
    for result in run.results:
        tasks = [f"{result.correct[t]}/{result.total[t]}" for t in task_targets]
        total = (f"{sum(result.correct[t] for t in task_targets)}/"
                 f"{sum(result.total[t] for t in task_targets)}")
        rest = [f"{result.correct[t]}/{result.total[t]}" for t in targets
                if t not in task_targets]
        rows.append((result.method, *tasks, total, *rest))
    notes = ["Scene-held-out: every row is fitted on the other scenes and predicts the "
             "held-out scene's variants.",
             "threshold:M = YUBI rule on M's raw score; rank:M = the same rule on M's "
             "within-scene ranks; logistic = logistic regression on dQ = Q - Q_clean "
             f"(clean variant {clean_variant!r}) of: "
             f"{', '.join(run.logistic_features) or '-'}"
             + (f"; left out (no clean score): {', '.join(run.left_out)}" if run.left_out
                else "")]
    paths = write_table(out, "predictors", header, rows,
                        title="Reliability predictors: correct/total held-out decisions",
                        notes=notes)
    from protocols.predictors import holm_adjusted

    family = [i for i, m in enumerate(comparisons) if m.target not in task_targets]
    holm = dict(zip(family, holm_adjusted([comparisons[i].p_value for i in family]),
                    strict=True)) if family else {}
    mc_rows = [(m.method, m.target, m.correct, m.baseline_correct, m.decisions, m.b, m.c,
                f"{m.p_value:.4g}", f"{holm[i]:.4g}" if i in holm else "")
               for i, m in enumerate(comparisons)]
    paths += write_table(
        out, "predictors_mcnemar",
        ("method", "target", "correct", "always_reliable_correct", "decisions",
         "only_predictor_right", "only_baseline_right", "mcnemar_exact_p", "holm_p"), mc_rows,
        title="Each predictor vs always-reliable: exact McNemar test on the paired decisions",
        notes=["p = two-sided binomial test of only_predictor_right out of the discordant "
               "decisions at 1/2; Total pools the task targets (decisions treated as "
               "independent).",
               f"holm_p: Holm-adjusted over the {len(family)} Total and all-tasks rows of this "
               "table (the per-task rows are left unadjusted, for reading only)."])
    pred_rows = [(row, target, p.scene, p.variant, "" if np.isnan(p.quality) else repr(p.quality),
                  p.label, p.prediction, int(p.correct), p.fit_status,
                  "" if p.threshold is None else repr(p.threshold))
                 for (row, target), preds in run.predictions.items() for p in preds]
    paths += write_table(
        out, "predictors_predictions",
        ("method", "target", "heldout_scene", "variant", "quality", "label", "prediction",
         "correct", "fit_status", "threshold"), pred_rows,
        title="Held-out decisions of every predictor row")
    return paths


def yubi_inputs(data_dir: Path) -> tuple[list[tuple], list[tuple], list[Path]]:
    """Scores (degraded variants + the clean scores the public data has) and labels of YUBI.

    Degraded variants: ``quality`` and ``label`` of ``reliability_predictions.csv``.
    Clean: PSNR/SSIM/LPIPS Test from ``test_metrics_common_set.csv`` (``*_all`` columns,
    the same views as the variants' scores) and NVS-SQA Test from ``nvssqa_test_clean.csv``;
    the public data has no clean NVS-SQA OBS score.
    """
    from protocols.yubi import load_yubi

    data = load_yubi(data_dir)
    rows = data.reliability.get("reliability_predictions.csv")
    if not rows:
        raise FileNotFoundError(f"{data_dir}/reliability_predictions.csv not found; pass the "
                                "YUBI results/data directory")
    scores: dict[tuple[str, str, str], float] = {}
    labels: dict[tuple[str, str, str], int] = {}
    for r in rows:
        scores[(r.scene, r.variant, r.method)] = r.quality
        labels[(r.target, r.scene, r.variant)] = r.label
    common = data_dir / "test_metrics_common_set.csv"
    nvs = data_dir / "nvssqa_test_clean.csv"
    with open_csv_text(common) as handle:
        for row in csv.DictReader(handle):
            if row["condition"] == "clean":
                for method, column in (("PSNR Test", "psnr_all"), ("SSIM Test", "ssim_all"),
                                       ("LPIPS Test", "lpips_all")):
                    scores[(row["rig"], "Clean", method)] = float(row[column])
    with open_csv_text(nvs) as handle:
        for row in csv.DictReader(handle):
            scores[(row["rig"], "Clean", "NVS-SQA Test")] = float(row["score"])
    score_rows = [(s, v, m, repr(q)) for (s, v, m), q in scores.items()]
    label_rows = [(t, s, v, y) for (t, s, v), y in labels.items()]
    return score_rows, label_rows, [*data.files, common, nvs]


def study_inputs(tables_dir: Path) -> tuple[list[tuple], list[tuple], list[Path]]:
    """Scores (mean over frames per view protocol and metric) and labels of a study's tables.

    Reads ``quality.csv`` (per-frame rows of ``bench study export``) and
    ``reliability_labels.csv``; methods are named ``<view protocol>:<metric>`` as in the
    study.s own reliability table.
    """
    quality, label_file = tables_dir / "quality.csv", tables_dir / "reliability_labels.csv"
    if quality.is_file() and not label_file.is_file():
        with open_csv_text(quality) as handle:
            scenes = sorted({row["scene"] for row in csv.DictReader(handle)})
        why = (f"the study has {len(scenes)} scene{'' if len(scenes) == 1 else 's'} "
               f"({', '.join(scenes)}) and leave-one-scene-out reliability needs >= 2; run a "
               "study with two or more scenes" if len(scenes) < 2 else
               "no comparison was rankable (real outcomes not tied) in >= 2 scenes; add trials "
               "or scenes")
        raise FileNotFoundError(f"{label_file} not found: {why}")
    for path in (quality, label_file):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found; pass a study's tables/ directory "
                                    "(bench study run writes quality.csv and "
                                    "reliability_labels.csv there)")
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with open_csv_text(quality) as handle:
        for row in csv.DictReader(handle):
            method = f"{row['metric']} {row['view_protocol']}"
            values[(row["scene"], row["condition"], method)].append(float(row["value"]))
    score_rows = [(s, c, m, repr(float(np.mean(v)))) for (s, c, m), v in sorted(values.items())
                  if np.all(np.isfinite(v))]
    with open_csv_text(label_file) as handle:
        label_rows = [(r["target"], r["scene"], r["condition"], int(r["label"]))
                      for r in csv.DictReader(handle)]
    return score_rows, label_rows, [quality, label_file]


def write_inputs(out: Path, score_rows: list[tuple], label_rows: list[tuple]) -> list[Path]:
    """``scores.csv`` and ``labels.csv`` (deterministic bytes)."""
    from bench.provenance import atomic_write_bytes
    from protocols.tablefmt import csv_text

    paths = [out / "scores.csv", out / "labels.csv"]
    atomic_write_bytes(paths[0], csv_text(SCORE_HEADER, score_rows).encode("utf-8"))
    atomic_write_bytes(paths[1], csv_text(LABEL_HEADER, label_rows).encode("utf-8"))
    return paths


def predictors_for_cli(out: Path, method_text: str, scores, labels, directions, *,
                       all_target: str, clean_variant: str | None) -> tuple[list[Path], dict]:
    """What ``bench reliability --method`` adds: run the predictors, write their tables.

    Returns:
        ``(written paths, manifest params)``.
    """
    from protocols.predictors import compare_with_baseline, parse_methods, run_predictors

    methods = parse_methods(method_text)
    variants = {v for m in scores.values() for _, v in m}
    if clean_variant is None:
        clean_variant = next((v for v in sorted(variants) if v.lower() == "clean"), "clean")
    elif clean_variant not in variants:
        raise ValueError(f"--clean-variant {clean_variant!r} is not a variant of the scores "
                         f"file; use one of {sorted(variants)}")
    run = run_predictors(scores, labels, methods=methods, lower_better=directions,
                         clean_variant=clean_variant)
    targets = list(labels)
    tasks = [t for t in targets if t != all_target]
    comparisons = compare_with_baseline(run, task_targets=tasks)
    paths = write_predictor_tables(out, run, comparisons, targets, task_targets=tasks,
                                   clean_variant=clean_variant)
    return paths, {"methods": methods, "clean_variant": clean_variant,
                   "logistic_features": run.logistic_features,
                   "logistic": "StandardScaler + LogisticRegression(C=1, balanced, lbfgs)"}
