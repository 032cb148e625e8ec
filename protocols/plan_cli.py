"""``bench plan trials`` and ``bench reliability-inputs`` (stdlib-only at import time)."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

PILOT_COLUMNS = ("scene", "task", "policy", "successes", "trials")
TOOL = "plan-trials/1"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``plan trials`` and ``reliability-inputs``."""
    plan = subparsers.add_parser(
        "plan", help="plan how many rollouts a ranking needs (exact, before running them)",
        description="Trial planning for two success rates (exact binomial enumeration).")
    inner = plan.add_subparsers(dest="subcommand", metavar="WHAT")
    trials = inner.add_parser(
        "trials", help="trials per policy for Fisher power, a right sign, a Wilson half-width",
        description="Smallest trials per policy for (a) two-sided Fisher p < alpha with the "
        "given power, (b) the given probability that the simulated order is right (ties "
        "wrong), (c) the given expected 95%% Wilson half-width; exact enumeration of the "
        "binomial outcomes. Give --p1/--p2, --grid or --pilot.")
    source = trials.add_mutually_exclusive_group(required=True)
    source.add_argument("--p1", type=float, help="success rate of pi_1 (fraction; with --p2)")
    source.add_argument("--grid", help="comma-separated rates; every pair p1 > p2 is planned")
    source.add_argument("--pilot", type=Path,
                        help="CSV of pilot counts: scene,task,policy,successes,trials "
                        "(two policies per scene-task, pi_1 first)")
    trials.add_argument("--p2", type=float, help="success rate of pi_2 (with --p1)")
    trials.add_argument("--alpha", type=float, default=0.05, help="Fisher level (default 0.05)")
    trials.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    trials.add_argument("--sign-prob", type=float, default=0.9,
                        help="target P(simulated order right) (default 0.9)")
    trials.add_argument("--half-width", type=float, default=0.1,
                        help="target expected Wilson half-width, as a fraction (default 0.1)")
    trials.add_argument("--max-trials", type=int, default=500,
                        help="largest trials per policy searched (default 500)")
    trials.add_argument("--out", type=Path, required=True, help="output directory (new)")
    trials.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    trials.set_defaults(func=_run_trials)
    plan.set_defaults(func=_needs_what)

    inputs = subparsers.add_parser(
        "reliability-inputs", help="scores.csv + labels.csv for bench reliability, from YUBI "
        "data or a study", description="Write the long-format scores.csv and labels.csv that "
        "bench reliability reads, from the YUBI public data (--yubi) or a study's tables "
        "(--study-tables).")
    from_ = inputs.add_mutually_exclusive_group(required=True)
    from_.add_argument("--yubi", type=Path, help="YUBI results/data directory")
    from_.add_argument("--study-tables", type=Path,
                       help="a study's tables/ directory (quality.csv, reliability_labels.csv)")
    inputs.add_argument("--out", type=Path, required=True, help="output directory (new)")
    inputs.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    inputs.set_defaults(func=_run_inputs)


def _needs_what(args: argparse.Namespace) -> int:
    raise ValueError("name what to plan: bench plan trials --p1 0.8 --p2 0.5 --out DIR")


def _rates(text: str) -> list[float]:
    try:
        rates = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--grid must be comma-separated rates, e.g. 0.1,0.5,0.9; got "
                         f"{text!r}") from None
    if len(rates) < 2 or any(not 0.0 <= r <= 1.0 for r in rates):
        raise ValueError("--grid needs at least two distinct rates in [0, 1], e.g. 0.1,0.5,0.9")
    return rates


