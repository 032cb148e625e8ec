"""Batched physics (World.step_frame) is bit-identical to the per-step reference loop (issue 32).

The reference is :meth:`bench.sim.world.World.step_frame_reference` (``env.batched_physics =
False``): the grasp rule, the robot command and ``mj_step`` once per physics step. The golden
digests of ``test_sim_task_files.py`` check the default (batched) path against the code of
git main a3b63ea as well.
"""

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.sim.config import GraspConfig


def _episode(env, qstate, *, batched: bool):
    from bench.policies import make_policy

    env.unwrapped.batched_physics = batched
    policy = make_policy("noisy-expert", env, seed=0)
    obs, info = env.reset(seed=0)
    policy.reset(seed=0)
    states, rows, done = [qstate(env).tobytes()], list(info["frame_states"]), False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        states.append(qstate(env).tobytes())
        rows.extend(info["frame_states"])
        done = terminated or truncated
    return states, [r.to_dict() for r in rows], info


@pytest.mark.parametrize("task,mode", [("cup", "contact"), ("tape", "friction")])
def test_batched_frames_equal_the_per_step_loop(small_scene, qstate, task, mode):
    env = gymnasium.make(bench.sim.ENV_IDS[task], scene=small_scene, obs_mode="state",
                         grasp=GraspConfig(mode=mode))
    try:
        ref_states, ref_rows, ref_info = _episode(env, qstate, batched=False)
        counts = env.unwrapped.world._stepper.counts
        assert counts == {"batched": 0, "replayed": 0}  # the reference never batches
        states, rows, info = _episode(env, qstate, batched=True)
    finally:
        env.close()
    assert states == ref_states  # every step's qpos, qvel, mocap, eq_active, time: same bytes
    assert rows == ref_rows
    assert info["success"] == ref_info["success"] and info["frame"] == ref_info["frame"]
    # both branches ran: frames in one call, and frames the grasp rule sent back to the loop
    assert counts["batched"] > 0 and counts["replayed"] > 0, counts


def test_replay_restores_the_frame_start_exactly(small_scene, qstate):
    """A frame rolled out and then refused must leave no trace: force the refusal."""
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state")
    try:
        env.reset(seed=1)
        world = env.unwrapped.world
        stepper = world._stepper
        before = qstate(env).tobytes()
        positions = np.repeat(world.home[None, :3, 3], 50, axis=0)
        from bench.geometry import mat_to_quat

        quats = np.repeat(mat_to_quat(world.home[:3, :3])[None], 50, axis=0)
        # a commanded opening below the measured one fails the "not closing" check at once
        ok = stepper.run(positions, quats, -1.0, check_open=True)
        assert not ok and stepper.counts["replayed"] == 1
        assert qstate(env).tobytes() == before
    finally:
        env.close()


def test_arm_robot_keeps_the_per_step_loop(small_scene):
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state",
                         robot="arm6")
    try:
        assert env.unwrapped.world._stepper is None  # differential IK needs every step
    finally:
        env.close()
