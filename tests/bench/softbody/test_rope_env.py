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
