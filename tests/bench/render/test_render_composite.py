"""Depth compositing of Gaussian renders with mesh renders (rule in bench.render.composite)."""

import numpy as np
import pytest

from bench.render import composite, render
from bench.render.output import RenderOutput
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import GaussianSplats


def gs_output():
    # 1x4 image: empty pixel; half-transparent Gaussians at 2 m; opaque at 1 m; opaque at 3 m.
    alpha = np.array([[0.0, 0.5, 1.0, 1.0]], np.float32)
    colour = np.array([[[0, 0, 0], [0.2, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]], np.float32)
    bg = (0.5, 0.5, 0.5)
    rgb = colour + (1 - alpha)[..., None] * np.asarray(bg, np.float32)  # colour is premultiplied
    depth = np.array([[np.inf, 2.0, 1.0, 3.0]], np.float32)
    return RenderOutput(rgb, depth, alpha, np.ones((1, 4), bool), background=bg)


def test_composite_rule_per_pixel():
    gs = gs_output()
    mesh_rgb = np.full((1, 4, 3), 0.8, np.float32)
    mesh_depth = np.array([[1.5, 2.5, 2.0, 2.0]], np.float32)
    out, depth = composite(gs, mesh_rgb, mesh_depth, return_depth=True)
    # Hand-computed from the rule: pixel 0 no Gaussians -> mesh; pixel 1 Gaussians in front ->
    # C + (1 - 0.5) * mesh; pixel 2 opaque Gaussian in front -> Gaussian; pixel 3 mesh in front.
    expected = np.array([[[0.8] * 3, [0.2 + 0.4, 0.1 + 0.4, 0.4], [0, 1, 0], [0.8] * 3]])
    np.testing.assert_allclose(out, expected, atol=1e-6)
    np.testing.assert_allclose(depth, [[1.5, 2.0, 1.0, 2.0]])


def test_composite_without_mesh_is_identity():
    gs = gs_output()
    out = composite(gs, np.zeros((1, 4, 3)), np.full((1, 4), np.inf))
    np.testing.assert_array_equal(out, gs.rgb)
    out_nan = composite(gs, np.zeros((1, 4, 3)), np.full((1, 4), np.nan))  # NaN = no mesh
    np.testing.assert_array_equal(out_nan, gs.rgb)


def test_composite_with_real_render():
    splats = GaussianSplats(
        np.array([[0.0, 0.0, 2.0]], np.float32), np.array([[1, 0, 0, 0]], np.float32),
        np.full((1, 3), np.log(0.3), np.float32), np.array([0.0], np.float32),
        np.zeros((1, 3), np.float32), np.zeros((1, 0, 3), np.float32))
    cam = Camera("pinhole", 16, 16, 12.0, 12.0, 8.0, 8.0, np.eye(4))
    gs = render(splats, cam, backend="cpu", background=(0.0, 0.0, 1.0))
    wall = np.full((16, 16, 3), [1.0, 0.0, 0.0], np.float32)
    behind = composite(gs, wall, np.full((16, 16), 5.0))
    front = composite(gs, wall, np.full((16, 16), 1.0))
    np.testing.assert_array_equal(front, wall)  # a wall at 1 m hides the Gaussian at 2 m
    # Behind the grey (0.5) Gaussian the red wall shows through with weight 1 - alpha and the
    # blue render background is gone: blue = 0.5 alpha exactly.
    np.testing.assert_allclose(behind[..., 2], 0.5 * gs.alpha, atol=1e-6)
    np.testing.assert_allclose(behind[..., 0], 0.5 * gs.alpha + (1 - gs.alpha), atol=1e-6)
    assert gs.alpha.max() > 0.4


def test_composite_shape_mismatch():
    with pytest.raises(ValueError, match="same camera"):
        composite(gs_output(), np.zeros((2, 4, 3)), np.zeros((2, 4)))
    no_bg = RenderOutput(*(getattr(gs_output(), k) for k in ("rgb", "depth", "alpha", "valid")))
    with pytest.raises(ValueError, match="background"):
        composite(no_bg, np.zeros((1, 4, 3)), np.zeros((1, 4)))


def _two_layer_scene():
    # A half-transparent red "floater" at 1 m and an opaque green "wall" at 3 m, both wide.
    means = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 3.0]], np.float32)
    rgb = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return GaussianSplats(
        means, np.tile(np.array([1, 0, 0, 0], np.float32), (2, 1)),
        np.log(np.array([[0.5, 0.5, 0.01], [3.0, 3.0, 0.01]], np.float32)),
        np.array([0.0, 8.0], np.float32), ((rgb - 0.5) / 0.28209479177387814).astype(np.float32),
        np.zeros((2, 0, 3), np.float32))


