"""Frames per second of the ``cpu`` (Warp) backend vs pure-torch tile rasterizers.

Contenders: ``cpu`` (Warp kernels), ``torch-dense`` (the straightforward torch tile
implementation: every tile pixel x every Gaussian binned to the tile, the issue's
"obvious alternative") and ``torch`` (the pruned torch path the CPU trainer uses).

Both run on ONE thread in the same process, on the procedural sample room
(``bench.scene.sample.sample_background``, SH degree 3) seen from a ring of 8
poses around the table (cycled, so consecutive frames differ), for 50k and
200k Gaussians, 128x128 and 256x256, pinhole (70 deg horizontal FOV) and fisheye
direct (equidistant, 200 deg). The backends are interleaved (one frame of each torch
path, then cpu frames for as long) so all see the same load on a shared machine.
Reported: median CPU time per frame (``time.process_time``, robust to other
jobs on a shared machine; both backends run on one thread), frames/s from it, the
speed-up of ``cpu`` over ``torch``, and the median wall-clock times for reference.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render.py [--out DIR] [--doc PATH]

``--doc docs/speed/render.md`` writes the table with the command, date and machine
(``benchmarks/speed_doc.py``); the rendering manual quotes that file.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def cameras(model: str, size: int):
    from bench.scene.cameras import Camera, orbit

    poses = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=8)
    if model == "pinhole":
        return [Camera.pinhole_from_fov(size, size, fov_x_deg=70.0, world_from_camera=p)
                for p in poses]
    return [Camera.equidistant_fisheye(size, size, fov_deg=200.0, world_from_camera=p)
            for p in poses]


CONTENDERS = ("cpu", "torch-dense", "torch")


def _render_fn(contender: str):
    from functools import partial

    from bench.render import render
    from bench.render.torch_backend import render_torch

    if contender == "torch-dense":
        return partial(render_torch, dense_tiles=True)
    return partial(render, backend=contender)


def time_contenders(splats, cams, *, seconds: float,
                    min_rounds: int) -> dict[str, dict[str, list]]:
    """Interleave the backends so all see the same machine load (shared CI boxes).

    Each round renders one frame of each torch path, then ``cpu`` frames for about as
    long as the slower one (1-20). Records wall time and process CPU time
    (``time.process_time``: unaffected by other processes competing for the cores).
    """
    fns = {c: _render_fn(c) for c in CONTENDERS}
    for fn in fns.values():
        fn(splats, cams[0])  # warm-up: upload, compile, allocate
    times: dict[str, dict[str, list]] = {c: {"wall": [], "cpu": []} for c in CONTENDERS}

    def frame(contender: str, cam) -> float:
        w0, c0 = time.perf_counter(), time.process_time()
        fns[contender](splats, cam)
        wall = time.perf_counter() - w0
        times[contender]["wall"].append(wall)
        times[contender]["cpu"].append(time.process_time() - c0)
        return wall

    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or time.perf_counter() - start < seconds:
        budget = max(frame("torch-dense", cams[rounds % len(cams)]),
                     frame("torch", cams[rounds % len(cams)]))
        spent, k = 0.0, 0
        while k < 20 and spent < budget:
            spent += frame("cpu", cams[len(times["cpu"]["wall"]) % len(cams)])
            k += 1
        rounds += 1
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256], help="pixels")
    parser.add_argument("--models", nargs="+", default=["pinhole", "fisheye"])
    parser.add_argument("--seconds", type=float, default=4.0, help="time per cell (s)")
    parser.add_argument("--min-frames", type=int, default=3, help="minimum torch frames per cell")
    parser.add_argument("--out", type=Path, help="write render_bench.csv / .md here")
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args(argv)
    from speed_doc import Table, command_line, render_table, run_started, write_speed_doc

    started = run_started()

    import torch

    torch.set_num_threads(1)
    from bench.scene.sample import sample_background

    rows = []
    for n in args.gaussians:
        splats = sample_background(seed=0, n_gaussians=n)
        for size in args.sizes:
            for model in args.models:
                cams = cameras(model, size)
                times = time_contenders(splats, cams, seconds=args.seconds,
                                        min_rounds=args.min_frames)
                wall = {k: float(np.median(v["wall"])) for k, v in times.items()}
                cpu = {k: float(np.median(v["cpu"])) for k, v in times.items()}
                for c in CONTENDERS:
                    print(f"{c:11s} {n:7d} {size}x{size} {model:8s} "
                          f"wall {1000 * wall[c]:8.1f} ms  cpu-time "
                          f"{1000 * cpu[c]:8.1f} ms  ({len(times[c]['wall'])} frames)",
                          file=sys.stderr)
                row = {"gaussians": n, "size": f"{size}x{size}", "camera": model}
                for c in CONTENDERS:
                    key = c.replace("-", "_")
                    row |= {f"{key}_wall_ms": 1000 * wall[c], f"{key}_cputime_ms": 1000 * cpu[c],
                            f"{key}_fps": 1 / cpu[c], f"{key}_frames": len(times[c]["wall"])}
                row["speedup_vs_dense"] = cpu["torch-dense"] / cpu["cpu"]
                row["speedup_vs_pruned"] = cpu["torch"] / cpu["cpu"]
                rows.append(row)
    header = ["Gaussians", "image", "camera", "cpu (Warp) ms", "cpu fps", "torch dense tiles ms",
              "speed-up vs dense", "torch pruned ms", "speed-up vs pruned"]
    cells = [[f"{r['gaussians']:,}", r["size"], r["camera"], f"{r['cpu_cputime_ms']:.1f}",
              f"{r['cpu_fps']:.1f}", f"{r['torch_dense_cputime_ms']:.0f}",
              f"{r['speedup_vs_dense']:.0f}x", f"{r['torch_cputime_ms']:.0f}",
              f"{r['speedup_vs_pruned']:.0f}x"] for r in rows]
    caption = ("Median CPU time per frame (`time.process_time`, ms) on one thread; fps = "
               "1 / that time; speed-up = torch time / Warp time, same frames, interleaved.")
    speed_table = Table(caption, header, cells, align=["l"] * 3 + ["r"] * 6)
    table = render_table(speed_table).split("\n", 2)[2]  # without the caption
    info = (f"{platform.processor() or platform.machine()}, 1 thread, torch "
            f"{torch.__version__}, python {platform.python_version()}")
    print(table)
    print(info)
    if args.out:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "render_bench.csv", index=False)
        (args.out / "render_bench.md").write_text(table + "\n\n" + info + "\n")
    if args.doc:
        write_speed_doc(
            args.doc, title="Rendering speed: `cpu` (Warp) vs torch tile rasterizers, one thread",
            command=command_line([__file__, *(sys.argv[1:] if argv is None else argv)],
                                 env_vars=("OMP_NUM_THREADS",)),
            tables=[speed_table],
            notes=["Scene: the procedural sample room (`sample_background`, SH degree 3) from 8 "
                   "poses on a ring around the table (radius 0.9 m, height 0.45 m); pinhole = "
                   "70 degrees horizontal FOV, fisheye = equidistant 200 degrees, direct.",
                   "Contenders: `cpu` (Warp), `torch-dense` (every tile pixel x every Gaussian "
                   "binned to the tile, the straightforward torch tile implementation) and "
                   "`torch` (the pruned torch path the CPU trainer uses). Each round renders one "
                   "frame of each torch path, then `cpu` frames for about as long; "
                   f"{args.seconds:g} s per cell, at least {args.min_frames} rounds.",
                   "Frames per contender and median wall times: `--out DIR` writes them to "
                   "render_bench.csv."],
            started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
