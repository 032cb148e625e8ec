"""Speed of the CPU 3DGS trainer (bench.recon.train, torch_raster backend).

For each image size and Gaussian count it builds a synthetic capture (12 ring views of a
random Gaussian cloud, bench.recon.synthetic), then measures

- ``train it/s``: full training iterations (render + L1/D-SSIM loss + backward + Adam)
  through the public ``bench.recon.train.train`` with densification off, and
- ``render-only it/s``: the forward pass alone (``torch_raster.rasterize`` under no_grad),
  the obvious lower bound a training step cannot beat,

on one torch thread by default. Run:

    .venv/bin/python benchmarks/bench_train.py --sizes 64 128 --gaussians 10000 50000
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

from bench.recon.capture import CaptureManifest
from bench.recon.synthetic import make_synthetic_capture
from bench.recon.train import TrainConfig, load_seed, train
from bench.render.torch_raster import rasterize


def measure(size: int, gaussians: int, iters: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cap = make_synthetic_capture(tmp, size=size, num_views=12, num_test=0,
                                     num_gaussians=gaussians, seed=0)
        manifest = CaptureManifest.load(cap.manifest_path)
        cfg = TrainConfig(iters=iters, densify=False, threads=threads, eval_every=10**9)
        init = load_seed(cap.seed_path, config=cfg)
        train(manifest, config=TrainConfig(iters=2, densify=False, threads=threads), init=init)
        start = time.perf_counter()
        train(manifest, config=cfg, init=init)
        train_s = (time.perf_counter() - start) / iters

        torch.set_num_threads(threads)
        t = {k: torch.as_tensor(v) for k, v in {
            "means": init.means, "quats": init.quats, "scales": init.log_scales,
            "opac": init.opacity_logits, "dc": init.sh_dc, "rest": init.sh_rest}.items()}
        cams = [v.camera for v in manifest.views]
        start = time.perf_counter()
        with torch.no_grad():
            for i in range(iters):
                rasterize(t["means"], t["quats"], t["scales"], t["opac"], t["dc"], t["rest"],
                          cams[i % len(cams)])
        render_s = (time.perf_counter() - start) / iters
    return {"size": size, "gaussians": gaussians, "train_its": 1.0 / train_s,
            "render_its": 1.0 / render_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128],
                        help="image widths = heights in pixels")
    parser.add_argument("--gaussians", type=int, nargs="+", default=[10_000, 50_000],
                        help="Gaussian counts")
    parser.add_argument("--iters", type=int, default=10, help="timed iterations per setting")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    rows = [measure(s, g, args.iters, args.threads) for s in args.sizes for g in args.gaussians]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.iters} timed iterations")
    print("| image | Gaussians | train it/s | render-only it/s |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']}x{r['size']} | {r['gaussians']:,} | {r['train_its']:.2f} | "
              f"{r['render_its']:.2f} |")
    np.testing.assert_array_less(0, [r["train_its"] for r in rows])


if __name__ == "__main__":
    main()
