"""Progress at success: the env's success is the scorer's terminal signal (RobotArena-inf)."""

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.policies import make_policy


def _episode(scene, task, policy_name, condition, **kwargs):
    """Step an episode by hand; returns every (reward, info) the env gave."""
    env = gymnasium.make(bench.sim.ENV_IDS[task], scene=scene, obs_mode="state", **kwargs)
    policy = make_policy(policy_name, env, seed=0)
    obs, info = env.reset(seed=condition)
    policy.reset(seed=condition)
    steps, terminated, truncated = [], False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        steps.append((reward, info))
    env.close()
    return steps


@pytest.mark.parametrize("task", ["cup", "tape", "pen"])
def test_successful_expert_episode_ends_at_progress_one(small_scene, task):
    steps = _episode(small_scene, task, "expert", 0)
    reward, info = steps[-1]
    assert info["success"] and info["failure"] is None
    assert info["progress"] == 1.0 and reward == 1.0
    # 1.0 arrives with the env's success (the strict 30-frame channel alone would never get
    # there: the env terminates 3 frames after its predicate first holds), not before it
    rows = [row for _, step_info in steps for row in step_info["frame_states"]]
    assert rows[-1].success and rows[-1].progress == 1.0
    assert all(r.progress < 1.0 for r in rows if not r.success)
    assert sum(r.success for r in rows) == 1  # success is declared at the final frame only


def test_failed_episode_stays_below_one(small_scene):
    steps = _episode(small_scene, "cup", "hold", 0, max_frames=40)
    reward, info = steps[-1]
    assert not info["success"] and steps[-1][1]["frame"] == 40
    assert max(r for r, _ in steps) < 1.0 and info["progress"] < 1.0
    rows = [row for _, step_info in steps for row in step_info["frame_states"]]
    assert not any(r.success for r in rows)


def test_rescoring_without_the_success_signal_misses_the_terminal(small_scene):
    # the success flags matter: without them offline scoring falls short of 1.0 at success
    from bench.sim.progress import score_stream
    from bench.sim.rollout import progress_frames, progress_success
    from bench.sim.task_progress import progress_spec
    from bench.sim.tasks import get_task

    steps = _episode(small_scene, "cup", "expert", 1)
    rows = [row for _, step_info in steps for row in step_info["frame_states"]]
    spec, frames = progress_spec(get_task("cup")), progress_frames(rows)
    flags = progress_success(rows)
    assert flags.dtype == bool and flags[-1] and not flags[:-1].any()
    with_flags = score_stream(spec, frames, dt=0.1, success=flags)
    without = score_stream(spec, frames, dt=0.1)
    assert with_flags.final_score == 1.0 and without.final_score < 1.0
    np.testing.assert_array_equal(with_flags.progress, without.progress)
