"""``bench demo``: run the whole study end to end on generated data (stdlib imports only here)."""

from __future__ import annotations

import argparse

QUICK = {"tasks": ("cup",), "trials": 1, "real_trials": 1, "n_gaussians": 5000,
         "max_frames": 150, "metrics": ("psnr", "ssim")}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo``."""
    p = subparsers.add_parser(
        "demo", help="run the main job: the whole study end to end on three generated scenes",
        description="Generate three sample rooms, apply every artifact preset, score quality, "
        "run paired rollouts of two vision-based policies per task, and write ranking, "
        "transition and reliability tables (CSV + Markdown), figures (PNG + PDF) and the "
        "regenerated YUBI tables under --out.")
    p.add_argument("--out", default=None, help="output directory (required)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of every editor and of the capture noise [default 0]")
    p.add_argument("--gaussians", type=int, default=None,
                   help="background Gaussians per sample room (count) [default 20000; "
                   "--quick 5000]")
    p.add_argument("--trials", type=int, default=None,
                   help="simulated rollouts per scene/condition/task/policy cell (count) "
                   "[default 3; --quick 1]")
    p.add_argument("--real-trials", type=int, default=None,
                   help="'real'-domain rollouts per scene/task/policy (count) "
                   "[default 20, YUBI's real count; --quick 1]")
    p.add_argument("--tasks", default=None,
                   help="comma-separated tasks (cup, tape, pen) [default all three; --quick cup]")
    p.add_argument("--quick", action="store_true",
                   help="smallest useful run: Cup only, 1 trial, 5000 Gaussians, PSNR + SSIM")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=run)
    add_train_policies_parser(p.add_subparsers(dest="demo_command", metavar="{train-policies}"))


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.demo.run import DemoConfig, run_demo
    from bench.errors import BenchError
    from bench.safety import preflight_output_dir

    if args.out is None:
        raise BenchError("bench demo needs --out DIR (the output directory)")
    if args.seed < 0:
        raise BenchError(f"--seed must be >= 0, got {args.seed}")
    preflight_output_dir(args.out, overwrite=args.overwrite)
    options = dict(QUICK) if args.quick else {}
    if args.gaussians is not None:
        if args.gaussians < 100:
            raise BenchError(f"--gaussians must be >= 100, got {args.gaussians}")
        options["n_gaussians"] = args.gaussians
    for name in ("trials", "real_trials"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
            options[name] = value
    if args.tasks is not None:
        tasks = tuple(t.strip().lower() for t in args.tasks.split(",") if t.strip())
        bad = sorted(set(tasks) - {"cup", "tape", "pen"})
        if not tasks or bad:
            raise BenchError(f"--tasks must name cup, tape and/or pen, got {args.tasks!r}")
        options["tasks"] = tasks
    run_demo(DemoConfig(out=Path(args.out), seed=args.seed, overwrite=args.overwrite, **options))
    return 0


def add_train_policies_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo train-policies`` (issue 12 item 3: the learned policies)."""
    p = subparsers.add_parser(
        "train-policies", help="re-record the demonstrations and retrain the learned policies",
        description="Record the scripted expert's noisy demonstrations in the three "
        "ground-truth worlds and train the behaviour-cloned policies (bc-large, bc-small) "
        "per task, deterministically; writes OUT/demos/, OUT/policies/<name>/<task>/ "
        "(the layout of bench/demo/assets/policies) and OUT/manifest.json. See "
        "docs/demo-policies.md.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--tasks", default="cup,tape,pen",
                   help="comma-separated tasks (cup, tape, pen) [default all three]")
    p.add_argument("--episodes", type=int, default=None,
                   help="demonstrations recorded per task (count) [default 300]")
    p.add_argument("--epochs", type=int, default=None,
                   help="training epochs (count) [default: the recipe's, 30 Cup/Tape, 20 Pen]")
    p.add_argument("--evaluate", type=int, default=0,
                   help="then roll each policy out this many times per task in the "
                   "ground-truth worlds and write OUT/eval.{csv,md} (count) [default 0]")
    p.add_argument("--resume", action="store_true",
                   help="keep the datasets and policies in --out whose config and inputs match")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out written by the bench")
    p.set_defaults(func=run_train_policies)


def run_train_policies(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import MARKER, marker_json, preflight_output_dir

    tasks = tuple(t.strip().lower() for t in args.tasks.split(",") if t.strip())
    bad = sorted(set(tasks) - {"cup", "tape", "pen"})
    if not tasks or bad:
        raise BenchError(f"--tasks must name cup, tape and/or pen, got {args.tasks!r}")
    for name in ("episodes", "epochs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BenchError(f"--{name} must be >= 1, got {value}")
    if args.evaluate < 0:
        raise BenchError(f"--evaluate must be >= 0, got {args.evaluate}")
    out = Path(args.out)
    if not (args.resume and (out / MARKER).is_file()):
        preflight_output_dir(out, overwrite=args.overwrite)
        if out.exists():  # --overwrite of a bench output: start afresh
            import shutil

            shutil.rmtree(out)
    from bench.demo.bc import TrainPoliciesConfig, train_policies, write_evaluation

    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_bytes(marker_json())
    options = {"tasks": tasks, "epochs": args.epochs}
    if args.episodes is not None:
        options["episodes"] = args.episodes
    train_policies(out, TrainPoliciesConfig(**options), resume=args.resume)
    if args.evaluate:
        write_evaluation(out, tasks=tasks, trials=args.evaluate)
    print(f"wrote {out}")
    return 0
