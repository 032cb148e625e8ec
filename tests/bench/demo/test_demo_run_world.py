"""The ``world`` real domain of a study: spec validation, envs, labels, executors, resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.study.executors import ExecutorConfig
from bench.study.runner import run_study
from bench.study.spec import StudySpec, spec_from_dict
from bench.study.store import ResultsStore
from bench.study.world_domain import WORLD_REAL, WorldDomain, make_domain_env

WORLD = {"worlds": {"duo": "gt-duo"}, "cameras": "wrist", "shadows": False}
SPEC = StudySpec(name="w", sample_scenes={"duo": 0}, sample_gaussians=2000,
                 conditions=("clean", "hole-90"), tasks=("cup",), trials=1, real_trials=2,
                 image_size=(32, 32), max_frames=40, metrics=("psnr",), obs_policy_every=0,
                 real_domain="world", real_world=WORLD)
TABLES = ("rollouts.csv", "success_rates.csv", "ranking.csv", "transitions.csv", "quality.csv",
          "conditions.csv")


def test_spec_resolves_world_defaults_and_round_trips():
    assert SPEC.real_world == {**WorldDomain().to_json(), **WORLD}
    assert SPEC.rolls_out_real and not SPEC.simulated_real
    assert spec_from_dict(SPEC.to_json()) == SPEC


@pytest.mark.parametrize(("change", "message"), [
    ({"real_world": {"worlds": {}}}, "needs a ground-truth world for every scene; add "
     "real_world.worlds entries for \\['duo'\\]"),
    ({"real_world": {**WORLD, "worlds": {"duo": "gt-duo", "lab": "gt-g2"}}},
     "real_world.worlds names scenes \\['lab'\\] that are not in the spec"),
    ({"real_world": {**WORLD, "tilt": 3}}, "unknown real_world keys \\['tilt'\\]; valid keys"),
    ({"real_world": {**WORLD, "cameras": "head"}}, "real_world cameras must be one of"),
    ({"real_world": {**WORLD, "friction_scale": 0}}, "friction_scale must be in \\(0, 10\\]"),
    ({"real_world": {**WORLD, "shadows": "yes"}}, "shadows must be true or false"),
    ({"real_world": {**WORLD, "mesh_lights": {"lab": {}}}},
     "mesh_lights names scenes \\['lab'\\] without a world"),
    ({"real_world": {**WORLD, "mesh_lights": {"duo": {"ambient": [1, 1, 1]}}}},
     "mesh_lights\\['duo'\\] is malformed"),
    ({"real_world": {**WORLD, "mesh_lights": [1]}}, "mesh_lights must be an object"),
    ({"real_world": [1]}, "spec key 'real_world' must be an object"),
    ({"real_domain": "simulated"}, "real_world is for real_domain \"world\""),
    ({"real_results": "x.csv"}, "give either real_results or real_domain \"world\""),
])
def test_bad_world_specs_are_refused_in_one_line(change, message):
    with pytest.raises(BenchError, match=message) as info:
        spec_from_dict({**SPEC.to_json(), **change})
    assert "\n" not in str(info.value)


def test_unknown_world_is_refused_by_the_registry_check():
    spec = SPEC.replace(real_world={**WORLD, "worlds": {"duo": "gt-dou"}})
    with pytest.raises(BenchError, match="real_world.worlds\\['duo'\\]: unknown ground-truth "
                       "world 'gt-dou'; choose one of"):
        spec.validate_registries()


def _bundle():
    import dataclasses

    from bench.scene.sample import make_sample_scene

    return dataclasses.replace(make_sample_scene(seed=0, n_gaussians=2000), name="duo")


def test_mesh_lights_light_only_the_simulated_domain_and_a_callers_decorator_wins():
    from bench.sim.lighting import FIT_DIRECTIONS, MeshLights

    lights = MeshLights(ambient=(0.3, 0.2, 0.1), headlight=(0.05, 0.05, 0.05),
                        directional=((0.1, 0.1, 0.1),) * len(FIT_DIRECTIONS))
    spec = SPEC.replace(real_world={**WORLD, "mesh_lights": {"duo": lights.to_json()}})
    envs = {d: make_domain_env(spec, scene="duo", task="cup", domain=d, bundle=_bundle(),
                               overrides={"image_size": (32, 32)}) for d in ("sim", "real")}
    own = make_domain_env(spec, scene="duo", task="cup", domain="sim", bundle=_bundle(),
                          overrides={"image_size": (32, 32), "world_decorator": lambda s: None})
    try:
        sim, real = (envs[d].unwrapped.world.model for d in ("sim", "real"))
        np.testing.assert_allclose(sim.vis.headlight.ambient, lights.ambient, rtol=1e-6)
        assert sim.nlight == own.unwrapped.world.model.nlight + len(FIT_DIRECTIONS)
        assert not np.allclose(real.vis.headlight.ambient, lights.ambient)
        assert not np.allclose(own.unwrapped.world.model.vis.headlight.ambient, lights.ambient)
    finally:
        for env in (*envs.values(), own):
            env.close()


def test_domain_envs_share_the_rig_and_differ_in_world():
    overrides = {"image_size": (32, 32), "max_frames": 40}
    spec = SPEC.replace(real_world={**WORLD, "cameras": "yubi-dual", "tilt_deg": 30.0})
    sim = make_domain_env(spec, scene="duo", task="cup", domain="sim", bundle=_bundle(),
                          overrides=overrides)
    real = make_domain_env(spec, scene="duo", task="cup", domain="real", bundle=None,
                           overrides=overrides)
    try:
        assert sim.observation_space == real.observation_space
        assert sim.unwrapped.config.background == "gaussian"
        assert real.unwrapped.config.background == "none"
        # the room is in the real model only (visual geoms), the rig is tilted in both
        assert real.unwrapped.world.model.ngeom > sim.unwrapped.world.model.ngeom + 50
        for a, b in zip(sim.unwrapped.rig, real.unwrapped.rig, strict=True):
            np.testing.assert_array_equal(a.pose, b.pose)
        from bench.worlds.real import demo_rig

        tilted = demo_rig(sim.unwrapped.config, sim.unwrapped.world.robot, tilt_deg=30.0)
        np.testing.assert_array_equal(sim.unwrapped.rig[0].pose, tilted[0].pose)
        obs_sim, _ = sim.reset(seed=1000)
        obs_real, _ = real.reset(seed=1000)
        np.testing.assert_array_equal(obs_sim["proprio"], obs_real["proprio"])
        assert not np.array_equal(obs_sim["wrist_left_rgb"], obs_real["wrist_left_rgb"])
    finally:
        sim.close()
        real.close()


def test_physics_offset_scales_only_the_task_objects():
    spec = SPEC.replace(real_world={**WORLD, "friction_scale": 0.5, "mass_scale": 2.0})
    base = make_domain_env(SPEC, scene="duo", task="cup", domain="real", bundle=None,
                           overrides={"obs_mode": "state"})
    offset = make_domain_env(spec, scene="duo", task="cup", domain="real", bundle=None,
                             overrides={"obs_mode": "state"})
    try:
        m0, m1 = base.unwrapped.world.model, offset.unwrapped.world.model
        bodies = sorted(base.unwrapped.world._object_ids.values())  # noqa: SLF001
        others = [b for b in range(m0.nbody) if b not in bodies]
        np.testing.assert_allclose(m1.body_mass[bodies], 2.0 * m0.body_mass[bodies])
        np.testing.assert_array_equal(m1.body_mass[others], m0.body_mass[others])
        geoms = np.isin(m0.geom_bodyid, bodies)
        assert geoms.any()
        np.testing.assert_allclose(m1.geom_friction[geoms], 0.5 * m0.geom_friction[geoms])
        np.testing.assert_array_equal(m1.geom_friction[~geoms], m0.geom_friction[~geoms])
    finally:
        base.close()
        offset.close()


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world") / "serial"
    run_study(SPEC, out, progress=False)
    return out


def test_world_rows_are_labelled(serial):
    import csv
    import json

    manifest = json.loads((serial / "real_results.json").read_text())
    assert manifest["kind"] == WORLD_REAL and manifest["worlds"] == {"duo": "gt-duo"}
    assert manifest["params"]["real_world"]["shadows"] is False
    with open(serial / "tables" / "success_rates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["source"] for r in rows if r["domain"] == "real"} == {WORLD_REAL}
    assert {r["source"] for r in rows if r["domain"] == "sim"} == {"simulation"}
    with ResultsStore(serial) as store:
        real = [r for r in store.rollouts() if r.domain == "real"]
    assert len(real) == 2 * 2 and {r.init_index for r in real} == {1000, 1001}


def _same_results(a: Path, b: Path) -> None:
    for name in TABLES:
        assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
    with ResultsStore(a) as sa, ResultsStore(b) as sb:
        assert sa.rollouts() == sb.rollouts()


@pytest.mark.slow
def test_process_executor_gives_the_serial_rows(serial, tmp_path):
    out = tmp_path / "process"
    run_study(SPEC, out, progress=False, executor=ExecutorConfig(kind="process", workers=2))
    _same_results(serial, out)


@pytest.mark.slow
def test_ray_executor_gives_the_serial_rows(serial, tmp_path):
    pytest.importorskip("ray")  # the optional extra
    out = tmp_path / "ray"
    run_study(SPEC, out, progress=False, executor=ExecutorConfig(kind="ray", workers=2))
    _same_results(serial, out)


def test_resume_reruns_nothing_and_refuses_another_world(serial, tmp_path):
    import shutil

    out = tmp_path / "resumed"
    shutil.copytree(serial, out)
    with ResultsStore(out) as store:  # a run killed after its first real rollout
        keep = [r for r in store.rollouts() if r.domain == "real"][:1]
    import sqlite3

    with sqlite3.connect(out / "results.sqlite") as db:
        db.execute("DELETE FROM rollouts WHERE NOT (domain = 'real' AND trial = ? AND policy = ?)",
                   (keep[0].trial, keep[0].policy))
    result = run_study(SPEC, out, resume=True, progress=False)
    assert result.new_rollouts == 2 * 2 - 1 + 2 * 2  # the 3 other real + 4 simulated rollouts
    _same_results(serial, out)
    other = SPEC.replace(real_world={**WORLD, "worlds": {"duo": "gt-g2"}})
    with pytest.raises(BenchError, match="holds a study with a different spec"):
        run_study(other, out, resume=True, progress=False)
