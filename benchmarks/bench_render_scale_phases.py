"""Where a frame's time goes at scan size: per-phase CPU time, today's path vs the exact path.

Both contenders on ONE thread in the same process, interleaved frame by frame on the
same poses (the ring of ``bench_render_scale.py``). Phases are timed around each Warp
launch and sort (``time.process_time``; CPU launches run synchronously):

- ``projection``: ``_project_kernel`` (today) / ``_project_simd_kernel`` plus the lanes it
  defers to ``_project_rows_kernel`` (exact);
- ``depth sort``: Warp's radix sort of the drawn Gaussians (today) / ``_depth_sort_kernel``
  (exact: radix sort and depth ties in one pass);
- ``binning``: ``_bin_kernel`` (today: count, scan, scatter and pack) /
  ``_scatter_prefetch_kernel``;
- ``blend``: the tile rasterizer;
- ``host``: everything else (numpy compaction, ties, tile offsets, block culling, copies).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render_scale_phases.py [--out DIR]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_render_scale import cameras  # noqa: E402

PHASES = {"_project_kernel": "projection", "_project_simd_kernel": "projection",
          "_project_rows_kernel": "projection", "_depth_sort_kernel": "depth sort",
          "_bin_kernel": "binning", "_scatter_kernel": "binning",
          "_scatter_prefetch_kernel": "binning", "_raster_tile_kernel": "blend",
          "_raster_packed_kernel": "blend", "_raster_kernel": "blend"}
COLUMNS = ("projection", "depth sort", "binning", "blend", "host", "total")


class PhaseTimer:
    """Wraps ``wp.launch`` and ``wp.utils.radix_sort_pairs`` to add up CPU time per phase."""

    def __init__(self) -> None:
        import warp as wp

        self.wp, self.launch, self.sort = wp, wp.launch, wp.utils.radix_sort_pairs
        self.acc: dict[str, float] = {}

        def launch(kernel, *args, **kwargs):
            c0 = time.process_time()
            out = self.launch(kernel, *args, **kwargs)
            phase = PHASES.get(kernel.key, "host")
            self.acc[phase] = self.acc.get(phase, 0.0) + time.process_time() - c0
            return out

        def sort(*args, **kwargs):
            c0 = time.process_time()
            out = self.sort(*args, **kwargs)
            self.acc["depth sort"] = self.acc.get("depth sort", 0.0) + time.process_time() - c0
            return out

        wp.launch, wp.utils.radix_sort_pairs = launch, sort

    def frame(self, fn) -> dict[str, float]:
        self.acc = {}
        c0 = time.process_time()
        fn()
        total = time.process_time() - c0
        phases = dict(self.acc)
        phases["host"] = total - sum(phases.values()) + phases.get("host", 0.0)
        phases["total"] = total
        return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, default=3_000_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--models", nargs="+", default=["pinhole", "fisheye"])
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    from bench.render import render
    from bench.scene.sample import sample_background

    splats = sample_background(seed=0, n_gaussians=args.gaussians)
    timer = PhaseTimer()
    lines = ["| image | camera | path | " + " | ".join(f"{c} ms" for c in COLUMNS) + " |",
             "|" + "---|" * (3 + len(COLUMNS))]
    for size in args.sizes:
        for model in args.models:
            cams = cameras(model, size)
            paths = {"today": dict(culling=False), "exact": {}}
            for kw in paths.values():
                render(splats, cams[0], backend="cpu", **kw)  # warm-up
            rec = {k: [] for k in paths}
            for i in range(args.frames):
                for name, kw in paths.items():
                    cam = cams[i % len(cams)]
                    rec[name].append(timer.frame(
                        lambda cam=cam, kw=kw: render(splats, cam, backend="cpu", **kw)))
            for name, frames in rec.items():
                med = {c: 1000 * float(np.median([f.get(c, 0.0) for f in frames]))
                       for c in COLUMNS}
                lines.append(f"| {size}x{size} | {model} | {name} | "
                             + " | ".join(f"{med[c]:.0f}" for c in COLUMNS) + " |")
                print(lines[-1], file=sys.stderr)
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "render_scale_phases.md").write_text(
            table + f"\n\n{args.gaussians:,} Gaussians, 1 thread, median of {args.frames} "
            "frames per path and cell\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
