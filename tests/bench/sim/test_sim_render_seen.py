"""Rendering only what is seen (issue 32 item 3), with the full render as the reference.

- cube-map faces that no drawn geom reaches are not drawn (``MujocoPinhole.cull``): every
  observation equals the one with every face drawn, byte for byte;
- ``run_episode`` renders the observations a policy query reads (not the last step's, nor
  the asynchronous loop's in-between steps) unless a video is requested; records and state
  streams are the same either way.
"""

import hashlib

import gymnasium
import numpy as np
import pytest

import bench.sim


class _Seen:
    """Env wrapper hashing the camera images of every observation it returns."""

    def __init__(self, env):
        self.env, self.sha = env, hashlib.sha256()

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _keep(self, obs):
        for key in sorted(obs):
            if key.endswith("_rgb"):
                self.sha.update(np.ascontiguousarray(obs[key]).tobytes())

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        self._keep(out[0])
        return out

    def step(self, action):
        out = self.env.step(action)
        self._keep(out[0])
        return out


@pytest.fixture(scope="module")
def dual_env(small_scene):
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, cameras="yubi-dual",
                         image_size=(40, 40), max_frames=40)
    yield env
    env.close()


def _count_renders(env):
    renderer = env.unwrapped._get_renderer()
    calls = [0]
    draw = renderer.render_cameras

    def counted():
        calls[0] += 1
        return draw()

    renderer.render_cameras = counted
    return calls, lambda: setattr(renderer, "render_cameras", draw)


def test_culled_faces_change_no_pixel(dual_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    dual_env.reset(seed=0)
    pinhole = dual_env.unwrapped._get_renderer().mujoco
    digests = {}
    for cull in (False, True):
        pinhole.cull, pinhole.culled = cull, 0
        seen = _Seen(dual_env)
        policy = make_policy("expert", dual_env, seed=0)
        run_episode(seen, policy, init_index=2, video=True)
        digests[cull] = seen.sha.hexdigest()
        culled = pinhole.culled
    assert digests[True] == digests[False]
    assert culled > 0  # some faces over the table see neither the gripper nor an object


@pytest.mark.parametrize("latency_ms", [0.0, 250.0])
def test_only_query_frames_are_rendered_unless_a_video_is_asked(dual_env, latency_ms):
    from bench.policies import make_policy
    from bench.sim.rollout import Execution, run_episode

    execution = Execution("async", latency_ms) if latency_ms else Execution()
    results = {}
    for video in (True, False):
        calls, restore = _count_renders(dual_env)
        try:
            policy = make_policy("expert", dual_env, seed=0)
            states: list = []
            record, _, _ = run_episode(dual_env, policy, init_index=1, states=states,
                                       execution=execution, video=video)
        finally:
            restore()
        results[video] = (record, [s.to_dict() for s in states], calls[0])
    (rec_v, rows_v, renders_v), (rec, rows, renders) = results[True], results[False]
    assert rec == rec_v and rows == rows_v
    assert renders == rec.policy_queries  # one observation per query, nothing else
    assert renders < renders_v
    unwrapped = dual_env.unwrapped
    assert unwrapped.observe_terminal and unwrapped.observe_steps  # flags restored


def test_unrendered_observation_keeps_the_space(dual_env):
    """A step nobody looks at still returns every key of the observation space (Gymnasium's
    env checker asserted ``obs keys ['proprio'] != space keys`` on an episode's first, and
    terminal, step); its images are black and nothing is drawn."""
    unwrapped = dual_env.unwrapped
    dual_env.reset(seed=0)
    calls, restore = _count_renders(dual_env)
    unwrapped.observe_steps = False
    try:
        hold = np.tile(np.array([0, 0, 0, 0, 0, 0, 1.0], np.float32),
                       (unwrapped.chunk_size, 1))
        obs = dual_env.step(hold)[0]
    finally:
        unwrapped.observe_steps = True
        restore()
    assert calls[0] == 0
    assert sorted(obs) == sorted(dual_env.observation_space.spaces)
    assert dual_env.observation_space.contains(obs)
    assert all(not obs[k].any() for k in obs if k.endswith("_rgb"))
