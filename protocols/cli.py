"""``bench tables``, ``bench reliability`` and ``bench stats`` (stdlib-only at import time)."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from protocols import DEFAULT_YUBI_DATA


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``tables``, ``reliability`` and ``stats`` on the ``bench`` parser."""
    _add_tables(subparsers)
    _add_reliability(subparsers)
    _add_stats(subparsers)


# --- bench tables yubi -------------------------------------------------------------------------


def _add_tables(subparsers: argparse._SubParsersAction) -> None:
    tables = subparsers.add_parser(
        "tables",
        help="regenerate a paper's tables and figures from its public data",
        description="Regenerate a paper's tables (CSV + Markdown) and figures (PNG + PDF).",
    )
    inner = tables.add_subparsers(dest="subcommand", metavar="PAPER")
    yubi = inner.add_parser(
        "yubi",
        help="YUBI-Real2Sim: Table I, reliability table, clean ranking, MAE, Fig. 4 + panels",
        description="Recompute YUBI-Real2Sim's tables from its public per-condition data. "
        "Predictions are recomputed from the quality and label columns; the published prediction "
        "column is only "
        "compared against (checks.md).",
    )
    yubi.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_YUBI_DATA,
        help="YUBI results/data directory (default: the copy shipped in results/yubi/data)",
    )
    yubi.add_argument(
        "--out", type=Path, required=True, help="output directory (created; must not exist)"
    )
    yubi.add_argument(
        "--overwrite", action="store_true", help="replace an existing --out directory"
    )
    yubi.set_defaults(func=_run_tables_yubi)
    tables.set_defaults(func=_tables_needs_paper)


def _tables_needs_paper(args: argparse.Namespace) -> int:
    raise ValueError("name the paper: bench tables yubi --out DIR")


def _check_out_not_inside_data(out: Path, data: Path) -> None:
    """--out may not be, contain, or lie inside --data (``bench.safety``)."""
    from bench.safety import check_output_path

    out_r, data_r = out.resolve(), data.resolve()
    if out_r == data_r or out_r in data_r.parents:
        raise ValueError(f"--out {out} would replace the input data {data}; choose another --out")
    check_output_path(out, inputs=[("--data", data)])


def _run_tables_yubi(args: argparse.Namespace) -> int:
    from bench.provenance import staged_output_dir
    from bench.safety import preflight_output_dir
    from protocols.yubi import load_yubi
    from protocols.yubi_report import regenerate

    _check_out_not_inside_data(args.out, args.data)
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=[("--data", args.data)])
    data = load_yubi(args.data)
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=[("--data", args.data)]) as staging:
        checks = regenerate(data, staging)
    table1 = checks["table1"]
    rel = checks["reliability"].get("reliability", {})
    print(
        f"wrote {args.out}: Table I rows matching the paper "
        f"{sum(c['match'] for c in table1)}/{len(table1)}; "
        f"reliability predictions matching the published ones "
        f"{rel.get('prediction_matches_published', 0)}/{rel.get('rows', 0)} (see checks.md)"
    )
    return 0


# --- bench reliability -------------------------------------------------------------------------


