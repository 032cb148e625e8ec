"""Issue 30 item 2: lens distortion and poses survive camera-file round trips.

Each test names a defect of the version before the fix (all failed there):
``bench cameras convert`` refused every distorted COLMAP model; ``save_cameras`` to
transforms.json wrote a distorted pinhole with zero coefficients; COLMAP export wrote
OPENCV without k3 (FULL_OPENCV's k3..k6 lost); COLMAP re-export moved 18-19 of 20 pose
lines in their last digits on every trip (the camera centre drifted 1.9e-13 in 50 trips).
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.scene.camera_files import convert_cameras, load_cameras, save_cameras
from bench.scene.cameras import Camera

THIRD = 1.0 / 3.0  # a float whose shortest repr has 16 digits: exactness shows
# COLMAP model -> params with every distortion slot nonzero (so the model is the smallest one
# holding them, and must come back as is).
MODELS = {
    "SIMPLE_RADIAL": [50.25, 40.5, 30.5, -0.1 * THIRD],
    "RADIAL": [50.25, 40.5, 30.5, -0.1 * THIRD, 0.02 * THIRD],
    "OPENCV": [50.25, 52.75, 40.5, 30.5, -0.1 * THIRD, 0.02, 0.001 * THIRD, -0.002],
    "FULL_OPENCV": [50.25, 52.75, 40.5, 30.5, -0.1 * THIRD, 0.02, 0.001 * THIRD, -0.002,
                    0.003 * THIRD, 0.04, -0.005 * THIRD, 0.006],
    "OPENCV_FISHEYE": [50.25, 52.75, 40.5, 30.5, 0.05 * THIRD, 0.01, -0.002 * THIRD, 0.0004],
}
MODEL_IDS = {"PINHOLE": 1, "SIMPLE_RADIAL": 2, "RADIAL": 3, "OPENCV": 4, "OPENCV_FISHEYE": 5,
             "FULL_OPENCV": 6, "SIMPLE_RADIAL_FISHEYE": 8, "RADIAL_FISHEYE": 9}
PINHOLE = [50.25, 52.75, 40.5, 30.5]
QT = (0.5, -0.5, 0.5, 0.5, 0.1 * THIRD, -2.0, 3.5)  # one pose line: q (unit), t


def _write_colmap(folder, model, params, *, binary=False, poses=(QT,)):
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"view_{i:02d}.png" for i in range(len(poses))]
    if binary:
        cams = struct.pack("<Q", 1) + struct.pack(f"<iiQQ{len(params)}d", 1, MODEL_IDS[model],
                                                  80, 60, *params)
        images = struct.pack("<Q", len(poses))
        for i, (qt, name) in enumerate(zip(poses, names, strict=True)):
            images += struct.pack("<i7di", i + 1, *qt, 1) + name.encode() + b"\x00"
            images += struct.pack("<Q", 0)
        (folder / "cameras.bin").write_bytes(cams)
        (folder / "images.bin").write_bytes(images)
    else:
        (folder / "cameras.txt").write_text(f"1 {model} 80 60 {' '.join(map(repr, params))}\n")
        (folder / "images.txt").write_text("".join(
            f"{i + 1} {' '.join(map(repr, qt))} 1 {name}\n\n"
            for i, (qt, name) in enumerate(zip(poses, names, strict=True))))
    return folder


def _colmap_cameras(folder) -> list[tuple[str, list[float]]]:
    """(model, params) of every camera of a COLMAP model, exactly as stored."""
    if (folder / "cameras.txt").exists():
        rows = [ln.split() for ln in (folder / "cameras.txt").read_text().splitlines()
                if ln and not ln.startswith("#")]
        return [(r[1], [float(v) for v in r[4:]]) for r in rows]
    data = (folder / "cameras.bin").read_bytes()
    by_id = {v: k for k, v in MODEL_IDS.items()}
    out, offset = [], 8
    for _ in range(struct.unpack_from("<Q", data)[0]):
        _, model_id, _, _ = struct.unpack_from("<iiQQ", data, offset)
        n = {1: 4, 2: 4, 3: 5, 4: 8, 5: 8, 6: 12}[model_id]
        out.append((by_id[model_id], list(struct.unpack_from(f"<{n}d", data, offset + 24))))
        offset += 24 + 8 * n
    return out


def _qt_rows(folder) -> list[tuple[float, ...]]:
    if (folder / "images.txt").exists():
        rows = [ln.split() for ln in (folder / "images.txt").read_text().splitlines()
                if ln and not ln.startswith("#")]
        return [tuple(float(v) for v in r[1:8]) for r in rows]
    data = (folder / "images.bin").read_bytes()
    out, offset = [], 8
    for _ in range(struct.unpack_from("<Q", data)[0]):
        out.append(struct.unpack_from("<i7di", data, offset)[1:8])
        offset = data.index(b"\x00", offset + 64) + 1 + 8
    return out


# ------------------------------------------------------------------ distortion kept
@pytest.mark.parametrize("binary", [False, True], ids=["text", "bin"])
@pytest.mark.parametrize(("model", "via"), [  # transforms.json cannot hold FULL_OPENCV: refused
    (m, v) for m in MODELS for v in ("colmap-text", "colmap-binary", "json", "transforms")
    if (m, v) != ("FULL_OPENCV", "transforms")])
def test_convert_keeps_each_distorted_colmap_model_exactly(tmp_path, model, binary, via):
    """Defect: convert refused every distorted model (FULL_OPENCV even when read)."""
    src = _write_colmap(tmp_path / "src", model, MODELS[model], binary=binary)
    middle = tmp_path / {"json": "cams.json", "transforms": "transforms.json"}.get(via, "mid")
    convert_cameras(src, middle, format=via)
    convert_cameras(middle, tmp_path / "back", format="colmap-binary" if binary else "colmap-text")
    assert _colmap_cameras(tmp_path / "back") == [(model, MODELS[model])]  # floats compare exactly
    if via.startswith("colmap"):  # the pose numbers as read, too
        assert _qt_rows(tmp_path / "back") == [QT]


@pytest.mark.parametrize(("model", "params", "k"), [
    ("SIMPLE_RADIAL_FISHEYE", [50.25, 40.5, 30.5, 0.05 * THIRD], (0.05 * THIRD, 0.0, 0.0, 0.0)),
    ("RADIAL_FISHEYE", [50.25, 40.5, 30.5, 0.05 * THIRD, -0.01], (0.05 * THIRD, -0.01, 0.0, 0.0)),
])
def test_colmap_radial_fisheyes_read_as_kannala_brandt(tmp_path, model, params, k):
    """Defect: COLMAP's (SIMPLE_)RADIAL_FISHEYE were refused though OPENCV_FISHEYE holds them."""
    (cam,) = load_cameras(_write_colmap(tmp_path / "m", model, params))
    assert (cam.model, cam.fx, cam.fy, cam.distortion) == ("fisheye", 50.25, 50.25, k)
    convert_cameras(tmp_path / "m", tmp_path / "out")
    assert _colmap_cameras(tmp_path / "out") == [("OPENCV_FISHEYE", [50.25, 50.25, 40.5, 30.5, *k])]


