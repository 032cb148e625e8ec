"""The Warp CPU rasterizer with a backward pass (bench.render.warp_grad) vs the torch path.

References: :func:`bench.render.torch_raster.rasterize` in float64 (its own gradients are
checked against central finite differences in test_render_torch_raster.py) and central
finite differences of that float64 forward model, which the Warp forward pass reproduces
to float32 round-off (checked here too).
"""

import numpy as np
import pytest
import torch

from bench.render import constants as K
from bench.render import torch_raster, warp_grad
from bench.scene.cameras import Camera, look_at

NAMES = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")
CAM = Camera("pinhole", 40, 32, 36.0, 36.0, 20.3, 15.6, look_at((0.3, -2.0, 0.6), (0, 0, 0)))
FISHEYE = Camera("fisheye", 40, 32, 14.0, 14.0, 20.0, 16.0,
                 look_at((0.3, -1.0, 0.4), (0, 0, 0)), distortion=(0.03, -0.01, 0.0, 0.0),
                 fov_deg=190.0)
CAMERAS = {"pinhole": CAM, "fisheye": FISHEYE}


def overlapping_scene(seed: int, n: int = 70) -> dict[str, np.ndarray]:
    """Overlapping, mostly opaque Gaussians (occlusion; pixels hit the transmittance stop),
    plus two large ones beside the view whose x/z lies beyond the pinhole frustum clamp."""
    rng = np.random.default_rng(seed)
    params = {
        "means": rng.uniform(-0.35, 0.35, (n, 3)),
        "quats": rng.normal(size=(n, 4)),
        "log_scales": np.log(rng.uniform(0.04, 0.15, (n, 3))),
        "opacity_logits": rng.normal(2.5, 1.5, n),
        "sh_dc": rng.normal(0.0, 1.0, (n, 3)),
        "sh_rest": rng.normal(0.0, 0.2, (n, 15, 3)),
    }
    # camera at y = -2 looking at the origin: x = +-1.9 at depth ~2 is x/z ~ 0.95 > ~0.72
    params["means"][:2] = [[1.9, 0.0, 0.0], [-1.9, 0.2, 0.3]]
    params["log_scales"][:2] = np.log(0.45)
    params["opacity_logits"][:2] = 0.5
    return params


def weights(camera: Camera, seed: int = 5) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    h, w = camera.height, camera.width
    return [torch.tensor(rng.normal(size=s)) for s in ((h, w, 3), (h, w), (h, w))]


def loss_of(out, w) -> torch.Tensor:
    """Uses rgb, alpha and depth, so dL/dC, dL/dD and dL/dT are all exercised."""
    dtype = out.rgb.dtype
    depth = torch.where(out.alpha > 0.2, out.depth, torch.zeros_like(out.depth))
    return ((out.rgb * w[0].to(dtype)).sum() + (out.alpha * w[1].to(dtype)).sum()
            + (depth * w[2].to(dtype)).sum())


def gradients(module, params, camera, dtype, **kwargs):
    leaves = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    out = module.rasterize(*(leaves[k] for k in NAMES), camera, background=(0.2, 0.3, 0.4),
                           **kwargs)
    loss_of(out, weights(camera)).backward()
    grads = {k: leaves[k].grad.double() for k in NAMES}
    grads["means2d"] = out.means2d.grad.double()
    return _detached(out), grads


def _detached(out):
    return type(out)(*(t.detach() for t in out))


def test_scene_exercises_the_transmittance_stop(monkeypatch):
    params = overlapping_scene(0)
    for camera in CAMERAS.values():
        with_stop, _ = gradients(torch_raster, params, camera, torch.float64)
        monkeypatch.setattr(K, "TRANSMITTANCE_MIN", 0.0)
        without, _ = gradients(torch_raster, params, camera, torch.float64)
        monkeypatch.undo()
        assert (with_stop.rgb - without.rgb).abs().max() > 1e-6  # the stop changes pixels


