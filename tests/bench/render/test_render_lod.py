"""Opt-in level of detail (``bench.render.lod``): tree, moment matching, cut, manifest.

Closed-form checks: a merged node's mean, covariance and SH are the weighted mixture
moments of its members (weights opacity x pi x the two largest standard deviations),
at every level; its effective opacity integrates (numerically, on a grid) to the
members' coverage of its footprint. A tiny ``pixel_size`` draws every original and must
give the exact image bit for bit; the image converges to it as ``pixel_size`` shrinks.
"""

import json

import numpy as np
import pytest
import warp as wp

from bench.cli import main
from bench.render import LodConfig, render
from bench.render import constants as K
from bench.render import culling as C
from bench.render import lod as L
from bench.render.lod import _covariances
from bench.render.warp_culled import _merged_atan2
from bench.scene.bundle import save_scene
from bench.scene.cameras import Camera, look_at, orbit
from bench.scene.gaussians import SH_C0, GaussianSplats
from bench.scene.sample import make_sample_scene, sample_background


@pytest.fixture(scope="module")
def room():
    return sample_background(seed=2, n_gaussians=20000)


def mixture_moments(splats, rows):
    std = np.sort(np.exp(splats.log_scales[rows].astype(np.float64)), axis=1)
    w = splats.opacities()[rows].astype(np.float64) * np.pi * std[:, 1] * std[:, 2]
    mu = splats.means[rows].astype(np.float64)
    mean = (w[:, None] * mu).sum(0) / w.sum()
    d = mu - mean
    cov = (w[:, None, None] * (_covariances(splats.quats[rows], splats.log_scales[rows])
                               + d[:, :, None] * d[:, None, :])).sum(0) / w.sum()
    return mean, cov, w


def test_tree_partitions_every_block_down_to_single_gaussians(room):
    index, h = C.spatial_index(room), L.lod_hierarchy(room)
    np.testing.assert_array_equal(h.level_start[0], index.block_start)
    for b in range(index.num_blocks):  # same Gaussians per block, reordered
        sl = slice(index.block_start[b], index.block_start[b + 1])
        np.testing.assert_array_equal(np.sort(h.order[sl]), np.sort(index.order[sl]))
    assert len(h.level_start[-1]) - 1 == len(h.order)  # the last level: single Gaussians
    for k in range(len(h.level_start) - 1):
        coarse, fine = h.level_start[k], h.level_start[k + 1]
        assert np.isin(coarse, fine).all()  # nested
        ids = np.arange(h.level_offset[k], h.level_offset[k + 1])
        children = h.child_hi[ids] - h.child_lo[ids]
        sizes = np.diff(coarse)
        assert ((children >= 1) & (children <= 2 ** L.SPLITS_PER_LEVEL)).all()
        assert (children[sizes == 1] == 1).all()
        # Children of node j start where j starts and end where it ends.
        first = h.child_lo[ids] - h.level_offset[k + 1]
        last = h.child_hi[ids] - h.level_offset[k + 1]
        np.testing.assert_array_equal(fine[first], coarse[:-1])
        np.testing.assert_array_equal(fine[last], coarse[1:])


def test_median_split_cuts_the_widest_feature_in_half():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(11, 2)) * [1.0, 5.0]  # y is the widest
    order, starts = L.median_split(feats, np.arange(11), np.array([0, 11]))
    np.testing.assert_array_equal(starts, [0, 5, 11])
    assert feats[order[:5], 1].max() <= feats[order[5:], 1].min()
    np.testing.assert_array_equal(np.sort(order), np.arange(11))


