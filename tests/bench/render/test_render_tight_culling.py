"""Tight tile lists of the culled exact path (``bench.render.warp_culled``).

The culled path lists a Gaussian only in the tiles where the rasterizer's own
``alpha >= ALPHA_MIN`` rectangle holds a pixel centre, and drops it when there is none;
today's ``warp_backend.render_cpu`` lists it in every tile of its ``3 sigma`` square and
skips it there. The images must be the same bit for bit. The risky cases are the
rectangle's edges: Gaussians centred exactly on pixel centres and on pixel / tile
borders, opacity just above ``ALPHA_MIN`` (rectangles of a hundredth of a pixel), high
opacity (``ALPHA_MAX`` clamp, early stops), a 200-degree fisheye with Gaussians at
95-100 degrees from the axis and on the axis itself (the ``r -> 0`` branch), occluders,
and tiles cut by the image edge. Each scene also checks that the tight lists really do
drop Gaussians and tile entries (so the test would notice a no-op).
"""

import math

import numpy as np
import pytest

from bench.render import constants as K
from bench.render import culling as C
from bench.render import warp_backend as wb
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats


@pytest.fixture(autouse=True)
def scalar_projection(monkeypatch):
    """Bit for bit against today: the exact path with today's per-Gaussian arithmetic.

    The default SIMD projection is checked against it in test_render_simd_projection.py.
    """
    monkeypatch.setattr(C, "PROJECTION", "scalar")

# Opacities around the thresholds: just above ALPHA_MIN (tiny rectangles), moderate,
# and near / above ALPHA_MAX (clamped alpha, pixels that stop early).
OPACITIES = np.array([K.ALPHA_MIN * (1 + 1e-5), K.ALPHA_MIN * 1.001, K.ALPHA_MIN * 1.3,
                      K.ALPHA_MIN * 3.0, 0.05, 0.5, 0.95, 0.99, 0.9999])


def logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


def splats_at(cam_points: np.ndarray, cam: Camera, rng: np.random.Generator, *,
              log_scale_range=(-7.0, -3.0)) -> GaussianSplats:
    """Gaussians at camera-frame points (world = camera pose applied), mixed opacity/size."""
    n = len(cam_points)
    pose = cam.world_from_camera
    means = (cam_points @ pose[:3, :3].T + pose[:3, 3]).astype(np.float32)
    quats = rng.normal(size=(n, 4)).astype(np.float32)
    log_scales = rng.uniform(*log_scale_range, size=(n, 3)).astype(np.float32)
    opacity = OPACITIES[rng.integers(0, len(OPACITIES), n)]
    return GaussianSplats(means, quats, log_scales, logit(opacity).astype(np.float32),
                          rng.normal(size=(n, 3)).astype(np.float32),
                          (0.3 * rng.normal(size=(n, 15, 3))).astype(np.float32))


