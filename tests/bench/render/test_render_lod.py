"""Opt-in level of detail (``bench.render.lod``): moment matching, selection, manifest.

Closed-form checks: a merged Gaussian's mean and covariance are the weighted mixture
moments of its members (weights opacity x pi x the two largest standard deviations),
whatever level it was merged from; a one-member cell reproduces its Gaussian. A tiny
``pixel_size`` selects every block's original Gaussians and must give the exact image.
"""

import json

import numpy as np
import pytest

from bench.cli import main
from bench.render import LodConfig, render
from bench.render import culling as C
from bench.render import lod as L
from bench.render.lod import _covariances
from bench.scene.bundle import save_scene
from bench.scene.cameras import Camera, orbit
from bench.scene.sample import make_sample_scene, sample_background


@pytest.fixture(scope="module")
def room():
    return sample_background(seed=2, n_gaussians=20000)


def mixture_moments(splats, rows):
    std = np.sort(np.exp(splats.log_scales[rows].astype(np.float64)), axis=1)
    w = splats.opacities()[rows] * np.pi * std[:, 1] * std[:, 2]
    mu = splats.means[rows].astype(np.float64)
    mean = (w[:, None] * mu).sum(0) / w.sum()
    d = mu - mean
    cov = (w[:, None, None] * (_covariances(splats.quats[rows], splats.log_scales[rows])
                               + d[:, :, None] * d[:, None, :])).sum(0) / w.sum()
    return mean, cov, w


def test_coarsest_level_is_the_mixture_of_each_block(room):
    index = C.spatial_index(room)
    h = L.lod_hierarchy(room)
    coarse = len(L.LOD_LEVELS) - 1
    merged_cov = _covariances(h.merged.quats, h.merged.log_scales)
    for b in np.random.default_rng(0).choice(index.num_blocks, 10, replace=False):
        rows = index.order[index.block_start[b]:index.block_start[b + 1]]
        (i,) = range(h.level_block_start[coarse, b], h.level_block_start[coarse, b + 1])
        mean, cov, w = mixture_moments(room, rows)
        np.testing.assert_allclose(h.merged.means[i], mean, atol=2e-6)
        np.testing.assert_allclose(merged_cov[i], cov, atol=1e-6 * np.abs(cov).max() + 1e-12)
        np.testing.assert_allclose(h.merged.sh_dc[i],
                                   (w[:, None] * room.sh_dc[rows]).sum(0) / w.sum(), atol=1e-5)


def test_single_member_cell_reproduces_its_gaussian(room):
    one = room.subset(np.array([123]))
    h = L.build_hierarchy(one, C.build_index(one))
    assert h.merged.num == len(L.LOD_LEVELS)
    for k in range(h.merged.num):
        np.testing.assert_allclose(h.merged.means[k], one.means[0], atol=1e-7)
        np.testing.assert_allclose(_covariances(h.merged.quats[k:k + 1],
                                                h.merged.log_scales[k:k + 1])[0],
                                   _covariances(one.quats, one.log_scales)[0], rtol=1e-4,
                                   atol=1e-12)
        np.testing.assert_allclose(h.merged.opacities()[k], one.opacities()[0], rtol=1e-5)


def cams():
    ring = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=4)
    return [Camera.pinhole_from_fov(64, 48, fov_x_deg=70.0, world_from_camera=ring[0]),
            Camera.equidistant_fisheye(64, 64, fov_deg=200.0, world_from_camera=ring[1])]


@pytest.mark.parametrize("cam_index", [0, 1])
def test_tiny_pixel_size_is_exact_and_coarse_is_close(room, cam_index):
    cam = cams()[cam_index]
    exact = render(room, cam, backend="cpu", culling=False)
    fine = render(room, cam, backend="cpu", lod=LodConfig(pixel_size=1e-6))
    np.testing.assert_array_equal(fine.rgb, exact.rgb)  # same rows, kernels and order
    index, h = C.spatial_index(room), L.lod_hierarchy(room)
    blocks = C.visible_blocks(index, cam)
    levels = L.choose_levels(index, h, cam, blocks, LodConfig(pixel_size=2.0))
    assert (levels >= 0).any()  # some blocks are drawn merged
    coarse = render(room, cam, backend="cpu", lod=LodConfig(pixel_size=2.0))
    mse = np.mean((coarse.rgb - exact.rgb) ** 2)
    assert 0 < mse and 10 * np.log10(1 / mse) > 18  # measured ~24-30 dB on these views


def test_lod_validation():
    with pytest.raises(ValueError, match="pixel_size"):
        LodConfig(pixel_size=0.0)
    with pytest.raises(ValueError, match="cpu backend only"):
        render(sample_background(seed=0, n_gaussians=100), cams()[0], backend="reference",
               lod=LodConfig())


def test_cli_records_lod_in_manifest(tmp_path, capsys):
    root = tmp_path / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=3000), root)
    args = ["render", "--scene", str(root), "--role", "test", "--backend", "cpu", "--width", "32"]
    assert main([*args, "--out", str(tmp_path / "exact")]) == 0
    assert main([*args, "--out", str(tmp_path / "lod"), "--lod-pixels", "1.5"]) == 0
    exact = json.loads((tmp_path / "exact/manifest.json").read_text())
    lod = json.loads((tmp_path / "lod/manifest.json").read_text())
    assert exact["params"]["lod"] is None
    assert lod["params"]["lod"] == {"mode": "lod", "levels": [8, 4, 2, 1], "pixel_size": 1.5}
    assert main([*args, "--out", str(tmp_path / "bad"), "--lod-pixels", "0"]) == 2
    assert "pixel_size" in capsys.readouterr().err and not (tmp_path / "bad").exists()
