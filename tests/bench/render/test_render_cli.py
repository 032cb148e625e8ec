"""``bench render`` and ``bench cameras convert`` end to end on a small sample scene."""

import json

import cv2
import numpy as np
import pytest

from bench.cli import main
from bench.provenance import sha256_file
from bench.scene.bundle import save_scene
from bench.scene.camera_files import load_cameras, save_cameras
from bench.scene.cameras import Camera, look_at
from bench.scene.sample import make_sample_scene


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene") / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=3000), root)
    return root


def test_render_role_writes_pngs_depth_manifest(scene_dir, tmp_path):
    out = tmp_path / "out"
    assert main(["render", "--scene", str(scene_dir), "--role", "obs_probe", "--out", str(out),
                 "--backend", "cpu", "--width", "64"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "render/1" and manifest["counts"]["views"] == 12
    for key, rel in manifest["files"].items():
        assert manifest["outputs"][key]["sha256"] == sha256_file(out / rel)
    cams = load_cameras(out / "cameras.json")
    assert (cams[0].width, cams[0].height) == (64, 64)  # 128x128 probe scaled, aspect kept
    rgb = cv2.imread(str(out / "rgb/0000_probe_00.png"), cv2.IMREAD_UNCHANGED)
    assert rgb.shape == (64, 64, 3) and rgb.dtype == np.uint8 and rgb.std() > 5
    depth = np.load(out / "depth/0000_probe_00.npy")
    depth_png = cv2.imread(str(out / "depth/0000_probe_00.png"), cv2.IMREAD_UNCHANGED)
    assert depth_png.dtype == np.uint16
    finite = np.isfinite(depth)
    assert finite.mean() > 0.9  # the room surrounds the camera
    np.testing.assert_allclose(depth_png[finite], np.round(depth[finite] * 1000), atol=0.5)
    assert (depth_png[~finite] == 0).all()


def test_render_is_deterministic_and_refuses_overwrite(scene_dir, tmp_path, capsys):
    cams = [Camera.equidistant_fisheye(40, 32, fov_deg=200, world_from_camera=look_at(
        (0.4, -0.5, 0.4), (0, 0, 0)), name="wrist/left.png")]
    save_cameras(tmp_path / "cams.json", cams)
    args = ["render", "--scene", str(scene_dir), "--cameras", str(tmp_path / "cams.json"),
            "--backend", "cpu", "--fisheye-mode", "cubemap", "--background", "1,1,1"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a, b = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in "ab")
    assert a["outputs"] == b["outputs"]  # byte-identical files
    assert (tmp_path / "a/rgb/0000_left.png").exists()
    alpha = cv2.imread(str(tmp_path / "a/alpha/0000_left.png"), cv2.IMREAD_UNCHANGED)
    assert alpha[0, 0] == 0  # corner outside the 200-degree image circle
    assert main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--role", "nope"], "no camera role"),
        (["--cameras", "missing.json"], "does not exist"),
        (["--role", "test", "--background", "1,2"], "--background"),
        (["--role", "test", "--width", "0"], "positive"),
        (["--role", "test", "--sh-degree", "5"], "sh_degree"),
    ],
)
def test_render_bad_input_one_line_error(scene_dir, tmp_path, capsys, extra, needle):
    out = tmp_path / "out"
    rc = main(["render", "--scene", str(scene_dir), "--out", str(out), "--backend", "cpu", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not out.exists()  # nothing half-written


def test_cameras_convert_cli(tmp_path):
    cams = [Camera.pinhole_from_fov(32, 24, fov_x_deg=60, world_from_camera=look_at(
        (1, 2, 1), (0, 0, 0)), name="a.png")]
    save_cameras(tmp_path / "cams.json", cams)
    assert main(["cameras", "convert", str(tmp_path / "cams.json"), str(tmp_path / "sparse"),
                 "--format", "colmap-binary"]) == 0
    assert main(["cameras", "convert", str(tmp_path / "sparse"),
                 str(tmp_path / "transforms.json")]) == 0
    back = load_cameras(tmp_path / "transforms.json")
    np.testing.assert_allclose(back[0].world_from_camera, cams[0].world_from_camera, atol=1e-12)


def test_render_help_states_units_and_defaults_without_none_noise():
    import argparse

    from bench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["render"].format_help()
    assert "(default: None)" not in text and "(default: False)" not in text
    helps = {a.dest: a.help for a in sub.choices["render"]._actions}
    assert "pixels" in helps["width"] and "pixels" in helps["height"]
    assert helps["background"].endswith("[default 0,0,0]")
    assert helps["backend"].endswith("[default auto]")


def test_cameras_convert_refuses_unknown_names_existing_outputs_and_notes_lost_fov(
        tmp_path, capsys):
    fish = Camera("fisheye", 32, 32, 9.0, 9.0, 16.0, 16.0, look_at((1, 2, 1), (0, 0, 0)),
                  distortion=(0.02, -0.005, 0.0, 0.0), fov_deg=200.0, name="f.png")
    save_cameras(tmp_path / "fish.json", [fish])
    src = str(tmp_path / "fish.json")
    # a suffix that names no format is refused instead of becoming a COLMAP directory
    assert main(["cameras", "convert", src, str(tmp_path / "out.txt")]) == 2
    assert not (tmp_path / "out.txt").exists()
    assert "cannot tell the camera file format" in capsys.readouterr().err
    # an existing destination is kept unless --overwrite
    (tmp_path / "taken.json").write_text("[]")
    assert main(["cameras", "convert", src, str(tmp_path / "taken.json")]) == 2
    assert (tmp_path / "taken.json").read_text() == "[]"
    assert "--overwrite" in capsys.readouterr().err
    assert main(["cameras", "convert", src, str(tmp_path / "taken.json"), "--overwrite"]) == 0
    assert load_cameras(tmp_path / "taken.json")[0].fov_deg == 200.0
    # COLMAP cannot store fov_deg: converted, with a one-line note on stderr
    capsys.readouterr()
    assert main(["cameras", "convert", src, str(tmp_path / "sparse")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fov_deg" in err[0]
    assert load_cameras(tmp_path / "sparse")[0].fov_deg is None