def read_pilot(path: Path) -> list[tuple[str, str, str, str, tuple[int, int], tuple[int, int]]]:
    """Pairs ``(scene, task, pi_1, pi_2, (k1, n1), (k2, n2))`` from a pilot-counts CSV."""
    from protocols._validate import check_successes

    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; pass a CSV with header "
                                f"{','.join(PILOT_COLUMNS)}")
    from bench.tabular import open_csv_text  # UTF-8 with or without a BOM

    with open_csv_text(path) as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in PILOT_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path.name} lacks columns {missing}; expected header "
                             f"{','.join(PILOT_COLUMNS)}")
        cells: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
        for line, row in enumerate(reader, start=2):
            try:
                k, n = check_successes(float(row["successes"]), float(row["trials"]),
                                       k_name="successes", n_name="trials")
            except ValueError as exc:
                raise ValueError(f"{path.name} line {line}: {exc}") from None
            if n == 0:
                raise ValueError(f"{path.name} line {line}: 0 trials; a pilot cell needs >= 1")
            policies = cells.setdefault((row["scene"], row["task"]), {})
            if row["policy"] in policies:
                raise ValueError(f"{path.name} line {line}: duplicate policy {row['policy']!r} "
                                 f"for {row['scene']}/{row['task']}; keep one row per policy")
            policies[row["policy"]] = (k, n)
    pairs = []
    for (scene, task), policies in cells.items():
        if len(policies) != 2:
            raise ValueError(f"{path.name}: {scene}/{task} has {len(policies)} policies; "
                             "give exactly two (pi_1 first) per scene-task")
        (p1, c1), (p2, c2) = policies.items()
        pairs.append((scene, task, p1, p2, c1, c2))
    if not pairs:
        raise ValueError(f"{path.name} has no rows; add two policies per scene-task")
    return pairs


def _run_trials(args: argparse.Namespace) -> int:
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from protocols.power import PlanTargets

    targets = PlanTargets(alpha=args.alpha, power=args.power, sign_probability=args.sign_prob,
                          half_width=args.half_width, max_trials=args.max_trials)
    if (args.p1 is None) != (args.p2 is None):
        raise ValueError("--p1 and --p2 go together; give both rates")
    for flag, rate in (("--p1", args.p1), ("--p2", args.p2)):  # before --out is staged
        if rate is not None and not 0.0 <= rate <= 1.0:  # NaN fails too
            raise ValueError(f"{flag} {rate:g} is not a success rate; pass a fraction in [0, 1]")
    if args.p1 is not None and args.p1 == args.p2:  # no difference to detect: power is nan
        raise ValueError(f"--p1 {args.p1:g} equals --p2 {args.p2:g}: equal rates have no "
                         "difference to detect (Fisher power and the sign probability are "
                         "undefined); give two different rates, e.g. --p1 0.8 --p2 0.5")
    pilot = read_pilot(args.pilot) if args.pilot is not None else None
    grid = _rates(args.grid) if args.grid is not None else None
    _check_pairs(grid, pilot)
    with staged_output_dir(args.out, overwrite=args.overwrite) as staging:
        if pilot is not None:
            written, summary = _plan_pilot(staging, pilot, targets)
        else:
            rates = grid if grid is not None else None
            written, summary = _plan_rates(staging, targets, rates=rates,
                                           pair=None if rates else (args.p1, args.p2))
        manifest = make_manifest(
            tool=TOOL, params={**targets.__dict__, "test": "fisher two-sided, p < alpha",
                               "sign": "ties count as wrong", "wilson": "expected half-width",
                               "grid": grid, "p1": args.p1, "p2": args.p2},
            seed=None, inputs={"pilot": args.pilot} if args.pilot else None,
            outputs={p.name if p.parent == staging else f"{p.parent.name}/{p.name}": p
                     for p in written},
            counts={"pairs": summary["pairs"]})
        atomic_write_json(staging / "manifest.json", manifest)
    print(f"wrote {args.out}: {summary['line']}")
    return 0


