"""``bench scene init | edit | crop`` end to end (CLI): bundles, manifests, previews, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.geometry import Similarity
from bench.provenance import sha256_file
from bench.scene.bundle import load_scene
from bench.scene.camera_files import load_cameras
from bench.scene.gaussians import GaussianSplats
from bench.scene.ply import read_ply, write_ply
from bench.scene.sample import make_sample_scene, sample_world_from_splat
from bench.scene.transforms import transform_splats

DATA = Path(__file__).parents[2] / "data" / "scans"


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> Path:
    """The sample room's background as a raw scan (splat frame, no scene.json)."""
    room = make_sample_scene(seed=0, n_gaussians=20000)
    path = tmp_path_factory.mktemp("scan") / "room.ply"
    write_ply(path, room.splat_background())
    return path


@pytest.fixture(scope="module")
def bundle(scan, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("init") / "lab"
    assert main(["scene", "init", "--splat", str(scan), "--out", str(out),
                 "--table-size", "1.2", "0.8", "--keepout", "0", "0", "0.06", "0.3", "0.3",
                 "0.12"]) == 0
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_init_writes_a_registered_bundle(bundle, scan):
    scene = load_scene(bundle)
    assert scene.name == "lab"
    assert scene.table.size == (1.2, 0.8) and scene.table.center == (0.0, 0.0)
    # the recovered registration is the sample's own (up to the table's 180-degree symmetry)
    truth = Similarity.from_matrix(sample_world_from_splat())
    got = scene.similarity
    assert abs(got.scale / truth.scale - 1) < 0.005
    flip = np.diag([-1.0, -1.0, 1.0])
    rot_err = min(np.abs(got.rotation - truth.rotation).max(),
                  np.abs(got.rotation - flip @ truth.rotation).max())
    assert rot_err < 0.01
    assert np.abs(got.translation - truth.translation).max() < 0.01
    # background written back bit-exactly in the scan's frame
    assert np.array_equal(read_ply(bundle / "background.ply").means, read_ply(scan).means)
    # cameras and previews
    test, probe = load_cameras(bundle / "cameras/test.json"), load_cameras(
        bundle / "cameras/probe.json")
    assert len(test) == 8 and len(probe) == 12
    centre = np.zeros(3)
    for cam in test + probe:  # every generated camera looks at the table centre
        uv, valid = cam.project_world(centre[None])
        assert valid[0] and abs(uv[0, 0] - cam.cx) < 1e-6 and abs(uv[0, 1] - cam.cy) < 1e-6
    import cv2

    for name, shape in (("top", (512, 512)), ("perspective", (480, 640)),
                        ("fisheye", (256, 256))):
        image = cv2.imread(str(bundle / "previews" / f"{name}.png"))
        assert image.shape[:2] == shape and image.std() > 10  # something was rendered
        green = (image[..., 1] > 200) & (image[..., 0] < 100) & (image[..., 2] < 100)
        assert green.sum() > 50, name  # the table rectangle is drawn
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["tool"] == "scene-init/1" and manifest["seed"] == 0
    assert manifest["inputs"]["scan"]["sha256"] == sha256_file(scan)
    assert manifest["outputs"]["background"]["sha256"] == sha256_file(bundle / "background.ply")
    assert manifest["outputs"]["previews/top.png"]["sha256"] == sha256_file(
        bundle / "previews/top.png")
    assert manifest["registration"]["scale_source"] == "table-size"
    assert manifest["counts"]["gaussians"] == 20000
    registration = json.loads((bundle / "scene.json").read_text())["registration"]
    assert registration["tool"] == "scene-init/1" and registration["cameras"] == "generated"


def test_init_is_byte_identical(bundle, scan, tmp_path):
    again = tmp_path / "lab"
    assert main(["scene", "init", "--splat", str(scan), "--out", str(again),
                 "--table-size", "1.2", "0.8", "--keepout", "0", "0", "0.06", "0.3", "0.3",
                 "0.12"]) == 0
    assert _files(again) == _files(bundle)


def test_hole_in_the_ceiling_after_init(bundle, tmp_path):
    out = tmp_path / "hole"
    assert main(["perturb", "--preset", "hole-54", "--scene", str(bundle), "--out",
                 str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["removed"] > 500  # the ceiling above the table is gone
    world = load_scene(out).background
    above = (world.means[:, 2] > 1.0) & (np.hypot(world.means[:, 0], world.means[:, 1]) < 0.5)
    assert not above.any()


def test_edit_moves_table_keepouts_and_rerenders(bundle, tmp_path):
    out = tmp_path / "edited"
    assert main(["scene", "edit", str(bundle), "--out", str(out), "--rotate-z", "90",
                 "--table-height", "0.01"]) == 0
    before, after = load_scene(bundle), load_scene(out)
    assert after.table.height == 0.01
    assert abs(after.table.yaw_deg - 90.0) < 1e-9 and np.allclose(after.table.center, 0, atol=1e-9)
    # keepout carried with the scene: a 90 degree turn keeps its size
    assert np.allclose(after.keepouts[0].size, before.keepouts[0].size)
    # the world turned: splat points land 90 degrees further round
    turned = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]]) @ before.similarity.rotation
    assert np.allclose(after.similarity.rotation, turned, atol=1e-9)
    assert np.allclose(after.background.means[:, :2],
                       before.background.means[:, :2] @ np.array([[0, 1], [-1, 0.0]]), atol=1e-4)
    assert (out / "previews/top.png").read_bytes() != (bundle / "previews/top.png").read_bytes()
    cams = load_cameras(out / "cameras/test.json")  # regenerated around the raised table
    uv, valid = cams[0].project_world(np.array([[0.0, 0.0, 0.01]]))
    assert valid[0] and abs(uv[0, 0] - cams[0].cx) < 1e-6
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "scene-edit/1"
    assert manifest["inputs"]["scene"]["sha256"] == sha256_file(bundle / "scene.json")
    edits = json.loads((out / "scene.json").read_text())["edits"]
    assert edits[-1]["rotate_z_deg"] == 90.0