def test_full_opencv_k3_to_k6_kept(tmp_path):
    """Defect: FULL_OPENCV was refused on read, and export wrote OPENCV without k3."""
    params = MODELS["FULL_OPENCV"]
    (cam,) = load_cameras(_write_colmap(tmp_path / "m", "FULL_OPENCV", params),
                          keep_distortion=True)
    assert cam.opencv_distortion == tuple(params[4:])  # OpenCV's order k1 k2 p1 p2 k3 k4 k5 k6
    for fmt in ("colmap-text", "colmap-binary"):
        save_cameras(tmp_path / fmt, [cam], format=fmt)
        assert _colmap_cameras(tmp_path / fmt) == [("FULL_OPENCV", params)]
    save_cameras(tmp_path / "cams.json", [cam])
    (again,) = load_cameras(tmp_path / "cams.json", keep_distortion=True)
    assert again.opencv_distortion == cam.opencv_distortion


def test_colmap_export_keeps_k3(tmp_path):
    """Defect: a pinhole with k3 was written as OPENCV, which has no k3: k3 silently lost."""
    pose = np.eye(4)
    cam = Camera("pinhole", 80, 60, 50.0, 52.0, 40.0, 30.0, pose,
                 opencv_distortion=(-0.1, 0.02, 0.001, -0.002, 0.003))
    for fmt in ("colmap-text", "colmap-binary"):
        save_cameras(tmp_path / fmt, [cam], format=fmt)
        assert _colmap_cameras(tmp_path / fmt) == [
            ("FULL_OPENCV", [50.0, 52.0, 40.0, 30.0, -0.1, 0.02, 0.001, -0.002, 0.003, 0.0, 0.0,
                             0.0])]
        (again,) = load_cameras(tmp_path / fmt, keep_distortion=True)
        assert again.opencv_distortion == cam.opencv_distortion


