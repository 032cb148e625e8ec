"""The exact path's SIMD projection (``warp_culled._project_simd_kernel``) against today's.

The SIMD kernel evaluates today's float operations in today's order, 8 Gaussians per
thread (Warp's matrix products as fmaf chains, libm's atan2f per lane), so every
projected value, and hence the image, must equal the scalar kernel's bit for bit
(``projection="scalar"``, itself equal to ``warp_backend.render_cpu``: tested in
test_render_culling.py and test_render_tight_culling.py). Lanes whose floor, ceil or
cull threshold lies in a guard band are deferred to the scalar kernel; the scenes built
to hit rectangle edges and the lens edge check that the deferral is used and exact.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bench.render import culling as C
from bench.render import warp_culled as wc
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats
from bench.scene.sample import sample_background

_HERE = Path(__file__).parent


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(f"_simd_{name}", _HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


culled_scenes = _sibling("test_render_culling")  # the room's cameras
tight_scenes = _sibling("test_render_tight_culling")  # edge-of-rectangle scenes

_STATE = ("touched", "rect", "depth", "xy", "conic", "ext", "color")


def project_both(splats: GaussianSplats, cam: Camera, **kwargs):
    """(scalar image, scalar state, simd image, simd state, lanes deferred)."""
    arr = C._cpu_arrays(C.spatial_index(splats), splats)
    out = []
    for projection in ("scalar", "simd"):
        image = C.render_cpu_culled(splats, cam, projection=projection, **kwargs)
        out += [image, {k: getattr(arr, k).numpy().copy() for k in _STATE}]
    return (*out, arr.last_deferred)


def check(splats: GaussianSplats, cam: Camera, **kwargs) -> int:
    """SIMD == scalar bit for bit (image and every projected value of the drawn rows)."""
    ref, ref_state, fast, fast_state, deferred = project_both(splats, cam, **kwargs)
    np.testing.assert_array_equal(fast_state["touched"], ref_state["touched"])
    drawn = ref_state["touched"] != 0
    for key in _STATE[1:]:
        np.testing.assert_array_equal(fast_state[key][drawn], ref_state[key][drawn])
    for field in ("rgb", "depth", "alpha", "valid"):
        assert getattr(fast, field).tobytes() == getattr(ref, field).tobytes(), field
    return deferred


@pytest.fixture(scope="module")
def room():
    return sample_background(seed=1, n_gaussians=30000)


@pytest.mark.parametrize("cam_index", range(len(culled_scenes.cameras())))
def test_room_views_match_scalar(room, cam_index):
    cam = culled_scenes.cameras()[cam_index]
    deferred = check(room, cam, background=(0.2, 0.3, 0.4))
    drawn = np.count_nonzero(C._cpu_arrays(C.spatial_index(room), room).touched_np)
    assert deferred <= 0.02 * len(room.means) and drawn > 0


def test_room_with_occluder_matches_scalar(room):
    cam = culled_scenes.cameras()[1]
    occ = np.where(np.random.default_rng(0).random((cam.height, cam.width)) < 0.5, 1.2,
                   np.inf).astype(np.float32)
    check(room, cam, occluder_depth=occ)


@pytest.mark.parametrize("seed", [0, 1])
def test_pinhole_pixel_centres_borders_and_thresholds(seed):
    rng = np.random.default_rng(seed)
    cam = Camera("pinhole", 72, 40, 60.0, 60.0, 36.0, 20.0, tight_scenes.pose(rng))
    splats = tight_scenes.splats_at(tight_scenes.pinhole_grid_points(cam, rng), cam, rng)
    assert check(splats, cam, background=(0.1, 0.2, 0.3)) > 0  # the guard band is used


def test_pinhole_large_and_elongated_with_occluder():
    rng = np.random.default_rng(5)
    cam = Camera("pinhole", 64, 64, 50.0, 50.0, 31.7, 32.3, tight_scenes.pose(rng))
    splats = tight_scenes.splats_at(tight_scenes.pinhole_grid_points(cam, rng), cam, rng,
                                    log_scale_range=(-6.0, -1.0))
    occ = np.where(rng.random((64, 64)) < 0.5, 1.5, np.inf).astype(np.float32)
    check(splats, cam, occluder_depth=occ)


@pytest.mark.parametrize("fov", [200.0, 190.0])
def test_fisheye_near_the_lens_edge_and_on_axis(fov):
    # Gaussians at 95-101 degrees, on the axis (the r -> 0 branch, always deferred) and one
    # float below 100 degrees (the cull threshold, deferred by the theta guard).
    rng = np.random.default_rng(int(fov))
    cam = Camera.equidistant_fisheye(64, 64, fov_deg=fov, world_from_camera=tight_scenes.pose(rng))
    splats = tight_scenes.splats_at(tight_scenes.fisheye_points(rng), cam, rng)
    assert check(splats, cam) >= 20  # at least the on-axis Gaussians
    distorted = Camera("fisheye", 64, 56, 19.0, 20.0, 32.0, 27.5, cam.world_from_camera,
                       distortion=(0.03, -0.01, 0.002, 0.0), fov_deg=200.0)
    check(splats, distorted, background=(1.0, 1.0, 1.0))


def test_simd_render_is_deterministic(room):
    cam = culled_scenes.cameras()[6]
    first = C.render_cpu_culled(room, cam, projection="simd")
    C._INDEX.pop(room, None)  # fresh index and upload
    second = C.render_cpu_culled(room, cam, projection="simd")
    assert first.rgb.tobytes() == second.rgb.tobytes()
    assert first.depth.tobytes() == second.depth.tobytes()


def test_unknown_projection_is_rejected(room):
    with pytest.raises(ValueError, match="projection must be one of"):
        C.render_cpu_culled(room, culled_scenes.cameras()[0], projection="fast")


def test_chunks_cover_the_runs_exactly():
    runs = np.array([[0, 3], [5, 21], [21, 22], [40, 40], [64, 80]])
    start, length = C.chunks_of_runs(runs)
    rows = np.concatenate([np.arange(s, s + n) for s, n in zip(start, length, strict=True)])
    np.testing.assert_array_equal(rows, np.concatenate([np.arange(a, b) for a, b in runs]))
    assert length.max() <= C.CHUNK and length.min() >= 1


@pytest.mark.parametrize("ties", [0, 1, 3, 9])
def test_native_depth_sort_equals_radix_sort_and_tie_pass(ties):
    # The reference: Warp's stable radix sort, then ties_by_original_index. Keys with
    # runs of 2 .. ties + 1 equal depths, keys sharing their top bytes (skipped passes).
    import warp as wp

    rng = np.random.default_rng(ties)
    for n in (0, 1, 2, 5000):
        keys = rng.uniform(0.5, 0.6 if ties == 9 else 40.0, n).astype(np.float32)
        for _ in range(ties):
            pick = rng.integers(0, n, n // 10) if n else np.zeros(0, int)
            keys[pick] = keys[rng.integers(0, n, len(pick))] if n else keys[pick]
        rows = rng.permutation(n).astype(np.int32)
        original = rng.permutation(n).astype(np.int64)
        ref_keys, ref_rows = (wp.zeros(2 * n + 2, dtype=dt, device="cpu")
                              for dt in (float, wp.int32))
        ref_keys.numpy()[:n], ref_rows.numpy()[:n] = keys, rows
        wp.utils.radix_sort_pairs(ref_keys, ref_rows, n)
        C.ties_by_original_index(ref_keys.numpy()[:n], ref_rows.numpy()[:n], original)
        for use_original in (1, 0):
            k, r = (wp.zeros(2 * n + 2, dtype=dt, device="cpu") for dt in (float, wp.int32))
            k.numpy()[:n], r.numpy()[:n] = keys, rows
            wp.launch(wc._depth_sort_kernel, dim=1, device="cpu",
                      inputs=[k, r, n, wp.array(original, dtype=wp.int64, device="cpu"),
                              use_original])
            np.testing.assert_array_equal(k.numpy()[:n], np.sort(keys))
            if use_original:
                np.testing.assert_array_equal(r.numpy()[:n], ref_rows.numpy()[:n])
            else:  # stable: ties keep their input order
                np.testing.assert_array_equal(r.numpy()[:n], rows[np.argsort(keys,
                                                                             kind="stable")])


@pytest.mark.parametrize("cam_index", [0, 6, 8])
def test_reference_sort_and_scatter_give_the_same_image(room, monkeypatch, cam_index):
    cam = culled_scenes.cameras()[cam_index]
    fast = C.render_cpu_culled(room, cam)
    fast_isect = C._cpu_arrays(C.spatial_index(room), room).isect.numpy().copy()
    monkeypatch.setattr(C, "SORT", "plain")
    monkeypatch.setattr(C, "SCATTER", "plain")
    plain = C.render_cpu_culled(room, cam)
    np.testing.assert_array_equal(
        C._cpu_arrays(C.spatial_index(room), room).isect.numpy(), fast_isect)
    assert fast.rgb.tobytes() == plain.rgb.tobytes()
    assert fast.depth.tobytes() == plain.depth.tobytes()