def test_merged_nodes_are_the_mixture_moments(room):
    h = L.lod_hierarchy(room)
    merged_cov = _covariances(h.merged.quats, h.merged.log_scales)
    rng = np.random.default_rng(0)
    checked = 0
    for k, starts in enumerate(h.level_start):
        ids = h.level_offset[k] + np.flatnonzero(np.diff(starts) > 1)
        for node in rng.choice(ids, min(6, len(ids)), replace=False) if len(ids) else []:
            j = node - h.level_offset[k]
            rows = h.order[starts[j]:starts[j + 1]]
            i = h.node_row[node] - len(h.order)
            mean, cov, w = mixture_moments(room, rows)
            np.testing.assert_allclose(h.merged.means[i], mean, atol=2e-6)
            np.testing.assert_allclose(merged_cov[i], cov, atol=1e-5 * np.abs(cov).max())
            np.testing.assert_allclose(h.merged.sh_dc[i],
                                       (w[:, None] * room.sh_dc[rows]).sum(0) / w.sum(),
                                       atol=1e-5)
            np.testing.assert_allclose(h.merged.sh_rest[i],
                                       (w[:, None, None] * room.sh_rest[rows]).sum(0) / w.sum(),
                                       atol=1e-6)
            np.testing.assert_allclose(h.node_sigma[node], np.sqrt(np.linalg.eigvalsh(cov)[-1]),
                                       rtol=1e-5)
            rgb = 0.5 + K.SH_C0 * room.sh_dc[rows].astype(np.float64)
            var = (w[:, None] * (rgb - (w[:, None] * rgb).sum(0) / w.sum()) ** 2).sum(0) / w.sum()
            np.testing.assert_allclose(h.node_colour_std[node], np.sqrt(var.mean()), rtol=1e-4,
                                       atol=1e-7)
            checked += 1
    assert checked >= 12
    assert (h.node_sigma[h.node_row < len(h.order)] == 0).all()  # originals never merged


@pytest.mark.parametrize("absorb", [1e-4, 0.3, 2.0, 40.0])
def test_coverage_opacity_integrates_to_the_members_coverage(absorb):
    s1, s2 = 1.0, 0.5
    o = L.coverage_opacity(np.array([absorb]), np.array([s1 * s2]),
                           footprint_area=L.FOOTPRINT_AREA)[0]
    x, y = np.meshgrid(np.linspace(-12, 12, 2401), np.linspace(-6, 6, 1201))
    alpha = np.minimum(K.ALPHA_MAX, o * np.exp(-0.5 * ((x / s1) ** 2 + (y / s2) ** 2)))
    integral = alpha.sum() * (24 / 2400) * (12 / 1200)
    footprint = L.FOOTPRINT_AREA * s1 * s2
    np.testing.assert_allclose(integral, footprint * (1 - np.exp(-absorb / footprint)),
                               rtol=2e-3)
    if absorb == 40.0:
        assert o > 1  # an opaque patch: flat-topped


def cams():
    ring = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=4)
    return [Camera.pinhole_from_fov(64, 48, fov_x_deg=70.0, world_from_camera=ring[0]),
            Camera.equidistant_fisheye(64, 64, fov_deg=200.0, world_from_camera=ring[1])]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b) ** 2)
    return np.inf if mse == 0 else 10 * np.log10(1 / mse)


@pytest.mark.parametrize("cam_index", [0, 1])
def test_lod_converges_to_the_exact_image(room, cam_index):
    cam = cams()[cam_index]
    exact = render(room, cam, backend="cpu", culling=False)
    fine = render(room, cam, backend="cpu", lod=LodConfig(pixel_size=1e-6))
    for field in ("rgb", "depth", "alpha"):  # same rows, kernels and order
        np.testing.assert_array_equal(getattr(fine, field), getattr(exact, field))
    index, h = C.spatial_index(room), L.lod_hierarchy(room)
    blocks = C.visible_blocks(index, cam)
    quality, drawn = [], []
    for px in (4.0, 1.0, 0.25):
        cfg = LodConfig(pixel_size=px, colour_tolerance=None)
        rows = L.choose_rows(index, h, cam, blocks, cfg)
        drawn.append(len(rows))
        quality.append(psnr(render(room, cam, backend="cpu", lod=cfg).rgb, exact.rgb))
        if px >= 1.0:
            assert (rows >= len(h.order)).any()  # some nodes are drawn merged
    assert drawn[0] < drawn[1] <= drawn[2]
    assert quality[0] < quality[1] <= quality[2]
    assert quality[0] > 20  # measured 29.5 / 31.0 dB (px 4), 60.8 / 41.3 dB (px 1), exact at 0.25


