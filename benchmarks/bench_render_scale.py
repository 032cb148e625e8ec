"""Rendering at scan size: today's ``cpu`` path vs block culling vs level of detail.

Contenders, all on ONE thread in the same process, interleaved frame by frame on the
same poses (8 poses on a ring around the table, cycled) so all see the same load on a
shared machine:

- ``today``: ``render(..., backend="cpu", culling=False)`` (every Gaussian projected);
- ``exact``: ``render(..., backend="cpu")`` (the default: hierarchical block culling
  with the cached spatial index, :mod:`bench.render.culling`, and the tight-tile-list
  kernels of :mod:`bench.render.warp_culled`); its images are compared with ``today``'s
  (max abs difference, expected 0);
- ``lod-PX``: ``render(..., lod=LodConfig(pixel_size=PX))`` (opt-in, approximate),
  with its PSNR against the exact image of the same pose.

Scene: the procedural sample room grown to 1 M and 3 M Gaussians (SH degree 3);
128x128 and 256x256; pinhole (70 deg) and equidistant fisheye (200 deg). Reported:
median CPU time per frame (``time.process_time``), frames/s from it, the speed-up of
exact over today, index / hierarchy build times (paid once per scene).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render_scale.py [--out DIR] [--doc PATH]

``--doc docs/speed/render-scale.md`` writes the same tables with the command, date, machine
and load (``benchmarks/speed_doc.py``); the manual docs/rendering-at-scale.md quotes that file.
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


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(1.0 / mse)


def time_cell(splats, cams, lod_pixels, frames: int) -> dict:
    from bench.render import LodConfig, render

    fns = {"today": lambda c: render(splats, c, backend="cpu", culling=False),
           "exact": lambda c: render(splats, c, backend="cpu")}
    for px in lod_pixels:
        cfg = LodConfig(pixel_size=px)
        fns[f"lod-{px:g}"] = lambda c, cfg=cfg: render(splats, c, backend="cpu", lod=cfg)
    for fn in fns.values():
        fn(cams[0])  # warm-up: upload, compile, allocate
    cpu = {k: [] for k in fns}
    diff, quality = 0.0, {k: [] for k in fns if k.startswith("lod")}
    same = True  # exact == today byte for byte (rgb, depth, alpha) on every frame
    for i in range(frames):
        cam = cams[i % len(cams)]
        outs = {}
        for name, fn in fns.items():
            c0 = time.process_time()
            outs[name] = fn(cam)
            cpu[name].append(time.process_time() - c0)
        diff = max(diff, float(np.abs(outs["exact"].rgb - outs["today"].rgb).max()))
        same &= all(getattr(outs["exact"], f).tobytes() == getattr(outs["today"], f).tobytes()
                    for f in ("rgb", "depth", "alpha"))
        for name in quality:
            quality[name].append(psnr(outs[name].rgb, outs["exact"].rgb))
    return {"cpu": {k: float(np.median(v)) for k, v in cpu.items()}, "max_abs_diff": diff,
            "identical": same, "psnr": {k: float(np.mean(v)) for k, v in quality.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256], help="pixels")
    parser.add_argument("--models", nargs="+", default=["pinhole", "fisheye"])
    parser.add_argument("--lod-pixels", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--frames", type=int, default=4, help="frames per contender and cell")
    parser.add_argument("--out", type=Path, help="write render_scale.csv / .md here")
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # speed_doc beside this script
    from speed_doc import Table, command_line, render_table, run_started, write_speed_doc

    started = run_started()

    from bench.render import culling, lod
    from bench.scene.sample import sample_background

    rows, builds = [], []
    for n in args.gaussians:
        splats = sample_background(seed=0, n_gaussians=n)
        c0 = time.process_time()
        index = culling.spatial_index(splats)
        t_index = time.process_time() - c0
        c0 = time.process_time()
        hierarchy = lod.lod_hierarchy(splats)
        t_lod = time.process_time() - c0
        builds.append({"gaussians": n, "blocks": index.num_blocks, "index_s": t_index,
                       "lod_s": t_lod, "merged": hierarchy.merged.num})
        print(f"{n}: index {t_index:.2f} s ({index.num_blocks} blocks), LOD hierarchy "
              f"{t_lod:.2f} s ({hierarchy.merged.num} merged)", file=sys.stderr)
        for size in args.sizes:
            for model in args.models:
                res = time_cell(splats, cameras(model, size), args.lod_pixels, args.frames)
                row = {"gaussians": n, "size": f"{size}x{size}", "camera": model,
                       "exact_vs_today_max_abs_diff": res["max_abs_diff"],
                       "exact_identical": res["identical"]}
                for k, v in res["cpu"].items():
                    row[f"{k}_ms"] = 1000 * v
                    row[f"{k}_fps"] = 1 / v
                row["exact_speedup"] = res["cpu"]["today"] / res["cpu"]["exact"]
                for k, v in res["psnr"].items():
                    row[f"{k}_psnr_db"] = v
                print(row, file=sys.stderr)
                rows.append(row)
    lods = [f"lod-{px:g}" for px in args.lod_pixels]
    header = (["Gaussians", "image", "camera", "today ms", "exact ms", "exact speed-up",
               "max diff", "identical"]
              + [f"{k} {col}" for k in lods for col in ("ms", "fps", "PSNR dB")])
    cells = [[f"{r['gaussians']:,}", r["size"], r["camera"], f"{r['today_ms']:.0f}",
              f"{r['exact_ms']:.0f}", f"{r['exact_speedup']:.2f}x",
              f"{r['exact_vs_today_max_abs_diff']:.0e}",
              "yes" if r["exact_identical"] else "no"]
             + [cell for k in lods for cell in (f"{r[f'{k}_ms']:.1f}", f"{r[f'{k}_fps']:.0f}",
                                                f"{r[f'{k}_psnr_db']:.1f}")] for r in rows]
    speed_table = Table("Median CPU time per frame (`time.process_time`, ms) on one thread; "
                        "fps = 1 / that time; exact speed-up = today ms / exact ms; max diff = "
                        "largest absolute rgb difference exact vs today; identical = exact and "
                        "today equal byte for byte (rgb, depth, alpha) on every frame; LOD PSNR "
                        "against the exact image of the same pose.", header, cells,
                        align=["l"] * 3 + ["r"] * (len(header) - 3))
    build_table = Table("Built once per scene (CPU time, s):",
                        ["Gaussians", "blocks", "index build s", "LOD hierarchy s",
                         "merged Gaussians"],
                        [[f"{b['gaussians']:,}", str(b["blocks"]), f"{b['index_s']:.2f}",
                          f"{b['lod_s']:.2f}", f"{b['merged']:,}"] for b in builds],
                        align=["r"] * 5)
    table = render_table(speed_table).split("\n", 2)[2]  # without the caption
    build = "\n".join(f"{b['gaussians']:,} Gaussians: index {b['index_s']:.2f} s "
                      f"({b['blocks']} blocks), LOD hierarchy {b['lod_s']:.2f} s "
                      f"({b['merged']:,} merged Gaussians)" for b in builds)
    info = f"{platform.processor() or platform.machine()}, 1 thread, python " \
           f"{platform.python_version()}, {args.frames} frames per contender and cell"
    print(table)
    print(build)
    print(info)
    if args.out:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "render_scale.csv", index=False)
        (args.out / "render_scale.md").write_text(table + "\n\n" + build + "\n\n" + info + "\n")
    if args.doc:
        write_speed_doc(
            args.doc, title="Rendering at scan size: today's `cpu` path vs culling vs LOD, "
                            "one thread",
            command=command_line([__file__, *(sys.argv[1:] if argv is None else argv)],
                                 env_vars=("OMP_NUM_THREADS",)),
            tables=[speed_table, build_table],
            notes=["Scene: the procedural sample room (`sample_background`, SH degree 3) "
                   "grown to the Gaussian counts above, 8 poses on a ring around the table "
                   "(radius 0.9 m, height 0.45 m), cycled; pinhole = 70 degrees horizontal "
                   "FOV, fisheye = equidistant 200 degrees.",
                   "Contenders, interleaved frame by frame on the same poses: `today` = "
                   "`render(..., backend=\"cpu\", culling=False)` (every Gaussian projected), "
                   "`exact` = `render(..., backend=\"cpu\")` (block culling with the cached "
                   "spatial index, the default), `lod-PX` = `render(..., lod=LodConfig("
                   "pixel_size=PX))` (opt-in, approximate). The script sets the BLAS/OpenMP "
                   f"thread variables to 1; {args.frames} frames per contender and cell after "
                   "one warm-up frame each; PSNR `inf` = identical to exact."],
            started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
