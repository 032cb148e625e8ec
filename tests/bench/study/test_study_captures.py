"""Captured cameras with distortion: COLMAP models and transforms.json read with their
coefficients, and OpenCV undistortion to a pinhole that puts a point where the pinhole
projects it."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from bench.errors import BenchError
from bench.scene.camera_files import load_cameras, save_cameras
from bench.study.captures import undistort

POSE_LINE = "1 1 0 0 0 0 0 0 1 view.png\n\n"
MODELS = {  # COLMAP model -> (params, expected opencv_distortion or fisheye k1..k4)
    "SIMPLE_PINHOLE": ([50, 40, 30], ()),
    "PINHOLE": ([50, 52, 40, 30], ()),
    "SIMPLE_RADIAL": ([50, 40, 30, 0.1], (0.1, 0.0, 0.0, 0.0, 0.0)),
    "RADIAL": ([50, 40, 30, 0.1, -0.02], (0.1, -0.02, 0.0, 0.0, 0.0)),
    "OPENCV": ([50, 52, 40, 30, 0.1, -0.02, 0.001, -0.002], (0.1, -0.02, 0.001, -0.002, 0.0)),
    "OPENCV_FISHEYE": ([50, 52, 40, 30, 0.05, 0.01, 0.0, 0.0], (0.05, 0.01, 0.0, 0.0)),
}


def _colmap_text(folder, model, params):
    folder.mkdir(parents=True)
    (folder / "cameras.txt").write_text(f"1 {model} 80 60 {' '.join(map(str, params))}\n")
    (folder / "images.txt").write_text(POSE_LINE)


@pytest.mark.parametrize("model", list(MODELS))
def test_colmap_models_read_with_distortion(tmp_path, model):
    params, expected = MODELS[model]
    _colmap_text(tmp_path / "m", model, params)
    (cam,) = load_cameras(tmp_path / "m", keep_distortion=True)
    if model == "OPENCV_FISHEYE":
        assert cam.model == "fisheye" and cam.distortion == pytest.approx(expected)
    else:
        assert cam.model == "pinhole" and cam.opencv_distortion == pytest.approx(expected)
    assert (cam.fx, cam.cx, cam.cy) == (50, 40, 30)
    if expected and model != "OPENCV_FISHEYE":  # the renderer's loader still refuses them
        with pytest.raises(BenchError, match="with distortion"):
            load_cameras(tmp_path / "m")
        # binary round trip (written as OPENCV) keeps the coefficients
        save_cameras(tmp_path / "bin", [cam], format="colmap-binary")
        (again,) = load_cameras(tmp_path / "bin", keep_distortion=True)
        assert again.opencv_distortion == pytest.approx(cam.opencv_distortion)


def test_colmap_binary_simple_radial(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    cams = struct.pack("<Q", 1) + struct.pack("<iiQQ4d", 1, 2, 80, 60, 50.0, 40.0, 30.0, 0.1)
    (folder / "cameras.bin").write_bytes(cams)
    image = struct.pack("<i7di", 1, 1, 0, 0, 0, 0, 0, 0, 1) + b"view.png\x00" + \
        struct.pack("<Q", 0)
    (folder / "images.bin").write_bytes(struct.pack("<Q", 1) + image)
    (cam,) = load_cameras(folder, keep_distortion=True)
    assert cam.opencv_distortion == pytest.approx((0.1, 0, 0, 0, 0))


def test_transforms_json_distortion(tmp_path):
    frame = {"file_path": "images/a.png", "transform_matrix": np.eye(4).tolist()}
    data = {"camera_model": "OPENCV", "w": 80, "h": 60, "fl_x": 50, "fl_y": 52, "cx": 40,
            "cy": 30, "k1": 0.1, "k2": -0.02, "k3": 0.003, "p1": 0.001, "p2": -0.002,
            "frames": [frame]}
    (tmp_path / "transforms.json").write_text(json.dumps(data))
    (cam,) = load_cameras(tmp_path / "transforms.json", keep_distortion=True)
    assert cam.opencv_distortion == pytest.approx((0.1, -0.02, 0.001, -0.002, 0.003))
    with pytest.raises(BenchError, match="undistort the images first"):
        load_cameras(tmp_path / "transforms.json")


def _dot_image(width, height, uv):  # a bright 3x3 dot centred on pixel-centre coordinate uv
    image = np.zeros((height, width, 3), np.uint8)
    col, row = int(np.floor(uv[0])), int(np.floor(uv[1]))
    image[row - 1:row + 2, col - 1:col + 2] = 255
    return image


def _centroid(image):  # -> (u, v) in pixel-centre coordinates
    weights = image[..., 0].astype(np.float64)
    rows, cols = np.nonzero(weights)
    w = weights[rows, cols]
    return np.array([np.sum(cols * w) / w.sum() + 0.5, np.sum(rows * w) / w.sum() + 0.5])


@pytest.mark.parametrize("model", ["OPENCV", "OPENCV_FISHEYE"])
def test_undistortion_moves_a_point_to_its_pinhole_projection(tmp_path, model):
    import cv2

    params = {"OPENCV": [120, 120, 100.5, 80.5, -0.25, 0.06, 0.001, -0.001],
              "OPENCV_FISHEYE": [110, 110, 100.5, 80.5, 0.05, 0.01, 0.0, 0.0]}[model]
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "cameras.txt").write_text(f"1 {model} 200 160 {' '.join(map(str, params))}\n")
    (folder / "images.txt").write_text(POSE_LINE)
    (cam,) = load_cameras(folder, keep_distortion=True)
    point = np.array([[[0.35, -0.22, 1.0]]])  # camera frame, off-centre where distortion bites
    K = np.array([[cam.fx, 0, cam.cx - 0.5], [0, cam.fy, cam.cy - 0.5], [0, 0, 1]])
    if model == "OPENCV":
        projected, _ = cv2.projectPoints(point, np.zeros(3), np.zeros(3), K,
                                         np.array(cam.opencv_distortion))
    else:
        projected, _ = cv2.fisheye.projectPoints(point, np.zeros(3), np.zeros(3), K,
                                                 np.array(cam.distortion))
    uv = projected.reshape(2) + 0.5  # OpenCV integer centres -> this bench's +0.5
    flat, pinhole, crop = undistort(_dot_image(200, 160, uv), cam)
    assert pinhole.model == "pinhole" and not pinhole.opencv_distortion
    assert flat.shape[:2] == (pinhole.height, pinhole.width) == (crop["height"], crop["width"])
    expected = np.array([pinhole.fx * 0.35 + pinhole.cx, pinhole.fy * -0.22 + pinhole.cy])
    # the dot is 3 px wide and resampled bilinearly: its centroid lands within half a pixel
    assert np.abs(_centroid(flat) - expected).max() < 0.5
    assert np.abs(_centroid(_dot_image(200, 160, uv)) - uv).max() < 0.51  # the probe itself
