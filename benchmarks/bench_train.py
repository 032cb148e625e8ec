"""Speed of the CPU 3DGS trainer: the Warp rasterizer vs the pure-torch one, side by side.

For each image size and Gaussian count it builds a synthetic capture (12 ring views of a
random Gaussian cloud, :mod:`bench.recon.synthetic`, initialised from its noisy seed) and
times full training iterations (render + 0.8 L1 + 0.2 D-SSIM loss + backward + Adam)
through the public :func:`bench.recon.train.train` with densification off, for

- ``raster="warp"`` (:mod:`bench.render.warp_grad`: torch projection + SH, Warp tile
  compositing forward and backward; the default) and
- ``raster="torch"`` (:mod:`bench.render.torch_raster`, the pruned block path; the
  reference and fallback),

at each ``--threads`` count (torch threads = Warp tile threads). The two rasterizers are
timed in alternating rounds of the same run so that load from other processes hits both;
quote the ratio. ``--recon`` also times a whole reconstruction: 3,000 iterations (default
densification, SH degree 1) of a 128 x 128 synthetic capture seeded with 40,000 points (the
size of ``bench scene sample``'s room), Warp path, and the torch path's first iterations.

    .venv/bin/python benchmarks/bench_train.py --sizes 64 128 256 \\
        --gaussians 10000 50000 200000 --threads 1 2 --recon --csv train_speed.csv

``--doc docs/speed/train.md`` writes the same tables with the command, date, machine and
load (``benchmarks/speed_doc.py``); the trainer manual quotes that file.
"""

from __future__ import annotations

import argparse
import csv
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.recon.capture import CaptureManifest
from bench.recon.synthetic import make_synthetic_capture
from bench.recon.train import TrainConfig, load_seed, train

RASTERS = ("warp", "torch")
GRID_HEADER = ["image", "Gaussians", "threads", "warp it/s", "torch it/s", "speed-up"]
RECON_HEADER = ["image", "views (train + test)", "seed points", "threads", "warp 3,000 it (s)",
                "held-out PSNR start -> end (dB)", "Gaussians at end", "torch s/it",
                "torch 3,000 it (estimate, s)", "speed-up (estimate)"]


def seconds_per_iteration(manifest, init, *, raster: str, threads: int, iters: int) -> float:
    """Wall seconds per training iteration (densification off, no evaluation)."""
    cfg = TrainConfig(iters=iters, densify=False, threads=threads, eval_every=10**9,
                      raster=raster, sh_degree=0)
    start = time.perf_counter()
    train(manifest, config=cfg, init=init)
    return (time.perf_counter() - start) / iters


