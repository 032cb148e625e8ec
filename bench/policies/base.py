"""The Policy protocol and the policy registry.

A policy maps the latest observation (and, for privileged reference policies,
the environment's ``info``) to an action chunk ``[chunk_size, 7]`` - or one row
``[7]`` for an environment made with ``control="single"``. Policies are built
by name from :data:`POLICIES` with the environment they will drive and a seed::

    policy = make_policy("expert", env, seed=0)
    policy.reset(seed=episode_seed)
    chunk = policy.act(obs, info)

Entries carry metadata: ``privileged`` (reads ``info["state"]``, so it cannot
run on a real robot) and a one-line ``description``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.registry import Registry


@runtime_checkable
class Policy(Protocol):
    """A closed-loop policy queried once per executed chunk."""

    name: str

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode (reseed any noise from ``seed``)."""

    def act(  # -> [chunk_size, 7] (or [7] with control='single')
        self, obs: dict[str, np.ndarray], info: dict[str, Any]
    ) -> np.ndarray:
        """Return the next action chunk ``[chunk_size, 7]`` (or ``[7]`` in single-step mode)."""


POLICIES: Registry = Registry("policy")


def make_policy(name: str, env: Any, *, seed: int = 0, **kwargs: Any) -> Policy:
    """Build the registered policy ``name`` for ``env`` (a Gymnasium env, wrapped or not)."""
    factory = POLICIES.get(name)
    return factory(env.unwrapped if hasattr(env, "unwrapped") else env, seed=seed, **kwargs)
