"""Where a Warp training step's time goes: CPU time (this thread) per phase, min over reps.

One step of :func:`bench.recon.train.train` taken apart (synthetic ring capture, SH degree
0, one thread): Warp pinhole projection, SH colours, binning (``Tiles``), the compositing
kernel forward, the loss (0.8 L1 + 0.2 D-SSIM) forward and backward, the compositing
kernel backward, and the projection / colour backward. Thread CPU time is used, not wall
time, so that other processes on a shared machine disturb it less; run it from two
checkouts (``PYTHONPATH``) to compare them::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_train_phases.py --size 128 \\
        --gaussians 50000 --reps 8
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

from bench.recon.capture import CaptureManifest
from bench.recon.synthetic import make_synthetic_capture
from bench.recon.train import ImageCache, TrainConfig, _make_params, load_seed, photometric_loss
from bench.render import warp_grad
from bench.render.torch_raster import gaussian_colors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128, help="image width = height")
    parser.add_argument("--gaussians", type=int, default=50_000, help="Gaussian count")
    parser.add_argument("--reps", type=int, default=8, help="timed steps (after 1 warm-up)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with tempfile.TemporaryDirectory() as tmp:
        cap = make_synthetic_capture(tmp, size=args.size, num_views=12, num_test=0,
                                     num_gaussians=args.gaussians, seed=0)
        manifest = CaptureManifest.load(cap.manifest_path)
        params = _make_params(load_seed(cap.seed_path, config=TrainConfig(sh_degree=0)), "cpu")
        views = manifest.training_views(None)
        target = ImageCache(manifest, views).get(0, "cpu")
    cam = views[0].camera
    background = torch.zeros(3)
    times: dict[str, list[float]] = {}

    def tick(name: str, start: float) -> float:
        times.setdefault(name, []).append(time.thread_time() - start)
        return time.thread_time()

    for _ in range(args.reps + 1):
        t = time.thread_time()
        proj = warp_grad.project_pinhole(params["means"], params["quats"], params["scales"], cam)
        t = tick("projection forward", t)
        opac = torch.sigmoid(params["opacities"])
        colors = gaussian_colors(params["means"], params["sh0"][:, 0], params["shN"], cam, 0)
        t = tick("colours forward", t)
        tiles = warp_grad.Tiles(proj.depths, proj.visible, proj.means2d.detach(),
                                proj.conics.detach(), opac.detach(), proj.radii,
                                (cam.width, cam.height), 16)
        t = tick("binning", t)
        ins = (proj.means2d, proj.conics, opac, proj.depths, colors)
        leaves = [x.detach().requires_grad_() for x in ins]
        acc_c, _, trans = warp_grad.WarpComposite.apply(
            *leaves, tiles, warp_grad._valid_pixels(cam), None, 1)
        t = tick("composite forward", t)
        rgb = acc_c + trans[..., None] * background
        loss, _, _ = photometric_loss(rgb, target)
        t = tick("loss forward", t)
        grad_c, grad_t = torch.autograd.grad(loss, [acc_c, trans])
        t = tick("loss backward", t)
        grads = torch.autograd.grad([acc_c, trans], leaves, [grad_c, grad_t])
        t = tick("composite backward", t)
        torch.autograd.backward(list(ins), list(grads))
        tick("projection + colours backward", t)
        for p in params.values():
            p.grad = None
    print(f"{args.size}x{args.size}, {args.gaussians:,} Gaussians, {tiles.total:,} tile "
          f"pairs; thread CPU ms, min / median of {args.reps}")
    total = 0.0
    for name, values in times.items():
        values = values[1:]
        total += min(values)
        print(f"| {name} | {1e3 * min(values):.2f} | {1e3 * np.median(values):.2f} |")
    print(f"| sum of minima | {1e3 * total:.2f} | |")


if __name__ == "__main__":
    main()
