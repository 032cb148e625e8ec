"""Baseline policies for paired comparisons: noisy expert, uniform random, hold still."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from bench.policies.base import POLICIES
from bench.policies.expert import ScriptedExpert


class NoisyExpert(ScriptedExpert):
    """The scripted expert with seeded Gaussian noise on every translation row.

    Args:
        env: The (unwrapped) environment.
        seed: Base seed; ``reset(seed=s)`` reseeds with ``(seed, s)`` so every episode's
            noise is reproducible and independent of the others.
        noise: Standard deviation of the translation noise per frame, metres.
    """

    name = "noisy-expert"

    def __init__(self, env: Any, *, seed: int = 0, noise: float = 0.004) -> None:
        super().__init__(env, seed=seed)
        if noise < 0:
            raise ValueError(f"noise must be >= 0 m, got {noise}")
        self.noise = noise
        self._rng = np.random.default_rng(seed)

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: reseed the noise with ``(seed, seed of the episode)``."""
        super().reset(seed=seed)
        self._rng = np.random.default_rng([self.seed, 0 if seed is None else seed])

    def act(  # -> [chunk_size, 7] or [7]
        self, obs: dict[str, np.ndarray], info: dict[str, Any]
    ) -> np.ndarray:
        """The expert's action plus N(0, noise) metres on each row's xyz; [chunk_size, 7] or [7]."""
        chunk = np.array(super().act(obs, info), dtype=np.float64)
        rows = np.atleast_2d(chunk)
        rows[:, :3] += self._rng.normal(0.0, self.noise, size=(rows.shape[0], 3))
        return rows.astype(np.float32).reshape(chunk.shape)


class RandomPolicy:
    """Uniform random actions from the environment's action space (seeded per episode)."""

    name = "random"

    def __init__(self, env: Any, *, seed: int = 0) -> None:
        self.space = env.action_space
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: reseed with ``(seed, seed of the episode)``."""
        self._rng = np.random.default_rng([self.seed, 0 if seed is None else seed])

    def act(  # -> [chunk_size, 7] or [7]
        self, obs: dict[str, np.ndarray], info: dict[str, Any]
    ) -> np.ndarray:
        """A uniform random float32 action in the action space's bounds ([chunk_size, 7] or [7])."""
        low, high = self.space.low, self.space.high
        return self._rng.uniform(low, high).astype(np.float32)


class HoldPolicy:
    """Never moves and keeps the gripper open (success 0 unless the scene solves itself)."""

    name = "hold"

    def __init__(self, env: Any, *, seed: int = 0) -> None:
        self.shape = env.action_space.shape
        self.opening = float(env.action_space.high.reshape(-1, 7)[0, 6])

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode (the policy has no state)."""
        pass

    def act(  # -> [chunk_size, 7] or [7]
        self, obs: dict[str, np.ndarray], info: dict[str, Any]
    ) -> np.ndarray:
        """A float32 action of zero motion with the gripper fully open ([chunk_size, 7] or [7])."""
        action = np.zeros(self.shape, dtype=np.float32)
        action[..., 6] = self.opening
        return action


for _mm in (4, 8, 12):  # variants are registry entries: noisy-expert, noisy-expert-8mm, ...
    POLICIES.register(
        "noisy-expert" if _mm == 4 else f"noisy-expert-{_mm}mm",
        functools.partial(NoisyExpert, noise=_mm / 1000.0),
        privileged=True,
        noise_m=_mm / 1000.0,
        description=f"expert + seeded Gaussian translation noise ({_mm} mm per frame)",
    )
POLICIES.register("random", RandomPolicy, privileged=False, description="uniform random actions")
POLICIES.register("hold", HoldPolicy, privileged=False, description="stand still, gripper open")