def _add_reliability(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reliability",
        help="scene-held-out reliability classifier on your own scores and labels",
        description="Leave-one-scene-out threshold classifier (YUBI-Real2Sim protocol): predict "
        "H = 1 (simulated ranking disagrees with real) iff the oriented quality score < tau.",
    )
    parser.add_argument(
        "--scores",
        type=Path,
        required=True,
        help="CSV with columns scene,variant,method,quality (quality in the metric's own units)",
    )
    parser.add_argument(
        "--labels",
        type=Path,
        required=True,
        help="CSV with columns target,scene,variant,label (label 1 = sim ranking disagrees "
        "with real, ties included; 0 = agrees)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="output directory (created; must not exist)"
    )
    parser.add_argument(
        "--lower-better",
        action="append",
        default=[],
        metavar="METHOD",
        help="METHOD's scores are better when lower (repeatable; default from the metric table)",
    )
    parser.add_argument(
        "--higher-better",
        action="append",
        default=[],
        metavar="METHOD",
        help="METHOD's scores are better when higher (repeatable)",
    )
    parser.add_argument(
        "--all-target",
        default=None,
        metavar="NAME",
        help="name of the derived all-tasks target (default: All-three for 3 tasks, "
        "else All-tasks); "
        "derived only when the labels file does not already contain it",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing --out directory"
    )
    parser.add_argument("--method", default="threshold",  # issue 17: protocols/predictors.py
                        help="predictors: comma list of threshold, rank, logistic, or all "
                        "(anything beyond threshold adds predictors*.csv with McNemar tests)")
    parser.add_argument("--clean-variant", default=None, metavar="NAME",
                        help="variant holding each scene's clean score, for dQ (default: clean)")
    parser.set_defaults(func=_run_reliability)


def _read_long_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; pass an existing CSV file")
    from bench.tabular import open_csv_text  # UTF-8 with or without a BOM

    with open_csv_text(path) as handle:
        reader = csv.DictReader(handle, strict=True)
        try:
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path.name} lacks columns {missing}; expected header {','.join(columns)}"
                )
            rows = list(reader)
        except csv.Error as exc:
            raise ValueError(f"{path.name}: malformed CSV ({exc}; an unclosed quote?); fix the "
                             "quoting") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path.name} is not UTF-8 text; re-save it as UTF-8 CSV") from None
    short = [i for i, row in enumerate(rows, start=2) if None in row.values() or None in row]
    if short:
        raise ValueError(f"{path.name} line {short[0]}: wrong number of fields; every row needs "
                         f"{','.join(columns)}")
    if not rows:
        raise ValueError(f"{path.name} has a header but no rows; add one row per (scene, variant)")
    return rows


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a number; write plain decimals") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{where}: quality must be finite, got {text!r}; drop that row")
    return value


def load_scores(path: Path) -> dict[str, dict[tuple[str, str], float]]:
    """Method -> {(scene, variant): quality} from a long-format scores CSV."""
    scores: dict[str, dict[tuple[str, str], float]] = {}
    for line, row in enumerate(
        _read_long_csv(path, ("scene", "variant", "method", "quality")), start=2
    ):
        key = (row["scene"], row["variant"])
        method_scores = scores.setdefault(row["method"], {})
        if key in method_scores:
            raise ValueError(
                f"{path.name} line {line}: duplicate {row['method']} score for {key}; keep one"
            )
        method_scores[key] = _number(row["quality"], f"{path.name} line {line}")
    return scores


def load_labels(
    path: Path, *, all_target: str | None
) -> tuple[dict[str, dict[tuple[str, str], int]], str]:
    """Target -> {(scene, variant): H}; the all-tasks target is derived when absent."""
    from protocols.reliability import all_tasks_label

    labels: dict[str, dict[tuple[str, str], int]] = {}
    for line, row in enumerate(
        _read_long_csv(path, ("target", "scene", "variant", "label")), start=2
    ):
        if row["label"].strip() not in ("0", "1"):
            raise ValueError(f"{path.name} line {line}: label must be 0 or 1, got {row['label']!r}")
        key = (row["scene"], row["variant"])
        target_labels = labels.setdefault(row["target"], {})
        if key in target_labels:
            raise ValueError(
                f"{path.name} line {line}: duplicate label for {row['target']} {key}; keep one"
            )
        target_labels[key] = int(row["label"])
    # a labels file that already holds All-three (e.g. the YUBI one) keeps that name
    name = all_target or ("All-three" if len(labels) == 3 or "All-three" in labels
                          else "All-tasks")
    tasks = [t for t in labels if t != name]
    if name not in labels and len(tasks) >= 2:
        shared = set.intersection(*(set(labels[t]) for t in tasks))
        keys = [k for k in labels[tasks[0]] if k in shared]
        labels[name] = {k: all_tasks_label(labels[t][k] for t in tasks) for k in keys}
    return labels, name


