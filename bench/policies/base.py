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

ACTION_DIM = 7
ACTION_MODES = ("delta", "absolute")
CAMERA_SUFFIX = "_rgb"
#: (name, width, unit) of each proprioception field, in order (float32 [8] in all).
PROPRIO_FIELDS = (
    ("tcp_position", 3, "metres, world frame (x, y, z)"),
    ("tcp_quaternion", 4, "unit quaternion w x y z, world frame"),
    ("finger_opening", 1, "metres between the pads (0 closed)"),
)
PROPRIO_DIM = sum(width for _, width, _ in PROPRIO_FIELDS)

class PolicyError(RuntimeError):
    """A policy fault (server dead, slow or refusing; malformed chunk), not a task failure.

    The message is one line naming the policy and the reason; the rollout that hits it is
    stored with ``status="error"`` and rerun by ``bench study run --resume``.
    """


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


POLICIES: Registry = Registry("policy")


def task_instruction(task: Any) -> str:
    """The language instruction of ``task`` (a TaskSpec or a registered task name).

    The task file's ``instruction`` is the one source (bench/sim/task_files/*.json).
    """
    if isinstance(task, str):
        from bench.sim.tasks import get_task

        task = get_task(task)
    return str(task.instruction)


def camera_images(obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``{camera: uint8 [H, W, 3]}`` from an env observation's ``<camera>_rgb`` keys (sorted)."""
    return {
        key[: -len(CAMERA_SUFFIX)]: obs[key]
        for key in sorted(obs)
        if key.endswith(CAMERA_SUFFIX) and isinstance(obs[key], np.ndarray)
    }


def policy_observation(
    obs: Mapping[str, Any], env: Any, *, frame: int | None = None
) -> dict[str, Any]:
    """The policy-facing observation (module docstring) of env observation ``obs``.

    Args:
        obs: What ``env.reset`` / ``env.step`` returned.
        env: The environment (wrapped or not): gives the task and the control rate.
        frame: Control frame of ``obs`` (default: the env's current frame).
    """
    unwrapped = getattr(env, "unwrapped", env)
    if frame is None:
        frame = int(getattr(unwrapped, "_frame", 0))
    hz = float(unwrapped.config.control_hz)
    out = dict(obs)
    out["images"] = camera_images(obs)
    out["proprio"] = np.asarray(obs["proprio"], dtype=np.float32)
    out["prompt"] = task_instruction(unwrapped.task)
    out["timestamp"] = frame / hz
    return out


def validate_chunk(chunk: Any, *, source: str) -> np.ndarray:  # -> float32 [T, 7]
    """Check a policy output: float array ``[T, 7]`` (or ``[7]``), finite; else PolicyError."""
    if not isinstance(chunk, np.ndarray):
        raise PolicyError(f"{source}: returned {type(chunk).__name__}, expected a float32 "
                          "numpy array [T, 7]")
    if chunk.dtype.kind != "f":
        raise PolicyError(f"{source}: returned dtype {chunk.dtype}, expected float32 [T, 7]")
    rows = chunk[None] if chunk.ndim == 1 else chunk
    if rows.ndim != 2 or rows.shape[1] != ACTION_DIM or rows.shape[0] < 1:
        raise PolicyError(f"{source}: returned shape {tuple(chunk.shape)}, expected [T, 7] "
                          "(dx, dy, dz, rx, ry, rz, opening)")
    if not np.all(np.isfinite(rows)):
        raise PolicyError(f"{source}: returned NaN or inf in its action chunk")
    return rows.astype(np.float32, copy=False)


def absolute_to_delta(  # rows [T, 7] absolute, target [4, 4] -> [T, 7] delta
    rows: np.ndarray, target: np.ndarray
) -> np.ndarray:
    """Chain absolute TCP targets (world xyz + rotvec, opening) into wrist-frame deltas."""
    from bench.geometry import mat_to_rotvec, pose, rotvec_to_mat

    out = np.empty_like(rows, dtype=np.float64)
    current = np.asarray(target, dtype=np.float64)
    for i, row in enumerate(np.asarray(rows, dtype=np.float64)):
        goal = pose(rotvec_to_mat(row[3:6]), row[:3])
        delta = np.linalg.inv(current) @ goal
        out[i, :3] = delta[:3, 3]
        out[i, 3:6] = mat_to_rotvec(delta[:3, :3])
        out[i, 6] = row[6]
        current = goal
    return out.astype(np.float32)


def to_env_chunk(
    chunk: Any, env: Any, info: Mapping[str, Any], *, mode: str = "delta", source: str = "policy"
) -> np.ndarray:  # -> [chunk_size, 7] float32 (or [7] with control='single')
    """Validate a policy chunk and fit it to the env's action shape (module docstring)."""
    if mode not in ACTION_MODES:
        raise PolicyError(f"{source}: action_mode {mode!r} is not one of {ACTION_MODES}")
    rows = validate_chunk(chunk, source=source)
    if mode == "absolute":
        rows = absolute_to_delta(rows, np.asarray(info["tcp_target"]))
    unwrapped = getattr(env, "unwrapped", env)
    if unwrapped.config.control == "single":
        return np.ascontiguousarray(rows[0])
    size = int(unwrapped.chunk_size)
    if len(rows) >= size:
        return np.ascontiguousarray(rows[:size])
    hold = np.zeros((size - len(rows), ACTION_DIM), dtype=np.float32)
    hold[:, 6] = rows[-1, 6]
    return np.concatenate([rows, hold])


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
        from bench.policies.entry import build_entry_point

        return build_entry_point(name, unwrapped, seed=seed, kwargs=kwargs)
    factory = POLICIES.get(name)
    return factory(unwrapped, seed=seed, **kwargs)
