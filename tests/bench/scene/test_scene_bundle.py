"""Scene bundles: save/load, registration round trip, table spec, validation."""

import json
import math
import warnings

import numpy as np
import pytest

from bench.errors import BenchError
from bench.geometry import Similarity
from bench.scene.bundle import (
    KeepoutBox,
    SceneBundle,
    SceneWarning,
    TableSpec,
    load_scene,
    save_scene,
)
from bench.scene.gaussians import GaussianSplats
from bench.scene.transforms import transform_splats


def world_splats(n=300, seed=0):
    rng = np.random.default_rng(seed)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    means = rng.uniform([-1, -1, -0.5], [1, 1, 1.5], (n, 3)).astype(np.float32)
    return GaussianSplats(means, f(n, 4), f(n, 3) - 3, f(n), f(n, 3), 0.1 * f(n, 15, 3))


def registration():
    m = np.eye(4)
    c, s = math.cos(0.7), math.sin(0.7)
    m[:3, :3] = 2.5 * np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    m[:3, 3] = (0.3, -0.2, 0.5)
    return m


def bundle(**kw):
    args = dict(name="t", background=world_splats(), world_from_splat=registration(),
                table=TableSpec(center=(0.1, 0.0), size=(1.2, 0.8), yaw_deg=20.0, height=0.0),
                keepouts=(KeepoutBox((0, 0, 0.05), (0.1, 0.1, 0.1)),),
                cameras={"test": "cameras/test.json"},
                files={"cameras/test.json": b"[]\n"}, extra_json={"custom": {"a": 1}})
    args.update(kw)
    return SceneBundle(**args)


def test_save_load_registration_round_trip(tmp_path):
    b = bundle()
    save_scene(b, tmp_path / "s")
    data = json.loads((tmp_path / "s" / "scene.json").read_text())
    assert data["format"] == "splatbench-scene/1" and data["custom"] == {"a": 1}
    assert data["background"] == "background.ply"
    assert data["cameras"] == {"test": "cameras/test.json"}
    np.testing.assert_array_equal(np.array(data["world_from_splat"]), registration())
    loaded = load_scene(tmp_path / "s")
    # the background is stored in splat coordinates and mapped back to world on load
    np.testing.assert_allclose(loaded.background.means, b.background.means, atol=1e-6)
    np.testing.assert_allclose(loaded.background.sh_rest, b.background.sh_rest, atol=1e-6)
    assert loaded.table == b.table and loaded.keepouts == b.keepouts
    assert loaded.extra_json == {"custom": {"a": 1}}
    # on disk: splat frame = inverse registration applied to the world Gaussians
    from bench.scene.ply import read_ply

    stored = read_ply(tmp_path / "s" / "background.ply")
    expected = transform_splats(b.background, Similarity.from_matrix(registration()).inverse())
    np.testing.assert_allclose(stored.means, expected.means, atol=1e-6)


def test_loaded_bundle_saves_bit_exactly_and_copies_folders(tmp_path):
    save_scene(bundle(), tmp_path / "a")
    (tmp_path / "a" / "objects").mkdir()
    (tmp_path / "a" / "objects" / "cup.obj").write_text("v 0 0 0\n")
    loaded = load_scene(tmp_path / "a")
    save_scene(loaded, tmp_path / "b")
    for rel in ("background.ply", "scene.json", "cameras/test.json", "objects/cup.obj"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_replaced_background_is_transformed_not_cached(tmp_path):
    save_scene(bundle(), tmp_path / "a")
    loaded = load_scene(tmp_path / "a")
    moved = loaded.background.replace(means=loaded.background.means + np.float32(1.0))
    save_scene(loaded.replace(background=moved), tmp_path / "b")
    with pytest.warns(SceneWarning):  # everything moved 1 m up: the table is now below it
        again = load_scene(tmp_path / "b")
    np.testing.assert_allclose(again.background.means, moved.means, atol=2e-6)


def test_overwrite_refused(tmp_path):
    save_scene(bundle(), tmp_path / "a")
    with pytest.raises(BenchError, match="exists; pass --overwrite"):
        save_scene(bundle(), tmp_path / "a")
    save_scene(bundle(name="x"), tmp_path / "a", overwrite=True)
    assert json.loads((tmp_path / "a" / "scene.json").read_text())["name"] == "x"


def test_table_footprint_in_rotated_frame():
    table = TableSpec(center=(1.0, 2.0), size=(2.0, 0.4), yaw_deg=90.0)
    # yaw 90: the 2 m side runs along world y
    inside = table.contains_xy(np.array([[1.0, 2.9], [1.15, 2.0], [1.0, 3.1], [1.3, 2.0]]))
    np.testing.assert_array_equal(inside, [True, True, False, False])
    assert table.contains_xy(np.array([[1.3, 2.0]]), margin=0.11)[0]
    local = np.random.default_rng(0).uniform(-1, 1, (10, 2))
    np.testing.assert_allclose(table.to_local(table.to_world(local)), local, atol=1e-12)


@pytest.mark.parametrize("size", [(0.0, 1.0), (1.0, -0.5)])
def test_empty_table_footprint(size):
    with pytest.raises(BenchError, match="table footprint is empty"):
        TableSpec(size=size)


def test_table_outside_scene_warns(tmp_path):
    save_scene(bundle(table=TableSpec(center=(5.0, 0.0), size=(1.0, 1.0))), tmp_path / "far")
    with pytest.warns(SceneWarning, match="outside the background bounds"):
        load_scene(tmp_path / "far")
    save_scene(bundle(), tmp_path / "near")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_scene(tmp_path / "near")


def test_load_errors(tmp_path):
    with pytest.raises(BenchError, match="not found"):
        load_scene(tmp_path / "missing")
    (tmp_path / "d").mkdir()
    with pytest.raises(BenchError, match="scene.json not found"):
        load_scene(tmp_path / "d")
    (tmp_path / "d" / "scene.json").write_text('{"format": "other"}')
    with pytest.raises(BenchError, match="expected 'splatbench-scene/1'"):
        load_scene(tmp_path / "d")
    save_scene(bundle(), tmp_path / "r")
    data = json.loads((tmp_path / "r" / "scene.json").read_text())
    data["world_from_splat"][0][0] *= 1.5  # no longer s * R
    (tmp_path / "r" / "scene.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match="not orthonormal"):
        load_scene(tmp_path / "r")


def test_require_table():
    with pytest.raises(BenchError, match="has no table spec"):
        bundle(table=None).require_table()


def test_keepout_distance():
    box = KeepoutBox((0, 0, 0), (2, 2, 2))
    d = box.distance(np.array([[0, 0, 0], [2, 0, 0], [2, 2, 1]]))
    np.testing.assert_allclose(d, [0.0, 1.0, math.sqrt(2)])
