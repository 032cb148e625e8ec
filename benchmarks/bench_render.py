"""Frames per second of the ``cpu`` (Warp) backend vs the pure-torch tile rasterizer.

Both run on ONE thread in the same process, on the procedural sample room
(``bench.scene.sample.sample_background``, SH degree 3) seen from a ring of 8
poses around the table (cycled, so consecutive frames differ), for 50k and
200k Gaussians, 128x128 and 256x256, pinhole (70 deg horizontal FOV) and fisheye
direct (equidistant, 200 deg). The two backends are interleaved (one torch frame,
then cpu frames for as long) so both see the same load on a shared machine.
Reported: median milliseconds per frame, frames/s from the median, and the
speed-up of ``cpu`` over ``torch`` from medians and from best frames.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render.py [--out DIR]
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


def time_pair(splats, cams, *, seconds: float, min_rounds: int) -> dict[str, list[float]]:
    """Interleave the two backends so both see the same machine load (shared CI boxes).

    Each round renders one ``torch`` frame, then ``cpu`` frames for about as long (1-20).
    """
    from bench.render import render

    for backend in ("cpu", "torch"):
        render(splats, cams[0], backend=backend)  # warm-up: upload, compile, allocate
    times: dict[str, list[float]] = {"cpu": [], "torch": []}
    start = time.perf_counter()
    while len(times["torch"]) < min_rounds or time.perf_counter() - start < seconds:
        cam = cams[len(times["torch"]) % len(cams)]
        t0 = time.perf_counter()
        render(splats, cam, backend="torch")
        budget = time.perf_counter() - t0
        times["torch"].append(budget)
        spent = 0.0
        for k in range(20):
            t0 = time.perf_counter()
            render(splats, cams[(len(times["cpu"]) + k) % len(cams)], backend="cpu")
            times["cpu"].append(time.perf_counter() - t0)
            spent += times["cpu"][-1]
            if spent >= budget:
                break
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256], help="pixels")
    parser.add_argument("--models", nargs="+", default=["pinhole", "fisheye"])
    parser.add_argument("--seconds", type=float, default=4.0, help="time per cell (s)")
    parser.add_argument("--min-frames", type=int, default=3, help="minimum torch frames per cell")
    parser.add_argument("--out", type=Path, help="write render_bench.csv / .md here")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from bench.scene.sample import sample_background

    rows = []
    for n in args.gaussians:
        splats = sample_background(seed=0, n_gaussians=n)
        for size in args.sizes:
            for model in args.models:
                cams = cameras(model, size)
                times = time_pair(splats, cams, seconds=args.seconds, min_rounds=args.min_frames)
                med = {k: float(np.median(v)) for k, v in times.items()}
                best = {k: float(np.min(v)) for k, v in times.items()}
                for backend in ("cpu", "torch"):
                    print(f"{backend:5s} {n:7d} {size}x{size} {model:8s} "
                          f"median {1000 * med[backend]:8.1f} ms  best {1000 * best[backend]:8.1f} "
                          f"ms  ({len(times[backend])} frames)", file=sys.stderr)
                rows.append({"gaussians": n, "size": f"{size}x{size}", "camera": model,
                             "cpu_ms": 1000 * med["cpu"], "cpu_best_ms": 1000 * best["cpu"],
                             "cpu_fps": 1 / med["cpu"], "torch_ms": 1000 * med["torch"],
                             "torch_best_ms": 1000 * best["torch"], "torch_fps": 1 / med["torch"],
                             "speedup": med["torch"] / med["cpu"],
                             "speedup_best": best["torch"] / best["cpu"]})
    header = ("| Gaussians | image | camera | cpu (Warp) ms | cpu fps | torch tiles ms | "
              "torch fps | speed-up (median / best) |")
    lines = [header, "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['gaussians']:,} | {r['size']} | {r['camera']} | {r['cpu_ms']:.1f} | "
                     f"{r['cpu_fps']:.1f} | {r['torch_ms']:.0f} | {r['torch_fps']:.2f} | "
                     f"{r['speedup']:.0f}x / {r['speedup_best']:.0f}x |")
    table = "\n".join(lines)
    info = (f"{platform.processor() or platform.machine()}, 1 thread, torch "
            f"{torch.__version__}, python {platform.python_version()}")
    print(table)
    print(info)
    if args.out:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "render_bench.csv", index=False)
        (args.out / "render_bench.md").write_text(table + "\n\n" + info + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
