"""Regenerate the YUBI-Real2Sim tables and figures from its public data (``bench tables yubi``).

Everything is recomputed from success counts and from the ``quality`` and
``label`` columns; published ``prediction``/``fit_status``/``mae.csv`` values are
only compared against, and the comparison is written to ``checks.md`` /
``checks.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from protocols.figures import ranking_figure
from protocols.ranking import mae, rank_agreement
from protocols.reliability import (
    ALL_THREE,
    ALWAYS_RELIABLE,
    MethodResult,
    Prediction,
    evaluate_methods,
)
from protocols.stats import fisher_exact_p, wilson_interval
from protocols.tablefmt import write_table
from protocols.transitions import condition_transitions
from protocols.yubi import (
    CLEAN,
    CONDITION_LABELS,
    PAPER_CLEAN,
    PAPER_RELIABILITY,
    PAPER_TABLE1,
    YubiData,
    labels_from_success_rates,
)

TOOL = "yubi-tables/1"
SCENE_LABELS = {"Duo": "FR3 Duo", "Flat": "FR3 Flat", "G2": "TX-G2"}


def _frac(k: int, n: int) -> str:
    return f"{k}/{n}"


def _p(value: float) -> str:
    """A p-value with 4 significant digits (tiny p stays visible, unlike fixed decimals)."""
    return f"{value:.4g}"


def table1(data: YubiData, out: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    """``table1.csv``/``.md`` and per-comparison details ``transitions.csv``."""
    clean = list(data.clean.values())
    rows, detail_rows, checks = [], [], []
    for condition in data.conditions:
        cf = list(data.counterfactual[condition].values())
        result = condition_transitions(condition, clean, cf)
        row = (
            result.sig_lost,
            result.sig_gained,
            result.reversed,
            result.tied,
            result.agree,
            result.total,
        )
        rows.append((condition, *row))
        paper = PAPER_TABLE1.get(condition)
        checks.append(
            {
                "condition": condition,
                "regenerated": list(row),
                "paper": list(paper) if paper else None,
                "match": paper == row,
            }
        )
        for pair in result.pairs:
            scene, task = pair.label.split("/")
            detail_rows.append(
                (
                    condition,
                    scene,
                    task,
                    pair.clean_outcome,
                    pair.cf_outcome,
                    _p(pair.clean_p),
                    _p(pair.cf_p),
                    pair.sig_lost,
                    pair.sig_gained,
                    pair.reversed,
                    pair.tied,
                )
            )
    header = ("condition", "sig_lost", "sig_gained", "reversed", "tied", "agree", "total")
    md_rows = [(CONDITION_LABELS.get(r[0], r[0]), *r[1:5], _frac(r[5], r[6])) for r in rows]
    paths = write_table(
        out,
        "table1",
        header,
        rows,
        title="Effect of each counterfactual condition on the scene-task comparisons "
        "(significance: two-sided Fisher p < 0.05 lost/gained vs. Clean; ranking vs. Clean)",
        md_header=(
            "CF condition",
            "Sig. lost",
            "Sig. gained",
            "Reversed",
            "Tied",
            "Agreement with real",
        ),
        md_rows=md_rows,
    )
    paths += write_table(
        out,
        "transitions",
        (
            "condition",
            "scene",
            "task",
            "clean_outcome",
            "cf_outcome",
            "clean_p",
            "cf_p",
            "sig_lost",
            "sig_gained",
            "reversed",
            "tied",
        ),
        detail_rows,
        title="Per-comparison transitions (clean -> counterfactual)",
    )
    return paths, checks


def clean_ranking(data: YubiData, out: Path) -> tuple[list[Path], dict[str, Any]]:
    """``clean_ranking.csv``: rates, Wilson intervals, outcome per comparison; scene + overall."""
    rows, md_rows = [], []
    for (scene, task), pair in data.clean.items():
        cells, md_cells = [], []
        for k, n in (
            (pair.real_k1, pair.real_n1),
            (pair.real_k2, pair.real_n2),
            (pair.sim_k1, pair.sim_n1),
            (pair.sim_k2, pair.sim_n2),
        ):
            ci = wilson_interval(k, n)
            cells += [_frac(k, n), ci.estimate, ci.low, ci.high]
            md_cells.append(
                f"{k}/{n} = {100 * ci.estimate:.1f} [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"
            )
        p = fisher_exact_p(pair.sim_k1, pair.sim_n1, pair.sim_k2, pair.sim_n2)
        pair_mae = mae([pair], eligible_only=False)
        rows.append((scene, task, *cells, _p(p), pair.outcome, "", "", pair_mae))
        md_rows.append((scene, task, *md_cells, _p(p), pair.outcome, "", f"{pair_mae:.2f}"))
    blank = [""] * 18  # 16 rate cells, sim_fisher_p, outcome
    for scene in data.scenes:
        pairs = [data.clean[(scene, t)] for t in data.tasks if (scene, t) in data.clean]
        result = rank_agreement(pairs)
        scene_row = (_frac(result.correct, result.eligible), result.accuracy, mae(pairs))
        rows.append((scene, "all", *blank, *scene_row))
        md_rows.append((scene, "all", *[""] * 6, scene_row[0], f"{scene_row[2]:.2f}"))
    overall = rank_agreement(data.clean.values())
    overall_mae = mae(data.clean.values())
    overall_frac = _frac(overall.correct, overall.eligible)
    rows.append(("all", "all", *blank, overall_frac, overall.accuracy, overall_mae))
    md_rows.append(("all", "all", *[""] * 6, overall_frac, f"{overall_mae:.4f}"))
    header = ["scene", "task"]
    for cell in ("real_pi1", "real_pi2", "sim_pi1", "sim_pi2"):
        header += [f"{cell}_k/n", f"{cell}_rate", f"{cell}_wilson_low", f"{cell}_wilson_high"]
    header += ["sim_fisher_p", "outcome", "acc_rank_k/n", "acc_rank", "mae_pp"]
    paths = write_table(
        out,
        "clean_ranking",
        header,
        rows,
        title="Clean policy ranking: successes/trials = rate % [95% Wilson interval %]",
        md_header=(
            "scene",
            "task",
            "Real π1",
            "Real π2",
            "Sim π1",
            "Sim π2",
            "Fisher p (sim)",
            "outcome",
            "Acc_rank",
            "MAE (pp)",
        ),
        md_rows=md_rows,
        notes=[
            "Rows with task = all summarise a scene (or all scenes): "
            "Acc_rank = k/|M| over eligible "
            "pairs, MAE in percentage points over eligible pairs and both policies.",
            "outcome: correct / reversed / sim_tie (wrong) / real_tie (unrankable).",
        ],
    )
    check = {
        "correct": overall.correct,
        "eligible": overall.eligible,
        "mae_pp": overall_mae,
        "paper": PAPER_CLEAN,
        "match": (overall.correct, overall.eligible)
        == (PAPER_CLEAN["correct"], PAPER_CLEAN["eligible"])
        and abs(overall_mae - PAPER_CLEAN["mae_pp"]) < 5e-5,
    }
    return paths, check


def mae_table(data: YubiData, out: Path) -> tuple[list[Path], dict[str, Any]]:
    """``mae.csv`` in the published layout, recomputed from counts and compared with it."""
    rows, exact, close, compared = [], 0, 0, 0
    for condition in (CLEAN, *data.conditions):
        pairs_by_key = data.clean if condition == CLEAN else data.counterfactual[condition]
        for scene in data.scenes:
            pairs = [p for (s, _), p in pairs_by_key.items() if s == scene]
            value = mae(pairs)
            text = repr(value)
            n_cells = 2 * rank_agreement(pairs).eligible
            rows.append((condition, scene, n_cells, text))
            published = data.published_mae.get((condition, scene))
            if published is not None:
                compared += 1
                exact += published == (n_cells, text)
                close += published[0] == n_cells and abs(float(published[1]) - value) < 1e-9
    paths = write_table(
        out,
        "mae",
        ("condition", "scene", "n_policy_cells", "mae_pp"),
        rows,
        title="MAE per condition and scene (percentage points, eligible pairs, both policies)",
    )
    check = {
        "rows": len(rows),
        "compared_with_published": compared,
        "byte_identical_values": exact,
        "within_1e-9": close,
        "match": compared == len(rows) == close,
    }
    return paths, check


def _method_order(rows) -> list[str]:
    return list(dict.fromkeys(r.method for r in rows))


def reliability_tables(data: YubiData, out: Path) -> tuple[list[Path], dict[str, Any]]:
    """``reliability.csv`` (+ CrossScore variant) recomputed from quality + label columns."""
    paths: list[Path] = []
    checks: dict[str, Any] = {}
    for file_name, rows in data.reliability.items():
        stem = (
            "reliability"
            if file_name == "reliability_predictions.csv"
            else "reliability_crossscore"
        )
        methods = _method_order(rows)
        targets = list(dict.fromkeys(r.target for r in rows))
        scores = {
            m: {(r.scene, r.variant): r.quality for r in rows if r.method == m} for m in methods
        }
        labels = {
            t: {
                (r.scene, r.variant): r.label
                for r in rows
                if r.target == t and r.method == methods[0]
            }
            for t in targets
        }
        results, predictions = evaluate_methods(scores, labels)
        paths += write_reliability(out, stem, results, targets)
        paths += write_predictions(out, f"{stem}_predictions", predictions)
        checks[stem] = _compare_published(rows, predictions, results, labels, data)
    return paths, checks


def _task_targets(targets: list[str], all_target: str = ALL_THREE) -> list[str]:
    return [t for t in targets if t != all_target]


def write_reliability(
    out: Path,
    stem: str,
    results: list[MethodResult],
    targets: list[str],
    *,
    all_target: str = ALL_THREE,
    negated: Sequence[str] | None = None,
) -> list[Path]:
    """``stem.csv``/``.md``: method, per-task correct/total, Total over tasks, all-tasks target.

    ``negated`` names the lower-is-better methods for the table note (None: the
    YUBI methods, where only LPIPS is).
    """
    tasks = _task_targets(targets, all_target)
    header = ("method", *tasks, "Total", *(t for t in targets if t == all_target))
    rows = []
    for result in results:
        cells = [_frac(result.correct[t], result.total[t]) for t in tasks]
        total = _frac(sum(result.correct[t] for t in tasks), sum(result.total[t] for t in tasks))
        tail = (
            [_frac(result.correct[all_target], result.total[all_target])]
            if all_target in targets
            else []
        )
        rows.append((result.method, *cells, total, *tail))
    return write_table(
        out,
        stem,
        header,
        rows,
        title="Scene-held-out reliability classification: correct/total held-out decisions",
        notes=[
            "Predict H = 1 (unreliable) iff the oriented score Q < tau; "
            "tau fitted on the other scenes "
            "by balanced accuracy (ties: sensitivity, then smaller tau); "
            + _negated_note(negated),
            f"Total pools the task targets; {ALWAYS_RELIABLE} predicts H = 0 everywhere.",
        ],
    )


def _negated_note(negated: Sequence[str] | None) -> str:
    if negated is None:
        return "LPIPS negated."
    if not negated:
        return "every score is higher-is-better (none negated)."
    return f"lower-is-better scores negated: {', '.join(negated)}."


def write_predictions(
    out: Path, stem: str, predictions: Mapping[tuple[str, str], list[Prediction]]
):
    """``stem.csv``/``.md``: every held-out decision with its fold's threshold (oriented scale)."""
    table = []
    for (method, target), preds in predictions.items():
        for p in preds:
            table.append(
                (
                    method,
                    target,
                    p.scene,
                    p.variant,
                    repr(p.quality),
                    p.label,
                    p.prediction,
                    int(p.correct),
                    p.fit_status,
                    "" if p.threshold is None else repr(p.threshold),
                )
            )
    header = (
        "method",
        "target",
        "heldout_scene",
        "variant",
        "quality",
        "label",
        "prediction",
        "correct",
        "fit_status",
        "threshold_oriented",
    )
    return write_table(out, stem, header, table, title="Recomputed held-out predictions")


