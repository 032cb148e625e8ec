"""Wrist-visible damage on the demo's reconstructions (issue 12 item 4): the measurement of
:mod:`bench.demo.visibility` on one shipped world, one task, small images, one rollout."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bench.demo.visibility import (
    VisibilityConfig,
    cell_rows,
    changed_pixels,
    main,
    measure_visibility,
    preset_rows,
    write_outputs,
)
from bench.errors import BenchError

# one reconstruction (gt-flat), Cup, the first simulated start, 24 x 24 fisheyes
SMALL = VisibilityConfig(scenes=("flat",), tasks=("cup",), presets=("clean", "hole-90"),
                         conditions=1, image_size=(24, 24))


@pytest.fixture(scope="module")
def measured():
    return measure_visibility(SMALL)


def test_hole_90_changes_tilted_wrist_pixels_of_a_reconstruction(measured):
    assert measured.observations >= 3  # reset + executed chunks of the expert's rollout
    (cell,) = measured.cells
    assert cell.world == "gt-flat" and cell.task == "cup"
    # visible damage: well above one pixel per frame, at the "> 8 levels" threshold
    assert measured.fraction("hole-90", 8) > 0.01, measured.fraction("hole-90", 8)
    assert measured.fraction("hole-90", 0) >= measured.fraction("hole-90", 8)
    # the tilted rig looks at the ceiling, the untilted one hardly
    assert measured.ceiling() > measured.ceiling(untilted=True) + 0.05


def test_clean_against_clean_changes_exactly_nothing(measured):
    # the clean bundle loaded a second time: the renders are bit-identical, no noise floor
    assert measured.fraction("clean", 0) == 0.0
    assert all(n == 0 for n in measured.cells[0].changed["clean"].values())


def test_same_config_gives_the_same_tables(measured, tmp_path):
    again = measure_visibility(SMALL)
    assert preset_rows(SMALL, again) == preset_rows(SMALL, measured)
    assert cell_rows(SMALL, again) == cell_rows(SMALL, measured)
    write_outputs(tmp_path / "a", SMALL, measured)
    write_outputs(tmp_path / "b", SMALL, again)
    names = sorted(p.name for p in (tmp_path / "a").iterdir() if not p.name.startswith("."))
    assert names == ["ceiling.csv", "ceiling.md", "config.json", "manifest.json",
                     "visibility.csv", "visibility.md", "visibility_cells.csv",
                     "visibility_cells.md"]
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["tool"] == "demo-visibility/2"
    assert set(manifest["inputs"]) == {"flat/scene.json", "flat/background.ply"}
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["tilt_deg"] == 45.0 and config["profile"] == "cup"  # resolved


def test_the_clean_render_is_the_demo_envs_observation():
    """The measurement renders what the demo's simulated env gives the policy, bit for bit,
    at the reset and after executed chunks (the live state the env renders)."""
    from bench.policies.base import make_policy
    from bench.scene.bundle import load_scene
    from bench.sim.observation import ObservationRenderer
    from bench.study.work_unit import make_study_env

    spec = SMALL.study_spec()
    bundle = load_scene(spec.scenes["flat"])
    env = make_study_env(spec, scene="flat", task="cup", domain="sim", bundle=bundle)
    state_env = make_study_env(spec, scene="flat", task="cup", domain="sim", bundle=bundle,
                               obs_mode="state")
    base = state_env.unwrapped
    renderer = ObservationRenderer(base.world, bundle, base.config, rig=base.rig)
    try:
        obs, info = env.reset(seed=100)
        state_env.reset(seed=100)
        policy = make_policy("expert", env)
        for _ in range(2):  # reset + one executed chunk
            images = renderer.render_cameras()
            assert sorted(images) == ["wrist_left_rgb", "wrist_right_rgb"]
            for key, image in images.items():
                assert image.shape == (24, 24, 3)
                np.testing.assert_array_equal(image, obs[key])
            action = policy.act(obs, info)
            obs, _, _, _, info = env.step(action)
            state_env.step(action)
    finally:
        renderer.close()
        env.close()
        state_env.close()


def test_changed_pixels_counts_inside_the_circle_above_each_threshold():
    clean = np.zeros((2, 3, 3), np.uint8)
    damaged = clean.copy()
    damaged[0, 0] = (0, 9, 0)    # > 8 in one channel
    damaged[0, 1] = (8, 8, 8)    # > 0 but not > 8
    damaged[1, 2] = (255, 0, 0)  # outside the image circle
    valid = np.ones((2, 3), bool)
    valid[1, 2] = False
    assert changed_pixels(clean, damaged, valid, (0, 8)) == {0: 2, 8: 1}
    # a darker damaged pixel counts too (no uint8 wrap-around)
    assert changed_pixels(damaged, clean, valid, (0, 8)) == {0: 2, 8: 1}


def test_sample_room_mode_still_measures():
    config = VisibilityConfig(scenes=("sample",), tasks=("cup",), presets=("hole-90",),
                              conditions=1, image_size=(24, 24), sample_gaussians=3000)
    result = measure_visibility(config)
    assert result.cells[0].world == "sample-room"
    assert result.fraction("hole-90", 8) > 0.01


def test_bad_config_is_refused_with_the_fix():
    with pytest.raises(BenchError, match="choose from"):
        VisibilityConfig(scenes=("gt-duo",))
    with pytest.raises(BenchError, match="--presets"):
        VisibilityConfig(presets=("hole-45",))
    with pytest.raises(BenchError, match="increasing"):
        VisibilityConfig(thresholds=(8, 0))


def test_visibility_cli_refuses_bad_input_before_measuring(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "v"), "--size", "4"]) == 2
    assert ">= 8" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "v"), "--tasks", "cups"]) == 2
    assert "unknown visibility tasks" in capsys.readouterr().err
    existing = tmp_path / "exists"
    existing.mkdir()
    assert main(["--out", str(existing)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert not (tmp_path / "v").exists() and list(existing.iterdir()) == []


def test_visibility_cli_refuses_unsafe_out_before_measuring(tmp_path, capsys, monkeypatch):
    import bench.demo.visibility as visibility

    def fail(*args, **kwargs):
        raise AssertionError("measured before --out was checked")

    monkeypatch.setattr(visibility, "measure_visibility", fail)
    scan = tmp_path / "scan"  # a user's directory, not written by the bench
    scan.mkdir()
    (scan / "keep.txt").write_text("precious")
    assert main(["--out", str(scan), "--overwrite", "--scenes", "flat"]) == 2
    assert "not written by the bench" in capsys.readouterr().err
    assert [p.name for p in scan.iterdir()] == ["keep.txt"]
    bundle = SMALL.study_spec().scenes["flat"]  # the shipped reconstruction measured
    inside = f"{bundle}/visibility-out"
    assert main(["--out", inside, "--scenes", "flat"]) == 2
    assert "lies inside the input" in capsys.readouterr().err
    assert not os.path.exists(inside)
