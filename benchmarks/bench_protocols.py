"""Speed of the protocols fast paths beside their plain references.

Run: ``python benchmarks/bench_protocols.py [--repeats N]``.

Measured side by side in one run:

* progress scoring of a recorded stream: vectorised :func:`bench.sim.progress.score_stream`
  vs stepping :class:`bench.sim.progress.ProgressScorer` (identical numbers, tested);
* MMRV: vectorised :func:`protocols.ranking.mmrv` vs the double loop
  :func:`protocols.ranking.mmrv_reference`;
* the YUBI regeneration: tables only vs tables + 10 figures (PNG + PDF).

Prints a Markdown table; the median of ``--repeats`` runs is reported.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _place_stream(steps: int):
    from bench.sim.progress import Frames

    t = np.linspace(0.0, 1.0, steps)
    cup = np.zeros((steps, 7))
    cup[:, 3] = 1.0
    cup[:, 0] = 0.3 * np.clip((t - 0.3) / 0.35, 0, 1)
    cup[:, 2] = 0.02 + np.where((t > 0.25) & (t < 0.65), 0.08, 0.0)
    bowl = np.zeros((steps, 7))
    bowl[:, 0], bowl[:, 3] = 0.3, 1.0
    ee = cup.copy()
    ee[:, 0] = np.where(t < 0.2, -0.3 + 1.5 * t, cup[:, 0])
    gripper = np.where((t > 0.2) & (t < 0.7), 0.2, 1.0)
    return Frames({"cup": cup, "bowl": bowl}, ee, gripper)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmarks and print a Markdown table."""
    from bench.sim.progress import ProgressScorer, StepState, place_in, score_stream
    from protocols.ranking import mmrv, mmrv_reference
    from protocols.yubi import load_yubi
    from protocols.yubi_report import clean_ranking, figures, mae_table, reliability_tables, table1

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument(
        "--steps", type=int, default=1800, help="stream length (1800 = 3 min at 10 Hz)"
    )
    parser.add_argument("--policies", type=int, default=200, help="policies for MMRV")
    args = parser.parse_args(argv)

    spec, stream = place_in("cup", "bowl"), _place_stream(args.steps)

    def online() -> None:
        scorer = ProgressScorer(spec, dt=0.1)
        for i in range(len(stream)):
            objects = {k: v[i] for k, v in stream.objects.items()}
            scorer.update(StepState(objects, stream.ee_pose[i], float(stream.gripper[i])))

    rng = np.random.default_rng(0)
    sim, real = rng.random(args.policies), rng.random(args.policies)
    data = load_yubi(Path(__file__).resolve().parents[1] / "results" / "yubi" / "data")

    def tables_only() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for build in (table1, clean_ranking, mae_table, reliability_tables):
                build(data, Path(tmp))

    def with_figures() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            tables_only()
            figures(data, Path(tmp))

    rows = [
        (
            f"progress, {args.steps} steps",
            "score_stream (vectorised)",
            _median_seconds(lambda: score_stream(spec, stream, dt=0.1), args.repeats),
        ),
        (
            f"progress, {args.steps} steps",
            "ProgressScorer.update loop",
            _median_seconds(online, args.repeats),
        ),
        (
            f"MMRV, {args.policies} policies",
            "mmrv (vectorised)",
            _median_seconds(lambda: mmrv(sim=sim, real=real), args.repeats),
        ),
        (
            f"MMRV, {args.policies} policies",
            "mmrv_reference (double loop)",
            _median_seconds(lambda: mmrv_reference(sim=sim, real=real), args.repeats),
        ),
        (
            "YUBI regeneration",
            "tables only (8 CSV + MD)",
            _median_seconds(tables_only, args.repeats),
        ),
        (
            "YUBI regeneration",
            "tables + 10 figures (PNG + PDF)",
            _median_seconds(with_figures, max(1, args.repeats // 2)),
        ),
    ]
    print("| workload | path | median seconds |")
    print("|---|---|---|")
    for workload, path, seconds in rows:
        print(f"| {workload} | {path} | {seconds:.4f} |")


if __name__ == "__main__":
    main()