def test_lod_is_deterministic(room):
    rebuilt = L.build_hierarchy(room, C.build_index(room))
    h = L.lod_hierarchy(room)
    for name in ("order", "node_row", "node_sigma", "node_colour_std", "merged_opacity"):
        np.testing.assert_array_equal(getattr(rebuilt, name), getattr(h, name))
    cam, cfg = cams()[1], LodConfig(pixel_size=1.0)
    first = render(room, cam, backend="cpu", lod=cfg)
    copy = sample_background(seed=2, n_gaussians=20000)  # a new object: new cache entries
    again = render(copy, cam, backend="cpu", lod=cfg)
    np.testing.assert_array_equal(first.rgb, again.rgb)
    np.testing.assert_array_equal(first.rgb, render(room, cam, backend="cpu", lod=cfg).rgb)


def test_lod_validation():
    with pytest.raises(ValueError, match="pixel_size"):
        LodConfig(pixel_size=0.0)
    with pytest.raises(ValueError, match="colour_tolerance"):
        LodConfig(colour_tolerance=-1.0)
    with pytest.raises(ValueError, match="colour_tolerance"):
        LodConfig(colour_tolerance=float("inf"))
    with pytest.raises(ValueError, match="cpu backend only"):
        render(sample_background(seed=0, n_gaussians=100), cams()[0], backend="reference",
               lod=LodConfig())
    for bad in (4, -1, 1.0, True, "0"):
        with pytest.raises(ValueError, match="merged_sh_degree"):
            LodConfig(merged_sh_degree=bad)


def test_cli_records_lod_in_manifest(tmp_path, capsys):
    root = tmp_path / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=3000), root)
    args = ["render", "--scene", str(root), "--role", "test", "--backend", "cpu", "--width", "32"]
    assert main([*args, "--out", str(tmp_path / "exact")]) == 0
    assert main([*args, "--out", str(tmp_path / "lod"), "--lod-pixels", "1.5",
                 "--lod-colour-tolerance", "0.1"]) == 0
    exact = json.loads((tmp_path / "exact/manifest.json").read_text())
    lod = json.loads((tmp_path / "lod/manifest.json").read_text())
    assert exact["params"]["lod"] is None
    assert lod["params"]["lod"] == {
        "mode": "lod", "hierarchy": L.HIERARCHY, "branching": 4, "normal_scale": L.NORMAL_SCALE,
        "footprint_area": L.FOOTPRINT_AREA, "layer_gap": L.LAYER_GAP,
        "layer_bias": L.LAYER_BIAS, "merged_alpha_min": L.MERGED_ALPHA_MIN, "pixel_size": 1.5,
        "colour_tolerance": 0.1, "merged_sh_degree": None}
    assert main([*args, "--out", str(tmp_path / "lod0"), "--lod-pixels", "1.5",
                 "--lod-merged-sh-degree", "0"]) == 0
    lod0 = json.loads((tmp_path / "lod0/manifest.json").read_text())["params"]["lod"]
    assert lod0["merged_sh_degree"] == 0 and lod0["colour_tolerance"] == 0.05
    assert main([*args, "--out", str(tmp_path / "bad"), "--lod-pixels", "1.5",
                 "--lod-merged-sh-degree", "5"]) == 2
    assert "merged_sh_degree" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert main([*args, "--out", str(tmp_path / "bad"), "--lod-merged-sh-degree", "0"]) == 2
    assert "--lod-pixels" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert main([*args, "--out", str(tmp_path / "bad"), "--lod-pixels", "0"]) == 2
    assert "pixel_size" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert main([*args, "--out", str(tmp_path / "bad"), "--lod-colour-tolerance", "0.1"]) == 2
    assert "--lod-pixels" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def two_layers(rng, n_back=300, n_front=100):
    """A wall of points at z = 0 and a panel 1 cm in front of part of it (z = 0.01)."""
    back = np.c_[rng.uniform(-0.5, 0.5, (n_back, 2)), rng.normal(0.0, 5e-4, n_back)]
    front = np.c_[rng.uniform(-0.2, 0.2, (n_front, 2)), 0.01 + rng.normal(0.0, 5e-4, n_front)]
    return np.r_[back, front]


