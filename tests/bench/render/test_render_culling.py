"""Block culling (``bench.render.culling``) in front of the ``cpu`` backend.

The culled renderer runs today's Warp kernels on the Gaussians of the blocks that may
be drawn, in the same depth order (ties by original index), so its images must equal
``warp_backend.render_cpu``'s bit for bit. The real risk is a block test that is not
conservative; ``test_every_drawn_gaussian_is_in_a_visible_block`` checks it against the
kernel's own per-Gaussian cull on views that see only part of the room.
"""

import numpy as np
import pytest

from bench.render import culling as C
from bench.render import render
from bench.render import warp_backend as wb
from bench.scene.cameras import Camera, look_at, orbit
from bench.scene.gaussians import GaussianSplats
from bench.scene.sample import sample_background


@pytest.fixture(autouse=True)
def scalar_projection(monkeypatch):
    """Bit for bit against today: the exact path with today's per-Gaussian arithmetic.

    The default SIMD projection is checked against it in test_render_simd_projection.py.
    """
    monkeypatch.setattr(C, "PROJECTION", "scalar")


@pytest.fixture(scope="module")
def room():
    return sample_background(seed=1, n_gaussians=30000)


def cameras():
    ring = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=4)
    cams = [Camera.pinhole_from_fov(96, 64, fov_x_deg=70.0, world_from_camera=p) for p in ring]
    # Close to a wall / into a corner: most of the room is outside the view.
    wall = look_at(eye=(0.3, 0.2, 0.4), target=(2.0, 0.4, 0.3))
    corner = look_at(eye=(-0.5, -0.4, 1.0), target=(-2.0, -2.0, 0.2))
    cams += [Camera.pinhole_from_fov(80, 80, fov_x_deg=40.0, world_from_camera=wall),
             Camera.pinhole_from_fov(64, 48, fov_x_deg=100.0, world_from_camera=corner)]
    cams += [Camera.equidistant_fisheye(64, 64, fov_deg=200.0, world_from_camera=ring[1]),
             Camera.equidistant_fisheye(64, 64, fov_deg=120.0, world_from_camera=wall),
             Camera("fisheye", 72, 64, 20.0, 21.0, 36.0, 31.0, corner,
                    distortion=(0.02, -0.005, 0.001, 0.0), fov_deg=190.0)]
    return cams


def assert_same(a, b):
    np.testing.assert_array_equal(a.rgb, b.rgb)
    np.testing.assert_array_equal(a.depth, b.depth)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.valid, b.valid)


@pytest.mark.parametrize("cam_index", range(len(cameras())))
def test_culled_equals_today(room, cam_index):
    cam = cameras()[cam_index]
    assert_same(C.render_cpu_culled(room, cam, background=(0.2, 0.3, 0.4)),
                wb.render_cpu(room, cam, background=(0.2, 0.3, 0.4)))


def test_every_drawn_gaussian_is_in_a_visible_block(room):
    index = C.spatial_index(room)
    assert index.num_blocks > 20
    dropped_somewhere = False
    for cam in cameras():
        wb.render_cpu(room, cam)
        drawn = np.flatnonzero(wb.splat_arrays(room).touched_np)
        runs = C.block_runs(index, C.visible_blocks(index, cam))
        kept = np.zeros(room.num, bool)
        for a, b in runs:
            kept[index.order[a:b]] = True
        assert kept[drawn].all(), cam.name
        np.testing.assert_array_equal(C.cull_indices(room, cam), np.flatnonzero(kept))
        dropped_somewhere |= kept.sum() < 0.5 * room.num
    assert dropped_somewhere  # the wall / corner views cull most blocks


def test_depth_ties_keep_index_order_and_transparent_are_dropped(room):
    # Every Gaussian twice (exact depth ties) plus a fully transparent copy.
    ghost = room.replace(opacity_logits=np.full(room.num, -8.0, np.float32))
    splats = GaussianSplats.concat(GaussianSplats.concat(room, room), ghost)
    index = C.build_index(splats)
    assert index.dropped_transparent == room.num
    for cam in cameras()[:2] + cameras()[5:6]:
        assert_same(C.render_cpu_culled(splats, cam), wb.render_cpu(splats, cam))


def test_dispatcher_uses_culling_and_cubemap_and_occluder(room, monkeypatch):
    monkeypatch.setattr(C, "CULL_MIN_GAUSSIANS", 1)
    calls = []
    real = C.render_cpu_culled
    monkeypatch.setattr(C, "render_cpu_culled", lambda *a, **k: calls.append(1) or real(*a, **k))
    fish = cameras()[5]
    occ = np.full((fish.height, fish.width), 1.2, np.float32)
    for kw in ({}, {"fisheye_mode": "cubemap"}, {"occluder_depth": occ}):
        a = render(room, fish, backend="cpu", **kw)
        b = render(room, fish, backend="cpu", culling=False, **kw)
        assert_same(a, b)
    assert len(calls) >= 3


def test_empty_and_all_transparent():
    empty = GaussianSplats.empty(sh_degree=0)
    cam = cameras()[0]
    assert C.render_cpu_culled(empty, cam).alpha.max() == 0.0
    rng = np.random.default_rng(0)
    n = 50
    clear = GaussianSplats(rng.normal(size=(n, 3)).astype(np.float32),
                           np.tile(np.float32([1, 0, 0, 0]), (n, 1)),
                           np.full((n, 3), -3.0, np.float32), np.full(n, -9.0, np.float32),
                           np.zeros((n, 3), np.float32), np.zeros((n, 0, 3), np.float32))
    out = C.render_cpu_culled(clear, cam)
    assert out.alpha.max() == 0.0 and np.isinf(out.depth).all()
