"""``bench study compare`` argument parsing (stdlib imports only; work in bench.study.compare)."""

from __future__ import annotations

import argparse


def add_compare_parser(inner: argparse._SubParsersAction) -> None:
    """Register ``bench study compare`` on the ``bench study`` subparsers."""
    from bench.study.store import DOMAINS
    p = inner.add_parser(
        "compare", help="paired deployment-fidelity comparison of two study outputs",
        description="Pair the rollouts of two study outputs (same spec, one deployment knob "
        "changed) and write per-task deltas with 95%% paired-bootstrap CIs, correlations of "
        "per-policy rates and time to first grasp (CSV + Markdown + PNG/PDF).")
    p.add_argument("--base", required=True, help="baseline study output directory")
    p.add_argument("--variant", required=True, help="variant study output directory")
    p.add_argument("--out", required=True, help="output directory for tables and figure")
    p.add_argument("--domain", default="sim", choices=DOMAINS,
                   help="which rollouts to pair")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from bench.study.compare import write_comparison

    tables = write_comparison(args.base, args.variant, args.out, domain=args.domain,
                              seed=args.seed, overwrite=args.overwrite)
    for row in tables["deltas"]:
        print(f"{row['task']}: delta success {row['delta_success']:+.3f} "
              f"[{row['success_ci_low']:+.3f}, {row['success_ci_high']:+.3f}], delta progress "
              f"{row['delta_progress']:+.3f} ({row['pairs']} pairs)")
    print(f"wrote {args.out}")
    return 0
