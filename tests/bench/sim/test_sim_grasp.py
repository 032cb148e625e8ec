"""Grasp rules: the YUBI weld keeps the relative pose (no jump) and releases on opening;
the frictional rule stops closing at the force threshold."""

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.geometry import quat_to_mat
from bench.sim.grasp import GraspConfig


def _descend_and_close(env):
    """Move over the cup (condition 2: x=0, y=-0.22), descend, close; return the last info."""
    obs, info = env.reset(seed=2)
    tgt = info["tcp_target"]
    cup = info["objects"]["cup"]["pos"]
    # tool frame: x = world x, y = -world y, z = -world z (home pose)
    moves = [np.array([cup[0] - tgt[0, 3], -(cup[1] - tgt[1, 3]), 0.0])]
    moves += [np.array([0.0, 0.0, (tgt[2, 3] - 0.05) / 5])] * 5
    for move in moves:
        for _ in range(int(np.ceil(np.abs(move).max() / 0.05))):
            step = move / int(np.ceil(np.abs(move).max() / 0.05))
            obs, _, _, _, info = env.step(np.r_[step, 0, 0, 0, 0.11])
    for _ in range(8):
        obs, _, _, _, info = env.step(np.r_[0, 0, 0, 0, 0, 0, 0.0])
    return info


def _relative(env):
    world = env.unwrapped.world
    hand = world.robot.tcp_pose(world.data)
    cup = world.object_state("cup")
    return hand[:3, :3].T @ (cup.pos - hand[:3, 3]), hand[:3, :3].T @ quat_to_mat(cup.quat)


def test_contact_rule_attaches_without_jump_and_releases(small_scene):
    env = gymnasium.make(
        bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state", control="single"
    )
    info = _descend_and_close(env)
    assert info["grasp"]["attached"] == "cup"
    assert ("cup", "left_pad") in info["contacts"] and ("cup", "right_pad") in info["contacts"]
    pos0, rot0 = _relative(env)
    for _ in range(5):  # lift 10 cm
        _, _, _, _, info = env.step(np.r_[0, 0, -0.02, 0, 0, 0, 0.0])
    pos1, rot1 = _relative(env)
    assert info["objects"]["cup"]["pos"][2] > 0.12
    np.testing.assert_allclose(pos1, pos0, atol=2e-3)  # rigidly carried (weld tolerance)
    np.testing.assert_allclose(rot1, rot0, atol=2e-2)
    _, _, _, _, info = env.step(np.r_[0, 0, 0, 0, 0, 0, 0.11])  # open -> release -> falls
    assert info["grasp"]["attached"] is None
    for _ in range(5):
        _, _, _, _, info = env.step(np.r_[0, 0, 0, 0, 0, 0, 0.11])
    assert info["objects"]["cup"]["pos"][2] < 0.06


def test_frictional_rule_holds_near_threshold(small_scene):
    config = GraspConfig(mode="friction", force_threshold=12.0)
    env = gymnasium.make(
        bench.sim.ENV_IDS["cup"],
        scene=small_scene,
        obs_mode="state",
        control="single",
        grasp=config,
    )
    _descend_and_close(env)
    world = env.unwrapped.world
    assert world.grasp.attached is None and world.grasp.squeezing == 0
    force = world.grasp.pad_force(world.model, world.data, 0)
    assert force == pytest.approx(12.0, rel=0.35)
    for _ in range(5):
        _, _, _, _, info = env.step(np.r_[0, 0, -0.02, 0, 0, 0, 0.0])
    assert info["objects"]["cup"]["pos"][2] > 0.1  # friction alone lifts it


def test_grasp_config_validation():
    with pytest.raises(ValueError, match="grasp mode"):
        GraspConfig(mode="magnet")
    with pytest.raises(ValueError):
        GraspConfig(force_threshold=0.0)


def test_vectorised_pad_contacts_match_the_reference_loop(small_scene):
    from bench.policies import make_policy

    env = gymnasium.make(
        bench.sim.ENV_IDS["tape"], scene=small_scene, obs_mode="state", control="single"
    )
    policy = make_policy("expert", env)
    obs, info = env.reset(seed=4)
    world = env.unwrapped.world
    seen = 0
    for _ in range(60):
        obs, _, terminated, _, info = env.step(policy.act(obs, info))
        fast = world.grasp.pad_contacts(world.data)
        np.testing.assert_array_equal(
            fast, world.grasp.pad_contacts_reference(world.model, world.data)
        )
        seen += int(fast.any())
        if terminated:
            break
    assert seen > 3  # the comparison covered frames with pad contacts
