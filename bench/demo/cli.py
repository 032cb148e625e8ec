"""``bench demo``: run the bench end to end on generated data (stdlib imports only here)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo``."""
    p = subparsers.add_parser(
        "demo", help="run the main job end to end on a generated sample scene",
        description="Generate the sample room, apply every perturbation preset, write scene "
        "bundles + manifests and a summary table under --out.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the scene and every editor [default 0]")
    p.add_argument("--gaussians", type=int, default=40000,
                   help="background Gaussians of the sample room (count) [default 40000]")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.demo.run import DemoConfig, run_demo
    from bench.errors import BenchError

    if args.gaussians < 100:
        raise BenchError(f"--gaussians must be >= 100, got {args.gaussians}")
    run_demo(DemoConfig(out=Path(args.out), seed=args.seed, n_gaussians=args.gaussians,
                        overwrite=args.overwrite))
    return 0
