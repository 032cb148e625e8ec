"""The vector env and its episode runner against N single envs and run_episode (the reference)."""

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.policies import make_policy
from bench.policies.base import PolicyError
from bench.sim.rollout import run_episode
from bench.sim.vector_env import SplatBenchVectorEnv
from bench.sim.vector_rollout import EpisodeJob, run_episodes


def _env(scene, **kwargs):
    return gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, **kwargs)


def test_vector_steps_equal_single_envs(small_scene):
    kwargs = {"image_size": (24, 24), "max_frames": 24}
    vec = SplatBenchVectorEnv([lambda: _env(small_scene, **kwargs) for _ in range(3)])
    singles = [_env(small_scene, **kwargs) for _ in range(3)]
    try:
        assert vec.observation_space["wrist_rgb"].shape == (3, 24, 24, 3)
        obs, infos = vec.reset(seed=[4, 0, 9])
        ref = [env.reset(seed=s)[0] for env, s in zip(singles, [4, 0, 9], strict=True)]
        for key in obs:
            np.testing.assert_array_equal(obs[key], np.stack([r[key] for r in ref]))
        assert infos["condition"].tolist() == [4, 0, 9] and infos["_condition"].all()
        rng = np.random.default_rng(0)  # random chunks within the action space
        low, high = vec.single_action_space.low, vec.single_action_space.high
        for _ in range(2):
            actions = rng.uniform(low, high, size=(3, *low.shape)).astype(np.float32)
            active = np.array([True, False, True])
            obs, rewards, _, _, infos = vec.step(actions, active=active)
            for i in np.flatnonzero(active):
                o, r, *_ = singles[i].step(actions[i])
                assert rewards[i] == r
                np.testing.assert_array_equal(obs["wrist_rgb"][i], o["wrist_rgb"])
                np.testing.assert_array_equal(obs["proprio"][i], o["proprio"])
            assert not infos["_frame"][1] and infos["frame"][0] == infos["frame"][2] > 0
        with pytest.raises(ValueError, match="active must be a bool array"):
            vec.step(actions, active=np.array([1, 0, 1]))
        with pytest.raises(ValueError, match="seed has 2 entries for 3 envs"):
            vec.reset(seed=[1, 2])
    finally:
        vec.close()
        for env in singles:
            env.close()


class _FaultAfter:
    """Expert that raises a PolicyError at its ``fault``-th query (a faulty server)."""

    def __init__(self, env, fault):
        self.inner, self.fault, self.name = make_policy("expert", env), fault, "faulty"

    def reset(self, *, seed=None):
        self.inner.reset(seed=seed)
        self.calls = 0

    def act(self, obs, info):
        self.calls += 1
        if self.calls == self.fault:
            raise PolicyError("policy 'faulty': server went away")
        return self.inner.act(obs, info)


def test_run_episodes_equals_run_episode(small_scene):
    """Episodes of different lengths (success, time limit, a fault) refill the sub-envs."""
    kwargs = {"obs_mode": "state", "max_frames": 60}
    jobs = [EpisodeJob("expert", c, e) for e, c in enumerate([0, 3, 5, 7, 1])] + \
        [EpisodeJob("faulty", 2, 5), EpisodeJob("noisy", 6, 6)]

    def policies_for(env):
        return {"expert": make_policy("expert", env, seed=0),
                "noisy": make_policy("noisy-expert", env, seed=0),
                "faulty": _FaultAfter(env.unwrapped, 2)}

    single = _env(small_scene, **kwargs)
    reference, ref_states = [], []
    for job in jobs:
        states: list = []
        record, _, _ = run_episode(single, policies_for(single)[job.policy],
                                   init_index=job.init_index, episode=job.episode,
                                   policy_name=job.policy, states=states)
        reference.append(record)
        ref_states.append(states)
    single.close()
    vec = SplatBenchVectorEnv([lambda: _env(small_scene, **kwargs) for _ in range(3)])
    try:
        results = list(run_episodes(vec, [policies_for(e) for e in vec.envs], jobs))
    finally:
        vec.close()
    assert [r.job for r in results] == list(range(len(jobs)))
    assert [r.record for r in results] == reference
    assert [r.states for r in results] == ref_states
    assert {r.status for r in reference} == {"ok", "error"}  # the fault path is covered
    assert len({r.frames for r in reference}) > 2  # episodes of different lengths


def test_learned_policy_rgb_episodes_equal_run_episode(small_scene):
    """The demo's CNN policies on two wrist fisheyes: same records, frames and query count."""
    kwargs = {"cameras": "yubi-dual", "image_size": (32, 32), "max_frames": 24}
    jobs = [EpisodeJob(p, c, c) for c in (0, 1) for p in ("bc-large", "bc-aux-dagger")]
    single = _env(small_scene, **kwargs)
    ref = {p: make_policy(p, single, seed=0) for p in ("bc-large", "bc-aux-dagger")}
    runs = [run_episode(single, ref[j.policy], init_index=j.init_index, episode=j.episode,
                        policy_name=j.policy, record_frames=True) for j in jobs]
    reference = [r[0] for r in runs]
    single.close()
    vec = SplatBenchVectorEnv([lambda: _env(small_scene, **kwargs) for _ in range(2)])
    try:
        pols = [{p: make_policy(p, e, seed=0) for p in ("bc-large", "bc-aux-dagger")}
                for e in vec.envs]
        results = list(run_episodes(vec, pols, jobs, record_frames=True))
    finally:
        vec.close()
    assert [r.record for r in results] == reference
    # the frames OBS-Policy scores: the rig's first camera (wrist_left_rgb), as run_episode
    for result, (_, frames, _) in zip(results, runs, strict=True):
        assert len(frames) > 1 and len(result.frames) == len(frames)
        assert all(np.array_equal(a, b) for a, b in zip(result.frames, frames, strict=True))
    assert all(len(r.latencies) == r.record.policy_queries > 0 for r in results)
