"""``bench study run``: run a study spec end to end (stdlib imports only here)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench study run`` and ``bench study export``."""
    from bench.study.store import EXPORT_FORMATS  # stdlib-only module
    p = subparsers.add_parser(
        "study", help="run a paired study (conditions, quality, rollouts, verdicts)",
        description="Run the YUBI-Real2Sim protocol described by a JSON StudySpec.")
    inner = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    run = inner.add_parser(
        "run", help="run (or resume) a study",
        description="Build condition bundles, score Test/OBS-Probe views, run paired rollouts "
        "and write tables (CSV + Markdown), figures (PNG + PDF) and results.sqlite under --out. "
        "Every rollout is committed when it ends; --resume continues a killed run.")
    run.add_argument("--spec", required=True, help="study spec JSON file (see bench.study.spec)")
    run.add_argument("--out", required=True, help="output directory")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="continue the study already in --out (same spec); skips stored rows")
    mode.add_argument("--overwrite", action="store_true",
                      help="delete a previous study output in --out and start again")
    run.add_argument("--reuse-from", default=None, metavar="DIR",
                     help="copy the rollouts an earlier study output DIR already ran that this "
                     "spec plans (it may differ only in policies, trials, tasks, conditions, "
                     "metrics), after re-running one per (scene, task, policy, domain) as a "
                     "check; DIR is only read (docs/studies.md)")
    run.add_argument("--trials", type=int, default=None,
                     help="override the spec's simulated trials per cell (count)")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    run.add_argument("--include-clean", action="store_true",
                     help="also label and classify the clean condition in the reliability "
                     "classifier (default: the YUBI set, counterfactual conditions only)")
    run.add_argument("--no-report", action="store_true",
                     help="do not write the HTML report (--out/report/) at the end")
    run.add_argument("--dry-run", action="store_true",
                     help="print the resolved plan (cells, rollouts, retrainings, estimated CPU "
                     "time from one measured rollout per task) and write nothing")
    from bench.study.executors import add_executor_arguments  # stdlib + registry only

    add_executor_arguments(run)
    run.set_defaults(func=_run)
    export = inner.add_parser(
        "export", help="export a study's results.sqlite as CSV (or Parquet)",
        description="Write rollouts, quality and conditions (long format, sorted by key) as "
        "CSV or Parquet files.")
    export.add_argument("--results", required=True,
                        help="a study output directory or its results.sqlite")
    export.add_argument("--out", required=True, help="directory for the table files")
    export.add_argument("--format", default="csv", choices=EXPORT_FORMATS,
                        help="file format (parquet needs pyarrow)")
    export.set_defaults(func=_export)
    report = inner.add_parser(
        "report", help="write a study's self-contained HTML report",
        description="One HTML page (index.html, images beside it in img/, manifest.json) of a "
        "finished study output: design, success rates with Wilson intervals, ranking "
        "agreement, transitions, Test-view quality with thumbnails, reliability predictors, "
        "paired wrist-view rollouts (re-run deterministically) and provenance.")
    report.add_argument("run_dir", metavar="RUN_DIR",
                        help="a finished study output (bench study run --out, bench demo --out)")
    report.add_argument("--out", default=None,
                        help="report directory (default RUN_DIR/report; replaced if the bench "
                        "wrote it)")
    report.add_argument("--rollouts", type=int, default=2,
                        help="paired rollouts re-run per condition (count, default 2)")
    report.add_argument("--max-rollouts", type=int, default=40,
                        help="cap on rollouts re-run in all (count, default 40)")
    report.set_defaults(func=_report)
    from bench.study.compare_cli import add_compare_parser  # bench study compare

    add_compare_parser(inner)
    p.set_defaults(func=_needs_subcommand)


def _needs_subcommand(args: argparse.Namespace) -> int:
    raise ValueError("name a subcommand: bench study run --spec SPEC.json --out DIR")


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.errors import BenchError
    from bench.study.executors import config_from_args
    from bench.study.runner import run_study
    from bench.study.spec_file import load_spec

    spec, executor = load_spec(args.spec)  # the file read once: the study and its executor
    executor = config_from_args(args, executor)
    if args.trials is not None:
        if args.trials < 1:
            raise BenchError(f"--trials must be >= 1, got {args.trials}")
        spec = spec.replace(trials=args.trials)
    if args.include_clean:
        spec = spec.replace(include_clean=True)
    if args.dry_run:
        from bench.study.dry_run import make_plan
        from bench.study.preflight import check_study

        spec.validate_registries()
        spec.validate_inputs()
        # every refusal of the real run (names, sizes, bundles, inputs, disk), before the
        # plan's measured rollouts: a dry run must not accept what the run refuses (issue 30)
        check_study(spec, Path(args.out), spec_file=args.spec)
        from bench.study.executors import check_executor

        check_executor(executor)  # an unreachable ray --address is refused here too
        if args.reuse_from is not None:
            from bench.study.reuse import check_source, count_reusable

            found = check_source(spec, args.reuse_from, out=Path(args.out))
        for line in make_plan(spec).lines():
            print(line)
        if args.reuse_from is not None:
            held, planned = count_reusable(spec, found)
            print(f"--reuse-from {args.reuse_from}: {held} of the {planned} planned rollouts "
                  "are stored there (copied after the spot check, the rest run)")
        print(f"dry run: nothing written ({args.out} untouched)")
        return 0
    result = run_study(spec, Path(args.out), resume=args.resume, overwrite=args.overwrite,
                       progress=not args.no_progress, spec_file=args.spec, executor=executor,
                       reuse_from=args.reuse_from)
    for row in result.tables["ranking"]:
        print(f"{row['condition']}: ranking agreement {row['correct']}/{row['eligible']}, "
              f"MAE {row['mae']:.1f} pp, MMRV {row['mmrv']:.3f}, Pearson {row['pearson']:.2f} "
              f"(real: {row['real_source']})")
    reused = f", {result.reuse.rows} reused from {result.reuse.source}" \
        if result.reuse is not None else ""
    print(f"wrote {result.out} ({result.new_rollouts} new rollouts{reused})")
    if not args.no_report:
        from bench.study.report import write_report_or_warn

        write_report_or_warn(result.out)
    return 0


def _report(args: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.study.report import write_report

    if args.rollouts < 0 or args.max_rollouts < 0:
        raise BenchError("--rollouts and --max-rollouts must be >= 0")
    out = write_report(args.run_dir, args.out, rollouts_per_condition=args.rollouts,
                       max_rollouts=args.max_rollouts)
    print(f"wrote {out}/index.html")
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import check_output_path, check_parents
    from bench.study.store import DB_NAME, ResultsStore

    path = Path(args.results)
    db = path / DB_NAME if path.is_dir() else path
    if not db.is_file():
        raise BenchError(f"no results database at {db}; pass a study output directory")
    check_output_path(args.out, inputs=[("--results", db)])
    check_parents(args.out)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise BenchError(f"--out {args.out} is a file; name a directory for the CSV files")
    with ResultsStore.open_read_only(db) as store:
        written = store.export(args.out, fmt=args.format)
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0