def _check_pairs(grid: list[float] | None, pilot: list | None) -> None:
    """Refuse a plan of more than MAX_PLAN_PAIRS pairs before --out exists (issue 30)."""
    from bench.safety import MAX_PLAN_PAIRS

    if grid is not None:
        pairs = len(grid) * (len(grid) - 1) // 2
        if pairs > MAX_PLAN_PAIRS:
            raise ValueError(f"--grid of {len(grid):,} rates plans {pairs:,} pairs "
                             f"({len(grid):,} x {len(grid) - 1:,} / 2), above the cap of "
                             f"{MAX_PLAN_PAIRS:,} pairs (about 100 rates); use fewer rates")
    if pilot is not None and len(pilot) > MAX_PLAN_PAIRS:
        raise ValueError(f"--pilot holds {len(pilot):,} pilot pairs (scene-task cells), above "
                         f"the cap of {MAX_PLAN_PAIRS:,}; split the CSV into several plans")


def _n_text(n: int, cap: int) -> str:
    return str(n) if n > 0 else f">{cap}"


def _plan_rates(out: Path, targets, *, rates, pair):
    import numpy as np

    from protocols.plan_figures import trials_heatmap
    from protocols.power import plan_pairs
    from protocols.tablefmt import write_table

    if rates is None:
        p1s, p2s = [pair[0]], [pair[1]]
    else:
        p1s = [a for a in rates for b in rates if a > b]
        p2s = [b for a in rates for b in rates if a > b]
    plans = plan_pairs(p1s, p2s, targets)
    cap = targets.max_trials
    header = ("p1", "p2", "fisher_trials", "fisher_power", "sign_trials", "sign_probability",
              "wilson_trials", "wilson_half_width")
    rows = [(p.p1, p.p2, p.fisher_trials, p.fisher_power, p.sign_trials, p.sign_probability,
             p.wilson_trials, p.wilson_half_width) for p in plans]
    md_rows = [(f"{p.p1:g}", f"{p.p2:g}", _n_text(p.fisher_trials, cap),
                f"{p.fisher_power:.3f}", _n_text(p.sign_trials, cap),
                f"{p.sign_probability:.3f}", _n_text(p.wilson_trials, cap),
                f"{p.wilson_half_width:.3f}") for p in plans]
    paths = write_table(out, "trials", header, rows, title="Trials per policy", md_rows=md_rows,
                        notes=_notes(targets))
    if rates is not None:
        index = {r: i for i, r in enumerate(rates)}
        tables = {name: np.zeros((len(rates), len(rates)), dtype=np.int64)
                  for name in ("fisher", "sign")}
        for p in plans:
            for name, n in (("fisher", p.fisher_trials), ("sign", p.sign_trials)):
                i, j = index[p.p1], index[p.p2]
                tables[name][i, j] = tables[name][j, i] = n
        paths += trials_heatmap(out / "figures" / "trials_grid", rates, {
            f"Fisher p < {targets.alpha:g} with power {targets.power:g}": tables["fisher"],
            f"P(right order) >= {targets.sign_probability:g}": tables["sign"]},
            max_trials=cap)
    first = plans[0]
    line = (f"{len(plans)} rate pairs; e.g. {first.p1:g} vs {first.p2:g}: Fisher "
            f"{_n_text(first.fisher_trials, cap)}, sign {_n_text(first.sign_trials, cap)}, "
            f"Wilson {_n_text(first.wilson_trials, cap)} trials per policy")
    return paths, {"pairs": len(plans), "line": line}


def _notes(targets) -> list[str]:
    return [f"fisher_trials: smallest n per policy with P(two-sided Fisher p < {targets.alpha:g})"
            f" >= {targets.power:g} (exact; power is not monotone in n, see the curve);",
            f"sign_trials: smallest n with P(simulated order = true order) >= "
            f"{targets.sign_probability:g}, ties wrong;",
            f"wilson_trials: smallest n with expected 95% Wilson half-width <= "
            f"{targets.half_width:g} for both policies; >N = not reached by {targets.max_trials}."]


