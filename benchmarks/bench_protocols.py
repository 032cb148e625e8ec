"""Speed of the protocols fast paths beside their plain references.

Run: ``python benchmarks/bench_protocols.py [--repeats N]``.

Measured side by side in one run:

* progress scoring of a recorded stream: vectorised :func:`bench.sim.progress.score_stream`
  vs stepping :class:`bench.sim.progress.ProgressScorer` (identical numbers, tested);
* MMRV: vectorised :func:`protocols.ranking.mmrv` vs the double loop
  :func:`protocols.ranking.mmrv_reference`;
* the YUBI regeneration: tables only vs tables + 10 figures (PNG + PDF).

Prints a Markdown table; the median of ``--repeats`` runs is reported. ``--doc
docs/speed/protocols.md`` writes it with the command, date and machine
(``benchmarks/speed_doc.py``), the file the protocols manual quotes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
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
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args(argv)
    from speed_doc import Table, command_line, render_table, run_started, write_speed_doc

    started = run_started()

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
            "`score_stream` (vectorised)",
            _median_seconds(lambda: score_stream(spec, stream, dt=0.1), args.repeats),
        ),
        (
            f"progress, {args.steps} steps",
            "`ProgressScorer.update` loop",
            _median_seconds(online, args.repeats),
        ),
        (
            f"MMRV, {args.policies} policies",
            "`mmrv` (vectorised)",
            _median_seconds(lambda: mmrv(sim=sim, real=real), args.repeats),
        ),
        (
            f"MMRV, {args.policies} policies",
            "`mmrv_reference` (double loop)",
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
    table = Table(f"Median seconds of {args.repeats} runs (figures: of "
                  f"{max(1, args.repeats // 2)}):", ["workload", "path", "median seconds"],
                  [[w, p, f"{t:.4f}"] for w, p, t in rows], align=["l", "l", "r"])
    print(render_table(table))
    per_step_ms = 1000 * rows[1][2] / args.steps
    if args.doc:
        write_speed_doc(
            args.doc, title="Protocols speed: vectorised paths vs their plain references",
            command=command_line([__file__, *(sys.argv[1:] if argv is None else argv)]),
            tables=[table], started=started,
            notes=[f"The online scorer (`ProgressScorer.update`) costs {per_step_ms:.2f} ms per "
                   "step here; `score_stream` gives identical numbers for a recorded stream.",
                   f"Progress stream: a synthetic pick-and-place of {args.steps} steps; MMRV: "
                   f"{args.policies} policies with uniform random sim / real success rates "
                   "(seed 0); YUBI: the committed `results/yubi/data`, written to a temporary "
                   "folder."])


if __name__ == "__main__":
    main()
