"""gsplat backend on CUDA agrees with the cpu backend (skipped without CUDA + gsplat)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def _psnr(a, b):
    return 10 * math.log10(1.0 / max(float(np.mean((a - b) ** 2)), 1e-20))


@pytest.fixture(scope="module")
def room():
    pytest.importorskip("gsplat")
    from bench.scene.sample import sample_background

    return sample_background(seed=0, n_gaussians=50_000)


def _cameras(model):
    from bench.scene.cameras import Camera, orbit

    poses = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=4)
    if model == "pinhole":
        return [Camera.pinhole_from_fov(128, 128, fov_x_deg=70, world_from_camera=p) for p in poses]
    return [Camera.equidistant_fisheye(128, 128, fov_deg=170, world_from_camera=p) for p in poses]


@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_gsplat_matches_cpu(room, model):
    from bench.render import render, render_batch

    cams = _cameras(model)
    gpu = render_batch(room, cams, backend="gsplat")
    for cam, out in zip(cams, gpu, strict=True):
        cpu = render(room, cam, backend="cpu")
        assert _psnr(out.rgb, cpu.rgb) >= 40.0
        solid = (cpu.alpha > 0.5) & (out.alpha > 0.5)
        assert np.median(np.abs(out.depth[solid] - cpu.depth[solid])) < 1e-3


def test_auto_picks_gsplat_and_falls_back_to_cubemap(room):
    from bench.render import render, resolve_backend
    from bench.scene.cameras import Camera, look_at

    assert resolve_backend("auto") == "gsplat"
    cam = Camera("fisheye", 64, 64, 18.0, 18.0, 32.0, 32.0, look_at((0.9, 0, 0.45), (0, 0, 0)),
                 distortion=(0.02, 0.0, 0.0, 0.0), fov_deg=200.0)
    out = render(room, cam)  # distorted 200-degree lens: gsplat via cube map
    ref = render(room, cam, backend="cpu", fisheye_mode="cubemap")
    assert _psnr(out.rgb, ref.rgb) >= 35.0
    with pytest.raises(ValueError, match="cubemap"):
        render(room, cam, backend="gsplat")
