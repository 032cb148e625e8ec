"""The procedural sample room and `bench scene sample|info`."""

import json
import math

import numpy as np
import pytest

from bench.cli import main
from bench.provenance import sha256_file
from bench.scene.bundle import load_scene, save_scene
from bench.scene.camera_files import load_cameras
from bench.scene.gaussians import SH_C0
from bench.scene.sample import CEILING_Z, FLOOR_Z, make_sample_scene


@pytest.fixture(scope="module")
def room():
    return make_sample_scene(seed=0, n_gaussians=6000)


def test_layout(room):
    s = room.background
    assert len(s) == 6000 and s.sh_degree == 3
    assert room.table.height == 0.0 and room.table.size == (1.2, 0.8)
    z = s.means[:, 2]
    assert z.min() >= FLOOR_Z - 0.05 and z.max() <= CEILING_Z + 0.05
    top = room.table.contains_xy(s.means[:, :2]) & (np.abs(z) < 0.01)
    assert top.sum() > 300  # a dense textured table top at z = 0
    assert np.std(s.rgb()[top], axis=0).max() > 0.03  # textured, not flat colour
    lights = (z > CEILING_Z - 0.05) & (s.rgb().min(axis=1) > 0.9)
    assert lights.sum() > 50
    above_table = room.table.contains_xy(s.means[lights, :2], margin=0.3)
    assert above_table.all()  # the light panels hang over the table
    colours = s.rgb()[~top & ~lights]
    assert (colours[:, 0] - colours[:, 2]).max() > 0.4  # a red prop
    assert (colours[:, 2] - colours[:, 0]).max() > 0.3  # a blue prop
    assert np.abs(s.sh_rest).max() < 0.2 and np.abs(s.sh_rest).max() > 0
    assert room.keepouts and room.cameras == {"test": "cameras/test.json",
                                              "obs_probe": "cameras/probe.json"}


def test_registration_is_non_trivial(room):
    sim = room.similarity
    assert sim.scale == pytest.approx(2.5)
    assert not np.allclose(sim.rotation, np.eye(3)) and np.linalg.norm(sim.translation) > 0.1


def test_cameras_look_at_the_table(room, tmp_path):
    save_scene(room, tmp_path / "r")
    for role in ("test", "obs_probe"):
        cams = load_cameras(tmp_path / "r" / room.cameras[role])
        assert len(cams) >= 8
        for cam in cams:
            camera_from_world = np.linalg.inv(cam.world_from_camera)
            centre = camera_from_world @ np.array([0.0, 0.0, 0.0, 1.0])
            assert centre[2] > 0  # in front of the camera
            u = cam.fx * centre[0] / centre[2] + cam.cx
            v = cam.fy * centre[1] / centre[2] + cam.cy
            assert math.hypot(u - cam.cx, v - cam.cy) < 2  # table centre at the image centre


def test_deterministic_bytes_and_seed_changes(tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        save_scene(make_sample_scene(seed=seed, n_gaussians=2000), tmp_path / name)
    a, b, c = ((tmp_path / n / "background.ply").read_bytes() for n in "abc")
    assert a == b and a != c
    scene_a, scene_b = ((tmp_path / n / "scene.json").read_bytes() for n in "ab")
    assert scene_a == scene_b


def test_saved_room_loads_back_in_world_frame(room, tmp_path):
    save_scene(room, tmp_path / "r")
    loaded = load_scene(tmp_path / "r")
    np.testing.assert_allclose(loaded.background.means, room.background.means, atol=2e-6)
    np.testing.assert_allclose(loaded.background.sh_dc, room.background.sh_dc)
    assert SH_C0 * loaded.background.sh_dc.max() + 0.5 <= 1.0 + 1e-6


def test_cli_sample_and_info(tmp_path, capsys):
    assert main(["scene", "sample", "--out", str(tmp_path / "s"), "--seed", "1",
                 "--gaussians", "1500"]) == 0
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["tool"] == "sample-room/1" and manifest["seed"] == 1
    assert manifest["params"] == {"n_gaussians": 1500} and manifest["counts"] == {"gaussians": 1500}
    assert manifest["outputs"]["background"]["sha256"] == sha256_file(tmp_path / "s" /
                                                                     "background.ply")
    assert main(["scene", "info", str(tmp_path / "s"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["gaussians"] == 1500 and info["sh_degree"] == 3 and info["frame"] == "world"
    assert info["table"]["size"] == [1.2, 0.8] and info["memory_bytes"] > 1500 * 59 * 4
    assert main(["scene", "info", str(tmp_path / "s" / "background.ply")]) == 0
    text = capsys.readouterr().out
    assert "1,500 (SH degree 3)" in text and "file frame" in text
    assert main(["scene", "sample", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bench scene sample: error: output directory {tmp_path / 's'} exists; "
                   "pass --overwrite or choose another --out"]
    assert main(["scene", "sample", "--out", str(tmp_path / "neg"), "--seed", "-1"]) == 2
    assert capsys.readouterr().err.strip() == ("bench scene sample: error: --seed must be a "
                                               "non-negative integer, got -1")
    assert not (tmp_path / "neg").exists()
    assert main(["scene", "info", str(tmp_path / "missing")]) == 2
    assert "bench scene info: error:" in capsys.readouterr().err


def test_rendered_views_are_closed_surfaces(room, tmp_path):
    # the room must look like a room, not a point cloud: every view is (almost) fully covered
    render = pytest.importorskip("bench.render").render
    save_scene(room, tmp_path / "r")
    loaded = load_scene(tmp_path / "r")
    full = make_sample_scene(seed=0)  # the default density the demo and docs use
    for role in ("test", "obs_probe"):
        for cam in load_cameras(tmp_path / "r" / room.cameras[role])[::4]:
            out = render(full.background, cam, backend="cpu")
            assert (out.alpha > 0.95).mean() > 0.98, cam.name
            assert np.isfinite(out.depth).mean() > 0.98
            sparse = render(loaded.background, cam, backend="cpu")  # 6,000 Gaussians
            assert (sparse.alpha > 0.5).mean() > 0.9, cam.name


def test_cli_info_reports_dropped_nonfinite(tmp_path, capsys):
    from bench.scene.ply import read_ply, write_ply

    save_scene(make_sample_scene(seed=0, n_gaussians=500), tmp_path / "s")
    ply = tmp_path / "s" / "background.ply"
    splats = read_ply(ply)
    splats.means[[3, 7], 0] = np.nan  # two damaged Gaussians
    write_ply(ply, splats)
    for target in (tmp_path / "s", ply):
        assert main(["scene", "info", str(target), "--drop-nonfinite", "--json"]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["gaussians"] == 498
        assert "warning: " in captured.err and "dropped 2 Gaussians with NaN/Inf" in captured.err
