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


@pytest.mark.parametrize("camera_name", ["pinhole", "fisheye", "occluder"])
def test_pruned_path_matches_dense_tiles(camera_name):
    # The default path differentiates only the weighted pairs; the plain dense per-tile path
    # (dense_tiles=True) is the reference. Many opaque, overlapping Gaussians so pixels hit
    # the transmittance stop, and an image whose size is not a multiple of the tile size.
    rng = np.random.default_rng(11)
    n = 400
    base = {
        "means": rng.uniform(-0.6, 0.6, (n, 3)),
        "quats": rng.normal(size=(n, 4)),
        "log_scales": np.log(rng.uniform(0.02, 0.15, (n, 3))),
        "opacity_logits": rng.normal(2.0, 2.0, n),
        "sh_dc": rng.normal(0.0, 1.0, (n, 3)),
        "sh_rest": rng.normal(0.0, 0.2, (n, 15, 3)),
    }
    eye = (0.3, -2.0, 0.6) if camera_name != "fisheye" else (0.3, -1.2, 0.4)
    if camera_name == "fisheye":
        camera = Camera("fisheye", 45, 37, 14.0, 14.0, 22.0, 18.0, look_at(eye, (0, 0, 0)),
                        distortion=(0.03, -0.01, 0.0, 0.0), fov_deg=190.0)
    else:
        camera = Camera("pinhole", 45, 37, 40.0, 40.0, 22.1, 18.3, look_at(eye, (0, 0, 0)))
    occluder = None
    if camera_name == "occluder":
        occluder = torch.full((37, 45), float("inf"), dtype=torch.float64)
        occluder[5:30, 10:35] = 2.0
    weights = [torch.tensor(rng.normal(size=s)) for s in ((37, 45, 3), (37, 45), (37, 45))]
    results = []
    for dense in (False, True):
        params = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
                  for k, v in base.items()}
        out = rasterize(*(params[k] for k in NAMES), camera, background=(0.2, 0.3, 0.4),
                        occluder_depth=occluder, dense_tiles=dense)
        depth = torch.where(out.alpha > 0.2, out.depth, torch.zeros_like(out.depth))
        loss = (out.rgb * weights[0]).sum() + (out.alpha * weights[1]).sum() + (
            depth * weights[2]).sum()
        loss.backward()
        results.append((out, {k: params[k].grad for k in NAMES}, out.means2d.grad))
    (fast, fast_grads, fast_m2d), (dense, dense_grads, dense_m2d) = results
    assert float(dense.alpha.detach().max()) > 1 - 2e-4  # some pixels reach the stop
    # Same float64 arithmetic up to summation order: agreement to round-off.
    torch.testing.assert_close(fast.rgb, dense.rgb, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fast.alpha, dense.alpha, rtol=1e-10, atol=1e-12)
    assert torch.equal(torch.isinf(fast.depth), torch.isinf(dense.depth))
    finite = torch.isfinite(dense.depth)
    torch.testing.assert_close(fast.depth[finite], dense.depth[finite], rtol=1e-10, atol=1e-12)
    for name in NAMES:
        torch.testing.assert_close(fast_grads[name], dense_grads[name], rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(fast_m2d, dense_m2d, rtol=1e-8, atol=1e-10)
    with torch.no_grad():  # without autograd the pruned path blends in its mask pass
        plain = {k: torch.tensor(v, dtype=torch.float64) for k, v in base.items()}
        nograd = rasterize(*(plain[k] for k in NAMES), camera, background=(0.2, 0.3, 0.4),
                           occluder_depth=occluder)
    torch.testing.assert_close(nograd.rgb, dense.rgb.detach(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(nograd.alpha, dense.alpha.detach(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(nograd.depth[finite], dense.depth.detach()[finite], rtol=1e-10,
                               atol=1e-12)
