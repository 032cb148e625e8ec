"""Rigid and similarity geometry in numpy: the one place for rotation math.

Conventions (everywhere in splatbench):

- Quaternions are ``(w, x, y, z)`` (scalar first, as MuJoCo and the INRIA 3DGS PLY
  store them), Hamilton product, active rotations: ``quat_to_mat(q) @ v`` rotates
  ``v``, and ``quat_to_mat(quat_mul(a, b)) == quat_to_mat(a) @ quat_to_mat(b)``.
  Inputs need not be unit; :func:`mat_to_quat` returns unit quaternions with ``w >= 0``.
- Rotation matrices act on column vectors; poses are ``[4, 4]`` homogeneous
  ``target_from_source`` matrices (``pose(R, t) @ [p, 1] = [R p + t, 1]``).
- Rotation vectors are ``axis * angle`` (radians, angle in [0, pi]).
- Cameras use OpenCV axes (+x right, +y down, +z forward), see :func:`look_at`.

The torch (:func:`bench.render.torch_raster.quat_to_rotmat`) and Warp
(``bench.render.warp_backend._quat_to_rotmat``) quaternion-to-matrix functions are
twins of :func:`quat_to_mat`, tested against it.

Plain float64 numpy on purpose: these run a few times per control frame or once per
scene, so clarity wins; the formulas are the closed forms, and :func:`mat_to_quat`
follows MuJoCo's ``mju_mat2Quat`` operation for operation (bit-identical, tested),
so simulator and scene code agree to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError

__all__ = [
    "ORTHONORMAL_TOL", "Similarity", "interpolate_pose", "look_at", "mat_to_quat",
    "mat_to_quat_batch",
    "mat_to_rotvec", "pose", "quat_mul", "quat_normalize", "quat_slerp", "quat_to_mat",
    "rotvec_to_mat", "slerp_mat", "top_down_mat", "wrap_angle", "yaw_mat", "yaw_quat",
]

ORTHONORMAL_TOL = 1e-4  # max |R^T R - I| accepted (JSON matrices carry ~6-8 digits)
_MJ_MINVAL = 1e-15  # MuJoCo's mjMINVAL: the normalisation threshold of mju_normalize4


# --------------------------------------------------------------------------- quaternions
def _quat_norm(q: np.ndarray) -> np.ndarray:  # [4] -> scalar, [..., 4] -> [..., 1]
    # np.linalg.norm of a 1-D array sums in another order than the axis form: keep the
    # 1-D form for single quaternions so their results stay bit-identical.
    return np.linalg.norm(q) if q.ndim == 1 else np.linalg.norm(q, axis=-1, keepdims=True)


def quat_normalize(quat: np.ndarray) -> np.ndarray:  # [..., 4] -> [..., 4]
    """Unit quaternion(s) ``q / |q|`` (the sign is kept)."""
    q = np.asarray(quat, dtype=np.float64)
    return q / _quat_norm(q)


def quat_to_mat(quat: np.ndarray) -> np.ndarray:  # [..., 4] -> [..., 3, 3]
    """Rotation matrix of (not necessarily unit) quaternion(s) ``(w, x, y, z)``."""
    q = np.asarray(quat, dtype=np.float64)
    w, x, y, z = np.moveaxis(q / _quat_norm(q), -1, 0)
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ]
    return np.stack(rows, axis=-1).reshape(q.shape[:-1] + (3, 3))


def _mat_to_quat_one(m: np.ndarray) -> np.ndarray:  # [9] row-major -> [4]
    # The branch order and arithmetic of MuJoCo's mju_mat2Quat + mju_normalize4.
    q = np.zeros(4)
    if m[0] + m[4] + m[8] > 0:
        q[0] = 0.5 * np.sqrt(1 + m[0] + m[4] + m[8])
        q[1] = 0.25 * (m[7] - m[5]) / q[0]
        q[2] = 0.25 * (m[2] - m[6]) / q[0]
        q[3] = 0.25 * (m[3] - m[1]) / q[0]
    elif m[0] > m[4] and m[0] > m[8]:
        q[1] = 0.5 * np.sqrt(1 + m[0] - m[4] - m[8])
        q[0] = 0.25 * (m[7] - m[5]) / q[1]
        q[2] = 0.25 * (m[1] + m[3]) / q[1]
        q[3] = 0.25 * (m[2] + m[6]) / q[1]
    elif m[4] > m[8]:
        q[2] = 0.5 * np.sqrt(1 - m[0] + m[4] - m[8])
        q[0] = 0.25 * (m[2] - m[6]) / q[2]
        q[1] = 0.25 * (m[1] + m[3]) / q[2]
        q[3] = 0.25 * (m[5] + m[7]) / q[2]
    else:
        q[3] = 0.5 * np.sqrt(1 - m[0] - m[4] + m[8])
        q[0] = 0.25 * (m[3] - m[1]) / q[3]
        q[1] = 0.25 * (m[2] + m[6]) / q[3]
        q[2] = 0.25 * (m[5] + m[7]) / q[3]
    norm = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if norm < _MJ_MINVAL:
        return np.array([1.0, 0.0, 0.0, 0.0])
    if abs(norm - 1) > _MJ_MINVAL:
        q *= 1 / norm
    return q if q[0] >= 0 else -q


def mat_to_quat(mat: np.ndarray) -> np.ndarray:  # [..., 3, 3] -> [..., 4]
    """Unit quaternion(s) ``(w, x, y, z)`` with ``w >= 0`` of rotation matrix(es).

    Shepperd's method with MuJoCo's branch order and arithmetic (``mju_mat2Quat``).
    """
    m = np.asarray(mat, dtype=np.float64)
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"mat_to_quat needs [..., 3, 3] matrices, got shape {m.shape}")
    flat = m.reshape(-1, 9)
    out = np.array([_mat_to_quat_one(row) for row in flat]).reshape(m.shape[:-2] + (4,))
    return out


def mat_to_quat_batch(mats: np.ndarray) -> np.ndarray:  # [N, 3, 3] -> [N, 4]
    """Unit quaternions ``(w, x, y, z)`` of many rotation matrices at once (scipy, vectorised).

    ``scipy.spatial.transform.Rotation.from_matrix``: the nearest rotation of each matrix,
    with scipy's sign choice (``w`` may be negative; ``q`` and ``-q`` are the same
    rotation). For per-Gaussian and per-node work where :func:`mat_to_quat`'s Python loop
    would be slow; the two agree up to sign (tested).
    """
    from scipy.spatial.transform import Rotation

    xyzw = Rotation.from_matrix(np.asarray(mats, np.float64)).as_quat()
    return xyzw[..., [3, 0, 1, 2]]


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # [..., 4] x [..., 4] -> [..., 4]
    """Hamilton product ``a (x) b`` of ``(w, x, y, z)`` quaternions (broadcasts)."""
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


def quat_slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:  # [4], [4] -> [4]
    """Shortest-arc spherical interpolation of two quaternions, ``t`` in [0, 1] (unit out).

    Nearly parallel inputs (``|q0 . q1| > 0.9995``) are interpolated linearly and
    renormalised, where slerp's ``1 / sin(theta)`` loses precision.
    """
    q0, q1 = q0 / np.linalg.norm(q0), q1 / np.linalg.norm(q1)
    dot = float(np.dot(q0, q1))
    if dot < 0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = np.arccos(dot)
    return (np.sin((1 - t) * theta) * q0 + np.sin(t * theta) * q1) / np.sin(theta)


# --------------------------------------------------------------------------- rotation vectors
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


# --------------------------------------------------------------------------- poses
def pose(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:  # [3, 3], [3] -> [4, 4]
    """Homogeneous transform from a [3, 3] rotation and a [3] translation."""
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = translation
    return out


def yaw_mat(yaw: float) -> np.ndarray:  # -> [3, 3]
    """Rotation about world +z by ``yaw`` radians."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def yaw_quat(yaw: float) -> np.ndarray:  # -> [4]
    """Quaternion ``(w, x, y, z)`` of the rotation about world +z by ``yaw`` radians."""
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


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