def test_edit_in_place_and_keepout_numbers(bundle, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    assert main(["scene", "edit", str(copy), "--keepout", "0.3", "0.2", "0.05", "0.1", "0.1",
                 "0.1", "--no-previews"]) == 0
    assert len(load_scene(copy).keepouts) == 2
    assert not (copy / "previews").exists()  # stale previews are not kept
    assert main(["scene", "edit", str(copy), "--remove-keepout", "0", "--scale", "2"]) == 0
    scene = load_scene(copy)
    assert len(scene.keepouts) == 1 and np.allclose(scene.keepouts[0].center, (0.6, 0.4, 0.1))
    assert np.allclose(scene.table.size, (2.4, 1.6))
    assert (copy / "previews/top.png").exists()


def test_edit_errors(bundle, capsys):
    assert main(["scene", "edit", str(bundle)]) == 2
    assert "nothing to edit" in capsys.readouterr().err
    assert main(["scene", "edit", str(bundle), "--remove-keepout", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "valid numbers 0..0" in err


def test_crop_removes_task_object_gaussians(bundle, tmp_path):
    out = tmp_path / "cropped"
    scene = load_scene(bundle)
    box = ("1.45", "1.2", "-0.5", "0.6", "0.45", "0.6")  # the red box prop
    assert main(["scene", "crop", str(bundle), "--out", str(out), "--box", *box]) == 0
    cropped = load_scene(out)
    centre, half = np.array([1.45, 1.2, -0.5]), np.array([0.3, 0.225, 0.3])
    inside = (np.abs(scene.background.means - centre) <= half).all(axis=1)
    assert inside.sum() > 100 and len(cropped.background) == len(scene.background) - inside.sum()
    # untouched Gaussians are written back bit-exactly (splat frame)
    kept = read_ply(bundle / "background.ply").subset(~inside)
    assert np.array_equal(read_ply(out / "background.ply").sh_rest, kept.sh_rest)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "scene-crop/1"
    assert manifest["counts"]["removed"] == int(inside.sum())
    assert manifest["removed_per_box"] == [int(inside.sum())]
    out2 = tmp_path / "cropped-keepouts"
    assert main(["scene", "crop", str(bundle), "--out", str(out2), "--keepouts", "--margin",
                 "0.02", "--no-previews"]) == 0
    assert json.loads((out2 / "manifest.json").read_text())["counts"]["boxes"] == 1


def test_no_table_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 20000
    blob = GaussianSplats(
        means=(rng.normal(size=(n, 3)) * 0.5).astype(np.float32),
        quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.full((n, 3), -4.0, np.float32), opacity_logits=np.full(n, 2.0, np.float32),
        sh_dc=np.zeros((n, 3), np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))
    path = tmp_path / "blob.ply"
    write_ply(path, blob)
    out = tmp_path / "out"
    assert main(["scene", "init", "--splat", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench scene init: error: no table found: searched")
    assert err.count("\n") == 1 and "--up" in err and "--world-from-splat" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["blob.ply"]


def test_real_scan_cli_answers(tmp_path, capsys):
    out = tmp_path / "guitar"
    code = main(["scene", "init", "--splat", str(DATA / "guitar.compressed.ply"), "--out",
                 str(out), "--no-previews"])
    err = capsys.readouterr().err
    assert (code == 0 and out.is_dir()) or (code == 2 and "no table found" in err
                                             and not out.exists())


def test_bad_scans_and_options(scan, tmp_path, capsys):
    room = read_ply(scan)
    means = room.means.copy()
    means[:5] = np.nan
    nan = tmp_path / "nan.ply"
    write_ply(nan, room.replace(means=means))
    assert main(["scene", "init", "--splat", str(nan), "--out", str(tmp_path / "a")]) == 2
    assert "--drop-nonfinite" in capsys.readouterr().err
    out = tmp_path / "b"
    assert main(["scene", "init", "--splat", str(nan), "--out", str(out), "--drop-nonfinite",
                 "--no-previews"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["dropped_nonfinite"] == 5
    linear = tmp_path / "linear.ply"
    write_ply(linear, room.replace(log_scales=np.full_like(room.log_scales, 2.5)))
    assert main(["scene", "init", "--splat", str(linear), "--out", str(tmp_path / "c")]) == 2
    assert "log-scales" in capsys.readouterr().err
    assert main(["scene", "init", "--splat", str(scan), "--out", str(tmp_path / "d"),
                 "--known-distance", "0,0", "1,0,0", "1"]) == 2
    assert "P1 P2 METRES" in capsys.readouterr().err
    assert main(["scene", "init", "--splat", str(scan), "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["scene", "init", "--splat", str(tmp_path / "missing.ply"), "--out",
                 str(tmp_path / "e")]) == 2
    assert "not found" in capsys.readouterr().err


def test_world_from_splat_and_known_distance(scan, tmp_path):
    matrix = tmp_path / "w.json"
    matrix.write_text(json.dumps(sample_world_from_splat().tolist()))
    out = tmp_path / "given"
    assert main(["scene", "init", "--splat", str(scan), "--out", str(out), "--world-from-splat",
                 str(matrix), "--no-previews"]) == 0
    scene = load_scene(out)
    assert np.array_equal(scene.world_from_splat, sample_world_from_splat())
    assert np.allclose(scene.table.center, 0, atol=0.01) and abs(scene.table.height) < 0.005
    truth = Similarity.from_matrix(sample_world_from_splat()).inverse()
    p1, p2 = truth.apply_points(np.array([[0.0, 0, 0], [1.0, 0, 0]]))
    out = tmp_path / "known"
    assert p1.min() < 0 and p2.min() < 0  # negative coordinates parse as values
    assert main(["scene", "init", "--splat", str(scan), "--out", str(out), "--no-previews",
                 "--known-distance", ",".join(map(str, p1)), ",".join(map(str, p2)), "1.0",
                 "--up", ",".join(map(str, truth.rotation @ (0, 0, -1.0) * -1))]) == 0
    scene = load_scene(out)
    assert abs(scene.similarity.scale / 2.5 - 1) < 1e-6
    assert np.allclose(scene.table.size, (1.2, 0.8), rtol=0.01)
    assert math.isclose(scene.table.height, 0.0)
    world = transform_splats(read_ply(scan), scene.world_from_splat)
    assert np.allclose(world.means, scene.background.means)


def test_edit_world_from_splat_refits_and_plain_bundles_keep_cameras(bundle, tmp_path):
    matrix = tmp_path / "w.json"
    turned = np.eye(4)
    turned[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    matrix.write_text(json.dumps((turned @ sample_world_from_splat()).tolist()))
    out = tmp_path / "refit"
    assert main(["scene", "edit", str(bundle), "--out", str(out), "--world-from-splat",
                 str(matrix), "--no-previews"]) == 0
    scene = load_scene(out)
    assert np.allclose(scene.table.center, 0, atol=0.01) and abs(scene.table.height) < 0.005
    assert abs(abs(scene.table.yaw_deg) - 90.0) < 1.0  # long side now along world y
    assert np.allclose(scene.table.size, (1.2, 0.8), rtol=0.01)
    # a bundle not made by init (the sample): cameras are the user's, left as they are
    sample = tmp_path / "sample"
    assert main(["scene", "sample", "--out", str(sample), "--gaussians", "3000"]) == 0
    assert main(["scene", "edit", str(sample), "--table-height", "0.02", "--no-previews"]) == 0
    assert load_scene(sample).table.height == 0.02
    assert main(["scene", "edit", str(sample), "--table-height", "0", "--no-previews"]) == 0
    assert load_scene(sample).table.height == 0.0  # 0 is a value, not "nothing to edit"
    fresh = tmp_path / "fresh"
    assert main(["scene", "sample", "--out", str(fresh), "--gaussians", "3000"]) == 0
    assert (sample / "cameras/test.json").read_bytes() == (fresh / "cameras/test.json").read_bytes()
    assert (sample / "background.ply").read_bytes() == (fresh / "background.ply").read_bytes()
