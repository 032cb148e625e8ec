"""Closing one env's renderer never changes another's images.

``MjrContext.free`` deletes GL objects by id in whichever OpenGL context is current. Before
the fix, closing (or dropping) an env while another env's context was current deleted that
other env's buffers, and its later observations were silently wrong (found with two envs
alive in one process, as paired screens and vector envs keep them). Reference: the same
env's observation before the other env existed, byte for byte.
"""

import gc

import gymnasium
import numpy as np
import pytest

import bench.sim


def _env(scene):
    return gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, cameras="yubi-dual",
                          image_size=(40, 40), max_frames=40)


def _images(env, seed):
    obs, _ = env.reset(seed=seed)
    return {key: np.array(obs[key]) for key in sorted(obs) if key.endswith("_rgb")}


@pytest.mark.parametrize("drop", ["close", "garbage-collect"])
def test_closing_another_env_keeps_this_envs_images(small_scene, drop):
    kept = _env(small_scene)
    try:
        before = _images(kept, seed=3)
        other = _env(small_scene)
        _images(other, seed=1)  # the other env's buffers exist and its context was current
        _images(kept, seed=3)  # now the kept env's context is the current one
        if drop == "close":
            other.close()
        else:
            del other
            gc.collect()
        after = _images(kept, seed=3)
        assert before.keys() == after.keys() and before
        for key in before:
            np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    finally:
        kept.close()


def test_close_twice_is_harmless(small_scene):
    env = _env(small_scene)
    _images(env, seed=0)
    renderer = env.unwrapped._get_renderer().mujoco
    renderer.close()
    renderer.close()  # the env's own close() calls it again
    env.close()
