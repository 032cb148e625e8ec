"""Speed of the CPU 3DGS trainer (bench.recon.train, torch_raster backend).

For each image size and Gaussian count it builds a synthetic capture (12 ring views of a
random Gaussian cloud, bench.recon.synthetic), then measures

- ``train it/s``: full training iterations (render + L1/D-SSIM loss + backward + Adam)
  through the public ``bench.recon.train.train`` with densification off, and
- ``render-only it/s``: the forward pass alone (``torch_raster.rasterize`` under no_grad),
  the obvious lower bound a training step cannot beat, and
- the same two for the plain dense per-tile path (``rasterize(..., dense_tiles=True)``,
  the rasterizer's reference and its implementation before the pruned block path): a
  training step there is timed as render + the trainer's loss + backward + Adam,

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
from bench.recon.train import (
    ImageCache,
    TrainConfig,
    _make_optimizers,
    _make_params,
    load_seed,
    photometric_loss,
    scene_scale,
    train,
)
from bench.render.torch_raster import rasterize


def dense_train_seconds(manifest, init, cfg: TrainConfig, iters: int) -> float:
    """Seconds per training step (render + loss + backward + Adam) on the dense tile path."""
    params = _make_params(init, "cpu")
    optimizers = _make_optimizers(params, cfg, scene_scale(manifest.views))
    images = ImageCache(manifest, manifest.views)

    def step(i: int) -> None:
        index = i % len(manifest.views)
        out = rasterize(params["means"], params["quats"], params["scales"], params["opacities"],
                        params["sh0"][:, 0, :], params["shN"], manifest.views[index].camera,
                        sh_degree=0, dense_tiles=True)
        loss, _, _ = photometric_loss(out.rgb, images.get(index, "cpu"))
        loss.backward()
        for optimizer in optimizers.values():
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)  # as train() does
    try:
        step(0)
        start = time.perf_counter()
        for i in range(iters):
            step(i)
        return (time.perf_counter() - start) / iters
    finally:
        torch.use_deterministic_algorithms(was_deterministic)


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
        render_s = {}
        for dense in (False, True):
            start = time.perf_counter()
            with torch.no_grad():
                for i in range(iters):
                    rasterize(t["means"], t["quats"], t["scales"], t["opac"], t["dc"],
                              t["rest"], cams[i % len(cams)], dense_tiles=dense)
            render_s[dense] = (time.perf_counter() - start) / iters
        dense_s = dense_train_seconds(manifest, init, cfg, iters)
    return {"size": size, "gaussians": gaussians, "train_its": 1.0 / train_s,
            "render_its": 1.0 / render_s[False], "dense_train_its": 1.0 / dense_s,
            "dense_render_its": 1.0 / render_s[True]}


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
    print("| image | Gaussians | train it/s | render-only it/s | dense tiles: train it/s | "
          "dense tiles: render-only it/s | train speed-up |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']}x{r['size']} | {r['gaussians']:,} | {r['train_its']:.2f} | "
              f"{r['render_its']:.2f} | {r['dense_train_its']:.2f} | "
              f"{r['dense_render_its']:.2f} | {r['train_its'] / r['dense_train_its']:.1f}x |")
    np.testing.assert_array_less(0, [r["train_its"] for r in rows])


if __name__ == "__main__":
    main()
