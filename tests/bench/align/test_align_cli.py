"""`bench align color|pose`: outputs, manifests, recovered parameters, one-line errors."""

from __future__ import annotations

import csv
import json

import numpy as np
import trimesh
from scipy.spatial.transform import Rotation

from bench.cli import main


def test_align_color_cli_recovers_the_camera_polynomial(tmp_path):
    import cv2

    from bench.render import render
    from bench.scene.bundle import load_scene, save_scene
    from bench.scene.camera_files import save_cameras
    from bench.scene.cameras import Camera, look_at
    from bench.scene.sample import make_sample_scene

    scene = make_sample_scene(seed=0, n_gaussians=4000)
    save_scene(scene, tmp_path / "scene")
    scene = load_scene(tmp_path / "scene")
    table = np.array([*scene.table.center, scene.table.height])
    cams = [Camera.pinhole_from_fov(48, 40, fov_x_deg=70.0, name=f"cam{i}",
                                    world_from_camera=look_at(table + offset, table))
            for i, offset in enumerate(([0.0, -0.8, 0.6], [0.7, 0.3, 0.5]))]
    save_cameras(tmp_path / "cams.json", cams)
    coeffs = np.array([[0.02, 0.9, 0.1], [0.0, 1.1, -0.15], [0.05, 0.8, 0.0]])
    (tmp_path / "cap").mkdir()
    for cam in cams:
        rgb = np.clip(render(scene.background, cam, backend="cpu").rgb, 0, 1).astype(np.float64)
        mapped = np.stack([np.polynomial.polynomial.polyval(rgb[..., c], coeffs[c])
                           for c in range(3)], -1)
        image = (np.clip(mapped, 0, 1) * 255 + 0.5).astype(np.uint8)
        cv2.imwrite(str(tmp_path / "cap" / f"{cam.name}.png"), image[..., ::-1])
    code = main(["align", "color", "--scene", str(tmp_path / "scene"), "--cameras",
                 str(tmp_path / "cams.json"), "--captures", str(tmp_path / "cap"),
                 "--backend", "cpu", "--out", str(tmp_path / "out")])
    assert code == 0
    fit = json.loads((tmp_path / "out" / "color_fit.json").read_text())
    # 8-bit captures: the fit is exact up to quantisation (1/255 per pixel)
    np.testing.assert_allclose(fit["coefficients"], coeffs, atol=0.03)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["fit"]["iterations"] == 50 and len(manifest["fit"]["residual_rms"]) == 3
    aligned = load_scene(tmp_path / "out" / "scene")
    assert len(aligned.background) == len(scene.background)


def test_align_color_cli_refuses_missing_capture(tmp_path, capsys):
    from bench.scene.bundle import save_scene
    from bench.scene.camera_files import save_cameras
    from bench.scene.cameras import Camera
    from bench.scene.sample import make_sample_scene

    save_scene(make_sample_scene(seed=0, n_gaussians=500), tmp_path / "scene")
    save_cameras(tmp_path / "cams.json", [Camera.pinhole_from_fov(
        16, 16, fov_x_deg=60.0, world_from_camera=np.eye(4), name="front")])
    (tmp_path / "cap").mkdir()
    code = main(["align", "color", "--scene", str(tmp_path / "scene"), "--cameras",
                 str(tmp_path / "cams.json"), "--captures", str(tmp_path / "cap"),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "front.png" in err
    assert not (tmp_path / "out").exists()


def _robot_files(tmp_path):
    base = trimesh.creation.box(extents=(0.08, 0.06, 0.20))
    base.apply_translation((0.0, 0.0, 0.10))
    arm = trimesh.creation.box(extents=(0.18, 0.04, 0.04))
    arm.apply_translation((0.12, 0.0, 0.22))
    base.export(tmp_path / "base.stl")
    arm.export(tmp_path / "arm.stl")
    (tmp_path / "links.json").write_text(json.dumps(
        {"links": {"base": "base.stl", "arm": "arm.stl"}}))
    return base, arm


def test_align_pose_cli_aligns_and_segments(tmp_path):
    from bench.scene.gaussians import GaussianSplats
    from bench.scene.ply import write_ply

    base, arm = _robot_files(tmp_path)
    rng = np.random.default_rng(0)
    points = np.concatenate([trimesh.sample.sample_surface(m, 1500, seed=s)[0]
                             for s, m in enumerate((base, arm))])
    truth = np.eye(4)
    truth[:3, :3] = Rotation.from_rotvec([0.2, -0.3, 0.35]).as_matrix()
    truth[:3, 3] = [0.03, 0.02, -0.04]
    scan = (points - truth[:3, 3]) @ truth[:3, :3] + rng.normal(0, 2e-4, points.shape)
    n = len(scan)
    splats = GaussianSplats(
        means=scan.astype(np.float32), quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.full((n, 3), -5.0, np.float32), opacity_logits=np.zeros(n, np.float32),
        sh_dc=np.zeros((n, 3), np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))
    write_ply(tmp_path / "robot.ply", splats)
    code = main(["align", "pose", "--splats", str(tmp_path / "robot.ply"), "--links",
                 str(tmp_path / "links.json"), "--out", str(tmp_path / "out")])
    assert code == 0
    result = json.loads((tmp_path / "out" / "alignment.json").read_text())
    # the strict 1 mm / 0.1 deg golden check is test_pose.py; here sparser scans (1,500 a link)
    np.testing.assert_allclose(np.array(result["model_from_splat"]), truth, atol=5e-3)
    assert result["rmse_m"] < 5e-3  # nearest-sample distance at 2,000 points a link (~6 mm apart)
    with open(tmp_path / "out" / "labels.csv") as handle:
        labels = [row["link"] for row in csv.DictReader(handle)]
    want = ["base"] * 1500 + ["arm"] * 1500
    assert np.mean(np.array(labels) == np.array(want)) > 0.99
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["counts"]["links"] == 2


def test_align_pose_cli_refuses_a_missing_mesh(tmp_path, capsys):
    (tmp_path / "links.json").write_text(json.dumps({"links": {"base": "nope.stl"}}))
    (tmp_path / "robot.ply").write_bytes(b"")
    code = main(["align", "pose", "--splats", str(tmp_path / "robot.ply"), "--links",
                 str(tmp_path / "links.json"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()