def _run_reliability(args: argparse.Namespace) -> int:
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.safety import preflight_output_dir
    from protocols.metric_directions import is_lower_better
    from protocols.reliability import evaluate_methods, pooled_choice
    from protocols.yubi_report import write_predictions, write_reliability

    inputs = [("--scores", args.scores), ("--labels", args.labels)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)
    scores = load_scores(args.scores)
    labels, all_name = load_labels(args.labels, all_target=args.all_target)
    both = set(args.lower_better) & set(args.higher_better)
    if both:
        raise ValueError(
            f"{sorted(both)} given as both --lower-better and --higher-better; pick one"
        )
    directions: dict[str, bool] = {}
    for method in scores:
        if method in args.lower_better or method in args.higher_better:
            directions[method] = method in args.lower_better
            continue
        try:
            directions[method] = is_lower_better(method)
        except ValueError:
            raise ValueError(
                f"unknown direction for method {method!r}; pass --lower-better {method!r} or "
                f"--higher-better {method!r}"
            ) from None
    unknown = (set(args.lower_better) | set(args.higher_better)) - set(scores)
    if unknown:
        raise ValueError(
            f"direction given for {sorted(unknown)}, which is not in {args.scores.name}; "
            "check the method names"
        )
    results, predictions = evaluate_methods(scores, labels, lower_better=directions)
    targets = list(labels)
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=inputs) as staging:
        negated = [m for m in scores if directions[m]]
        written = write_reliability(staging, "reliability", results, targets, all_target=all_name,
                                    negated=negated)
        written += write_predictions(staging, "reliability_predictions", predictions)
        extra_params = {}
        if args.method != "threshold":  # issue 17: the predictors beyond the threshold
            from protocols.predictor_report import predictors_for_cli

            paths, extra_params = predictors_for_cli(staging, args.method, scores, labels,
                                                     directions, all_target=all_name,
                                                     clean_variant=args.clean_variant)
            written += paths
        manifest = make_manifest(
            tool="reliability/1",
            params={
                "lower_better": directions,
                "all_target": all_name,
                "rule": "H=1 iff oriented Q < tau",
                **extra_params,
            },
            seed=None,
            inputs={"scores": args.scores, "labels": args.labels},
            outputs={p.name: p for p in written},
            counts={
                "methods": len(scores),
                "targets": len(targets),
                "decisions": sum(len(v) for v in predictions.values()),
            },
        )
        atomic_write_json(staging / "manifest.json", manifest)
    summary = "; " + pooled_choice(results, predictions, targets, all_target=all_name)
    print(
        f"wrote {args.out}/reliability.csv ({len(results) - 1} methods + always-reliable){summary}"
    )
    return 0


# --- bench stats -------------------------------------------------------------------------------


def _add_stats(subparsers: argparse._SubParsersAction) -> None:
    stats = subparsers.add_parser(
        "stats",
        help="one-line statistics: wilson, clopper-pearson, fisher, beta, mmrv",
        description="Quick checks of success-rate statistics (counts are whole numbers of trials).",
    )
    inner = stats.add_subparsers(dest="subcommand", metavar="STAT")
    for name, helptext in (
        ("wilson", "95%% Wilson score interval of K successes in N trials"),
        ("clopper-pearson", "exact Clopper-Pearson interval of K successes in N trials"),
        ("beta", "Beta posterior (uniform prior) of K successes in N trials"),
    ):
        sub = inner.add_parser(name, help=helptext)
        sub.add_argument("k", metavar="K", help="successes (whole number)")
        sub.add_argument("n", metavar="N", help="trials (whole number >= 1)")
        sub.add_argument(
            "--confidence", default="0.95", help="two-sided level in (0, 1) (default 0.95)"
        )
        sub.set_defaults(func=_run_stats)
    fisher = inner.add_parser("fisher", help="two-sided Fisher exact p of K1/N1 vs K2/N2")
    for arg, text in (
        ("k1", "successes of policy 1"),
        ("n1", "trials of policy 1"),
        ("k2", "successes of policy 2"),
        ("n2", "trials of policy 2"),
    ):
        fisher.add_argument(arg, metavar=arg.upper(), help=text)
    fisher.set_defaults(func=_run_stats)
    mmrv = inner.add_parser("mmrv", help="SIMPLER's MMRV and Pearson r of per-policy success rates")
    mmrv.add_argument(
        "--sim", required=True, help="comma-separated simulated rates in [0, 1], one per policy"
    )
    mmrv.add_argument(
        "--real", required=True, help="comma-separated real rates, same policies, same order"
    )
    mmrv.set_defaults(func=_run_stats)
    stats.set_defaults(func=_stats_needs_name)


