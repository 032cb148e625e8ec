"""Camera models, validation and trajectories (bench.scene.cameras)."""

import math

import cv2
import numpy as np
import pytest

from bench.scene.cameras import Camera, interpolate_poses, look_at, orbit


def _fisheye(k=(0.05, -0.01, 0.002, -0.0005), fov=200.0):
    pose = look_at((0.3, -1.0, 0.5), (0.0, 0.0, 0.0))
    return Camera("fisheye", 96, 80, 30.0, 31.0, 47.5, 40.2, pose, distortion=k, fov_deg=fov)


def test_pinhole_project_matches_opencv():
    rng = np.random.default_rng(0)
    cam = Camera("pinhole", 64, 48, 50.0, 52.0, 31.0, 25.0, np.eye(4))
    pts = rng.uniform([-1, -1, 0.5], [1, 1, 3], size=(50, 3))
    uv, valid = cam.project(pts)
    # Reference: cv2.projectPoints with zero distortion.
    ref, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), cam.K, np.zeros(5))
    assert valid.all()
    np.testing.assert_allclose(uv, ref[:, 0], atol=1e-9)


def test_fisheye_project_matches_cv2_fisheye_in_front():
    rng = np.random.default_rng(1)
    cam = _fisheye(fov=180.0)
    pts = rng.uniform([-1, -1, 0.2], [1, 1, 2], size=(100, 3))
    uv, valid = cam.project(pts)
    # Reference: cv2.fisheye.projectPoints (valid for points with z > 0).
    ref, _ = cv2.fisheye.projectPoints(pts[:, None], np.zeros(3), np.zeros(3), cam.K,
                                       np.array(cam.distortion))
    assert valid.all()
    np.testing.assert_allclose(uv, ref[:, 0], atol=1e-6)


def test_fisheye_unproject_inverts_project_beyond_90_degrees():
    cam = _fisheye()
    rng = np.random.default_rng(2)
    # Directions up to 99 degrees off-axis (a 200-degree lens sees slightly behind itself).
    theta = rng.uniform(0, math.radians(99), 200)
    phi = rng.uniform(0, 2 * math.pi, 200)
    dirs = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], 1)
    uv, valid = cam.project(dirs * 2.0)
    assert valid.all()
    rays, ok = cam.unproject(uv)
    assert ok.all()
    np.testing.assert_allclose(rays, dirs, atol=1e-7)


def test_fisheye_fov_limits_validity():
    cam = _fisheye(k=(0, 0, 0, 0), fov=160.0)
    theta = math.radians(85)
    uv, valid = cam.project(np.array([[math.sin(theta), 0, math.cos(theta)], [0, 0, 1]]))
    assert valid.tolist() == [False, True]
    rays, valid = cam.pixel_rays()
    # Equidistant: pixel radius / f = theta, so the valid disc has radius f * 80 deg.
    jj, ii = np.meshgrid(np.arange(cam.width) + 0.5, np.arange(cam.height) + 0.5)
    radius = np.hypot((jj - cam.cx) / cam.fx, (ii - cam.cy) / cam.fy)
    np.testing.assert_array_equal(valid, radius < math.radians(80))


def test_pinhole_unproject_roundtrip():
    cam = Camera("pinhole", 64, 48, 50.0, 52.0, 31.0, 25.0, np.eye(4))
    rays, valid = cam.pixel_rays()
    uv, ok = cam.project(rays.reshape(-1, 3))
    jj, ii = np.meshgrid(np.arange(64) + 0.5, np.arange(48) + 0.5)
    np.testing.assert_allclose(uv, np.stack([jj.ravel(), ii.ravel()], 1), atol=1e-9)
    assert valid.all() and ok.all()


def test_look_at_axes_and_projection_of_target():
    pose = look_at((2.0, 0.0, 1.0), (0.0, 0.0, 1.0))
    # Looking along -x with z up: right = +y, down = -z.
    np.testing.assert_allclose(pose[:3, :3], [[0, 0, -1], [1, 0, 0], [0, -1, 0]], atol=1e-12)
    cam = Camera.pinhole_from_fov(40, 30, fov_x_deg=60, world_from_camera=pose)
    uv, _ = cam.project_world(np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.5]]))
    np.testing.assert_allclose(uv[0], [20, 15])
    assert uv[1, 1] < 15  # a point above the target appears higher in the image


def test_orbit_and_interpolation():
    poses = orbit((0, 0, 0), radius=2.0, height=1.0, num_views=8)
    assert poses.shape == (8, 4, 4)
    np.testing.assert_allclose(np.linalg.norm(poses[:, :2, 3], axis=1), 2.0)
    mid = interpolate_poses(poses[:2], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(mid[0], poses[0], atol=1e-12)
    np.testing.assert_allclose(mid[2], poses[1], atol=1e-12)
    # Halfway between azimuths 0 and 45 deg the slerped camera still looks at the centre
    # (closed form: both keys look at the origin from the same height and radius).
    forward = mid[1][:3, 2]
    to_centre = -mid[1][:3, 3] / np.linalg.norm(mid[1][:3, 3])
    assert np.dot(forward, to_centre) > 0.999
    assert abs(np.linalg.det(mid[1][:3, :3]) - 1) < 1e-9


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"width": 0}, "positive"),
        ({"height": -3}, "positive"),
        ({"world_from_camera": np.full((4, 4), np.nan)}, "NaN"),
        ({"world_from_camera": np.diag([2.0, 1, 1, 1])}, "not rigid"),
        ({"world_from_camera": np.diag([-1.0, 1, 1, 1])}, "right-handed"),
        ({"fx": 0.0}, "> 0"),
        ({"model": "ortho"}, "not supported"),
        ({"distortion": (0.1, 0, 0, 0)}, "distortion-free"),
    ],
)
def test_bad_cameras_raise_with_fix(change, needle):
    base = dict(model="pinhole", width=8, height=8, fx=5.0, fy=5.0, cx=4.0, cy=4.0,
                world_from_camera=np.eye(4))
    with pytest.raises(ValueError, match=needle):
        Camera(**{**base, **change})


def test_look_at_degenerate():
    with pytest.raises(ValueError, match="parallel"):
        look_at((0, 0, 1), (0, 0, 0))


def test_resized_scales_intrinsics():
    cam = _fisheye().resized(48, 40)
    assert (cam.width, cam.height) == (48, 40)
    assert cam.fx == pytest.approx(15.0) and cam.cy == pytest.approx(20.1)
