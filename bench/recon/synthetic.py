"""A small synthetic capture with known ground truth (tests, benchmarks, examples).

A cloud of coloured Gaussians is rendered with :func:`bench.render.torch_raster.rasterize`
from cameras on a ring around it; the images, the pinhole cameras and a few held-out
test views go into a capture manifest, and a noisy, grey seed point cloud is written as
a PLY (as a dense MVS seed would be). Everything derives from one seed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.recon.capture import CaptureManifest, SourceFrame, View
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import SH_C0, GaussianSplats


@dataclass(frozen=True)
class SyntheticCapture:
    """Paths and ground truth of :func:`make_synthetic_capture`."""

    manifest_path: Path
    seed_path: Path
    truth: GaussianSplats


def ground_truth_splats(num: int, *, seed: int = 0) -> GaussianSplats:
    """``num`` opaque-ish coloured Gaussians in the cube [-1, 1]^3 (SH degree 0)."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-1.0, 1.0, (num, 3))
    rgb = rng.uniform(0.05, 0.95, (num, 3))
    quats = rng.normal(size=(num, 4))
    base = 1.2 / num ** (1.0 / 3.0)  # about a third of the mean spacing
    return GaussianSplats(
        means=means.astype(np.float32),
        quats=quats.astype(np.float32),
        log_scales=np.log(base * rng.uniform(0.5, 1.0, (num, 3))).astype(np.float32),
        opacity_logits=np.full(num, 2.0, np.float32),
        sh_dc=((rgb - 0.5) / SH_C0).astype(np.float32),
        sh_rest=np.zeros((num, 0, 3), np.float32),
    )


def ring_cameras(count: int, *, size: int, radius: float = 3.5, height: float = 1.2,
                 phase: float = 0.0) -> list[Camera]:
    """``count`` pinhole cameras (60 degree FOV) on a ring, looking at the origin."""
    cams = []
    for i in range(count):
        angle = 2 * math.pi * (i + phase) / count
        eye = (radius * math.cos(angle), radius * math.sin(angle), height * (1 if i % 2 else -1))
        cams.append(Camera.pinhole_from_fov(size, size, fov_x_deg=60.0,
                                            world_from_camera=look_at(eye, (0, 0, 0)),
                                            name=f"ring{i:03d}"))
    return cams


def render_truth(splats: GaussianSplats, camera: Camera) -> np.ndarray:  # [H, W, 3] uint8
    """Render ground truth with the torch rasterizer (no grad), as 8-bit RGB."""
    import torch

    from bench.render.torch_raster import rasterize

    def t(a):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)

    with torch.no_grad():
        out = rasterize(t(splats.means), t(splats.quats), t(splats.log_scales),
                        t(splats.opacity_logits), t(splats.sh_dc), t(splats.sh_rest), camera)
    return np.round(out.rgb.clamp(0, 1).numpy() * 255.0).astype(np.uint8)


def write_seed_ply(path: str | os.PathLike, points: np.ndarray, colors: np.ndarray) -> None:
    """Write a point-cloud PLY (``x y z`` float32, ``red green blue`` uint8)."""
    from plyfile import PlyData, PlyElement

    data = np.zeros(len(points), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                        ("red", "u1"), ("green", "u1"), ("blue", "u1")])
    data["x"], data["y"], data["z"] = points.T.astype(np.float32)
    rgb = np.clip(np.round(colors * 255), 0, 255).astype(np.uint8)
    data["red"], data["green"], data["blue"] = rgb.T
    PlyData([PlyElement.describe(data, "vertex")]).write(str(path))


def make_synthetic_capture(
    out_dir: str | os.PathLike,
    *,
    size: int = 32,
    num_views: int = 12,
    num_test: int = 3,
    num_gaussians: int = 1000,
    seed_noise: float = 0.05,
    seed: int = 0,
) -> SyntheticCapture:
    """Write a synthetic capture (``capture.json``, images, ``seed.ply``) into ``out_dir``.

    Args:
        out_dir: Output folder (created).
        size: Image width and height in pixels.
        num_views: Training frames (one ``forward`` view each).
        num_test: Held-out test views, between the training cameras on the ring.
        num_gaussians: Ground-truth Gaussians.
        seed_noise: Std (scene units) of the noise on the seed points.
        seed: Seed of every random draw.

    Returns:
        The manifest and seed paths and the ground-truth Gaussians.
    """
    import cv2

    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    truth = ground_truth_splats(num_gaussians, seed=seed)
    frames, views, tests = [], [], []
    for i, cam in enumerate(ring_cameras(num_views, size=size)):
        rel = f"images/train_{i:03d}.png"
        cv2.imwrite(str(out / rel), cv2.cvtColor(render_truth(truth, cam), cv2.COLOR_RGB2BGR))
        frames.append(SourceFrame(f"f{i:03d}", float(i), {}))
        views.append(View(f"f{i:03d}/forward", rel, cam.replace(name=rel), frame=f"f{i:03d}"))
    for i, cam in enumerate(ring_cameras(num_test, size=size, phase=0.37, radius=3.2)):
        rel = f"images/test_{i:03d}.png"
        cv2.imwrite(str(out / rel), cv2.cvtColor(render_truth(truth, cam), cv2.COLOR_RGB2BGR))
        tests.append(View(f"test{i:03d}", rel, cam.replace(name=rel)))
    manifest = CaptureManifest(tuple(frames), tuple(views), tuple(tests), out)
    manifest.save(out / "capture.json")
    rng = np.random.default_rng(seed + 1)
    points = truth.means + rng.normal(0.0, seed_noise, truth.means.shape)
    write_seed_ply(out / "seed.ply", points, np.full((len(points), 3), 0.5))
    return SyntheticCapture(out / "capture.json", out / "seed.ply", truth)
