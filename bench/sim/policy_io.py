"""The policy-facing observation and action helpers, on the simulator's side of the arrow.

The rollout loop (:func:`bench.sim.rollout.run_episode`) needs them to talk to a policy,
so they live here, in ``bench.sim``, which imports nothing from ``bench.policies``;
:mod:`bench.policies.base` re-exports every name, and users import them from there (its
module docstring and docs/policies.md are the contract: the observation dict
:func:`policy_observation` builds, the ``[T, 7]`` chunk :func:`to_env_chunk` fits to the
env, and :class:`PolicyError`, a policy fault).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "ACTION_DIM",
    "ACTION_MODES",
    "CAMERA_SUFFIX",
    "PROPRIO_DIM",
    "PROPRIO_FIELDS",
    "PolicyError",
    "absolute_to_delta",
    "camera_images",
    "policy_observation",
    "task_instruction",
    "to_env_chunk",
    "validate_chunk",
]

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
    """The policy-facing observation of env observation ``obs`` (see bench.policies.base).

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
    """Validate a policy chunk and fit it to the env's action shape (see bench.policies.base)."""
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