@pytest.mark.parametrize("backend", ["cpu", "torch", "reference"])
def test_occluder_makes_composite_exact(backend):
    splats = _two_layer_scene()
    cam = Camera("pinhole", 16, 16, 8.0, 8.0, 8.0, 8.0, np.eye(4))
    mesh_rgb = np.full((16, 16, 3), [0.0, 0.0, 1.0], np.float32)  # blue gripper at 2 m
    mesh_depth = np.full((16, 16), 2.0, np.float32)
    mesh_depth[:, :4] = np.inf  # no gripper in the left columns
    gs = render(splats, cam, backend=backend, occluder_depth=mesh_depth)
    assert gs.occluded
    full = render(splats, cam, backend=backend)
    out = composite(gs, mesh_rgb, mesh_depth)
    # Closed form at pixel (8, 8), centre 0.5 px from the floater's mean in x and y: 2D
    # variance (f s / z)^2 + 0.3 = 16.3 px^2, opacity 0.5 -> alpha a; then the blue gripper.
    a = 0.5 * np.exp(-0.5 * (0.5**2 + 0.5**2) / 16.3)
    np.testing.assert_allclose(out[8, 8], [a, 0.0, 1.0 - a], atol=1e-5)
    # Left columns: no mesh, the full render (floater over the wall) is unchanged.
    np.testing.assert_allclose(out[:, :4], full.rgb[:, :4], atol=1e-6)
    # The expected-depth rule loses the floater: its mixed depth (~1.9-3 m) is behind the mesh
    # only where the wall dominates; here the mean depth lies behind 2 m, so the mesh wins.
    approx = composite(full, mesh_rgb, mesh_depth)
    assert full.depth[8, 8] > 2.0
    np.testing.assert_allclose(approx[8, 8], [0.0, 0.0, 1.0])


def test_occluder_backends_agree_and_fisheye_cubemap():
    rng = np.random.default_rng(21)
    n = 250
    splats = GaussianSplats(
        rng.uniform(-1, 1, (n, 3)).astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32),
        np.log(rng.uniform(0.01, 0.12, (n, 3))).astype(np.float32),
        rng.normal(0.5, 2.0, n).astype(np.float32), rng.normal(0, 1, (n, 3)).astype(np.float32),
        rng.normal(0, 0.3, (n, 15, 3)).astype(np.float32))
    pinhole = Camera("pinhole", 48, 40, 45.0, 47.0, 24.3, 19.3,
                     look_at((2.0, -2.0, 1.0), (0, 0, 0)))
    fisheye = Camera("fisheye", 48, 40, 13.0, 13.5, 24.0, 20.0,
                     look_at((0.9, -0.9, 0.3), (0, 0, 0)),
                     distortion=(0.03, -0.01, 0.002, -0.0003), fov_deg=200.0)
    for cam in (pinhole, fisheye):
        occ = rng.uniform(1.0, 4.0, (cam.height, cam.width)).astype(np.float32)
        occ[rng.random(occ.shape) < 0.3] = np.inf
        ref = render(splats, cam, backend="reference", occluder_depth=occ)
        cpu = render(splats, cam, backend="cpu", occluder_depth=occ)
        assert 10 * np.log10(1 / np.mean((ref.rgb - cpu.rgb) ** 2)) >= 40
        assert (ref.alpha <= render(splats, cam, backend="reference").alpha + 1e-6).all()
    # Cube map vs direct with an occluder sphere at 3 m around Gaussians 2-5 m away (both
    # paths linearise well there): the occluder must be carried onto the cube faces.
    n = 3000
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    ring = splats.subset(rng.integers(0, 250, n)).replace(
        means=(dirs * rng.uniform(2.0, 5.0, (n, 1))).astype(np.float32),
        log_scales=np.log(rng.uniform(0.1, 0.25, (n, 3))).astype(np.float32))
    cam = Camera("fisheye", 96, 96, 27.0, 27.0, 48.0, 48.0, look_at((0, 0, 0), (1, 0.2, 0.1)),
                 fov_deg=200.0)
    occ = np.full((96, 96), 3.0, np.float32)
    direct = render(ring, cam, backend="cpu", occluder_depth=occ)
    cube = render(ring, cam, backend="cpu", fisheye_mode="cubemap", occluder_depth=occ)
    unoccluded = render(ring, cam, backend="cpu")
    assert cube.occluded and direct.occluded
    inner = direct.valid & (np.arccos(np.clip(cam.pixel_rays()[0][..., 2], -1, 1)) < 1.3)
    assert unoccluded.alpha[inner].mean() > direct.alpha[inner].mean() + 0.1
    # Faces compare each Gaussian's face z with the occluder's, direct its distance: the cut
    # differs slightly for wide Gaussians (~3% alpha); a lost occluder would give ~+0.13.
    assert abs(cube.alpha[inner].mean() - direct.alpha[inner].mean()) < 0.04
    assert 10 * np.log10(1 / np.mean((cube.rgb[inner] - direct.rgb[inner]) ** 2)) >= 20


def test_occluder_shape_is_checked():
    cam = Camera("pinhole", 16, 16, 8.0, 8.0, 8.0, 8.0, np.eye(4))
    with pytest.raises(ValueError, match="same camera"):
        render(_two_layer_scene(), cam, backend="cpu", occluder_depth=np.ones((4, 4)))
