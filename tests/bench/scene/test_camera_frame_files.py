"""Camera frames are data (issue 30, item 1): every camera file states "world" or "splat".

The JSON list gives each entry a ``"frame"`` key, ``transforms.json`` a top-level one;
files without it (and COLMAP models) take the reader's documented default; a bad or
mixed frame is one line. Readers that render the world-frame background (``bench
render``, ``bench score``'s scene roles) move splat-frame cameras with the bundle's
``world_from_splat``.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from bench.errors import BenchError
from bench.geometry import Similarity
from bench.scene.camera_files import (
    CameraFrameWarning,
    convert_cameras,
    load_camera_file,
    load_cameras,
    move_cameras,
    save_cameras,
)
from bench.scene.cameras import Camera, look_at


def world_from_splat() -> np.ndarray:  # [4, 4] the sample room's: scaled, turned, moved
    from bench.scene.sample import sample_world_from_splat

    return sample_world_from_splat()


def cameras() -> list[Camera]:
    return [Camera("pinhole", 64, 48, 50.0, 50.0, 32.0, 24.0,
                   look_at((1.0 + 0.2 * i, -0.8, 0.6), (0.0, 0.0, 0.0)), name=f"c{i}")
            for i in range(3)]


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("frame", ["world", "splat"])
@pytest.mark.parametrize("name", ["cams.json", "transforms.json"])
def test_frame_round_trip(tmp_path, frame, name):
    path = tmp_path / name
    save_cameras(path, cameras(), frame=frame)
    data = json.loads(path.read_text())
    if name == "transforms.json":
        assert next(iter(data)) == "frame" and data["frame"] == frame  # top level, first
        assert all("frame" not in f for f in data["frames"])
    else:
        assert isinstance(data, list)  # the list keeps its shape for older readers
        assert [next(iter(e)) for e in data] == ["frame"] * 3
        assert {e["frame"] for e in data} == {frame}
    loaded = load_cameras(path)
    assert loaded.frame == frame and [c.name for c in loaded] == ["c0", "c1", "c2"]
    other = "splat" if frame == "world" else "world"
    read = load_camera_file(path, default_frame=other)  # a declared frame beats the default
    assert (read.frame, read.declared, len(read.cameras)) == (frame, True, 3)
    for a, b in zip(read.cameras, cameras(), strict=True):
        np.testing.assert_allclose(a.world_from_camera, b.world_from_camera, atol=1e-12)


def test_object_form_is_read(tmp_path):
    path = tmp_path / "cams.json"
    path.write_text(json.dumps({"frame": "splat", "cameras": [c.to_dict() for c in cameras()]}))
    read = load_camera_file(path, default_frame="world")
    assert (read.frame, read.declared) == ("splat", True)


@pytest.mark.parametrize("default", ["world", "splat"])
def test_files_without_the_key_take_the_readers_default(tmp_path, default):
    legacy = tmp_path / "old.json"  # what every earlier version wrote
    legacy.write_text(json.dumps([c.to_dict() for c in cameras()]))
    assert load_cameras(legacy).frame is None
    read = load_camera_file(legacy, default_frame=default)
    assert (read.frame, read.declared) == (default, False)
    save_cameras(tmp_path / "transforms.json", cameras())  # no frame given: no key
    assert "frame" not in json.loads((tmp_path / "transforms.json").read_text())
    assert load_camera_file(tmp_path / "transforms.json", default_frame=default).frame == default
    save_cameras(tmp_path / "colmap", cameras(), format="colmap-text")
    read = load_camera_file(tmp_path / "colmap", default_frame=default)
    assert (read.frame, read.declared) == (default, False)


def test_colmap_cannot_keep_a_frame_and_says_so(tmp_path):
    with pytest.warns(CameraFrameWarning, match="no place for the camera frame"):
        save_cameras(tmp_path / "m", cameras(), format="colmap-binary", frame="world")
    assert load_camera_file(tmp_path / "m", default_frame="splat").frame == "splat"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no frame given: nothing to drop, no warning
        save_cameras(tmp_path / "n", cameras(), format="colmap-text")


def test_conversion_keeps_the_frame(tmp_path):
    save_cameras(tmp_path / "world.json", cameras(), frame="world")
    convert_cameras(tmp_path / "world.json", tmp_path / "transforms.json")
    assert json.loads((tmp_path / "transforms.json").read_text())["frame"] == "world"
    convert_cameras(tmp_path / "transforms.json", tmp_path / "back.json")
    assert load_cameras(tmp_path / "back.json").frame == "world"


@pytest.mark.parametrize("case", ["entry", "object", "transforms"])
def test_bad_frame_value_is_one_line(tmp_path, case):
    entries = [c.to_dict() for c in cameras()]
    if case == "entry":
        entries[1]["frame"] = "moon"
        content, name = entries, "cams.json"
    elif case == "object":
        content, name = {"frame": "moon", "cameras": entries}, "cams.json"
    else:
        save_cameras(tmp_path / "transforms.json", cameras())
        content = {**json.loads((tmp_path / "transforms.json").read_text()), "frame": "moon"}
        name = "transforms.json"
    (tmp_path / name).write_text(json.dumps(content))
    with pytest.raises(BenchError) as exc:
        load_cameras(tmp_path / name)
    text = _one_line(exc)
    assert "'moon'" in text and '"world"' in text and '"splat"' in text and name in text


def test_bad_frame_arguments_are_one_line(tmp_path):
    with pytest.raises(BenchError, match="'moon'.*use \"world\""):
        save_cameras(tmp_path / "c.json", cameras(), frame="moon")
    assert not (tmp_path / "c.json").exists()
    save_cameras(tmp_path / "c.json", cameras())
    with pytest.raises(BenchError, match="default_frame"):
        load_camera_file(tmp_path / "c.json", default_frame="moon")


def test_mixed_and_partial_frames_refused(tmp_path):
    entries = [c.to_dict() for c in cameras()]
    entries[0]["frame"], entries[2]["frame"] = "world", "splat"
    (tmp_path / "mixed.json").write_text(json.dumps([entries[0], entries[2]]))
    with pytest.raises(BenchError, match="mixes frames") as exc:
        load_cameras(tmp_path / "mixed.json")
    _one_line(exc)
    (tmp_path / "partial.json").write_text(json.dumps(entries[:2]))
    with pytest.raises(BenchError, match='entry 1 has no "frame" while entry 0 says "world"'):
        load_cameras(tmp_path / "partial.json")
    (tmp_path / "top.json").write_text(json.dumps({"frame": "splat", "cameras": entries[:2]}))
    with pytest.raises(BenchError, match="mixes frames"):
        load_cameras(tmp_path / "top.json")
    save_cameras(tmp_path / "transforms.json", cameras(), frame="world")
    data = json.loads((tmp_path / "transforms.json").read_text())
    data["frames"][0]["frame"] = "world"
    (tmp_path / "transforms.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match="once at the top level"):
        load_cameras(tmp_path / "transforms.json")


def test_moved_cameras_see_the_same_points():
    sim = Similarity.from_matrix(world_from_splat())
    assert not sim.is_identity()
    world = cameras()
    splat = move_cameras(world, source="world", target="splat", world_from_splat=sim.matrix())
    back = move_cameras(splat, source="splat", target="world", world_from_splat=sim.matrix())
    points_world = np.array([[0.0, 0.0, 0.0], [0.1, -0.2, 0.05], [-0.15, 0.1, 0.2]])
    points_splat = sim.inverse().apply_points(points_world)
    for w, s, b in zip(world, splat, back, strict=True):
        uv_w, ok_w = w.project_world(points_world)
        uv_s, ok_s = s.project_world(points_splat)
        assert ok_w.all() and ok_s.all()
        np.testing.assert_allclose(uv_s, uv_w, atol=1e-9)  # same pixels: same image
        np.testing.assert_allclose(b.world_from_camera, w.world_from_camera, atol=1e-12)
    assert move_cameras(world, source="world", target="world",
                        world_from_splat=sim.matrix()) == world


def test_render_and_score_read_a_splat_file_in_the_world_frame(tmp_path):
    """bench render moves a declared splat file into the world frame and writes "world"."""
    from bench.cli import main
    from bench.scene.bundle import load_scene, save_scene
    from bench.scene.sample import make_sample_scene
    from metrics.images import read_image
    from metrics.views import scene_cameras

    save_scene(make_sample_scene(seed=0, n_gaussians=600), tmp_path / "room")
    bundle = load_scene(tmp_path / "room")
    # the sample's own camera files say "world"
    role = json.loads((tmp_path / "room" / "cameras" / "test.json").read_text())
    assert {e["frame"] for e in role} == {"world"}
    world = [c.resized(48, 36) for c in scene_cameras(bundle, "test")[:2]]
    save_cameras(tmp_path / "world.json", world, frame="world")
    save_cameras(tmp_path / "splat.json", move_cameras(
        world, source="world", target="splat", world_from_splat=bundle.world_from_splat),
        frame="splat")
    for name in ("world", "splat"):
        argv = ["render", "--scene", tmp_path / "room", "--cameras", tmp_path / f"{name}.json",
                "--out", tmp_path / f"r_{name}", "--backend", "cpu"]
        assert main([str(a) for a in argv]) == 0
        written = load_camera_file(tmp_path / f"r_{name}" / "cameras.json", default_frame="splat")
        assert (written.frame, written.declared) == ("world", True)
        for a, b in zip(written.cameras, world, strict=True):
            np.testing.assert_allclose(a.world_from_camera, b.world_from_camera, atol=1e-9)
    for a, b in zip(sorted((tmp_path / "r_world" / "rgb").iterdir()),
                    sorted((tmp_path / "r_splat" / "rgb").iterdir()), strict=True):
        diff = np.abs(read_image(a).astype(int) - read_image(b).astype(int))
        assert diff.max() <= 1  # the same views, up to float rounding
    # a scene role declared splat is moved into the world frame for scoring
    (tmp_path / "room" / "cameras" / "test.json").write_bytes(
        (tmp_path / "splat.json").read_bytes())
    for a, b in zip(scene_cameras(load_scene(tmp_path / "room"), "test"), world, strict=True):
        np.testing.assert_allclose(a.world_from_camera, b.world_from_camera, atol=1e-9)
