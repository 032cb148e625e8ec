"""The policy interface, the observation a policy sees, action chunks, and the policy registry.

A policy is anything with ``reset(*, seed)`` and ``act(obs, info) -> float32 [T, 7]``
(:class:`Policy`). Built-in policies are built by name from :data:`POLICIES`;
any importable factory is built from an entry point ``"package.module:factory"``
(:mod:`bench.policies.entry`)::

    policy = make_policy("expert", env, seed=0)          # or "mypkg.pol:make_policy"
    policy.reset(seed=episode_seed)
    chunk = policy.act(policy_observation(obs, env), info)   # float32 [T, 7]

**Observation** (:func:`policy_observation`; a dict):

* ``images``: ``{camera: uint8 [H, W, 3]}``, one entry per env key ``<camera>_rgb``
  (today ``{"wrist": ...}``; empty with ``obs_mode="state"``);
* ``proprio``: float32 ``[8]`` (:data:`PROPRIO_FIELDS`): TCP position x y z (metres, world
  frame), TCP orientation quaternion w x y z (world frame, unit), finger opening (metres,
  0 closed);
* ``prompt``: the task's language instruction (str, :func:`task_instruction`);
* ``timestamp``: simulated time of the observation, seconds since ``reset``
  (control frame / control rate);
* the env's own keys (``wrist_rgb``, ``object_state``) stay in the dict unchanged, so
  policies written against the raw env observation keep working.

**Action**: a chunk float32 ``[T, 7]``; row ``i`` is meant for the ``i``-th control frame
after the observation. Columns depend on the policy's ``action_mode`` attribute
(:data:`ACTION_MODES`, default ``"delta"``):

* ``"delta"``: (dx, dy, dz) metres and rotation vector (rx, ry, rz) radians, the TCP
  delta pose in the current *commanded* TCP (wrist) frame, composed
  ``target <- target @ delta``; then the absolute finger opening in metres;
* ``"absolute"``: the world-frame TCP target (x, y, z) metres and rotation vector
  radians, then the finger opening in metres.

:func:`to_env_chunk` turns any chunk into the env's ``[chunk_size, 7]`` delta chunk:
absolute rows become chained deltas, a longer chunk is cut, a shorter one is padded
with "hold" rows (no motion, last opening). A chunk of the wrong shape or dtype, or
with NaN/inf, raises :class:`PolicyError` - a fault of the policy, which a rollout
records as ``status="error"``, never as a task failure.

**info** (second argument): the environment's privileged ``info`` dict. Only policies
registered with ``privileged=True`` (the scripted experts, which read
``info["state"]``) may use it; everything else must ignore it, and remote policies
never see it. The built-in vision policies (``visual-servo``, ``visual-glance``) locate
the actor in the wrist image only, but still read the grasp flag and commanded target
from ``info`` (a real robot's gripper and controller state), so they cannot be served
remotely either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.registry import Registry
from bench.sim.policy_io import (  # noqa: F401 - re-exported: users import them from here
    ACTION_DIM,
    ACTION_MODES,
    CAMERA_SUFFIX,
    PROPRIO_DIM,
    PROPRIO_FIELDS,
    PolicyError,
    absolute_to_delta,
    camera_images,
    policy_observation,
    task_instruction,
    to_env_chunk,
    validate_chunk,
)


@runtime_checkable
class Policy(Protocol):
    """A closed-loop policy queried once per executed chunk (see the module docstring).

    Optional attributes read by the rollout: ``action_mode`` ("delta" default or
    "absolute"), ``privileged`` (reads ``info``).
    """

    name: str

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode; reseed any noise from ``seed`` (the initial condition)."""

    def act(  # obs: see policy_observation; -> float32 [T, 7] ([7] with control='single')
        self, obs: Mapping[str, Any], info: Mapping[str, Any]
    ) -> np.ndarray:
        """Return the next action chunk float32 ``[T, 7]``."""


#: Built-in policies, then those of installed plugins (entry-point group ``splatbench.policies``,
#: docs/extending.md): ``POLICIES.register(name, factory, privileged=..., description=...)``.
POLICIES: Registry = Registry("policy", group="splatbench.policies")


def is_privileged(name: str) -> bool:
    """Whether the registered policy ``name`` reads privileged ``info`` (False if unknown)."""
    return bool(name in POLICIES and POLICIES.entry(name).meta.get("privileged", False))


def check_policy_task(name: str, task: Any) -> None:
    """Refuse a registered policy that cannot run on ``task`` (a task object); one line.

    A policy entry with ``tasks`` metadata runs on those tasks only (the rope experts); a
    task with a ``policies`` list (the deformable rope) takes only those registered
    policies. Entry points and unknown names pass (they are checked when built).
    """
    if name not in POLICIES:
        return
    from bench.errors import BenchError

    task_name = str(getattr(task, "name", task))
    only = POLICIES.entry(name).meta.get("tasks")
    if only is not None and task_name not in only:
        raise BenchError(f"policy {name!r} runs on tasks {list(only)} only, not {task_name!r}; "
                         f"pick another policy for {task_name!r}")
    runs_on = getattr(task, "policies", None)
    if runs_on is not None and name not in runs_on:
        raise BenchError(f"policy {name!r} cannot run on task {task_name!r}; use one of "
                         f"{', '.join(runs_on)} or an entry point package.module:factory")


def make_policy(name: str, env: Any, *, seed: int = 0, **kwargs: Any) -> Policy:
    """Build policy ``name`` for ``env``: a registry name or an entry point ``"pkg.mod:factory"``.

    Factories are called ``factory(env, seed=seed, **kwargs)`` with the unwrapped env.
    """
    unwrapped = env.unwrapped if hasattr(env, "unwrapped") else env
    if ":" in name:
        from bench.policies.factory import build_entry_point

        return build_entry_point(name, unwrapped, seed=seed, kwargs=kwargs)
    factory = POLICIES.get(name)
    return factory(unwrapped, seed=seed, **kwargs)
