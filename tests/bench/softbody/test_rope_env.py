"""splatbench/Rope-v0: Gymnasium contract, determinism, rope coupled to the gripper."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import bench.sim  # noqa: F401 - registers the env ids
from bench.scene.sample import make_sample_scene
from bench.sim.softbody.rope import ROPE_NODES, clip_crossings


@pytest.fixture(scope="module")
def scene():
    return make_sample_scene(seed=0, n_gaussians=3000)


def test_rope_env_contract_and_determinism(scene):
    from gymnasium.utils.env_checker import check_env

    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode="state", control="single")
    check_env(env.unwrapped, skip_render_check=True)
    runs = []
    for _ in range(2):
        obs, info = env.reset(seed=4)
        action = np.array([0.01, 0.0, -0.02, 0.0, 0.0, 0.1, 0.05], np.float32)
        for _ in range(5):
            obs, reward, terminated, truncated, info = env.step(action)
        runs.append(obs["object_state"].copy())
        assert obs["object_state"].shape == (3 * ROPE_NODES,)
        assert 0.0 <= reward <= 1.0 and not terminated and not truncated
    np.testing.assert_array_equal(runs[0], runs[1])
    obs_other, _ = env.reset(seed=5)
    assert not np.array_equal(obs_other["object_state"], env.reset(seed=4)[0]["object_state"])
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3))


def test_rope_rests_on_the_table(scene):
    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode="state", control="single")
    env.reset(seed=0)
    env.step(np.array([0, 0, 0, 0, 0, 0, 0.09], np.float32))
    settled = env.unwrapped.world.sim.positions()
    table = env.unwrapped.table.height
    assert np.abs(settled[:, 2] - (table + 0.005)).max() < 1e-3  # rests at its radius


def test_clip_crossings_counts_springs_through_the_opening():
    clip = np.eye(4)
    nodes = np.stack([np.zeros(11), np.linspace(-0.055, 0.045, 11), np.full(11, 0.01)], 1)
    springs = np.stack([np.arange(10), np.arange(1, 11)], 1)
    assert clip_crossings(nodes, springs, clip, table_height=0.0) == 1
    assert clip_crossings(nodes + [0.1, 0, 0], springs, clip, table_height=0.0) == 0
    assert clip_crossings(nodes + [0, 0, 0.2], springs, clip, table_height=0.0) == 0


def test_rope_expert_routes_the_rope_and_hold_does_not(scene):
    from bench.sim.rollout import run_episode
    from bench.sim.softbody.cli import _Hold
    from bench.sim.softbody.rope import rope_expert

    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode="state")
    expert = rope_expert(env)
    records = [run_episode(env, expert, init_index=c)[0] for c in (0, 7, 14)]
    assert all(r.success and r.progress_final == 1.0 for r in records)
    assert all(0 < r.first_grasp_frame < r.frames for r in records)
    hold, *_ = run_episode(env, _Hold(env), init_index=0)
    assert not hold.success and hold.progress_final < 0.2 and hold.truncated


def test_rope_gaussians_follow_the_lifted_rope(scene):
    from bench.sim.softbody.rope import rope_expert

    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode="state")
    expert = rope_expert(env)
    obs, info = env.reset(seed=0)
    expert.reset(0)
    while not info["stages"]["lift"]:
        obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
        assert not (terminated or truncated)
    nodes = env.unwrapped.world.sim.positions()
    splats = env.unwrapped.rope_splats()
    from scipy.spatial import cKDTree

    dist, _ = cKDTree(nodes).query(splats.means)
    assert nodes[:, 2].max() > env.unwrapped.table.height + 0.05  # the rope is in the air
    assert dist.max() < 0.012  # every Gaussian stays on the rope's surface


def test_softbody_rollout_cli(tmp_path, scene, capsys):
    from bench.cli import main
    from bench.scene.bundle import save_scene

    save_scene(scene, tmp_path / "scene")
    args = ["softbody", "rollout", "--scene", str(tmp_path / "scene"), "--episodes", "1",
            "--obs-mode", "state", "--save-states"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a = (tmp_path / "a" / "episodes.json").read_bytes()
    assert a == (tmp_path / "b" / "episodes.json").read_bytes()  # byte-identical reruns
    assert b'"successes": 1' in a
    assert (tmp_path / "a" / "states" / "episode_0000.csv").is_file()
    capsys.readouterr()
    code = main(["softbody", "rollout", "--scene", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "c")])
    assert code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_rope_wrist_view_renders_rope_gaussians(scene):
    env = gymnasium.make("splatbench/Rope-v0", scene=scene, image_size=(64, 64))
    obs, _ = env.reset(seed=0)
    assert obs["wrist_rgb"].shape == (64, 64, 3) and obs["wrist_rgb"].dtype == np.uint8
    renderer = env.unwrapped._get_renderer()
    with_rope = renderer.render_exterior()
    env.unwrapped.world.sim.set_state(env.unwrapped.world.sim.positions() + [0, 0, -1.0])
    without = renderer.render_exterior()  # rope moved under the table: out of view
    assert np.abs(with_rope.astype(int) - without.astype(int)).sum() > 0
    env.close()
