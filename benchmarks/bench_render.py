"""Frames per second of the ``cpu`` (Warp) backend vs the pure-torch tile rasterizer.

Both run on ONE thread in the same process, on the procedural sample room
(``bench.scene.sample.sample_background``, SH degree 3) seen from a ring of 8
poses around the table (cycled, so consecutive frames differ), for 50k and
200k Gaussians, 128x128 and 256x256, pinhole (70 deg horizontal FOV) and fisheye
direct (equidistant, 200 deg). Reported: median milliseconds per frame over
``--seconds`` of rendering (at least ``--min-frames`` frames), frames/s, and the
speed-up of ``cpu`` over ``torch``.

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


def time_backend(splats, cams, backend: str, *, seconds: float, min_frames: int) -> list[float]:
    from bench.render import render

    render(splats, cams[0], backend=backend)  # warm-up: upload, compile, allocate
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_frames or time.perf_counter() - start < seconds:
        cam = cams[len(times) % len(cams)]
        t0 = time.perf_counter()
        render(splats, cam, backend=backend)
        times.append(time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256], help="pixels")
    parser.add_argument("--models", nargs="+", default=["pinhole", "fisheye"])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per cell (s)")
    parser.add_argument("--min-frames", type=int, default=3)
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
                med = {}
                for backend in ("cpu", "torch"):
                    times = time_backend(splats, cams, backend, seconds=args.seconds,
                                         min_frames=args.min_frames)
                    med[backend] = float(np.median(times))
                    print(f"{backend:5s} {n:7d} {size}x{size} {model:8s} "
                          f"{1000 * med[backend]:9.1f} ms  {1 / med[backend]:7.1f} fps  "
                          f"({len(times)} frames)", file=sys.stderr)
                rows.append({"gaussians": n, "size": f"{size}x{size}", "camera": model,
                             "cpu_ms": 1000 * med["cpu"], "cpu_fps": 1 / med["cpu"],
                             "torch_ms": 1000 * med["torch"], "torch_fps": 1 / med["torch"],
                             "speedup": med["torch"] / med["cpu"]})
    header = ("| Gaussians | image | camera | cpu (Warp) ms | cpu fps | torch tiles ms | "
              "torch fps | speed-up |")
    lines = [header, "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['gaussians']:,} | {r['size']} | {r['camera']} | {r['cpu_ms']:.1f} | "
                     f"{r['cpu_fps']:.1f} | {r['torch_ms']:.0f} | {r['torch_fps']:.2f} | "
                     f"{r['speedup']:.0f}x |")
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