def measure(size: int, gaussians: int, threads: int, iters: dict[str, int],
            rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cap = make_synthetic_capture(tmp, size=size, num_views=12, num_test=0,
                                     num_gaussians=gaussians, seed=0)
        manifest = CaptureManifest.load(cap.manifest_path)
        init = load_seed(cap.seed_path, config=TrainConfig(sh_degree=0))
        for raster in RASTERS:  # warm-up: kernel compilation, allocator, caches
            seconds_per_iteration(manifest, init, raster=raster, threads=threads, iters=1)
        total = dict.fromkeys(RASTERS, 0.0)
        for _ in range(rounds):  # alternate so that outside load hits both alike
            for raster in RASTERS:
                total[raster] += seconds_per_iteration(manifest, init, raster=raster,
                                                       threads=threads, iters=iters[raster])
    row = {"size": size, "gaussians": gaussians, "threads": threads}
    for raster in RASTERS:
        row[f"{raster}_its"] = rounds / total[raster]
    row["speedup"] = row["warp_its"] / row["torch_its"]
    return row


def reconstruction(threads: int, torch_iters: int) -> dict:
    """3,000-iteration reconstruction at demo size (Warp) + the torch path's first steps."""
    with tempfile.TemporaryDirectory() as tmp:
        cap = make_synthetic_capture(tmp, size=128, num_views=24, num_test=4,
                                     num_gaussians=40_000, seed=0)
        manifest = CaptureManifest.load(cap.manifest_path)
        cfg = TrainConfig(iters=3000, sh_degree=1, threads=threads, eval_every=1000)
        init = load_seed(cap.seed_path, config=cfg)
        start = time.perf_counter()
        result = train(manifest, config=cfg, init=init)
        warp_s = time.perf_counter() - start
        spent = []  # both runs evaluate the test views at the start and the end: difference
        for n in (1, 1 + torch_iters):
            probe = TrainConfig(iters=n, sh_degree=1, threads=threads, eval_every=10**9,
                                raster="torch")
            start = time.perf_counter()
            train(manifest, config=probe, init=init)
            spent.append(time.perf_counter() - start)
        torch_s = (spent[1] - spent[0]) / torch_iters
    return {"warp_seconds": warp_s, "psnr_0": result.log[0]["test_psnr"],
            "psnr_final": result.log[-1]["test_psnr"],
            "gaussians_final": result.log[-1]["num_gaussians"],
            "torch_seconds_per_it": torch_s, "torch_estimate_s": 3000 * torch_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128],
                        help="image widths = heights in pixels")
    parser.add_argument("--gaussians", type=int, nargs="+", default=[10_000, 50_000],
                        help="Gaussian counts")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="thread counts (torch and Warp tile kernels)")
    parser.add_argument("--iters", type=int, default=20,
                        help="timed Warp iterations per round")
    parser.add_argument("--torch-iters", type=int, default=5,
                        help="timed torch iterations per round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--recon", action="store_true",
                        help="also time a 3,000-iteration 128 px / 40k-point reconstruction")
    parser.add_argument("--csv", default=None, help="also write the table as CSV here")
    parser.add_argument("--note", action="append",
                        help="a sentence added to the doc's notes (repeatable)")
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # speed_doc beside this script
    from speed_doc import Table, command_line, run_started, write_speed_doc

    started = run_started()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with `&`
    iters = {"warp": args.iters, "torch": args.torch_iters}
    print(f"torch {torch.__version__}; {args.rounds} alternating rounds of {args.iters} Warp / "
          f"{args.torch_iters} torch iterations per cell; SH degree 0, densification off")
    print("| " + " | ".join(GRID_HEADER) + " |")
    print("|---|---|---|---|---|---|", flush=True)
    rows, cells, stopped = [], [], []
    grid = [(s, g, t) for s in args.sizes for g in args.gaussians for t in args.threads]
    for k, (s, g, t) in enumerate(grid):
        try:  # Ctrl-C stops the grid; the cells measured so far still go into the doc
            r = measure(s, g, t, iters, args.rounds)
        except KeyboardInterrupt:
            stopped = grid[k:]
            print(f"interrupted: {len(stopped)} cell(s) not measured", flush=True)
            break
        rows.append(r)
        cells.append(grid_cells(r))
        print("| " + " | ".join(cells[-1]) + " |", flush=True)
    if not rows:
        raise SystemExit("interrupted before the first cell; nothing to write")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    tables = [Table(f"Training iterations per second (wall time; {args.rounds} alternating "
                    f"round(s) of {args.iters} Warp / {args.torch_iters} torch iterations per "
                    "cell; SH degree 0, densification off); speed-up = warp it/s / torch it/s.",
                    GRID_HEADER, cells, align=["l", "r", "r", "r", "r", "r"])]
    recon_threads = min(args.threads)
    if args.recon and not stopped:
        r = reconstruction(recon_threads, args.torch_iters)
        print(f"reconstruction, 128x128, 24 views, 40,000 seed points, SH degree 1, "
              f"densification on, {recon_threads} thread(s): warp 3,000 iterations "
              f"{r['warp_seconds']:.0f} s (held-out PSNR {r['psnr_0']:.2f} -> "
              f"{r['psnr_final']:.2f} dB, {r['gaussians_final']:,} Gaussians); torch "
              f"{r['torch_seconds_per_it']:.3f} s/it over its first {args.torch_iters} "
              f"iterations -> >= {r['torch_estimate_s']:.0f} s for 3,000")
        tables.append(Table(
            "Whole reconstruction (`--recon`): 3,000 iterations, SH degree 1, default "
            "densification, Warp path, wall time; the torch path timed over its first "
            f"{args.torch_iters} iterations (densification has not grown the cloud yet, so "
            "its 3,000-iteration estimate is a lower bound).",
            RECON_HEADER, [recon_cells(r, recon_threads)], align=["l"] + ["r"] * 9))
    np.testing.assert_array_less(0, [r["warp_its"] for r in rows])
    if args.doc:
        notes = ["Synthetic ring captures (`bench.recon.synthetic`, 12 views, seed 0), "
                 "initialised from the capture's noisy seed; one iteration = render + 0.8 L1 + "
                 "0.2 D-SSIM + backward + Adam through `bench.recon.train.train`. `warp` = "
                 "`bench.render.warp_grad` (the default), `torch` = `bench.render.torch_raster` "
                 "(pruned block path, the reference). threads = torch threads = Warp tile "
                 "threads. Each cell starts with one untimed iteration of each path (kernel "
                 "compilation, caches)."]
        if stopped:
            notes.append(f"Interrupted (Ctrl-C) after {len(rows)} of {len(grid)} cells; not "
                         "measured: " + ", ".join(f"{s}x{s} / {g:,} / {t} thread(s)"
                                                  for s, g, t in stopped) + ".")
        write_speed_doc(args.doc, title="CPU trainer speed: Warp vs torch rasterizer",
                        command=command_line([__file__, *(sys.argv[1:] if argv is None
                                                          else argv)]),
                        tables=tables, notes=notes + list(args.note or []), started=started)


def grid_cells(r: dict) -> list[str]:
    """One row of the speed table, formatted as printed."""
    return [f"{r['size']}x{r['size']}", f"{r['gaussians']:,}", str(r["threads"]),
            f"{r['warp_its']:.2f}", f"{r['torch_its']:.2f}", f"{r['speedup']:.1f}x"]


def recon_cells(r: dict, threads: int) -> list[str]:
    """The reconstruction row, formatted as printed."""
    return ["128x128", "24 + 4", "40,000", str(threads), f"{r['warp_seconds']:.0f}",
            f"{r['psnr_0']:.2f} -> {r['psnr_final']:.2f}", f"{r['gaussians_final']:,}",
            f"{r['torch_seconds_per_it']:.3f}", f"{r['torch_estimate_s']:.0f}",
            f"{r['torch_estimate_s'] / r['warp_seconds']:.1f}x"]


if __name__ == "__main__":
    main()
