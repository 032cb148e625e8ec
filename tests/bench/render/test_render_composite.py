"""Depth compositing of Gaussian renders with mesh renders (rule in bench.render.composite)."""

import numpy as np
import pytest

from bench.render import composite, render
from bench.render.output import RenderOutput
from bench.scene.cameras import Camera
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