def pinhole_grid_points(cam: Camera, rng: np.random.Generator) -> np.ndarray:
    """Camera-frame points projecting onto pixel centres, pixel borders and tile borders."""
    z = rng.uniform(0.5, 3.0, 3000)
    centres = rng.integers(0, cam.width, 3000) + 0.5
    rows = rng.integers(0, cam.height, 3000) + 0.5
    u = centres.copy()
    v = rows.copy()
    # A third on pixel borders (integers), a sixth on tile borders (multiples of 16),
    # some just outside the image.
    border = rng.random(3000) < 0.33
    u[border] = np.floor(u[border])
    tile = rng.random(3000) < 0.16
    u[tile] = K.TILE_SIZE * rng.integers(0, cam.width // K.TILE_SIZE + 1, tile.sum())
    v[tile] = K.TILE_SIZE * rng.integers(0, cam.height // K.TILE_SIZE + 1, tile.sum())
    out = rng.random(3000) < 0.05
    u[out] = rng.choice([-1.5, -0.5, cam.width + 0.5, cam.width + 1.5], out.sum())
    x = (u - cam.cx) * z / cam.fx
    y = (v - cam.cy) * z / cam.fy
    return np.stack([x, y, z], axis=1)


def fisheye_points(rng: np.random.Generator) -> np.ndarray:
    """Directions from the axis itself out to 101 degrees (the lens keeps < 100)."""
    n = 3000
    theta = np.radians(rng.uniform(0.0, 101.0, n))
    theta[:200] = np.radians(rng.uniform(95.0, 101.0, 200))
    theta[200:220] = 0.0  # on the optical axis: the r -> 0 branch of the projection
    theta[220:240] = np.nextafter(np.float32(math.radians(100.0)), 0.0)
    phi = rng.uniform(0.0, 2 * math.pi, n)
    dist = rng.uniform(0.4, 3.0, n)
    return dist[:, None] * np.stack([np.sin(theta) * np.cos(phi),
                                     np.sin(theta) * np.sin(phi), np.cos(theta)], axis=1)


def pose(rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    out = np.eye(4)
    out[:3, :3] = q
    out[:3, 3] = rng.normal(size=3)
    return out


def assert_same(a, b):
    np.testing.assert_array_equal(a.rgb, b.rgb)
    np.testing.assert_array_equal(a.depth, b.depth)
    np.testing.assert_array_equal(a.alpha, b.alpha)


def check(splats: GaussianSplats, cam: Camera, **kwargs) -> tuple[int, int, int, int]:
    """Culled == today bit for bit; returns (today drawn, tight drawn, today / tight entries)."""
    today = wb.render_cpu(splats, cam, **kwargs)
    today_touched = wb.splat_arrays(splats).touched_np
    today_drawn, today_entries = np.count_nonzero(today_touched), int(today_touched.sum())
    culled = C.render_cpu_culled(splats, cam, **kwargs)
    assert_same(culled, today)
    tight = C._cpu_arrays(C.spatial_index(splats), splats).touched_np
    return today_drawn, int(np.count_nonzero(tight)), today_entries, int(tight.sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_pinhole_pixel_centres_borders_and_thresholds(seed):
    rng = np.random.default_rng(seed)
    cam = Camera("pinhole", 72, 40, 60.0, 60.0, 36.0, 20.0, pose(rng))  # edge tiles cut
    splats = splats_at(pinhole_grid_points(cam, rng), cam, rng)
    today_drawn, tight_drawn, today_entries, tight_entries = check(
        splats, cam, background=(0.1, 0.2, 0.3))
    # Near-transparent Gaussians off pixel centres hold no pixel centre: dropped (most
    # points here sit on pixel centres, where even those are drawn).
    assert tight_drawn < today_drawn
    assert tight_entries < today_entries


def test_pinhole_large_and_elongated_with_occluder():
    rng = np.random.default_rng(5)
    cam = Camera("pinhole", 64, 64, 50.0, 50.0, 31.7, 32.3, pose(rng))
    splats = splats_at(pinhole_grid_points(cam, rng), cam, rng, log_scale_range=(-6.0, -1.0))
    occ = np.where(rng.random((64, 64)) < 0.5, 1.5, np.inf).astype(np.float32)
    check(splats, cam, occluder_depth=occ)
    _, _, today_entries, tight_entries = check(splats, cam)
    assert tight_entries < today_entries


@pytest.mark.parametrize("fov", [200.0, 190.0])
def test_fisheye_near_100_degrees_and_on_axis(fov):
    rng = np.random.default_rng(int(fov))
    cam = Camera.equidistant_fisheye(64, 64, fov_deg=fov, world_from_camera=pose(rng))
    splats = splats_at(fisheye_points(rng), cam, rng)
    today_drawn, tight_drawn, today_entries, tight_entries = check(splats, cam)
    assert 0 < tight_drawn <= today_drawn and tight_entries < today_entries
    distorted = Camera("fisheye", 64, 56, 19.0, 20.0, 32.0, 27.5, cam.world_from_camera,
                       distortion=(0.03, -0.01, 0.002, 0.0), fov_deg=200.0)
    check(splats, distorted, background=(1.0, 1.0, 1.0))


def test_exactly_opaque_stack_on_one_pixel_centre():
    # 40 near-opaque Gaussians on one pixel centre at increasing depth: the pixel stops
    # early (T < 1e-4), and the ones behind must change nothing whether listed or not.
    cam = Camera("pinhole", 32, 32, 40.0, 40.0, 16.0, 16.0, np.eye(4))
    n = 40
    z = np.linspace(1.0, 2.0, n)
    means = np.stack([(16.5 - 16.0) * z / 40.0, (7.5 - 16.0) * z / 40.0, z], 1)
    splats = GaussianSplats(means.astype(np.float32), np.tile(np.float32([1, 0, 0, 0]), (n, 1)),
                            np.full((n, 3), -6.0, np.float32),
                            logit(np.full(n, 0.9999)).astype(np.float32),
                            np.linspace(-1, 1, 3 * n).reshape(n, 3).astype(np.float32),
                            np.zeros((n, 0, 3), np.float32))
    check(splats, cam)


def test_tile_size_beyond_native_buffer_uses_plain_kernel():
    rng = np.random.default_rng(9)
    cam = Camera("pinhole", 80, 80, 60.0, 60.0, 40.0, 40.0, pose(rng))
    splats = splats_at(pinhole_grid_points(cam, rng), cam, rng)
    assert_same(C.render_cpu_culled(splats, cam, tile_size=40),
                wb.render_cpu(splats, cam, tile_size=40))


@pytest.mark.parametrize("levels", [1, 2, 3, 50, 10**9])
def test_tie_order_matches_reference(levels):
    rng = np.random.default_rng(levels)
    for n in (0, 1, 2, 3, 7, 5000):
        keys = np.sort(rng.integers(0, levels, n)).astype(np.float32)
        order = rng.permutation(n).astype(np.int32)
        original = rng.permutation(n)
        fast, plain = order.copy(), order.copy()
        C.ties_by_original_index(keys, fast, original)
        C.ties_by_original_index_reference(keys, plain, original)
        np.testing.assert_array_equal(fast, plain)
        assert (np.diff(keys) >= 0).all()


def test_many_short_ranges_simd_equals_scalar(monkeypatch):
    # LOD frames are many short row ranges (near blocks' originals, far blocks' merged
    # levels): the SIMD kernel's chunks of them give the scalar launch's image bit for bit,
    # for the exact path and for LOD.
    from bench.render.lod import LodConfig, render_cpu_lod
    from bench.scene.cameras import orbit
    from bench.scene.sample import sample_background

    room = sample_background(seed=3, n_gaussians=20000)
    ring = orbit((0.0, 0.0, 0.0), radius=0.9, height=0.45, num_views=2)
    cams = [Camera.pinhole_from_fov(64, 48, fov_x_deg=70.0, world_from_camera=ring[0]),
            Camera.equidistant_fisheye(64, 64, fov_deg=200.0, world_from_camera=ring[1])]
    lod = LodConfig(pixel_size=2.0)
    runs_exact = [C.render_cpu_culled(room, cam) for cam in cams]
    runs_lod = [render_cpu_lod(room, cam, config=lod) for cam in cams]
    monkeypatch.setattr(C, "PROJECTION", "simd")
    for cam, exact, coarse in zip(cams, runs_exact, runs_lod, strict=True):
        assert_same(C.render_cpu_culled(room, cam), exact)
        assert_same(exact, wb.render_cpu(room, cam))
        assert_same(render_cpu_lod(room, cam, config=lod), coarse)
