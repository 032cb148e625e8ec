"""StudySpec: JSON loading, defaults, validation messages."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench.errors import BenchError
from bench.study.executors import ExecutorConfig
from bench.study.spec import (
    DEFAULT_POLICIES,
    FIELD_TYPES,
    StudySpec,
    spec_from_dict,
)
from bench.study.spec_file import load_spec


def test_load_resolves_paths_and_defaults(tmp_path):
    (tmp_path / "spec.json").write_text(json.dumps({
        "name": "s1", "scenes": {"lab": "scenes/lab"}, "sample_scenes": {"duo": 3},
        "tasks": ["Cup", "pen"], "policies": {"pen": ["expert", "noisy-expert"]},
        "trials": 4, "image_size": [96, 96], "real_domain": "simulated"}))
    spec, executor = load_spec(tmp_path / "spec.json")
    assert executor == ExecutorConfig()  # no executor key: serial
    assert spec.scenes == {"lab": str((tmp_path / "scenes/lab").resolve())}
    assert spec.scene_names == ["duo", "lab"]
    assert spec.tasks == ("cup", "pen")
    assert spec.policies == {"cup": DEFAULT_POLICIES, "pen": ("expert", "noisy-expert")}
    assert spec.image_size == (96, 96)
    assert spec.conditions[0] == "clean"
    again = spec_from_dict(json.loads(json.dumps(spec.to_json())))  # resolved JSON round-trips
    assert again == spec


@pytest.mark.parametrize(("data", "message"), [
    ({"sample_scenes": {"a": 0}, "bogus": 1}, "unknown spec keys"),
    ({}, "names no scenes"),
    ({"sample_scenes": {"a": 0}, "conditions": ["warp"]}, "must include \"clean\""),
    ({"sample_scenes": {"a": 0}, "trials": 0}, "trials must be >= 1"),
    ({"sample_scenes": {"a": 0}, "policies": {"cup": ["expert", "expert"]}},
     "two different policies"),
    ({"sample_scenes": {"a": 0}, "tasks": ["cup"], "policies": {"pen": ["a", "b"]}},
     "not in tasks"),
    ({"sample_scenes": {"a": 0}, "trials": 20, "sim_condition_offset": 0,
      "real_condition_offset": 10},
     "disjoint"),
    ({"sample_scenes": {"a": 0, "b": 1}, "extra_conditions": {"random-30": {"a": "x"}}},
     "lacks a bundle"),
    # wrong JSON types name the key (were TypeErrors / tracebacks deep in the runner)
    ({"sample_scenes": ["a"]}, "'sample_scenes' must be an object"),
    ({"scenes": ["lab"]}, "'scenes' must be an object"),
    ({"sample_scenes": {"a": 0}, "sample_gaussians": "x"}, "'sample_gaussians' must be an int"),
    ({"sample_scenes": {"a": 0}, "trials": 2.5}, "'trials' must be an integer"),
    ({"sample_scenes": {"a": 0}, "trials": True}, "'trials' must be an integer"),
    ({"sample_scenes": {"a": 0}, "tasks": "cup"}, "'tasks' must be a list"),
    ({"sample_scenes": {"a": 0}, "seed": "x"}, "'seed' must be an integer"),
    ({"sample_scenes": {"a": 0}, "image_size": [64]}, "'image_size' must be \\[height, width\\]"),
    ({"sample_scenes": {"a": 0}, "policies": {"cup": "ab"}}, "'policies' must be an object"),
    ({"sample_scenes": {"a": 0}, "max_frames": "x"}, "'max_frames' must be an integer, null"),
    # values the runner would only refuse after writing bundles and rollouts
    ({"sample_scenes": {"a": 0}, "alpha": 2}, "alpha must be in \\(0, 1\\)"),
    ({"sample_scenes": {"a": 0}, "seed": -1}, "seed must be >= 0"),
    ({"sample_scenes": {"a": 0}, "image_size": [4, 4]}, "image_size must be two pixel counts"),
])
def test_bad_specs(data, message):
    with pytest.raises(BenchError, match=message):
        spec_from_dict(data)


def test_every_field_has_a_type_check():
    assert set(FIELD_TYPES) == {f.name for f in dataclasses.fields(StudySpec)}


def test_bundle_paths_checked_before_running(tmp_path):
    spec = StudySpec(scenes={"lab": str(tmp_path / "nowhere")}, real_domain="simulated")
    with pytest.raises(BenchError, match="'lab'.*not a scene bundle"):
        spec.validate_inputs()
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "scene.json").write_text("{}")
    spec = StudySpec(scenes={"lab": str(tmp_path / "lab")}, real_domain="simulated",
                     extra_conditions={"random-30": {"lab": str(tmp_path / "r30")}})
    with pytest.raises(BenchError, match="extra condition 'random-30', scene 'lab'"):
        spec.validate_inputs()


def test_unknown_render_backend_refused():
    spec = StudySpec(sample_scenes={"a": 0}, tasks=("cup",), render_backend="nope")
    with pytest.raises(ValueError, match="unknown render backend"):
        spec.validate_registries()


def test_registry_names_checked():
    spec = StudySpec(sample_scenes={"a": 0}, conditions=("clean", "hole-45"))
    with pytest.raises(BenchError, match="hole-54"):  # "did you mean"
        spec.validate_registries()
    with pytest.raises(ValueError, match="policy"):
        StudySpec(sample_scenes={"a": 0}, policies={"cup": ("visual-servo", "nope")},
                  tasks=("cup",)).validate_registries()


def test_missing_and_bad_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_spec(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(BenchError, match="not valid JSON"):
        load_spec(tmp_path / "bad.json")


def test_default_starts_share_one_distribution():
    # both default blocks lie past every task's grid, so sim and "real" starts are seeded uniform
    # draws over the same box (offset 0 put the first trials on the grid's first row only)
    from bench.sim.tasks import get_task

    spec = StudySpec(sample_scenes={"a": 0})
    for task in spec.tasks:
        grid = get_task(task).grid
        assert spec.sim_condition_offset >= grid.size
        assert spec.real_condition_offset >= grid.size
