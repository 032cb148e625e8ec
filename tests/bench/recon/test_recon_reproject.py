import math

import cv2
import numpy as np
import pytest

from bench.recon.capture import CaptureManifest, SourceFrame
from bench.recon.reproject import (
    pinhole_views,
    remap_maps,
    reproject_capture,
    reproject_image,
    view_names,
    view_rotations,
)
from bench.scene.cameras import Camera, look_at

# A 200-degree fisheye with mild Kannala-Brandt distortion (monotonic over 0..100 deg).
DIST = (0.02, -0.004, 0.0006, -0.00005)


def fisheye(pose=None):
    return Camera("fisheye", 400, 360, 64.0, 64.5, 200.3, 180.2,
                  np.eye(4) if pose is None else pose, distortion=DIST, fov_deg=200.0)


def test_view_rotations_are_55_degree_tilts_at_45_degree_steps():
    rotations = view_rotations()
    assert list(rotations) == list(view_names()) and len(rotations) == 9
    for k, name in enumerate(view_names()[1:]):
        r = rotations[name]
        np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-12)
        assert np.linalg.det(r) == pytest.approx(1.0)
        axis = r[:, 2]
        assert math.degrees(math.acos(axis[2])) == pytest.approx(55.0)
        assert math.degrees(math.atan2(axis[1], axis[0])) % 360 == pytest.approx(45.0 * k)
    np.testing.assert_array_equal(rotations["forward"], np.eye(3))


def test_paper_intrinsics_f_is_half_the_width():
    views = pinhole_views(fisheye(), size=2048)
    for cam in views.values():
        assert (cam.width, cam.cx, cam.cy) == (2048, 1024.0, 1024.0)
        assert cam.fx == pytest.approx(1024.0) and cam.fy == pytest.approx(1024.0)


def test_centre_ray_of_each_view_hits_its_direction_in_world():
    pose = look_at((0.3, -0.2, 0.5), (0.0, 0.4, 0.1))
    source = fisheye(pose)
    views = pinhole_views(source, size=64)
    for k, (name, cam) in enumerate(views.items()):
        ray, _ = cam.unproject(np.array([[cam.cx, cam.cy]]))
        world_ray = cam.world_from_camera[:3, :3] @ ray[0]
        tilt = 0.0 if name == "forward" else math.radians(55.0)
        azimuth = math.radians(45.0 * (k - 1))
        expected_src = np.array([math.sin(tilt) * math.cos(azimuth),
                                 math.sin(tilt) * math.sin(azimuth), math.cos(tilt)])
        np.testing.assert_allclose(world_ray, pose[:3, :3] @ expected_src, atol=1e-12)
        np.testing.assert_allclose(cam.position, source.position, atol=1e-12)


def blob_image(source, uv, sigma=1.5):
    jj, ii = np.meshgrid(np.arange(source.width) + 0.5, np.arange(source.height) + 0.5)
    img = np.exp(-((jj - uv[0]) ** 2 + (ii - uv[1]) ** 2) / (2 * sigma**2))
    return img.astype(np.float32)


def centroid(img):
    jj, ii = np.meshgrid(np.arange(img.shape[1]) + 0.5, np.arange(img.shape[0]) + 0.5)
    w = img / img.sum()
    return np.array([(w * jj).sum(), (w * ii).sum()])


def test_remapped_image_puts_each_view_direction_at_its_image_centre():
    # End to end through cv2.remap: a blob drawn in the fisheye image at the projection of
    # view k's optical axis must land at the centre (cx, cy) of view k.
    source = fisheye()
    for name, cam in pinhole_views(source, size=96).items():
        axis_src = view_rotations()[name][:, 2]
        uv, valid = source.project(axis_src[None])
        assert valid[0]
        out = reproject_image(blob_image(source, uv[0]), source, cam)
        np.testing.assert_allclose(centroid(out), [cam.cx, cam.cy], atol=0.1)