def interpolate_pose(
    start: np.ndarray,  # [4, 4]
    goal: np.ndarray,  # [4, 4]
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


def look_at(eye: Sequence[float], target: Sequence[float],
            up: Sequence[float] = (0.0, 0.0, 1.0)) -> np.ndarray:  # [3], [3], [3] -> [4, 4]
    """``world_from_camera`` (OpenCV axes) of a camera at ``eye`` looking at ``target``.

    ``up`` is the world direction that should appear upwards in the image (-y).
    """
    eye, target, up = (np.asarray(a, np.float64) for a in (eye, target, up))
    forward = target - eye
    if np.linalg.norm(forward) < 1e-12:
        raise ValueError("look_at: eye and target coincide; move the target away from the eye")
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-9:
        raise ValueError("look_at: viewing direction is parallel to `up`; pass another up vector")
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    out = np.eye(4)
    out[:3, 0], out[:3, 1], out[:3, 2], out[:3, 3] = right, down, forward, eye
    return out


# --------------------------------------------------------------------------- similarity
@dataclass(frozen=True)
class Similarity:
    """``x -> scale * rotation @ x + translation`` with a proper rotation.

    Attributes:
        scale: Uniform scale ``s > 0`` (e.g. world metres per splat unit).
        rotation: [3, 3] proper rotation matrix.
        translation: [3] translation in target units (metres).
    """

    scale: float
    rotation: np.ndarray  # [3, 3]
    translation: np.ndarray  # [3]

    @staticmethod
    def from_matrix(matrix: np.ndarray | list, *, source: str = "world_from_splat") -> Similarity:
        """Decompose a 4x4 similarity matrix, rejecting anything else with a clear error."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.shape != (4, 4):
            raise BenchError(f"{source} must be a 4x4 matrix, got shape {m.shape}")
        if not np.isfinite(m).all():
            raise BenchError(f"{source} contains NaN/Inf; store a finite 4x4 similarity matrix")
        if np.abs(m[3] - (0.0, 0.0, 0.0, 1.0)).max() > 1e-9:
            raise BenchError(f"{source} last row must be [0, 0, 0, 1], got {m[3].tolist()}")
        linear = m[:3, :3]
        det = float(np.linalg.det(linear))
        if det <= 0:
            raise BenchError(f"{source} has determinant {det:.3g} <= 0 (a reflection or a "
                             "collapse); the upper-left 3x3 must be s * R with R a rotation")
        diagonal = np.diag(np.diag(linear))
        if np.array_equal(linear, diagonal) and np.all(np.diag(linear) == linear[0, 0]):
            # s I exactly (no rotation): keep s and R = I exact (det ** (1/3) is off by
            # an ulp, which would turn the identity rotation into a needless SH rotation)
            scale, rotation = float(linear[0, 0]), np.eye(3)
        else:
            scale = det ** (1.0 / 3.0)
            rotation = linear / scale
        error = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
        if error > ORTHONORMAL_TOL:
            raise BenchError(f"{source} rotation part is not orthonormal (max |R^T R - I| = "
                             f"{error:.3g}); the upper-left 3x3 must be s * R with R a rotation")
        return Similarity(scale, rotation, m[:3, 3].copy())

    def matrix(self) -> np.ndarray:  # [4, 4]
        """The 4x4 homogeneous matrix ``[[s R, t], [0, 1]]``."""
        out = np.eye(4)
        out[:3, :3] = self.scale * self.rotation
        out[:3, 3] = self.translation
        return out

    def inverse(self) -> Similarity:
        """The similarity that undoes this one."""
        rt = self.rotation.T
        return Similarity(1.0 / self.scale, rt, -(rt @ self.translation) / self.scale)

    def compose(self, other: Similarity) -> Similarity:
        """``self`` after ``other``: ``x -> self(other(x))`` (matrix ``self @ other``)."""
        return Similarity(self.scale * other.scale, self.rotation @ other.rotation,
                          self.scale * (self.rotation @ other.translation) + self.translation)

    def is_identity(self) -> bool:
        """Whether the matrix is exactly the 4x4 identity."""
        return bool(np.array_equal(self.matrix(), np.eye(4)))

    def apply_points(self, points: np.ndarray) -> np.ndarray:  # [N, 3] -> [N, 3] float64
        """Map points: ``s R p + t`` for every row.

        Written as three column products summed in a fixed order, not ``p @ R.T``: BLAS picks
        a different kernel for one row than for many (and per CPU), so a matmul made a 1-row
        chunk round differently from the whole array; this way every row's result depends on
        that row alone, on every machine.
        """
        p = np.asarray(points, np.float64)
        r = self.rotation
        rotated = p[..., 0:1] * r[:, 0] + p[..., 1:2] * r[:, 1] + p[..., 2:3] * r[:, 2]
        return self.scale * rotated + self.translation