def _compare_published(rows, predictions, results, labels, data: YubiData) -> dict[str, Any]:
    lookup = {(m, t, p.scene, p.variant): p for (m, t), preds in predictions.items() for p in preds}
    pred_match = status_match = 0
    mismatches = []
    for r in rows:
        mine = lookup[(r.method, r.target, r.scene, r.variant)]
        pred_match += mine.prediction == r.published_prediction
        status_match += mine.fit_status == r.published_fit_status
        if mine.prediction != r.published_prediction or mine.fit_status != r.published_fit_status:
            mismatches.append([r.method, r.target, r.scene, r.variant])
    variants = tuple(dict.fromkeys(r.variant for r in rows))
    recomputed = labels_from_success_rates(data, variants)
    label_total = label_match = 0
    for target, values in labels.items():
        for key, value in values.items():
            if key in recomputed.get(target, {}):
                label_total += 1
                label_match += recomputed[target][key] == value
    table = {}
    for result in results:
        tasks = _task_targets(list(result.correct))
        table[result.method] = {
            **{t: result.correct[t] for t in result.correct},
            "Total": sum(result.correct[t] for t in tasks),
        }
    paper = {
        m: dict(zip(("Cup", "Tape", "Pen", "Total", ALL_THREE), v, strict=True))
        for m, v in PAPER_RELIABILITY.items()
    }
    paper_match = {
        m: all(v is None or table.get(m, {}).get(k) == v for k, v in paper[m].items())
        for m in paper
        if m in table
    }
    return {
        "rows": len(rows),
        "prediction_matches_published": pred_match,
        "fit_status_matches_published": status_match,
        "mismatched_rows": mismatches,
        "labels_checked_against_success_rates": label_total,
        "labels_matching_success_rates": label_match,
        "regenerated_correct_counts": table,
        "paper_table_match": paper_match,
    }


