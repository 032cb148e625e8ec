"""render_cubemap's cached remap plan equals the from-scratch reference bit for bit (issue 32)."""

import numpy as np
import pytest

from bench.render.output import RenderOutput
from bench.scene.cameras import Camera


def _pattern_backend(calls: list):
    """A pinhole backend whose output varies with the face pose and pixel (partial coverage)."""

    def backend(_splats, camera, *, background=(0.0, 0.0, 0.0), sh_degree=None,
                occluder_depth=None):
        calls.append(camera.name)
        h, w = camera.height, camera.width
        seed = int(abs(camera.world_from_camera[:3, :3] @ [1.0, 2.0, 3.0]).sum() * 1e6)
        rng = np.random.default_rng(seed)
        alpha = rng.random((h, w)).astype(np.float32)
        alpha[alpha < 0.3] = 0.0  # empty pixels: the premultiplied depth must skip them
        rgb = rng.random((h, w, 3)).astype(np.float32) * alpha[..., None]
        depth = np.where(alpha > 0, 0.2 + rng.random((h, w)), np.inf).astype(np.float32)
        if occluder_depth is not None:
            depth = np.minimum(depth, occluder_depth.astype(np.float32))
        return RenderOutput(rgb, depth, alpha, np.ones((h, w), bool), background=(0, 0, 0))

    return backend


def _fisheye(fov_deg: float, size: int, pose: np.ndarray) -> Camera:
    f = size / np.deg2rad(fov_deg)  # equidistant: the image circle spans the field of view
    return Camera("fisheye", size, size, f, f, size / 2, size / 2, pose,
                  distortion=(0.0, 0.0, 0.0, 0.0), fov_deg=fov_deg, name="fish")


@pytest.mark.parametrize("fov_deg", [120.0, 200.0])
def test_cached_remap_equals_reference_bit_for_bit(fov_deg):
    from bench.render.fisheye import render_cubemap, render_cubemap_reference
    from bench.scene.cameras import look_at

    rng = np.random.default_rng(0)
    for trial in range(3):  # the plan is cached by intrinsics: new poses reuse it
        pose = look_at(rng.normal(size=3), rng.normal(size=3) + [0, 0, 3])
        cam = _fisheye(fov_deg, 48, pose)
        calls_new, calls_ref = [], []
        occluder = None if trial < 2 else (0.3 + rng.random((48, 48))).astype(np.float32)
        new = render_cubemap(_pattern_backend(calls_new), None, cam, face_px=20,
                             background=(0.1, 0.2, 0.3), occluder_depth=occluder)
        ref = render_cubemap_reference(_pattern_backend(calls_ref), None, cam, face_px=20,
                                       background=(0.1, 0.2, 0.3), occluder_depth=occluder)
        assert calls_new == calls_ref  # the same faces, in the same order
        for name in ("rgb", "depth", "alpha", "valid"):
            a, b = getattr(new, name), getattr(ref, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (fov_deg, trial, name)
        assert new.occluded == ref.occluded


def test_narrow_lens_skips_the_back_face():
    from bench.render.fisheye import render_cubemap

    calls: list = []
    render_cubemap(_pattern_backend(calls), None, _fisheye(120.0, 32, np.eye(4)), face_px=12)
    assert len(calls) == 5 and not any(name.endswith(":-z") for name in calls)
