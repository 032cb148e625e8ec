"""A Gymnasium ``VectorEnv`` of N splatbench environments, stepped in one process.

Usage::

    from bench.sim.vector_env import SplatBenchVectorEnv
    vec = SplatBenchVectorEnv([lambda: bench.sim.make_env("cup", scene) for _ in range(4)])
    obs, infos = vec.reset(seed=[0, 1, 2, 3])          # obs["wrist_rgb"]: [4, H, W, 3]
    obs, rewards, terminated, truncated, infos = vec.step(chunks)   # chunks: [4, 32, 7]

Why in-process and synchronous: a study worker already owns one core; N envs in that
process share the loaded background, the policies' weights and one torch / Warp / GL runtime,
and the policy can be asked once for the N observations (:mod:`bench.sim.vector_rollout`).
Every sub-env is an ordinary env, so a sub-env's episode is the same bytes as the same
episode run alone (tests/bench/sim/test_vector_env.py).

Semantics (Gymnasium 1.x): ``autoreset_mode`` is ``DISABLED`` - episodes end at different
frames and the caller restarts a sub-env with ``reset(seed=..., options={"reset_mask":
mask})``, each with its own initial condition (``seed[i]`` = grid condition, as
``SplatBenchEnv.reset``). One extension of ``step``: ``active`` (bool ``[N]``) steps only
those sub-envs; the others keep their last observation and results (a finished episode is
not stepped again, which would render an observation nobody reads). Batched observations are
the sub-envs' dicts stacked per key (zeros where a sub-env's step rendered no image: see
``SplatBenchEnv.observe_terminal``); ``infos`` follows Gymnasium's vector convention
(``info[key]`` array + ``info["_" + key]`` mask) for the scalar keys :data:`VECTOR_INFO_KEYS`,
and every sub-env's full info dict (state streams, contacts, privileged state) is
:attr:`SplatBenchVectorEnv.env_infos` ``[i]``, its raw observation
:attr:`SplatBenchVectorEnv.env_observations` ``[i]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, create_empty_array

#: Scalar info keys returned in Gymnasium's vector format (the rest: ``env_infos[i]``).
VECTOR_INFO_KEYS = ("condition", "frame", "frames_executed", "success", "progress")


class SplatBenchVectorEnv(VectorEnv):
    """N splatbench envs stepped in this process (module docstring).

    Args:
        envs: The sub-envs, or callables that make them (all of one task and spaces).
        copy: Return a copy of the batched observation (Gymnasium's ``copy``); False hands
            out the internal buffer, overwritten by the next ``step``.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED, "render_modes": []}

    def __init__(self, envs: Sequence[gym.Env | Callable[[], gym.Env]], *,
                 copy: bool = True) -> None:
        if not envs:
            raise ValueError("SplatBenchVectorEnv needs at least one env (or env factory)")
        made: list[gym.Env] = []
        try:
            for env in envs:
                made.append(env() if callable(env) and not isinstance(env, gym.Env) else env)
        except BaseException:
            for env in made:
                env.close()
            raise
        self.envs = made
        self.num_envs = len(made)
        self.copy = copy
        first = made[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for i, env in enumerate(made[1:], 1):
            if env.observation_space != self.single_observation_space or \
                    env.action_space != self.single_action_space:
                self.close()
                raise ValueError(f"sub-env {i} has other spaces than sub-env 0; a vector env "
                                 "needs one task, rig and image size")
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._buffer = create_empty_array(self.single_observation_space, n=self.num_envs)
        self.env_observations: list[dict[str, np.ndarray] | None] = [None] * self.num_envs
        self.env_infos: list[dict[str, Any] | None] = [None] * self.num_envs
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)

    # -- Gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None):
        """Reset every sub-env (or those of ``options["reset_mask"]``), each at ``seed[i]``.

        An int ``seed`` gives sub-env ``i`` the condition ``seed + i`` (Gymnasium's rule).
        """
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        mask = self._mask(mask, "options['reset_mask']")
        if seed is None or isinstance(seed, int | np.integer):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed has {len(seeds)} entries for {self.num_envs} envs; "
                                 "pass one per sub-env (None for those not reset)")
        for i in np.flatnonzero(mask):
            obs, info = self.envs[i].reset(seed=seeds[i], options=options or None)
            self.env_observations[i], self.env_infos[i] = obs, info
            self._rewards[i] = float(info.get("progress", 0.0))
            self._terminated[i] = self._truncated[i] = False
        return self._batched(), self._vector_info(mask)

    def step(self, actions: Any, *, active: np.ndarray | None = None):
        """Step the sub-envs (all, or those of ``active``) with ``actions[i]``."""
        mask = self._mask(active, "active")
        for i in np.flatnonzero(mask):
            if self.env_infos[i] is None:
                raise RuntimeError(f"sub-env {i} was never reset; call reset() before step()")
            obs, reward, terminated, truncated, info = self.envs[i].step(actions[i])
            self.env_observations[i], self.env_infos[i] = obs, info
            self._rewards[i] = reward
            self._terminated[i], self._truncated[i] = terminated, truncated
        return (self._batched(), self._rewards.copy(), self._terminated.copy(),
                self._truncated.copy(), self._vector_info(mask))

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env."""
        for env in self.envs:
            env.close()

    # -- internals ------------------------------------------------------------------------
    def _mask(self, mask: Any, name: str) -> np.ndarray:  # -> bool [N]
        if mask is None:
            return np.ones(self.num_envs, dtype=bool)
        mask = np.asarray(mask)
        if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
            raise ValueError(f"{name} must be a bool array of shape ({self.num_envs},), got "
                             f"{mask.dtype} {mask.shape}")
        return mask

    def _batched(self) -> Any:
        """The sub-envs' observations stacked per key into the reused buffer.

        A key a sub-env did not render (never reset, or a terminal step with the env's
        ``observe_terminal`` off) is zeros in its row.
        """
        for key in self.single_observation_space.spaces:
            rows = self._buffer[key]
            for i, obs in enumerate(self.env_observations):
                value = None if obs is None else obs.get(key)
                if value is None:
                    rows[i] = 0
                else:
                    rows[i] = value
        if self.copy:
            return {k: v.copy() for k, v in self._buffer.items()}
        return self._buffer

    def _vector_info(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for key in VECTOR_INFO_KEYS:
            values = [info.get(key) if info is not None else None for info in self.env_infos]
            present = np.array([m and v is not None for m, v in zip(mask, values, strict=True)])
            kind = bool if key == "success" else (float if key == "progress" else int)
            out[key] = np.array([kind(v) if p else kind(0) for v, p in
                                 zip(values, present, strict=True)])
            out[f"_{key}"] = present
        return out