def with_normals(pts):  # [N, 3] -> [N, 7]: split features of flat Gaussians facing +z,
    return np.c_[pts, np.tile([0.0, 0.0, L.NORMAL_SCALE, 1e-3], (len(pts), 1))]  # 1 mm thick


def test_layer_cuts_split_two_layers_at_the_gap_and_leave_one_surface_alone():
    rng = np.random.default_rng(0)
    pts = with_normals(two_layers(rng))
    order = rng.permutation(len(pts))
    layers = L.layer_cuts(pts, order, np.array([0, len(pts)]))
    assert layers is not None and list(layers.segments) == [0]
    assert layers.cut[0] == 300  # every wall point before the gap, every panel point after
    behind = pts[layers.rows[layers.side < 0], 2]
    front = pts[layers.rows[layers.side > 0], 2]
    assert behind.max() < 0.005 < front.min()
    np.testing.assert_allclose(layers.thin[0], [0, 0, 1])  # the members' normal
    np.testing.assert_array_equal(np.sort(layers.rows), np.arange(len(pts)))
    wall = pts[:300]  # one noisy surface: no gap of 3 times its thickness
    assert L.layer_cuts(wall, np.arange(300), np.array([0, 300])) is None
    few = L.layer_cuts(pts, order[:7], np.array([0, 7]))  # too few members to look
    assert few is None and L.LAYER_MIN_MEMBERS > 7
    # split_segments: the layered segment cut at its gap, the other at its median
    both = np.r_[np.arange(len(pts)), len(pts) + np.arange(300)]
    feats = np.r_[pts, wall + [2.0, 0, 0, 0, 0, 0, 0]].astype(np.float32)
    new_order, starts, found = L.split_segments(feats, both.copy(), np.array([0, 400, 700]))
    np.testing.assert_array_equal(starts, [0, 300, 400, 550, 700])
    assert list(found.segments) == [0]


def panel_scene():
    """Grey wall (z = 0) with a white panel 1 cm in front of its middle, flat Gaussians."""
    rng = np.random.default_rng(1)
    n_back, n_front = 16000, 4000
    pts = two_layers(rng, n_back, n_front).astype(np.float32)
    n = len(pts)
    rgb = np.r_[np.full((n_back, 3), 0.3), np.full((n_front, 3), 0.9)]
    spacing = np.r_[np.full(n_back, 1.0 / np.sqrt(n_back)),
                    np.full(n_front, 0.4 / np.sqrt(n_front))]
    log_scales = np.log(np.c_[spacing, spacing, np.full(n, 1e-3)]).astype(np.float32)

    return GaussianSplats(
        means=pts, quats=np.tile(np.float32([1, 0, 0, 0]), (n, 1)), log_scales=log_scales,
        opacity_logits=np.full(n, 4.0, np.float32),
        sh_dc=((rgb - 0.5) / SH_C0).astype(np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))