def test_projection_matches_opencv_fisheye_in_front_of_the_camera():
    # Camera.project (used to build the remap maps) agrees with cv2.fisheye.projectPoints.
    source = fisheye()
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(200, 3))
    pts[:, 2] = np.abs(pts[:, 2]) + 0.3
    uv, _ = source.project(pts)
    k = source.K.copy()
    k[0, 2] -= 0.5  # OpenCV's pixel centres are at integers, ours at +0.5
    k[1, 2] -= 0.5
    ref, _ = cv2.fisheye.projectPoints(pts.reshape(-1, 1, 3), np.zeros(3), np.zeros(3), k,
                                       np.array(DIST))
    np.testing.assert_allclose(uv - 0.5, ref.reshape(-1, 2), atol=1e-9)


def test_pixel_round_trip_fisheye_pinhole_fisheye_within_half_a_pixel():
    # Draw a blob at a fisheye pixel, reproject into the view that sees it, locate the blob
    # there, and map the located pinhole pixel back to the fisheye: < 0.5 px from the start.
    source = fisheye()
    views = pinhole_views(source, size=128)
    rng = np.random.default_rng(1)
    errors = []
    for name, cam in views.items():
        for _ in range(3):
            px = rng.uniform(20, 108, size=2)  # well inside the view
            ray_view, _ = cam.unproject(px[None])
            rel = (source.camera_from_world @ cam.world_from_camera)[:3, :3]
            uv, valid = source.project(ray_view @ rel.T)
            assert valid[0], name
            out = reproject_image(blob_image(source, uv[0], sigma=1.2), source, cam)
            found = centroid(np.where(out > 0.05 * out.max(), out, 0.0))
            back_ray, _ = cam.unproject(found[None])
            back, _ = source.project(back_ray @ rel.T)
            errors.append(np.linalg.norm(back[0] - uv[0]))
    assert max(errors) < 0.5, max(errors)


def test_remap_maps_agree_with_direct_projection_at_pixel_centres():
    source = fisheye()
    cam = pinhole_views(source, size=32)["tilt_az135"]
    map_x, map_y = remap_maps(source, cam)
    rays, _ = cam.pixel_rays()
    rel = (source.camera_from_world @ cam.world_from_camera)[:3, :3]
    uv, valid = source.project(rays.reshape(-1, 3) @ rel.T)
    assert 0 < (~valid).sum() < valid.sum()  # the corner rays are > 100 deg off the lens axis
    np.testing.assert_allclose(map_x.ravel()[valid] + 0.5, uv[valid, 0], atol=1e-3)
    np.testing.assert_allclose(map_y.ravel()[valid] + 0.5, uv[valid, 1], atol=1e-3)
    assert (map_x.ravel()[~valid] == -1).all() and (map_y.ravel()[~valid] == -1).all()


def test_reproject_capture_writes_nine_views_with_exact_poses(tmp_path):
    pose = look_at((1.0, 0.0, 0.5), (0.0, 0.0, 0.0))
    source = fisheye(pose)
    img = (np.random.default_rng(0).random((360, 400, 3)) * 255).astype(np.uint8)
    (tmp_path / "frames").mkdir()
    cv2.imwrite(str(tmp_path / "frames" / "a.png"), img)
    pose2 = look_at((0.0, 1.0, 0.3), (0.2, 0.0, 0.0))
    source2 = fisheye(pose2)
    manifest = CaptureManifest(
        frames=(SourceFrame("f0", 0.0, {"left": "frames/a.png"}, {"left": source}),
                SourceFrame("f1", 1.0, {"left": "frames/a.png"}, {"left": source2})),
        root=tmp_path,
    )
    out = reproject_capture(manifest, size=24)
    assert [v.name for v in out.views] == list(view_names()) * 2
    for view in out.views:
        assert (tmp_path / view.image).is_file()
        expected = np.eye(4)
        expected[:3, :3] = view_rotations()[view.name]
        frame_pose = pose if view.frame == "f0" else pose2
        np.testing.assert_allclose(view.camera.world_from_camera, frame_pose @ expected,
                                   atol=1e-12)
    # the remap maps cached from frame f0 give the same pixels as computing them for f1
    view = out.views[9 + 4]
    direct = reproject_image(img, source2, view.camera)
    np.testing.assert_array_equal(cv2.imread(str(tmp_path / view.image)), direct)
    out.save(tmp_path / "capture.json")
    again = CaptureManifest.load(tmp_path / "capture.json")
    np.testing.assert_array_equal(again.views[3].camera.world_from_camera,
                                  out.views[3].camera.world_from_camera)