def _plan_pilot(out: Path, pilot, targets):
    import numpy as np

    from protocols.plan_figures import power_curves
    from protocols.power import (
        fisher_assurance,
        fisher_power_curve,
        plan_pairs,
        sign_probability_curve,
    )
    from protocols.tablefmt import write_table

    cap = targets.max_trials
    p1s = [c1[0] / c1[1] for *_, c1, _c2 in pilot]
    p2s = [c2[0] / c2[1] for *_, c2 in pilot]
    plans = plan_pairs(p1s, p2s, targets)
    rows, md_rows = [], []
    for (scene, task, pi1, pi2, c1, c2), plan in zip(pilot, plans, strict=True):
        assurance = float("nan")
        if plan.fisher_trials > 0:
            assurance = float(fisher_assurance(([c1[0]], [c1[1]]), ([c2[0]], [c2[1]]),
                                               plan.fisher_trials, alpha=targets.alpha)[0])
        rows.append((scene, task, pi1, pi2, f"{c1[0]}/{c1[1]}", f"{c2[0]}/{c2[1]}",
                     plan.fisher_trials, plan.fisher_power, assurance, plan.sign_trials,
                     plan.sign_probability, plan.wilson_trials, plan.wilson_half_width))
        md_rows.append((scene, task, pi1, pi2, f"{c1[0]}/{c1[1]}", f"{c2[0]}/{c2[1]}",
                        _n_text(plan.fisher_trials, cap), f"{plan.fisher_power:.3f}",
                        f"{assurance:.3f}", _n_text(plan.sign_trials, cap),
                        f"{plan.sign_probability:.3f}", _n_text(plan.wilson_trials, cap),
                        f"{plan.wilson_half_width:.3f}"))
    header = ("scene", "task", "pi_1", "pi_2", "pilot_pi_1", "pilot_pi_2", "fisher_trials",
              "fisher_power", "fisher_assurance", "sign_trials", "sign_probability",
              "wilson_trials", "wilson_half_width")
    notes = [*_notes(targets),
             "Rates are the pilot's k/n; fisher_assurance = expected power at fisher_trials "
             "over the pilot's Beta(k+1, n-k+1) posteriors (beta-binomial predictive, exact). "
             "A pilot tie (equal rates) has no difference to find (>N)."]
    paths = write_table(out, "trials", header, rows, title="Trials per policy from pilot counts",
                        md_rows=md_rows, notes=notes)
    found = [p.fisher_trials for p in plans if p.fisher_trials > 0]
    upto = min(cap, max(20, int(1.25 * max(found)) if found else 50))
    ns = list(range(1, upto + 1))
    fisher = fisher_power_curve(p1s, p2s, ns, alpha=targets.alpha)  # [N, G]
    sign = np.nan_to_num(sign_probability_curve(p1s, p2s, ns))
    curves: dict[str, dict] = {}
    for g, (scene, task, *_rest) in enumerate(pilot):
        curves.setdefault(task, {})[scene] = (fisher[:, g], sign[:, g])
    paths += power_curves(out / "figures" / "power_curves", ns, curves, alpha=targets.alpha,
                          power=targets.power, sign_target=targets.sign_probability)
    worst = max(found) if found else 0
    line = (f"{len(plans)} pilot pairs; largest Fisher requirement "
            f"{_n_text(worst, cap)} trials per policy")
    return paths, {"pairs": len(plans), "line": line}


def _run_inputs(args: argparse.Namespace) -> int:
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from protocols.predictor_report import study_inputs, write_inputs, yubi_inputs

    source = args.yubi if args.yubi is not None else args.study_tables
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is not a directory; pass an existing directory")
    scores, labels, files = yubi_inputs(source) if args.yubi else study_inputs(source)
    with staged_output_dir(args.out, overwrite=args.overwrite) as staging:
        written = write_inputs(staging, scores, labels)
        atomic_write_json(staging / "manifest.json", make_manifest(
            tool="reliability-inputs/1", params={"source": "yubi" if args.yubi else "study"},
            seed=None, inputs={str(p.relative_to(source)): p for p in files},
            outputs={p.name: p for p in written},
            counts={"scores": len(scores), "labels": len(labels)}))
    print(f"wrote {args.out}: {len(scores)} scores, {len(labels)} labels")
    return 0