def test_save_transforms_writes_the_coefficients_not_zeros(tmp_path):
    """Defect: save_cameras to transforms.json wrote k1..k4 = 0 for a distorted pinhole."""
    cam = Camera("pinhole", 80, 60, 50.0, 52.0, 40.0, 30.0, np.eye(4), name="a.png",
                 opencv_distortion=(-0.1, 0.02, 0.001, -0.002, 0.003))
    save_cameras(tmp_path / "transforms.json", [cam])
    (frame,) = json.loads((tmp_path / "transforms.json").read_text())["frames"]
    assert frame["camera_model"] == "OPENCV"
    assert {k: frame[k] for k in ("k1", "k2", "k3", "k4", "p1", "p2")} == {
        "k1": -0.1, "k2": 0.02, "k3": 0.003, "k4": 0.0, "p1": 0.001, "p2": -0.002}
    (again,) = load_cameras(tmp_path / "transforms.json", keep_distortion=True)
    assert again.opencv_distortion == cam.opencv_distortion


@pytest.mark.parametrize(("camera_model", "keys"), [
    ("OPENCV", {"k1": -0.1 * THIRD, "k2": 0.02, "k3": 0.003 * THIRD, "p1": 0.001,
                "p2": -0.002 * THIRD}),
    ("OPENCV_FISHEYE", {"k1": 0.05 * THIRD, "k2": 0.01, "k3": -0.002 * THIRD, "k4": 0.0004}),
])
def test_transforms_k1_k4_p1_p2_round_trip(tmp_path, camera_model, keys):
    """Defect: convert refused a distorted OPENCV transforms.json (and save zeroed it)."""
    data = {"camera_model": camera_model, "w": 80, "h": 60, "fl_x": 50.25, "fl_y": 52.75,
            "cx": 40.5, "cy": 30.5, **keys,
            "frames": [{"file_path": "images/a.png", "transform_matrix": np.eye(4).tolist()}]}
    (tmp_path / "transforms.json").write_text(json.dumps(data))
    chain = ["out/transforms.json", "cams.json", "colmap", "bin", "back/transforms.json"]
    src = tmp_path / "transforms.json"
    for i, target in enumerate(chain):
        (tmp_path / target).parent.mkdir(exist_ok=True)
        convert_cameras(src, tmp_path / target, format="colmap-binary" if i == 3 else None)
        src = tmp_path / target
    (frame,) = json.loads(src.read_text())["frames"]
    assert frame["camera_model"] == camera_model
    assert {k: frame[k] for k in keys} == keys
    assert all(frame.get(k, 0.0) == 0.0 for k in ("k1", "k2", "k3", "k4", "p1", "p2")
               if k not in keys)


def test_json_list_carries_both_opencv_forms_and_old_files_read(tmp_path):
    cams = [Camera("pinhole", 80, 60, 50.0, 52.0, 40.0, 30.0, np.eye(4), name="five.png",
                   opencv_distortion=(-0.1, 0.02, 0.001, -0.002, 0.003)),
            Camera("pinhole", 80, 60, 50.0, 52.0, 40.0, 30.0, np.eye(4), name="eight.png",
                   opencv_distortion=tuple(MODELS["FULL_OPENCV"][4:]))]
    save_cameras(tmp_path / "cams.json", cams)
    again = load_cameras(tmp_path / "cams.json", keep_distortion=True)
    assert [c.opencv_distortion for c in again] == [c.opencv_distortion for c in cams]
    # zero rational terms are one form with the 5-coefficient camera (as older files hold)
    eight = cams[0].replace(opencv_distortion=(*cams[0].opencv_distortion, 0.0, 0.0, 0.0))
    assert eight.opencv_distortion == cams[0].opencv_distortion
    with pytest.raises(BenchError, match="undistort the images first"):
        load_cameras(tmp_path / "cams.json")  # the renderer's loader still refuses them