@pytest.mark.parametrize("camera_name", ["pinhole", "fisheye"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("occluded", [False, True], ids=["free", "occluder"])
def test_gradients_match_float64_torch_path(camera_name, seed, occluded):
    camera = CAMERAS[camera_name]
    params = overlapping_scene(seed)
    kwargs = {}
    if occluded:  # an opaque surface cutting through the cloud (exact compositing)
        occ = np.full((camera.height, camera.width), np.inf)
        occ[:, : camera.width // 2] = 2.0 if camera_name == "pinhole" else 1.0
        kwargs["occluder_depth"] = torch.tensor(occ)
    ref_out, ref = gradients(torch_raster, params, camera, torch.float64, **kwargs)
    out, got = gradients(warp_grad, params, camera, torch.float32, threads=2, **kwargs)
    np.testing.assert_allclose(out.rgb.double(), ref_out.rgb, atol=2e-6)
    np.testing.assert_allclose(out.alpha.double(), ref_out.alpha, atol=2e-6)
    finite = torch.isfinite(ref_out.depth)
    assert torch.equal(torch.isfinite(out.depth), finite)
    np.testing.assert_allclose(out.depth[finite].double(), ref_out.depth[finite], rtol=1e-5)
    assert torch.equal(out.radii, ref_out.radii)
    for name, g_ref in ref.items():
        rel = float((got[name] - g_ref).norm() / g_ref.norm())
        assert rel < 1e-4, (name, rel)
        assert float(g_ref.norm()) > 1e-3, name  # the parameter does influence the image


@pytest.mark.parametrize("camera_name", ["pinhole", "fisheye"])
def test_gradients_match_central_finite_differences(camera_name):
    camera = CAMERAS[camera_name]
    params = overlapping_scene(2)
    _, got = gradients(warp_grad, params, camera, torch.float32)
    w = weights(camera)
    rng = np.random.default_rng(7)
    eps = 1e-6
    for name in NAMES:
        direction = rng.normal(size=params[name].shape)
        analytic = float((got[name] * torch.tensor(direction)).sum())

        def loss_at(step, name=name, direction=direction):
            moved = {**params, name: params[name] + step * direction}
            t = {k: torch.tensor(v, dtype=torch.float64) for k, v in moved.items()}
            with torch.no_grad():
                out = torch_raster.rasterize(*(t[k] for k in NAMES), camera,
                                             background=(0.2, 0.3, 0.4))
            return float(loss_of(out, w))

        numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
        assert analytic == pytest.approx(numeric, rel=1e-3, abs=1e-4), name
        assert abs(numeric) > 1e-2, name


def test_pinhole_projection_kernels_match_torch_project():
    params = overlapping_scene(3)
    f32 = {k: torch.tensor(params[k], dtype=torch.float32, requires_grad=True)
           for k in ("means", "quats", "log_scales")}
    f64 = {k: torch.tensor(params[k], dtype=torch.float64, requires_grad=True)
           for k in ("means", "quats", "log_scales")}
    got = warp_grad.project_pinhole(f32["means"], f32["quats"], f32["log_scales"], CAM)
    ref = torch_raster.project(f64["means"], f64["quats"], f64["log_scales"], CAM)
    assert torch.equal(got.visible, ref.visible) and torch.equal(got.radii, ref.radii)
    assert got.visible[:2].all()  # the two beyond the frustum clamp are drawn
    vis = ref.visible
    rng = np.random.default_rng(0)
    w = [torch.tensor(rng.normal(size=s)) for s in ((len(vis), 2), (len(vis), 3))]
    losses = []
    for proj in (got, ref):
        d = proj.means2d.dtype
        np.testing.assert_allclose(proj.conics[vis].detach().double(), ref.conics[vis].detach(),
                                   rtol=1e-4, atol=1e-6)
        losses.append((proj.means2d[vis] * w[0][vis].to(d)).sum()
                      + 10 * (proj.conics[vis] * w[1][vis].to(d)).sum() + proj.depths.sum())
    losses[0].backward()
    losses[1].backward()
    for name in f32:
        rel = float((f32[name].grad.double() - f64[name].grad).norm() / f64[name].grad.norm())
        assert rel < 1e-5, (name, rel)


def test_gradients_are_byte_identical_across_runs_and_thread_counts():
    params = overlapping_scene(4, n=400)
    runs = [gradients(warp_grad, params, CAM, torch.float32, threads=t)[1] for t in (1, 1, 3)]
    for other in runs[1:]:
        for name in runs[0]:
            assert torch.equal(runs[0][name], other[name]), name


def test_warp_rasterizer_rejects_float64_with_the_fix():
    t = {k: torch.tensor(v) for k, v in overlapping_scene(0, n=3).items()}
    with pytest.raises(ValueError, match="float32.*torch_raster"):
        warp_grad.rasterize(*(t[k] for k in NAMES), CAM)


def test_nothing_visible_gives_background_and_zero_gradients():
    params = overlapping_scene(0, n=5)
    params["means"] = params["means"] + np.array([0.0, -5.0, 0.0])  # all behind the camera
    out, grads = gradients(warp_grad, params, CAM, torch.float32)
    assert (out.radii == 0).all() and (out.alpha == 0).all()
    assert torch.allclose(out.rgb, torch.tensor([0.2, 0.3, 0.4]).expand(32, 40, 3))
    for name in ("means", "opacity_logits", "sh_dc"):
        assert (grads[name] == 0).all()
