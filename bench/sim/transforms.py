"""Rigid-transform helpers (quaternions are w, x, y, z, as MuJoCo stores them).

Plain numpy on purpose: these run a few times per control frame, never per
physics step in a hot loop, so clarity wins over speed.
"""

from __future__ import annotations

import numpy as np


def quat_to_mat(quat: np.ndarray) -> np.ndarray:  # [4] -> [3, 3]
    """Rotation matrix of a (not necessarily unit) quaternion ``(w, x, y, z)``."""
    w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def mat_to_quat(mat: np.ndarray) -> np.ndarray:  # [3, 3] -> [4]
    """Unit quaternion ``(w, x, y, z)`` with ``w >= 0`` of a rotation matrix."""
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(mat, dtype=np.float64).reshape(9))
    return quat if quat[0] >= 0 else -quat


def rotvec_to_mat(rotvec: np.ndarray) -> np.ndarray:  # [3] -> [3, 3]
    """Rodrigues: rotation about ``rotvec / |rotvec|`` by ``|rotvec|`` radians."""
    rotvec = np.asarray(rotvec, dtype=np.float64)
    angle = float(np.linalg.norm(rotvec))
    if angle < 1e-12:
        return np.eye(3)
    k = rotvec / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def mat_to_rotvec(mat: np.ndarray) -> np.ndarray:  # [3, 3] -> [3]
    """Inverse of :func:`rotvec_to_mat` (angle in [0, pi])."""
    quat = mat_to_quat(mat)
    sin_half = float(np.linalg.norm(quat[1:]))
    if sin_half < 1e-12:
        return np.zeros(3)
    angle = 2.0 * np.arctan2(sin_half, quat[0])
    return quat[1:] / sin_half * angle


def pose(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:  # -> [4, 4]
    """Homogeneous transform from a [3, 3] rotation and a [3] translation."""
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = translation
    return out


def yaw_mat(yaw: float) -> np.ndarray:  # -> [3, 3]
    """Rotation about world +z by ``yaw`` radians."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def top_down_mat(yaw: float) -> np.ndarray:  # -> [3, 3]
    """Tool frame pointing straight down (+z_tool = -z_world), fingers opening along yaw.

    Columns are the tool axes in world coordinates: x = (cos yaw, sin yaw, 0)
    (finger opening axis), z = (0, 0, -1) (approach), y = z cross x.
    """
    x_axis = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    z_axis = np.array([0.0, 0.0, -1.0])
    return np.stack([x_axis, np.cross(z_axis, x_axis), z_axis], axis=1)


def wrap_angle(angle: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def slerp_mat(r0: np.ndarray, r1: np.ndarray, t: float) -> np.ndarray:  # [3,3],[3,3] -> [3,3]
    """Geodesic interpolation between two rotations, ``t`` in [0, 1]."""
    return r0 @ rotvec_to_mat(t * mat_to_rotvec(r0.T @ r1))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # [..., 4] x [..., 4] -> [..., 4]
    """Hamilton product of (w, x, y, z) quaternions (broadcasts)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, np.float64), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def interpolate_pose(
    start: np.ndarray,
    goal: np.ndarray,
    steps: int,
) -> tuple[np.ndarray, np.ndarray]:  # -> [steps, 3], [steps, 4]
    """Poses at t = k / steps, k = 1..steps, from ``start`` to ``goal`` ([4, 4] each).

    Position: linear; rotation: geodesic (constant angular velocity). Vectorised
    over the steps so the physics loop only copies rows; equals
    :func:`slerp_mat` at every step (tested).
    """
    t = np.arange(1, steps + 1, dtype=np.float64)[:, None] / steps  # [steps, 1]
    positions = (1.0 - t) * start[:3, 3] + t * goal[:3, 3]
    rotvec = mat_to_rotvec(start[:3, :3].T @ goal[:3, :3])
    angle = float(np.linalg.norm(rotvec))
    axis = rotvec / angle if angle > 1e-12 else np.array([1.0, 0.0, 0.0])
    half = 0.5 * angle * t  # [steps, 1]
    relative = np.concatenate([np.cos(half), np.sin(half) * axis], axis=1)
    return positions, quat_mul(mat_to_quat(start[:3, :3]), relative)
