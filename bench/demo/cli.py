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
    commands = p.add_subparsers(dest="demo_command", metavar="{build}",
                                help="further demo commands (`bench demo build -h`)")
    add_build_parser(commands)


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


def add_build_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo build`` (the reconstructed backgrounds of the demo worlds)."""
    p = subparsers.add_parser(
        "build", help="regenerate the demo's reconstructed backgrounds (capture + training)",
        description="Simulate a handheld 200-degree fisheye capture of each ground-truth world, "
        "select frames, reproject to pinhole views, seed from depth and train the clean and "
        "the three coverage backgrounds (gsplat on CUDA, the CPU Warp trainer otherwise). "
        "Deterministic and resumable per (world, condition).")
    p.add_argument("--out", required=True, help="output directory (scenes/, captures/, work/)")
    p.add_argument("--worlds", default=None,
                   help="comma-separated worlds [default gt-duo,gt-flat,gt-g2]")
    p.add_argument("--conditions", default=None,
                   help="comma-separated conditions [default clean,central-pinhole,"
                   "contiguous-30,random-30]")
    p.add_argument("--iters", type=int, default=None,
                   help="training iterations per background [default: BuildConfig.iters]")
    p.add_argument("--resume", action="store_true",
                   help="continue an existing --out: finished artifacts with the same inputs "
                   "are kept, the rest is (re)built")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "gsplat"),
                   help="trainer backend [default auto: gsplat on CUDA, else cpu]")
    p.set_defaults(func=run_build)


def _names(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:
        return default
    return tuple(t.strip() for t in text.split(",") if t.strip())


def run_build(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from bench.demo.build import DEMO_CONDITIONS, DEMO_WORLDS, BuildConfig, build, check_names
    from bench.errors import BenchError

    worlds = _names(args.worlds, DEMO_WORLDS)
    conditions = _names(args.conditions, DEMO_CONDITIONS)
    check_names(worlds, conditions)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise BenchError(f"--out {out} exists and is not empty; pass --resume to continue it "
                         "or choose a new --out")
    config = BuildConfig(backend=args.backend)
    if args.iters is not None:
        if args.iters < 1:
            raise BenchError(f"--iters must be >= 1, got {args.iters}")
        config = dataclasses.replace(config, iters=args.iters)
    build(out, worlds=worlds, conditions=conditions, config=config)
    return 0
