"""Level of detail at scan size: fps / PSNR against the exact path, and where the error is.

Contenders, all on ONE thread in the same process, interleaved frame by frame on the same
8 poses of ``bench_render_scale.py`` (a ring around the table):

- ``exact``: ``render(..., backend="cpu")`` (the default exact path);
- ``lod PX/TOL[/shD]``: ``render(..., lod=LodConfig(pixel_size=PX, colour_tolerance=TOL,
  merged_sh_degree=D))`` (``TOL`` ``none``: colour ignored; no ``D``: the merged nodes use
  every SH band), with its PSNR against the exact image of the same
  pose over the image's valid pixels (a fisheye's image circle; the full-image PSNR of
  ``bench_render_scale.py`` also counts the identical black corners and reads ~1 dB higher).

Reported per point: median CPU time per frame (``time.process_time``), frames/s from it,
mean PSNR, Gaussians drawn per frame and the CPU time of the frame's own tree cut alone
(``warp_lod.frame_cut``: block culling, magnification and the walk in one launch)
and of its numpy reference (``culling.visible_blocks`` + ``lod.choose_rows``; each
timed in a separate call). ``--diagnose`` adds where the error is on the first image size:
the share of squared error on depth edges, on pixels the LOD leaves less opaque than
0.98, and elsewhere; the exact image against the exact image of a second draw of the same
room (``seed=1``: what two equally good reconstructions differ by) and against a 4x
supersampled exact render box-filtered to the same size (how much the exact image is a
point-sampled one).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render_lod.py [--out DIR] [--doc PATH]
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

DEFAULT_POINTS = ["0.35:0.05", "0.5:0.05", "0.7:0.05", "0.7:0.05:0", "0.8:0.05", "0.8:0.05:0",
                  "1:0.05", "1:0.1", "1.5:0.05", "1.5:0.1", "2:0.1", "1:none", "1.5:none",
                  "2:none"]


def parse_point(text: str):
    """``PX:TOL[:SH]``: pixel_size, colour_tolerance (or ``none``), merged SH degree."""
    from bench.render import LodConfig

    px, _, rest = text.partition(":")
    tol, _, sh = rest.partition(":")
    return LodConfig(pixel_size=float(px),
                     colour_tolerance=None if tol in ("", "none") else float(tol),
                     merged_sh_degree=None if sh == "" else int(sh))


def label(cfg) -> str:
    tol = "none" if cfg.colour_tolerance is None else f"{cfg.colour_tolerance:g}"
    sh = "" if cfg.merged_sh_degree is None else f"/sh{cfg.merged_sh_degree}"
    return f"{cfg.pixel_size:g}/{tol}{sh}"


def psnr(a: np.ndarray, b: np.ndarray) -> float:  # [..., 3] pixels
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(1.0 / mse)


def depth_edges(depth: np.ndarray, jump: float = 0.1) -> np.ndarray:  # [H, W] -> [H, W] bool
    """Pixels next to a 4-neighbour whose depth differs by more than ``jump`` (relative)."""
    d = np.where(np.isfinite(depth), depth, 1e3)
    edge = np.zeros(d.shape, bool)
    for axis in (0, 1):
        a, b = np.delete(d, 0, axis), np.delete(d, -1, axis)
        big = np.abs(a - b) / np.minimum(a, b) > jump
        if axis == 0:
            edge[1:] |= big
            edge[:-1] |= big
        else:
            edge[:, 1:] |= big
            edge[:, :-1] |= big
    return edge


def time_cell(splats, cams, configs, frames: int, diagnose: bool) -> dict:
    from bench.render import culling, lod, render, warp_lod

    index, hierarchy = culling.spatial_index(splats), lod.lod_hierarchy(splats)
    render(splats, cams[0], backend="cpu")  # warm-up: upload, compile, allocate
    for cfg in configs:
        render(splats, cams[0], backend="cpu", lod=cfg)
    names = [label(c) for c in configs]
    cpu = {k: [] for k in ["exact", *names]}
    quality = {k: [] for k in names}
    drawn = {k: [] for k in names}
    cut = {k: [] for k in names}
    cut_numpy = {k: [] for k in names}
    shares = {k: np.zeros(3) for k in names}
    for i in range(frames):
        cam = cams[i % len(cams)]
        c0 = time.process_time()
        exact = render(splats, cam, backend="cpu")
        cpu["exact"].append(time.process_time() - c0)
        valid = exact.valid
        edges = depth_edges(exact.depth) & valid
        for name, cfg in zip(names, configs, strict=True):
            c0 = time.process_time()
            out = render(splats, cam, backend="cpu", lod=cfg)
            cpu[name].append(time.process_time() - c0)
            quality[name].append(psnr(out.rgb[valid], exact.rgb[valid]))
            c0 = time.process_time()  # the frame's own cut: block culling + the native walk
            rows = warp_lod.frame_cut(hierarchy._tree, cam, pixel_size=cfg.pixel_size,
                                      colour_tolerance=cfg.colour_tolerance,
                                      layer_bias=lod.LAYER_BIAS)
            cut[name].append(time.process_time() - c0)
            c0 = time.process_time()  # the numpy reference of the same cut
            lod.choose_rows(index, hierarchy, cam, culling.visible_blocks(index, cam), cfg)
            cut_numpy[name].append(time.process_time() - c0)
            drawn[name].append(len(rows))
            if diagnose:
                err = ((out.rgb - exact.rgb).astype(np.float64) ** 2).sum(-1)
                thin = (out.alpha < 0.98) & valid & ~edges
                rest = valid & ~edges & ~thin
                shares[name] += [err[edges].sum(), err[thin].sum(), err[rest].sum()]
    return {"cpu": {k: float(np.median(v)) for k, v in cpu.items()},
            "psnr": {k: float(np.mean(v)) for k, v in quality.items()},
            "drawn": {k: float(np.mean(v)) for k, v in drawn.items()},
            "cut": {k: float(np.median(v)) for k, v in cut.items()},
            "cut_numpy": {k: float(np.median(v)) for k, v in cut_numpy.items()},
            "shares": {k: v / max(v.sum(), 1e-300) for k, v in shares.items()}}


def noise_floor(splats, n: int, cams, frames: int) -> dict:
    """Exact vs exact of ``seed=1``, and exact vs a 4x supersampled exact, box-filtered."""
    import dataclasses

    from bench.render import render
    from bench.scene.sample import sample_background

    other = sample_background(seed=1, n_gaussians=n)
    seeds, supersampled = [], []
    for cam in cams[:frames]:
        exact = render(splats, cam, backend="cpu")
        seeds.append(psnr(exact.rgb[exact.valid],
                          render(other, cam, backend="cpu").rgb[exact.valid]))
        big = dataclasses.replace(cam, width=4 * cam.width, height=4 * cam.height,
                                  fx=4 * cam.fx, fy=4 * cam.fy, cx=4 * cam.cx, cy=4 * cam.cy)
        fine = render(splats, big, backend="cpu").rgb
        box = fine.reshape(cam.height, 4, cam.width, 4, 3).mean(axis=(1, 3))
        supersampled.append(psnr(exact.rgb[exact.valid], box[exact.valid]))
    return {"seed": float(np.mean(seeds)), "supersampled": float(np.mean(supersampled))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, default=3_000_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256], help="pixels")
    parser.add_argument("--models", nargs="+", default=["fisheye"])
    parser.add_argument("--points", nargs="+", default=DEFAULT_POINTS, metavar="PX:TOL[:SH]",
                        help="LodConfig(pixel_size=PX, colour_tolerance=TOL or none, "
                             "merged_sh_degree=SH or all bands)")
    parser.add_argument("--frames", type=int, default=8, help="frames per contender and cell")
    parser.add_argument("--diagnose", action="store_true",
                        help="error shares and the exact image's own noise floor")
    parser.add_argument("--out", type=Path, help="write render_lod.csv / .md here")
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # speed_doc beside this script
    from bench_render_scale import cameras  # the same 8 poses as the exact-path benchmark
    from speed_doc import (
        Table,
        command_line,
        render_table,
        run_started,
        write_speed_doc,
    )

    started = run_started()
    configs = [parse_point(p) for p in args.points]

    from bench.render import culling, lod
    from bench.scene.sample import sample_background

    splats = sample_background(seed=0, n_gaussians=args.gaussians)
    c0 = time.process_time()
    culling.spatial_index(splats)
    t_index = time.process_time() - c0
    c0 = time.process_time()
    hierarchy = lod.lod_hierarchy(splats)
    t_lod = time.process_time() - c0
    print(f"index {t_index:.2f} s, hierarchy {t_lod:.2f} s ({hierarchy.merged.num} merged, "
          f"{len(hierarchy.level_start)} levels)", file=sys.stderr, flush=True)
    rows, diag = [], []
    for s_i, size in enumerate(args.sizes):
        for model in args.models:
            cams = cameras(model, size)
            res = time_cell(splats, cams, configs, args.frames, args.diagnose and s_i == 0)
            for cfg in configs:
                k = label(cfg)
                rows.append({"gaussians": args.gaussians, "size": f"{size}x{size}",
                             "camera": model, "pixel_size": cfg.pixel_size,
                             "colour_tolerance": cfg.colour_tolerance,
                             "merged_sh_degree": cfg.merged_sh_degree,
                             "exact_ms": 1000 * res["cpu"]["exact"],
                             "lod_ms": 1000 * res["cpu"][k], "lod_fps": 1 / res["cpu"][k],
                             "speedup": res["cpu"]["exact"] / res["cpu"][k],
                             "psnr_db": res["psnr"][k], "drawn": res["drawn"][k],
                             "cut_ms": 1000 * res["cut"][k],
                             "cut_numpy_ms": 1000 * res["cut_numpy"][k]})
                print(rows[-1], file=sys.stderr, flush=True)
                if args.diagnose and s_i == 0:
                    diag.append({"camera": model, "point": k, "psnr_db": res["psnr"][k],
                                 "edges": res["shares"][k][0], "thin": res["shares"][k][1],
                                 "rest": res["shares"][k][2]})
    floor = {}
    if args.diagnose:
        for model in args.models:
            floor[model] = noise_floor(splats, args.gaussians, cameras(model, args.sizes[0]),
                                       min(args.frames, 4))
            print(model, floor[model], file=sys.stderr, flush=True)

    header = ["image", "camera", "pixel_size", "colour tol.", "merged SH", "exact ms", "LOD ms",
              "LOD fps", "speed-up", "PSNR dB", "drawn / frame", "cut ms", "numpy cut ms"]
    cells = [[r["size"], r["camera"], f"{r['pixel_size']:g}",
              "none" if r["colour_tolerance"] is None else f"{r['colour_tolerance']:g}",
              "all" if r["merged_sh_degree"] is None else str(r["merged_sh_degree"]),
              f"{r['exact_ms']:.0f}", f"{r['lod_ms']:.1f}", f"{r['lod_fps']:.0f}",
              f"{r['speedup']:.0f}x", f"{r['psnr_db']:.1f}", f"{r['drawn']:,.0f}",
              f"{r['cut_ms']:.1f}", f"{r['cut_numpy_ms']:.1f}"] for r in rows]
    tables = [Table("Median CPU time per frame (`time.process_time`, ms) on one thread, "
                    f"{args.gaussians:,} Gaussians; fps = 1 / LOD ms; PSNR of the LOD image "
                    "against the exact one over the valid pixels, mean over the frames; "
                    "merged SH = the merged nodes' SH degree (`merged_sh_degree`; all = the "
                    "originals' bands); drawn = Gaussians (originals + merged nodes) per "
                    "frame; cut = the "
                    "frame's own tree cut alone (`warp_lod.frame_cut`: block culling, "
                    "magnification and the walk in one launch; included in LOD ms), numpy "
                    "cut = its reference (`culling.visible_blocks` + `lod.choose_rows`; "
                    "timed apart, not used by the frame).", header, cells,
                    align=["l"] * 5 + ["r"] * 8)]
    build = [[f"{args.gaussians:,}", f"{t_index:.2f}", f"{t_lod:.2f}",
              f"{hierarchy.merged.num:,}", str(len(hierarchy.level_start))]]
    tables.append(Table("Built once per scene (CPU time, s):",
                        ["Gaussians", "index s", "LOD tree s", "merged nodes", "levels"], build,
                        align=["r"] * 5))
    if diag:
        tables.append(Table(
            f"Where the squared error is ({args.sizes[0]} px, share of the frame's total, "
            "summed over the frames): depth edges = pixels next to a > 10% depth jump in the "
            "exact image; thin = other pixels the LOD leaves less opaque than 0.98; rest = "
            "the others.", ["camera", "point", "PSNR dB", "edges", "thin", "rest"],
            [[d["camera"], d["point"], f"{d['psnr_db']:.1f}", f"{d['edges']:.0%}",
              f"{d['thin']:.0%}", f"{d['rest']:.0%}"] for d in diag],
            align=["l", "l"] + ["r"] * 4))
        tables.append(Table(
            f"The exact image's own floor ({args.sizes[0]} px, PSNR dB over the valid pixels, "
            "mean over 4 poses): against the exact image of a second draw of the room "
            "(`seed=1`), and against a 4x supersampled exact render box-filtered 4x4.",
            ["camera", "exact vs seed 1", "exact vs 4x supersampled"],
            [[m, f"{f['seed']:.1f}", f"{f['supersampled']:.1f}"] for m, f in floor.items()],
            align=["l", "r", "r"]))
    text = "\n\n".join(render_table(t) for t in tables)
    print(text)
    if args.out:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "render_lod.csv", index=False)
        (args.out / "render_lod.md").write_text(text + "\n")
    if args.doc:
        write_speed_doc(
            args.doc, title="Level of detail at scan size: fps / PSNR against the exact path, "
                            "one thread",
            command=command_line([__file__, *(sys.argv[1:] if argv is None else argv)],
                                 env_vars=("OMP_NUM_THREADS",)),
            tables=tables,
            notes=["Scene: the procedural sample room (`sample_background(seed=0)`, SH degree "
                   "3) grown to the Gaussian count above; the 8 poses of "
                   "`bench_render_scale.py` (ring of radius 0.9 m at 0.45 m around the "
                   "table), cycled; fisheye = equidistant 200 degrees, pinhole = 70 degrees.",
                   "Contenders interleaved frame by frame on the same poses after one warm-up "
                   "frame each: `exact` = `render(..., backend=\"cpu\")`, LOD = `render(..., "
                   "lod=LodConfig(pixel_size, colour_tolerance))`. The script sets the "
                   "BLAS/OpenMP thread variables to 1."],
            started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