def test_a_panel_in_front_of_a_wall_keeps_its_colour_at_a_coarse_cut():
    splats = panel_scene()
    h = L.lod_hierarchy(splats)
    assert (h.merged_layer >= 0).any() and len(h.layer_gap) >= 1
    cam = Camera.pinhole_from_fov(48, 48, fov_x_deg=60.0, world_from_camera=look_from(
        (0.3, 0.2, 1.2)))
    exact = render(splats, cam, backend="cpu")
    lod = render(splats, cam, backend="cpu", lod=LodConfig(pixel_size=3.0, colour_tolerance=None))
    panel = exact.rgb.min(-1) > 0.85
    core = panel & np.roll(panel, 2, 0) & np.roll(panel, -2, 0) & np.roll(panel, 2, 1) \
        & np.roll(panel, -2, 1)  # away from its border
    assert core.sum() > 50
    # Measured 0.895 (exact 0.900) with layer cuts, mixed nodes refined and the far
    # layer sorted behind; 0.583 (the wall's grey mixed in) with median cuts only, the
    # tree before layers (kd-moment/2).
    assert lod.rgb[core].mean() > 0.85
    # Seen from behind the wall the far layer is the panel: it is the one pushed back.
    rows = np.arange(len(h.order), len(h.order) + h.merged.num)
    front = L.far_layer_bias(h, cam, rows)
    back = L.far_layer_bias(h, Camera.pinhole_from_fov(48, 48, fov_x_deg=60.0,
                                                       world_from_camera=look_from((0.3, 0.2,
                                                                                    -1.2))), rows)
    layered = (h.merged_layer >= 0) & h.merged_covered
    assert layered.sum() > 100
    assert ((front > 0) != (back > 0))[layered].all()  # exactly one side pushed per view
    assert (front[~layered] == 0).all() and (back[~layered] == 0).all()
    # Wall nodes beside the panel (not under it) are never pushed: the panel's rim
    # would be drawn over them.
    std = np.exp(h.merged.log_scales.max(axis=1).astype(np.float64))  # largest std
    beside = (h.merged_layer >= 0) & (np.abs(h.merged.means[:, :2]).max(axis=1)
                                      > 0.2 + std + 1e-3)  # beyond the panel's edge + 1 std
    assert beside.sum() > 10 and not h.merged_covered[beside].any()
    z = h.merged.means[:, 2]
    assert (z[front > 0] < 0.005).all() and (z[back > 0] > 0.005).all()
    np.testing.assert_allclose(front[front > 0], L.LAYER_BIAS * h.layer_spread[
        h.merged_layer[front > 0]], rtol=1e-6)


def look_from(eye):
    return look_at(eye, (0.0, 0.0, 0.0))


@pytest.mark.parametrize("cam_index", [0, 1])
def test_gathered_projection_draws_the_same_image_as_runs(room, cam_index):
    cam, cfg = cams()[cam_index], LodConfig(pixel_size=4.0)
    index, h = C.spatial_index(room), L.lod_hierarchy(room)
    render(room, cam, backend="cpu", lod=cfg)  # builds the device buffers
    buffers = h._buffers
    rows = L.choose_rows(index, h, cam, C.visible_blocks(index, cam), cfg)
    runs = L.rows_to_runs(rows)
    assert len(runs) > len(rows) / 16  # many short runs: the case gathering is for
    out = [C.render_runs(buffers.arrays, runs, cam, degree=room.sh_degree, background=(0, 0, 0),
                         occluder_depth=None, tile_size=K.TILE_SIZE, original=buffers.original,
                         gather=gather) for gather in (False, True)]
    for field in ("rgb", "depth", "alpha"):
        np.testing.assert_array_equal(getattr(out[0], field), getattr(out[1], field))


