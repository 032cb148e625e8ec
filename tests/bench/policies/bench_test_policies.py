"""Entry-point factories used by the policy tests (imported as tests.bench.policies...)."""

from __future__ import annotations

import numpy as np


class ProprioServo:
    """Non-privileged: moves the TCP towards a fixed world point, from proprio and images only.

    Reads every part of the policy observation (images, proprio, prompt, timestamp) so a
    transport that changes any of them changes the actions.
    """

    name = "proprio-servo"

    def __init__(self, env, *, seed: int = 0, goal=(0.05, -0.1, 0.25), chunk: int = 32):
        self.goal = np.asarray(goal, np.float64)
        self.chunk = chunk
        self.seed = seed
        self.opening = float(env.world.robot.max_opening)

    def reset(self, *, seed=None):
        self.rng = np.random.default_rng([self.seed, seed or 0])

    def act(self, obs, info):
        p = np.asarray(obs["proprio"], np.float64)
        image_term = sum(float(im.mean()) for im in obs["images"].values()) * 1e-6
        step = np.clip(self.goal - p[:3], -0.02, 0.02)
        rows = np.zeros((self.chunk, 7), np.float32)
        # wrist frame is rotated, but a small world-ish step is fine for a test policy
        rows[:, :3] = step + image_term + 1e-4 * len(obs["prompt"]) + 1e-5 * obs["timestamp"]
        rows[:, :3] += self.rng.normal(0, 0.002, size=(self.chunk, 3))
        rows[:, 6] = self.opening
        return rows


def make_servo(env, *, seed=0, **kwargs):
    return ProprioServo(env, seed=seed, **kwargs)


def make_int(env, *, seed=0):
    return 42


def make_no_act(env, *, seed=0):
    class Half:
        def reset(self, *, seed=None):
            pass

    return Half()


def make_strict(env):  # no seed keyword
    return ProprioServo(env)


NOT_CALLABLE = 3


class BadShape(ProprioServo):
    def act(self, obs, info):
        return np.zeros((4, 6), np.float32)


class BadNaN(ProprioServo):
    def act(self, obs, info):
        rows = super().act(obs, info)
        rows[0, 0] = np.nan
        return rows


class BadDtype(ProprioServo):
    def act(self, obs, info):
        return super().act(obs, info).astype(np.int32)
