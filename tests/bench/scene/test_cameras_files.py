"""Camera file round trips: JSON <-> COLMAP text/binary <-> nerfstudio transforms.json."""

import json

import numpy as np
import pytest

from bench.scene.camera_files import convert_cameras, load_cameras, save_cameras
from bench.scene.cameras import Camera, orbit


def _cameras():
    poses = orbit((0.1, -0.2, 0.3), radius=1.5, height=0.7, num_views=5)
    cams = [Camera.pinhole_from_fov(64, 48, fov_x_deg=70, world_from_camera=p, name=f"img_{i}.png")
            for i, p in enumerate(poses[:3])]
    k = (0.03, -0.01, 0.002, 0.0)
    cams += [Camera("fisheye", 80, 60, 25.0, 25.5, 40.1, 29.8, p, distortion=k, fov_deg=200.0,
                    name=f"img_{i + 3}.png") for i, p in enumerate(poses[3:])]
    return cams


def _assert_same(a, b, *, check_fov=True):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.model, x.width, x.height, x.name) == (y.model, y.width, y.height, y.name)
        np.testing.assert_allclose([x.fx, x.fy, x.cx, x.cy], [y.fx, y.fy, y.cx, y.cy], rtol=1e-12)
        np.testing.assert_allclose(x.distortion, y.distortion, atol=1e-15)
        np.testing.assert_allclose(x.world_from_camera, y.world_from_camera, atol=1e-12)
        if check_fov:
            assert x.fov_deg == y.fov_deg


@pytest.mark.parametrize("fmt", ["json", "colmap-text", "colmap-binary", "transforms"])
def test_round_trip_each_format(tmp_path, fmt):
    cams = _cameras()
    target = tmp_path / ("transforms.json" if fmt == "transforms" else "cams.json" if fmt == "json"
                         else "sparse")
    save_cameras(target, cams, format=fmt)
    # COLMAP has no field for the lens field of view; other formats keep it.
    _assert_same(cams, load_cameras(target), check_fov=not fmt.startswith("colmap"))


def test_chain_colmap_text_json_transforms(tmp_path):
    cams = _cameras()
    save_cameras(tmp_path / "model", cams, format="colmap-text")
    convert_cameras(tmp_path / "model", tmp_path / "cams.json")
    convert_cameras(tmp_path / "cams.json", tmp_path / "transforms.json")
    convert_cameras(tmp_path / "transforms.json", tmp_path / "model2", format="colmap-binary")
    _assert_same(load_cameras(tmp_path / "model"), load_cameras(tmp_path / "model2"))
    # COLMAP shares one camera entry among images with equal intrinsics (3 pinhole + 1 fisheye).
    lines = [ln for ln in (tmp_path / "model" / "cameras.txt").read_text().splitlines()
             if not ln.startswith("#")]
    assert len(lines) == 2


def test_colmap_text_handwritten(tmp_path):
    # A COLMAP model as written by COLMAP itself: identity rotation, camera 2 m in front of origin.
    (tmp_path / "cameras.txt").write_text("# comment\n1 SIMPLE_PINHOLE 100 80 90 50 40\n")
    (tmp_path / "images.txt").write_text(
        "# c\n7 1 0 0 0 0 0 2 1 a.png\n10.0 20.0 -1 30.0 40.0 5\n")
    (cam,) = load_cameras(tmp_path)
    assert cam.fx == cam.fy == 90 and cam.name == "a.png"
    # camera_from_world t = (0,0,2) -> camera centre at world (0,0,-2).
    np.testing.assert_allclose(cam.position, [0, 0, -2])


def test_transforms_uses_opengl_axes(tmp_path):
    # nerfstudio: camera looks down its -z; identity c2w looks along world -z.
    data = {"camera_model": "OPENCV", "w": 10, "h": 10, "fl_x": 5, "fl_y": 5, "cx": 5, "cy": 5,
            "frames": [{"file_path": "x.png", "transform_matrix": np.eye(4).tolist()}]}
    (tmp_path / "transforms.json").write_text(json.dumps(data))
    (cam,) = load_cameras(tmp_path / "transforms.json")
    np.testing.assert_allclose(cam.world_from_camera[:3, 2], [0, 0, -1])  # OpenCV forward


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cameras(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError, match="COLMAP"):
        load_cameras(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_cameras(tmp_path / "bad.json")
    entry = _cameras()[0].to_dict()
    entry["world_from_camera"][0][3] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps([entry]).replace("NaN", "NaN"))
    with pytest.raises(ValueError, match="NaN"):
        load_cameras(tmp_path / "nan.json")
    (tmp_path / "cameras.txt").write_text("1 OPENCV 10 10 5 5 5 5 0.1 0 0 0\n")
    (tmp_path / "images.txt").write_text("1 1 0 0 0 0 0 0 1 a.png\n\n")
    with pytest.raises(ValueError, match="image_undistorter"):
        load_cameras(tmp_path)
