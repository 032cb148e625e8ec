"""The differentiable torch tile rasterizer: gradients vs finite differences, 2D means."""

import numpy as np
import pytest
import torch

from bench.render import render
from bench.render.torch_raster import rasterize
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import GaussianSplats

NAMES = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def tiny_params(seed, n=6):
    rng = np.random.default_rng(seed)
    return {
        "means": rng.uniform(-0.4, 0.4, (n, 3)),
        "quats": rng.normal(size=(n, 4)),
        "log_scales": np.log(rng.uniform(0.08, 0.2, (n, 3))),
        "opacity_logits": rng.normal(0.0, 1.0, n),
        "sh_dc": rng.normal(0.0, 1.0, (n, 3)),
        "sh_rest": rng.normal(0.0, 0.2, (n, 15, 3)),
    }


CAM = Camera("pinhole", 24, 20, 22.0, 22.0, 12.3, 9.6, look_at((0.3, -2.0, 0.6), (0, 0, 0)))
FISHEYE = Camera("fisheye", 24, 20, 9.0, 9.0, 12.0, 10.0, look_at((0.3, -1.0, 0.4), (0, 0, 0)),
                 distortion=(0.03, -0.01, 0.0, 0.0), fov_deg=190.0)


def loss_fn(params, camera, weights):
    out = rasterize(*(params[k] for k in NAMES), camera, background=(0.2, 0.3, 0.4))
    depth = torch.where(out.alpha > 0.2, out.depth, torch.zeros_like(out.depth))
    rgb_term = (out.rgb * weights[0]).sum()
    return rgb_term + (out.alpha * weights[1]).sum() + (depth * weights[2]).sum()


@pytest.mark.parametrize("camera", [CAM, FISHEYE], ids=["pinhole", "fisheye"])
def test_gradients_match_finite_differences(camera):
    rng = np.random.default_rng(3)
    base = {k: torch.tensor(v, dtype=torch.float64) for k, v in tiny_params(1).items()}
    h, w = camera.height, camera.width
    weights = [torch.tensor(rng.normal(size=s)) for s in ((h, w, 3), (h, w), (h, w))]
    params = {k: v.clone().requires_grad_(True) for k, v in base.items()}
    loss_fn(params, camera, weights).backward()
    eps = 1e-6
    for name in NAMES:
        direction = torch.tensor(rng.normal(size=base[name].shape))
        analytic = float((params[name].grad * direction).sum())
        with torch.no_grad():
            plus = {**base, name: base[name] + eps * direction}
            minus = {**base, name: base[name] - eps * direction}
            diff = loss_fn(plus, camera, weights) - loss_fn(minus, camera, weights)
            numeric = float(diff) / (2 * eps)
        # Central differences in float64: agreement to ~1e-6 relative (brute force reference).
        assert analytic == pytest.approx(numeric, rel=1e-4, abs=1e-6), name
        assert abs(analytic) > 1e-3, name  # the parameter actually influences the image


def test_densification_outputs():
    params = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True)
              for k, v in tiny_params(2, n=8).items()}
    out = rasterize(*(params[k] for k in NAMES), CAM)
    out.rgb.sum().backward()
    assert out.means2d.shape == (8, 2) and out.means2d.grad is not None
    visible = out.radii > 0
    assert visible.any()
    # Screen-space gradients exist exactly for the Gaussians that were rasterized.
    assert (out.means2d.grad[~visible] == 0).all()
    assert (out.means2d.grad[visible].abs().sum(1) > 0).any()


def test_torch_raster_culls_behind_camera():
    params = {k: torch.tensor(v, dtype=torch.float32) for k, v in tiny_params(4).items()}
    params["means"] = params["means"] + torch.tensor([0.0, -5.0, 0.0])  # all behind CAM
    out = rasterize(*(params[k] for k in NAMES), CAM, background=(1.0, 0.0, 0.0))
    assert (out.radii == 0).all() and (out.alpha == 0).all()
    assert torch.isinf(out.depth).all()
    assert torch.allclose(out.rgb, torch.tensor([1.0, 0.0, 0.0]).expand(20, 24, 3))


def test_torch_backend_matches_rasterize_outputs():
    p = tiny_params(5)
    splats = GaussianSplats(**{k: np.asarray(v, np.float32) for k, v in p.items()})
    out = render(splats, CAM, backend="torch")
    direct = rasterize(*(torch.tensor(np.asarray(p[k], np.float32)) for k in NAMES), CAM)
    np.testing.assert_array_equal(out.rgb, direct.rgb.numpy())