def figures(data: YubiData, out: Path) -> list[Path]:
    """Fig. 4 (clean) and one disturbance panel figure per counterfactual condition."""
    from bench.progress import progress as progress_bar

    fig_dir = out / "figures"
    paths = ranking_figure(
        fig_dir / "fig4_clean_ranking",
        data.clean,
        scenes=data.scenes,
        tasks=data.tasks,
        title="Clean",
        scene_labels=SCENE_LABELS,
    )
    # progress on stderr, shown only on a terminal (disable=None)
    for condition in progress_bar(data.conditions, desc="figures", unit="fig", disable=None):
        paths += ranking_figure(
            fig_dir / f"disturbance_{condition}",
            data.counterfactual[condition],
            scenes=data.scenes,
            tasks=data.tasks,
            title=CONDITION_LABELS.get(condition, condition),
            clean=data.clean,
            scene_labels=SCENE_LABELS,
        )
    return paths


def _checks_markdown(checks: dict[str, Any]) -> str:
    lines = ["# Regenerated vs published", ""]
    t1 = checks["table1"]
    lines.append(f"Table I rows matching the paper: {sum(c['match'] for c in t1)}/{len(t1)}")
    for c in t1:
        if not c["match"]:
            lines.append(f"- {c['condition']}: regenerated {c['regenerated']}, paper {c['paper']}")
    cr = checks["clean_ranking"]
    lines.append(
        f"Clean ranking: {cr['correct']}/{cr['eligible']} correct, MAE {cr['mae_pp']:.4f} pp "
        f"(paper: {PAPER_CLEAN['correct']}/{PAPER_CLEAN['eligible']}, {PAPER_CLEAN['mae_pp']} pp)"
    )
    m = checks["mae"]
    lines.append(
        f"mae.csv: {m['within_1e-9']}/{m['rows']} values equal the published file within 1e-9 "
        f"({m['byte_identical_values']} byte-identical)"
    )
    for stem, rel in checks["reliability"].items():
        lines.append(
            f"{stem}: predictions recomputed from quality + label match the published "
            f"prediction column in {rel['prediction_matches_published']}/{rel['rows']} rows, "
            f"fit_status in {rel['fit_status_matches_published']}/{rel['rows']}; labels agree with "
            f"the success-rate data in {rel['labels_matching_success_rates']}/"
            f"{rel['labels_checked_against_success_rates']} checked rows"
        )
        for method, ok in rel["paper_table_match"].items():
            lines.append(f"- {method}: {'matches' if ok else 'DIFFERS FROM'} the paper's table")
    return "\n".join(lines) + "\n"