@pytest.mark.parametrize("scene", ["room", "panel"])
def test_native_cut_draws_the_reference_rows_and_pushes(room, scene):
    """warp_lod.frame_cut against visible_blocks + block_magnification + choose_rows +
    far_layer_bias (numpy): the same blocks and rows, bit-equal pushes."""
    from bench.render import warp_lod
    from bench.render.lod_nodes import layer_codes

    splats = room if scene == "room" else panel_scene()
    index, h = C.spatial_index(splats), L.lod_hierarchy(splats)
    render(splats, cams()[0], backend="cpu", lod=LodConfig())  # builds the device buffers
    tree = warp_lod.TreeArrays(h, index, wp.zeros(h._buffers.arrays.num, dtype=float,
                                                  device="cpu"))
    eyes = [(0.3, 0.2, 1.2), (-0.4, 0.1, -0.8), (0.0, -1.5, 0.2)]  # both sides of the panel
    views = cams() + [Camera.pinhole_from_fov(48, 48, fov_x_deg=60.0,
                                              world_from_camera=look_from(e)) for e in eyes]
    layered = layer_codes(h.merged_layer, h.merged_side, h.merged_covered) >= 0
    m = len(h.order)
    pushed = culled = 0
    for cam in views:
        blocks = C.visible_blocks(index, cam)
        culled += index.num_blocks - len(blocks)
        for px, tol in [(1e-6, 0.05), (0.5, 0.05), (2.0, None), (4.0, 0.1), (1e6, None)]:
            cfg = LodConfig(pixel_size=px, colour_tolerance=tol)
            reference = L.choose_rows(index, h, cam, blocks, cfg)
            tree.row_bias_np[m:][layered] = -1.0  # every layered row's push is rewritten
            rows = warp_lod.frame_cut(tree, cam, pixel_size=px, colour_tolerance=tol,
                                      layer_bias=L.LAYER_BIAS)
            v = int(tree.num_visible.numpy()[0])
            np.testing.assert_array_equal(tree.blocks.numpy()[:v], blocks)
            np.testing.assert_allclose(tree.scale.numpy()[:v],
                                       L.block_magnification(index, cam, blocks), rtol=1e-13)
            assert len(rows) == len(reference)
            np.testing.assert_array_equal(np.sort(rows), reference)
            bias = L.far_layer_bias(h, cam, reference)
            np.testing.assert_array_equal(tree.row_bias_np[reference], bias)
            pushed += int((bias > 0).sum())
    assert scene == "room" or pushed > 0  # the panel scene exercises the push
    assert culled > 0  # and some views cull blocks


@pytest.mark.parametrize("cam_index", [0, 1])
def test_native_and_reference_cut_give_the_same_image(room, cam_index, monkeypatch):
    cfg = LodConfig(pixel_size=2.0, colour_tolerance=0.1)
    native = render(room, cams()[cam_index], backend="cpu", lod=cfg)
    monkeypatch.setattr(L, "CUT", "reference")
    reference = render(room, cams()[cam_index], backend="cpu", lod=cfg)
    for field in ("rgb", "depth", "alpha"):
        np.testing.assert_array_equal(getattr(native, field), getattr(reference, field))


@pytest.mark.parametrize("cam_index", [0, 1])
def test_merged_sh_degree_colours_only_the_merged_rows(room, cam_index):
    """Degree 0 for merged nodes = their higher bands zeroed; originals keep every band."""
    cam = cams()[cam_index]
    cfg = LodConfig(pixel_size=2.0, colour_tolerance=0.1)
    h = L.lod_hierarchy(room)
    full = render(room, cam, backend="cpu", lod=cfg)
    for degree in (0, 1, 2):
        lowered = render(room, cam, backend="cpu",
                         lod=LodConfig(pixel_size=2.0, colour_tolerance=0.1,
                                       merged_sh_degree=degree))
        sh = h._buffers.arrays.sh.numpy()
        m, saved = len(h.order), sh[len(h.order):, (degree + 1) ** 2:].copy()
        sh[m:, (degree + 1) ** 2:] = 0.0  # the same colours through the full evaluation
        try:
            zeroed = render(room, cam, backend="cpu", lod=cfg)
        finally:
            sh[m:, (degree + 1) ** 2:] = saved
        np.testing.assert_array_equal(lowered.rgb, zeroed.rgb)
        assert np.abs(lowered.rgb - full.rgb).max() > 0  # the merged rows' bands did count
    # the exact image is untouched: a tiny pixel_size draws originals only
    exact = render(room, cam, backend="cpu")
    tiny = render(room, cam, backend="cpu", lod=LodConfig(pixel_size=1e-6, merged_sh_degree=0))
    np.testing.assert_array_equal(tiny.rgb, exact.rgb)