# -------------------------------------------------------------------------- refusals
def test_transforms_refuses_full_opencv_rational_terms(tmp_path):
    src = _write_colmap(tmp_path / "m", "FULL_OPENCV", MODELS["FULL_OPENCV"])
    with pytest.raises(BenchError, match="transforms.json cannot hold"):
        convert_cameras(src, tmp_path / "transforms.json")
    assert not (tmp_path / "transforms.json").exists()


@pytest.mark.parametrize(("extra", "fragment"), [
    ({"camera_model": "OPENCV", "k1": 0.1, "k4": 0.01}, r"r\^8 radial term"),
    ({"camera_model": "OPENCV_FISHEYE", "k1": 0.1, "p1": 0.01}, "no tangential terms"),
])
def test_transforms_coefficients_without_a_model_refused(tmp_path, extra, fragment):
    """Defect: nerfstudio's k4 (r^8) on OPENCV and p1/p2 on a fisheye were dropped silently."""
    data = {"w": 80, "h": 60, "fl_x": 50.0, "cx": 40.0, "cy": 30.0, **extra,
            "frames": [{"file_path": "a.png", "transform_matrix": np.eye(4).tolist()}]}
    (tmp_path / "transforms.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=fragment):
        load_cameras(tmp_path / "transforms.json", keep_distortion=True)


def _cli(argv, capsys):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr()


def test_cli_convert_keeps_distortion(tmp_path, capsys):
    """Defect: `bench cameras convert` refused every distorted COLMAP model."""
    src = _write_colmap(tmp_path / "m", "OPENCV", MODELS["OPENCV"])
    code, out = _cli(["cameras", "convert", src, tmp_path / "cams.json"], capsys)
    assert code == 0, out.err
    code, out = _cli(["cameras", "convert", tmp_path / "cams.json", tmp_path / "back"], capsys)
    assert code == 0, out.err
    assert _colmap_cameras(tmp_path / "back") == [("OPENCV", MODELS["OPENCV"])]


def test_cli_convert_refuses_a_target_that_cannot_hold_the_model(tmp_path, capsys):
    src = _write_colmap(tmp_path / "m", "FULL_OPENCV", MODELS["FULL_OPENCV"])
    code, out = _cli(["cameras", "convert", src, tmp_path / "transforms.json"], capsys)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1, out.err
    assert lines[0].startswith("bench cameras") and ": error: " in lines[0]
    assert "transforms.json cannot hold" in lines[0] and "colmap-text" in lines[0]
    assert "Traceback" not in out.err and not (tmp_path / "transforms.json").exists()


# ------------------------------------------------------------------------------ poses
def _random_cameras(seed: int, n: int = 20) -> list[Camera]:
    rng = np.random.default_rng(seed)
    cams = []
    for i in range(n):
        q = rng.normal(size=4)
        w, x, y, z = q / np.linalg.norm(q)
        rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = rot, rng.uniform(-5.0, 5.0, 3)
        cams.append(Camera("pinhole", 64, 48, 50.0, 50.0, 32.0, 24.0, pose, name=f"v{i:02d}.png"))
    return cams


@pytest.mark.parametrize("fmt", ["colmap-text", "colmap-binary"])
def test_colmap_reexport_byte_stable_and_no_drift(tmp_path, fmt):
    """Defect: every re-export moved most pose lines (centre drift 1.9e-13 after 50 trips)."""
    names = ("images.txt", "cameras.txt") if fmt == "colmap-text" else ("images.bin",
                                                                        "cameras.bin")
    save_cameras(tmp_path / "m0", _random_cameras(seed=30), format=fmt)
    first = load_cameras(tmp_path / "m0")
    cams = first
    for trip in range(1, 51):
        save_cameras(tmp_path / f"m{trip}", cams, format=fmt)
        cams = load_cameras(tmp_path / f"m{trip}")
        if trip >= 2:  # byte-identical from the second round trip on
            for name in names:
                assert (tmp_path / f"m{trip}" / name).read_bytes() == \
                    (tmp_path / "m1" / name).read_bytes(), (trip, name)
    drift = max(np.abs(a.world_from_camera - b.world_from_camera).max()
                for a, b in zip(cams, first, strict=True))
    assert drift == 0.0


@pytest.mark.parametrize("binary", [False, True], ids=["text", "bin"])
def test_colmap_values_as_read_are_written_back(tmp_path, binary):
    """A model as another tool writes it (17 digits, q not unit to the last bit, qw < 0) is
    written back with the same numbers: only the quaternion's sign becomes canonical."""
    rng = np.random.default_rng(7)
    poses = []
    for _ in range(20):
        q = rng.normal(size=4)
        q = q / np.linalg.norm(q) * (1 + 3e-16)
        poses.append((*q.tolist(), *rng.uniform(-5, 5, 3).tolist()))
    src = _write_colmap(tmp_path / "src", "PINHOLE", PINHOLE, binary=binary, poses=poses)
    convert_cameras(src, tmp_path / "out", format="colmap-binary" if binary else "colmap-text")
    for read, written in zip(poses, _qt_rows(tmp_path / "out"), strict=True):
        sign = 1.0 if read[0] > 0 else -1.0
        assert written == tuple(sign * v for v in read[:4]) + read[4:]


def test_quaternion_sign_canonical(tmp_path):
    """Defect: a 180-degree turn could be written with its first nonzero component negative."""
    poses = [(-0.5, 0.5, -0.5, -0.5, 1.0, 2.0, 3.0),  # qw < 0: negated
             (0.0, 0.6, -0.8, 0.0, 1.0, 2.0, 3.0),  # qw = 0: first nonzero (qx) positive
             (-0.0, -0.6, 0.8, 0.0, 1.0, 2.0, 3.0),  # the same rotation, other sign
             (0.0, 0.0, -0.6, 0.8, 0.0, -0.0, 1.0)]  # qw = qx = 0: qy positive; -0.0 -> 0.0
    src = _write_colmap(tmp_path / "src", "PINHOLE", PINHOLE, poses=poses)
    read = load_cameras(src, keep_distortion=True)
    moved = [Camera.from_dict(c.to_dict()) for c in read]  # same pose, q computed from it
    for cams, out in ((read, "as_read"), (moved, "recomputed")):
        save_cameras(tmp_path / out, cams)
        rows = _qt_rows(tmp_path / out)
        for row in rows:
            first = next(v for v in row[:4] if v != 0.0)
            assert first > 0 and math.isclose(math.hypot(*row[:4]), 1.0, rel_tol=1e-15)
        assert "-0.0" not in (tmp_path / out / "images.txt").read_text()
        assert rows[1][:4] == rows[2][:4]
        for a, b in zip(load_cameras(tmp_path / out, keep_distortion=True), read, strict=True):
            np.testing.assert_allclose(a.world_from_camera, b.world_from_camera, atol=1e-14)


def test_full_opencv_capture_undistorts_to_its_pinhole_projection(tmp_path):
    """FULL_OPENCV captures were refused; their 8 coefficients now go to OpenCV as they are."""
    import cv2

    from bench.study.captures import undistort

    # rational terms that move the point by 1.4 px: dropping them fails the 0.5 px bound
    params = [120.0, 121.0, 100.5, 80.5, -0.25, 0.06, 0.001, -0.001, 0.01, 0.25, 0.05, 0.01]
    (cam,) = load_cameras(_write_colmap(tmp_path / "m", "FULL_OPENCV", params),
                          keep_distortion=True)
    cam = cam.replace(width=200, height=160)  # the probe image's size (the file says 80x60)
    point = np.array([[[0.35, -0.22, 1.0]]])  # camera frame, off-centre where distortion bites
    K = np.array([[cam.fx, 0, cam.cx - 0.5], [0, cam.fy, cam.cy - 0.5], [0, 0, 1]])
    projected, _ = cv2.projectPoints(point, np.zeros(3), np.zeros(3), K,
                                     np.array(cam.opencv_distortion))
    uv = projected.reshape(2) + 0.5  # OpenCV integer centres -> this bench's +0.5
    image = np.zeros((160, 200, 3), np.uint8)
    image[int(uv[1]) - 1:int(uv[1]) + 2, int(uv[0]) - 1:int(uv[0]) + 2] = 255
    flat, pinhole, _ = undistort(image, cam)
    rows, cols = np.nonzero(flat[..., 0])
    weights = flat[rows, cols, 0].astype(np.float64)
    centroid = np.array([np.sum(cols * weights), np.sum(rows * weights)]) / weights.sum() + 0.5
    expected = np.array([pinhole.fx * 0.35 + pinhole.cx, pinhole.fy * -0.22 + pinhole.cy])
    assert np.abs(centroid - expected).max() < 0.5