def regenerate(data: YubiData, out: Path) -> dict[str, Any]:
    """Write every table, figure, check and the manifest into ``out`` (an empty staging dir)."""
    import json

    import matplotlib

    from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest

    outputs: list[Path] = []
    checks: dict[str, Any] = {}
    paths, checks["table1"] = table1(data, out)
    outputs += paths
    paths, checks["clean_ranking"] = clean_ranking(data, out)
    outputs += paths
    paths, checks["mae"] = mae_table(data, out)
    outputs += paths
    paths, checks["reliability"] = reliability_tables(data, out)
    outputs += paths
    outputs += figures(data, out)
    atomic_write_bytes(
        out / "checks.json", (json.dumps(checks, indent=2, sort_keys=True) + "\n").encode()
    )
    atomic_write_bytes(out / "checks.md", _checks_markdown(checks).encode("utf-8"))
    outputs += [out / "checks.json", out / "checks.md"]
    root = data.root
    manifest = make_manifest(
        tool=TOOL,
        params={
            "alpha": 0.05,
            "confidence": 0.95,
            "interval": "wilson",
            "test": "fisher two-sided",
        },
        seed=None,
        inputs={str(p.relative_to(root)): p for p in data.files},
        outputs={str(p.relative_to(out)): p for p in outputs},
        counts={
            "conditions": len(data.conditions),
            "comparisons": len(data.clean),
            "files_written": len(outputs),
        },
        extra={"matplotlib": matplotlib.__version__},
    )
    atomic_write_json(out / "manifest.json", manifest)
    return checks