def test_merged_gaussians_end_at_their_own_rim_alpha(room):
    """Closed form: rim at MERGED_ALPHA_MIN, at half the peak when faint, never past 1/255."""
    o = np.array([30.0, 10.0, 0.25, 0.1, 0.004])
    expect = np.log([30.0 * 8, 10.0 * 8, 2.0, 2.0, 0.004 * 255])
    np.testing.assert_allclose(L.merged_levels(o), expect, rtol=1e-6)
    assert L.MERGED_ALPHA_MIN == 1 / 8
    render(room, cams()[0], backend="cpu", lod=LodConfig())  # builds the device buffers
    h = L.lod_hierarchy(room)
    arr, m = h._buffers.arrays, len(h.order)
    level = C._levels(arr).numpy()
    np.testing.assert_array_equal(level[m:], L.merged_levels(h.merged_opacity))
    opacity = arr.opacity.numpy()[:m]  # the originals: the exact path's own (libm's logf)
    np.testing.assert_allclose(level[:m], np.log(opacity / np.float32(K.ALPHA_MIN)), rtol=1e-6)


def test_frames_of_other_cut_sizes_in_between_change_nothing(room):
    """The gathered projection's kept buffers (row list, chunk lengths) reset every frame."""
    cam = cams()[1]
    big, small = LodConfig(pixel_size=0.5), LodConfig(pixel_size=6.0, colour_tolerance=None)
    first_small = render(room, cam, backend="cpu", lod=small)
    first_big = render(room, cam, backend="cpu", lod=big)
    again_small = render(room, cam, backend="cpu", lod=small)
    again_big = render(room, cam, backend="cpu", lod=big)
    np.testing.assert_array_equal(first_small.rgb, again_small.rgb)
    np.testing.assert_array_equal(first_big.rgb, again_big.rgb)
    assert np.abs(first_small.rgb - first_big.rgb).max() > 0.05  # two different cuts


@wp.kernel
def _merged_atan2_kernel(y: wp.array(dtype=float), x: wp.array(dtype=float),
                         out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = _merged_atan2(y[i], x[i])


def test_merged_rows_angle_is_atan2_to_float_precision():
    """The merged pool's atan2 (warp_culled.MERGED_ATAN2_SNIPPET) against numpy's, float64."""
    rng = np.random.default_rng(0)
    angle = np.r_[rng.uniform(0.0, np.pi, 20000), 0.0, np.pi / 8, np.pi / 4, np.pi / 2, np.pi]
    radius = 10.0 ** rng.uniform(-3, 3, len(angle))
    y = (radius * np.sin(angle)).astype(np.float32)
    x = (radius * np.cos(angle)).astype(np.float32)
    y[1:4] = 0.0  # on the axis, both ways, and the origin
    x[1], x[2], x[3] = 1.0, -1.0, 0.0
    out = wp.zeros(len(y), dtype=float, device="cpu")
    wp.launch(_merged_atan2_kernel, dim=len(y), device="cpu",
              inputs=[wp.array(y, device="cpu"), wp.array(x, device="cpu"), out])
    expect = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    # rad; measured 2.6e-7 on 200,000 angles, numpy float32 arctan2 3.4e-7 (float32 rounding)
    assert np.abs(out.numpy() - expect).max() < 5e-7
    assert out.numpy()[3] == 0.0
