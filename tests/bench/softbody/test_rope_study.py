"""The rope as a study task: registry, make_env kwargs, policies, spec, CLI, paired study."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bench.sim
from bench.errors import BenchError
from bench.scene.sample import make_sample_scene
from bench.study.spec import StudySpec

SPEC = StudySpec(name="rope-tiny", sample_scenes={"a": 0}, sample_gaussians=2000,
                 conditions=("clean", "hole-54"), tasks=("rope",), trials=2, real_trials=1,
                 max_frames=100, image_size=(32, 32), metrics=("psnr",))


@pytest.fixture(scope="module")
def scene():
    return make_sample_scene(seed=0, n_gaussians=2000)


def test_rope_is_a_registered_task_with_its_env(scene):
    from bench.sim.softbody.rope import RopeEnv
    from bench.sim.softbody.task import ROPE_TASK
    from bench.sim.tasks import TASKS, get_task, is_deformable
    from bench.study.deployment import Deployment

    assert get_task("rope") is ROPE_TASK and get_task("ROPE") is ROPE_TASK
    assert TASKS.entry("rope").meta["env_id"] == "splatbench/Rope-v0"
    assert is_deformable("rope") and not is_deformable("cup")
    # exactly the keywords the study runner passes (max_frames None: the task's 600)
    env = bench.sim.make_env("rope", scene, image_size=(24, 32), max_frames=None,
                             render_backend="cpu", **Deployment().env_overrides())
    assert isinstance(env.unwrapped, RopeEnv) and env.unwrapped.max_frames == 600
    assert env.observation_space["wrist_rgb"].shape == (24, 32, 3)
    env.close()
    env = bench.sim.make_env("rope", scene, obs_mode="state", max_frames=40,
                             controller_gains="stiff")
    unwrapped = env.unwrapped
    assert unwrapped.max_frames == 40 and "object_state" in env.observation_space.spaces
    import mujoco

    model = unwrapped.world.model
    weld = model.eq_solref[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, "mocap_weld")]
    np.testing.assert_allclose(weld, unwrapped.config.controller_solref)  # gain hook applied


@pytest.mark.parametrize("kwargs, match", [
    ({"cameras": "yubi-dual"}, "does not support cameras='yubi-dual'"),
    ({"robot": "arm6"}, "does not support robot='arm6'"),
    ({"control_hz": 20.0}, "does not support control_hz=20.0"),
    ({"wobble": 1}, "has no option 'wobble'"),
])
def test_rope_env_refuses_unsupported_kwargs_in_one_line(scene, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        bench.sim.make_env("rope", scene, obs_mode="state", **kwargs)
    assert "\n" not in str(info.value)


def test_the_rigid_task_env_refuses_the_rope(scene):
    import gymnasium

    with pytest.raises(ValueError, match=r"make_env\('rope', scene\)"):
        gymnasium.make(bench.sim.TASK_ENV_ID, task="rope", scene=scene)


def test_rope_policies_are_registered_and_ranked(scene):
    from bench.policies import POLICIES, make_policy
    from bench.sim.rollout import run_episode

    for name in ("rope-expert", "rope-expert-hasty"):
        assert POLICIES.entry(name).meta["privileged"] is True
        assert POLICIES.entry(name).meta["tasks"] == ("rope",)
    env = bench.sim.make_env("rope", scene, obs_mode="state", max_frames=100)
    runs = {}
    for name in ("rope-expert", "rope-expert-hasty", "hold"):
        policy = make_policy(name, env, seed=0)
        runs[name] = run_episode(env, policy, init_index=100)[0]
    # measured at this commit: the clean expert routes condition 100 in 85 frames, the hasty
    # variant drops the rope at the clip (grasp and lift credit only), hold never moves
    assert runs["rope-expert"].success and runs["rope-expert"].frames == 85
    assert not runs["rope-expert-hasty"].success
    assert 0.2 < runs["rope-expert-hasty"].progress_final < 1.0
    assert runs["hold"].progress_final == 0.0
    again = run_episode(env, make_policy("rope-expert-hasty", env, seed=0), init_index=100)[0]
    assert again.to_dict() == runs["rope-expert-hasty"].to_dict()  # seeded noise: reproducible
    with pytest.raises(ValueError, match="runs on splatbench/Rope-v0 only"):
        make_policy("rope-expert", bench.sim.make_env("cup", scene, obs_mode="state"))


def test_spec_defaults_and_policy_task_checks():
    spec = StudySpec(name="s", sample_scenes={"a": 0}, tasks=("cup", "rope"))
    assert spec.policies == {"cup": ("visual-servo", "visual-glance"),
                             "rope": ("rope-expert", "rope-expert-hasty")}
    spec.validate_registries()
    bad = StudySpec(name="s", sample_scenes={"a": 0}, tasks=("rope",),
                    policies={"rope": ["visual-servo", "rope-expert"]})
    with pytest.raises(BenchError, match="'visual-servo' cannot run on task 'rope'"):
        bad.validate_registries()
    bad = StudySpec(name="s", sample_scenes={"a": 0}, tasks=("cup",),
                    policies={"cup": ["rope-expert", "expert"]})
    with pytest.raises(BenchError, match=r"runs on tasks \['rope'\] only, not 'cup'"):
        bad.validate_registries()


@pytest.mark.slow
def test_rope_study_runs_end_to_end_paired_and_byte_identical(tmp_path):
    from bench.scene.bundle import load_scene
    from bench.study.runner import run_study
    from bench.study.store import ResultsStore

    a, b = tmp_path / "a", tmp_path / "b"
    assert run_study(SPEC, a, progress=False).new_rollouts == 10
    assert run_study(SPEC, b, progress=False).new_rollouts == 10
    for table in ("rollouts", "success_rates", "ranking", "transitions"):
        assert (a / "tables" / f"{table}.csv").read_bytes() == \
            (b / "tables" / f"{table}.csv").read_bytes()
    with ResultsStore(a) as store:
        rows = store.rollouts()
    cells = {(r.condition, r.policy, r.domain, r.trial) for r in rows}
    expected = {(c, p, "sim", t) for c in ("clean", "hole-54")
                for p in ("rope-expert", "rope-expert-hasty") for t in (0, 1)}
    assert cells == expected | {("clean", p, "real", 0)
                                for p in ("rope-expert", "rope-expert-hasty")}
    by_cell = {(r.condition, r.policy, r.domain, r.trial): r for r in rows}
    for policy in ("rope-expert", "rope-expert-hasty"):
        for trial in (0, 1):
            clean = by_cell[("clean", policy, "sim", trial)]
            hole = by_cell[("hole-54", policy, "sim", trial)]
            assert clean.init_index == hole.init_index == 100 + trial  # paired starts
            # privileged experts never look at the background: identical outcomes
            assert (clean.success, clean.frames, clean.progress_final) == \
                (hole.success, hole.frames, hole.progress_final)
            assert clean.manifest_sha256 != hole.manifest_sha256
    # measured at this commit (max_frames 100): expert 2/2, hasty 1/2 in both conditions
    assert sum(by_cell[("clean", "rope-expert", "sim", t)].success for t in (0, 1)) == 2
    assert sum(by_cell[("clean", "rope-expert-hasty", "sim", t)].success for t in (0, 1)) == 1
    # paired: the wrist views differ (damaged background), the rope's physics does not
    envs = [bench.sim.make_env("rope", load_scene(a / "scenes" / "a" / cond), image_size=(32, 32),
                               render_backend="cpu") for cond in ("clean", "hole-54")]
    resets = [env.reset(seed=100) for env in envs]
    assert not np.array_equal(resets[0][0]["wrist_rgb"], resets[1][0]["wrist_rgb"])
    np.testing.assert_array_equal(resets[0][1]["rope_nodes"], resets[1][1]["rope_nodes"])
    for env in envs:
        env.close()
    assert json.loads((a / "study.json").read_text())["tasks"] == ["rope"]


def test_bench_rollout_task_rope(tmp_path, scene, capsys):
    from bench.cli import main
    from bench.scene.bundle import save_scene

    save_scene(scene, tmp_path / "scene")
    args = ["rollout", "--scene", str(tmp_path / "scene"), "--task", "rope", "--episodes", "1",
            "--obs-mode", "state", "--max-frames", "100", "--save-states"]
    assert main([*args, "--policy", "rope-expert", "--out", str(tmp_path / "a")]) == 0
    summary = json.loads((tmp_path / "a" / "episodes.json").read_text())["summary"]
    assert summary["successes"] == 1
    header = (tmp_path / "a" / "states" / "episode_0000.csv").read_text().splitlines()[0]
    assert "rope_end_x" in header and "rope_far_end_z" in header
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["task"] == "rope" and config["policy_meta"]["privileged"] is True
    capsys.readouterr()
    assert main(["task", "validate", "rope"]) == 2  # no rigid task file behind the rope
    assert "deformable" in capsys.readouterr().err.strip()
    for extra, match in ((["--policy", "expert"], "'expert' cannot run on task 'rope'"),
                         (["--policy", "rope-expert", "--cameras", "yubi-dual"],
                          "does not support cameras"),
                         (["--policy", "rope-expert", "--grasp", "friction"],
                          "does not support grasp=GraspConfig")):
        capsys.readouterr()
        assert main([*args, *extra, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0]
        assert not (tmp_path / "bad").exists()
