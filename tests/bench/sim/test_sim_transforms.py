"""Rigid-transform helpers against references (scipy Rotation; the per-step slerp reference)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from bench.geometry import (
    interpolate_pose,
    mat_to_quat,
    mat_to_rotvec,
    pose,
    quat_mul,
    quat_to_mat,
    rotvec_to_mat,
    slerp_mat,
    top_down_mat,
    wrap_angle,
)


def _wxyz(rot: Rotation) -> np.ndarray:
    x, y, z, w = rot.as_quat()
    return np.array([w, x, y, z])


@pytest.mark.parametrize("seed", range(5))
def test_conversions_match_scipy(seed):
    rot = Rotation.random(random_state=seed)
    np.testing.assert_allclose(quat_to_mat(_wxyz(rot)), rot.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(rotvec_to_mat(rot.as_rotvec()), rot.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(mat_to_rotvec(rot.as_matrix()), rot.as_rotvec(), atol=1e-9)
    q = mat_to_quat(rot.as_matrix())
    assert q[0] >= 0
    np.testing.assert_allclose(np.abs(q @ _wxyz(rot)), 1.0, atol=1e-12)
    other = Rotation.random(random_state=seed + 100)
    np.testing.assert_allclose(
        quat_to_mat(quat_mul(_wxyz(rot), _wxyz(other))), (rot * other).as_matrix(), atol=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_interpolation_equals_per_step_slerp(seed):
    rng = np.random.default_rng(seed)
    start = pose(Rotation.random(random_state=seed).as_matrix(), rng.normal(size=3))
    goal = pose(start[:3, :3] @ rotvec_to_mat(rng.normal(size=3) * 0.4), rng.normal(size=3))
    positions, quats = interpolate_pose(start, goal, 50)
    for k in range(50):
        t = (k + 1) / 50
        np.testing.assert_allclose(
            quat_to_mat(quats[k]), slerp_mat(start[:3, :3], goal[:3, :3], t), atol=1e-12
        )
        np.testing.assert_allclose(positions[k], (1 - t) * start[:3, 3] + t * goal[:3, 3])
    np.testing.assert_allclose(quat_to_mat(quats[-1]), goal[:3, :3], atol=1e-12)


def test_top_down_frame_and_wrap():
    r = top_down_mat(0.0)
    np.testing.assert_allclose(r, np.diag([1.0, -1.0, -1.0]))  # rotation by pi about x
    assert np.linalg.det(top_down_mat(0.7)) == pytest.approx(1.0)
    assert wrap_angle(3 * np.pi) == pytest.approx(-np.pi)