def _stats_needs_name(args: argparse.Namespace) -> int:
    raise ValueError(
        "name a statistic: wilson K N | clopper-pearson K N | beta K N | fisher K1 N1 K2 N2 | mmrv"
    )


def _whole(text: str, name: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None
    if not abs(value) <= MAX_COUNT or value != int(value):  # also refuses inf and nan
        raise ValueError(
            f"{name} must be a whole number of trials (at most {MAX_COUNT:.0e}), got {text!r}"
        )
    return int(value)


MAX_COUNT = 1e12  # trials; beyond this float counts lose integer precision in the statistics


def _level(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number in (0, 1), e.g. 0.95, got {text!r}") from None
    if not 0.0 < value < 1.0:  # also refuses nan
        raise ValueError(
            f"{name} must be between 0 and 1 (exclusive), e.g. 0.95 for 95%, got {text!r}"
        )
    return value


def _rates(text: str, name: str) -> list[float]:
    try:
        rates = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--{name} must be comma-separated numbers, e.g. 0.2,0.5,0.9") from None
    outside = [r for r in rates if not 0.0 <= r <= 1.0]  # also catches NaN
    if outside:
        raise ValueError(f"--{name} rate {outside[0]} is outside [0, 1]; pass success rates as "
                         "fractions (e.g. 0.45 for 45%)")
    return rates


def _run_stats(args: argparse.Namespace) -> int:
    from protocols import ranking, stats

    name = args.subcommand
    if name == "fisher":
        k1, n1, k2, n2 = (_whole(getattr(args, a), a.upper()) for a in ("k1", "n1", "k2", "n2"))
        p = stats.fisher_exact_p(k1, n1, k2, n2)
        print(
            f"fisher {k1}/{n1} vs {k2}/{n2}: two-sided p = {p:.6g} "
            f"({'<' if p < 0.05 else '>='} 0.05)"
        )
        return 0
    if name == "mmrv":
        sim, real = _rates(args.sim, "sim"), _rates(args.real, "real")
        value = ranking.mmrv(sim=sim, real=real)
        r = ranking.pearson(sim=sim, real=real) if len(sim) >= 2 else float("nan")
        print(
            f"mmrv = {value:.6g} (violation size from real rates), pearson r = {r:.6g}, "
            f"policies = {len(sim)}"
        )
        return 0
    k, n = _whole(args.k, "K"), _whole(args.n, "N")
    confidence = _level(args.confidence, "--confidence")
    if name == "beta":
        post = stats.beta_posterior(k, n)
        ci = post.credible_interval(confidence)
        print(
            f"beta {k}/{n}: Beta({post.alpha:g}, {post.beta:g}), mean = {post.mean:.6f}, "
            f"{confidence:.0%} credible [{ci.low:.6f}, {ci.high:.6f}]"
        )
        return 0
    fn = stats.wilson_interval if name == "wilson" else stats.clopper_pearson_interval
    ci = fn(k, n, confidence=confidence)
    print(
        f"{name} {k}/{n}: rate = {ci.estimate:.6f}, "
        f"{confidence:.0%} CI [{ci.low:.6f}, {ci.high:.6f}]"
    )
    return 0
