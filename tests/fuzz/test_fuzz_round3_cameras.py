"""Fuzz suite, round 3: `bench cameras convert` with lens distortion and COLMAP poses (issue 30).

Refused cases run through ``refused`` (conftest.py): exit 2, one ``bench ...: error:`` line
naming the problem and the fix, and a byte-identical workspace. The ``issue30_*`` cases are
the item-2 defects at the command line (each failed before its fix: convert refused every
distorted model, dropped nerfstudio k4 and fisheye p1/p2 silently, and re-exports drifted);
the generated families below feed malformed lens and pose values to every reader.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main

THIRD = 1.0 / 3.0
MODELS = {  # COLMAP model -> params, every distortion slot nonzero
    "SIMPLE_RADIAL": [50.25, 40.5, 30.5, -0.1 * THIRD],
    "RADIAL": [50.25, 40.5, 30.5, -0.1 * THIRD, 0.02],
    "OPENCV": [50.25, 52.75, 40.5, 30.5, -0.1 * THIRD, 0.02, 0.001, -0.002 * THIRD],
    "FULL_OPENCV": [50.25, 52.75, 40.5, 30.5, -0.1 * THIRD, 0.02, 0.001, -0.002, 0.003 * THIRD,
                    0.04, -0.005, 0.006 * THIRD],
    "OPENCV_FISHEYE": [50.25, 52.75, 40.5, 30.5, 0.05 * THIRD, 0.01, -0.002, 0.0004],
}
POSE = "1 0.5 -0.5 0.5 0.5 0.1 -2.0 3.5 1 view.png\n\n"


def colmap_text(ws: Path, name: str, camera_line: str, images: str = POSE) -> Path:
    folder = ws / name
    folder.mkdir()
    (folder / "cameras.txt").write_text(camera_line + "\n")
    (folder / "images.txt").write_text(images)
    return folder


def transforms(ws: Path, name: str, **keys) -> Path:
    data = {"w": 80, "h": 60, "fl_x": 50.0, "cx": 40.0, "cy": 30.0, **keys,
            "frames": [{"file_path": "a.png", "transform_matrix": np.eye(4).tolist()}]}
    (ws / name).mkdir()
    path = ws / name / "transforms.json"
    path.write_text(json.dumps(data))
    return path


def convert(*args) -> int:
    return main(["cameras", "convert", *(str(a) for a in args)])


def camera_rows(folder: Path) -> list[list[str]]:
    return [ln.split() for ln in (folder / "cameras.txt").read_text().splitlines()
            if ln and not ln.startswith("#")]


# --------------------------------------------------------------------------- issue 30 cases
@pytest.mark.parametrize(("model", "target"), [  # FULL_OPENCV -> transforms.json: refused below
    (m, t) for m in MODELS for t in ("cams.json", "transforms.json", "out_text", "out_bin")
    if (m, t) != ("FULL_OPENCV", "transforms.json")])
def test_issue30_convert_keeps_every_distorted_model(workspace, capsys, model, target):
    """`bench cameras convert` refused every distorted COLMAP model."""
    src = colmap_text(workspace, "m", f"1 {model} 80 60 {' '.join(map(repr, MODELS[model]))}")
    fmt = ["--format", "colmap-binary"] if target == "out_bin" else []
    assert convert(src, target, *fmt) == 0, capsys.readouterr().err
    assert convert(target, "back") == 0, capsys.readouterr().err
    assert camera_rows(workspace / "back") == [["1", model, "80", "60",
                                                *map(repr, MODELS[model])]]


def test_issue30_transforms_cannot_hold_full_opencv(workspace, refused):
    src = colmap_text(workspace, "m", "1 FULL_OPENCV 80 60 " + " ".join(map(repr,
                                                                           MODELS["FULL_OPENCV"])))
    refused(["cameras", "convert", src, "transforms.json"], fragment="transforms.json cannot hold")


@pytest.mark.parametrize(("keys", "fragment"), [
    ({"camera_model": "OPENCV", "k1": 0.1, "k4": 0.01}, "r^8 radial term"),
    ({"k4": -0.01}, "r^8 radial term"),  # OPENCV is the default camera_model
    ({"camera_model": "OPENCV_FISHEYE", "k1": 0.1, "p2": 0.01}, "no tangential terms"),
])
@pytest.mark.parametrize("target", ["cams.json", "model_dir"])
def test_issue30_transforms_coefficients_never_dropped(workspace, refused, keys, fragment,
                                                      target):
    """nerfstudio's k4 (r^8) and a fisheye's p1/p2 were read as zero without a word."""
    src = transforms(workspace, "ns", **keys)
    refused(["cameras", "convert", src, target], fragment=fragment)


@pytest.mark.parametrize("fmt", ["colmap-text", "colmap-binary"])
def test_issue30_cli_reexport_byte_stable(workspace, capsys, fmt):
    """Every COLMAP re-export moved pose lines in their last digits."""
    rng = np.random.default_rng(30)
    lines = []
    for i in range(20):
        q = rng.normal(size=4)
        q = q / np.linalg.norm(q)
        values = " ".join(map(repr, [*q.tolist(), *rng.uniform(-5, 5, 3).tolist()]))
        lines.append(f"{i + 1} {values} 1 v{i:02d}.png\n\n")
    src = colmap_text(workspace, "m0", "1 PINHOLE 64 48 50 50 32 24", "".join(lines))
    previous = src
    for trip in range(1, 4):
        assert convert(previous, f"m{trip}", "--format", fmt) == 0, capsys.readouterr().err
        previous = workspace / f"m{trip}"
    for name in sorted(p.name for p in (workspace / "m2").iterdir()):
        assert (workspace / "m3" / name).read_bytes() == (workspace / "m2" / name).read_bytes()


# --------------------------------------------------------------------------- generated families
@pytest.mark.parametrize(("camera_line", "fragment"), [
    ("1 FOV 80 60 50 50 40 30 0.9", "no lens model for"),
    ("1 THIN_PRISM_FISHEYE 80 60 50 50 40 30 0.1 0 0 0 0 0 0 0", "no lens model for"),
    ("1 OPENCV 80 60 50 50 40 30 nan 0 0 0", "malformed entry"),
    ("1 FULL_OPENCV 80 60 50 50 40 30 0.1 0 0 0 0 inf 0 0", "malformed entry"),
    ("1 RADIAL_FISHEYE 80 60 50 40 30 -inf 0", "malformed entry"),
    ("1 SIMPLE_RADIAL 80 60 50 40 30 0.1 0.2", "parameter count"),
    ("1 FULL_OPENCV 80 60 50 50 40 30 0.1 0 0 0", "parameter count"),
    ("1 OPENCV 80 60 50 50 40 30 k1 0 0 0", "malformed entry"),
])
def test_colmap_lens_values_refused(workspace, refused, camera_line, fragment):
    src = colmap_text(workspace, "m", camera_line)
    refused(["cameras", "convert", src, "cams.json"], fragment=fragment)


@pytest.mark.parametrize("qvec", ["0 0 0 0", "nan 0 0 0", "inf 0 0 1", "-0.0 -0.0 0 0"])
def test_colmap_degenerate_quaternion_refused(workspace, refused, qvec):
    src = colmap_text(workspace, "m", "1 PINHOLE 80 60 50 50 40 30",
                      f"1 {qvec} 0 0 1 1 view.png\n\n")
    refused(["cameras", "convert", src, "cams.json"], fragment="malformed entry")


@pytest.mark.parametrize("qvec", ["5e-324 0 0 0", "1e308 0 0 0", "1.7e308 -0.0 0 0"])
def test_colmap_extreme_quaternion_is_a_rotation(workspace, capsys, qvec):
    # a subnormal or huge but finite quaternion still names a rotation (COLMAP normalises it)
    src = colmap_text(workspace, "m", "1 PINHOLE 80 60 50 50 40 30",
                      f"1 {qvec} 0 0 1 1 view.png\n\n")
    assert convert(src, "cams.json") == 0, capsys.readouterr().err
    pose = np.array(json.loads((workspace / "cams.json").read_text())[0]["world_from_camera"])
    np.testing.assert_array_equal(pose, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, -1], [0, 0, 0, 1]])


def test_colmap_binary_distorted_model_truncated(workspace, refused):
    folder = workspace / "b"
    folder.mkdir()
    params = MODELS["FULL_OPENCV"]
    cams = struct.pack("<Q", 1) + struct.pack("<iiQQ12d", 1, 6, 80, 60, *params)
    (folder / "cameras.bin").write_bytes(cams[:-20])
    (folder / "images.bin").write_bytes(struct.pack("<Q", 0))
    refused(["cameras", "convert", folder, "cams.json"], fragment="truncated or corrupt")


@pytest.mark.parametrize(("value", "fragment"), [
    ([0.1, 0.0, 0.0, 0.0, 0.0, 0.0], "must be 5 finite numbers"),
    ([0.1, 0.0, 0.0], "must be 5 finite numbers"),
    ([0.1, 0.0, 0.0, 0.0, "x"], "entry 0"),
    ([0.1, 0.0, 0.0, 0.0, 1e400], "must be 5 finite numbers"),
])
def test_json_list_bad_opencv_distortion_refused(workspace, refused, value, fragment):
    entry = {"name": "a.png", "model": "pinhole", "width": 80, "height": 60, "fx": 50.0,
             "fy": 50.0, "cx": 40.0, "cy": 30.0, "world_from_camera": np.eye(4).tolist(),
             "opencv_distortion": value}
    (workspace / "c.json").write_text(json.dumps([entry]).replace("Infinity", "1e400"))
    refused(["cameras", "convert", "c.json", "out_dir"], fragment=fragment)


def test_json_list_distortion_on_a_fisheye_refused(workspace, refused):
    entry = {"name": "a.png", "model": "fisheye", "width": 80, "height": 60, "fx": 50.0,
             "fy": 50.0, "cx": 40.0, "cy": 30.0, "world_from_camera": np.eye(4).tolist(),
             "opencv_distortion": [0.1, 0.0, 0.0, 0.0, 0.0]}
    (workspace / "c.json").write_text(json.dumps([entry]))
    refused(["cameras", "convert", "c.json", "transforms.json"], fragment="on a pinhole camera")


@pytest.mark.parametrize("keys", [{"k1": "abc"}, {"k2": [0.1]}, {"p1": None},
                                  {"camera_model": "OPENCV_FISHEYE", "k3": {"v": 1}}])
def test_transforms_bad_coefficient_types_refused(workspace, refused, keys):
    src = transforms(workspace, "ns", **keys)
    refused(["cameras", "convert", src, "cams.json"], fragment="malformed frame")


@pytest.mark.parametrize("model", ["EQUIRECTANGULAR", "FULL_OPENCV", "FISHEYE624"])
def test_transforms_unknown_camera_model_refused(workspace, refused, model):
    src = transforms(workspace, "ns", camera_model=model, k1=0.1)
    refused(["cameras", "convert", src, "cams.json"], fragment="not supported")
