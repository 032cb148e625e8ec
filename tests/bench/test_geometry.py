"""bench.geometry against closed forms, scipy Rotation and MuJoCo; its torch and Warp twins.

References: the axis-angle closed form R = I + sin(a) K + (1 - cos(a)) K^2 (Rodrigues),
scipy.spatial.transform.Rotation (quaternions, rotation vectors, slerp), MuJoCo's
``mju_mat2Quat`` (bit for bit), and matrix algebra for similarity transforms.
"""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from bench import geometry as G
from bench.errors import BenchError


def _wxyz(rot: Rotation) -> np.ndarray:  # [..., 4]
    return np.roll(rot.as_quat(), 1, axis=-1)


def _random_rotations(count: int, seed: int) -> np.ndarray:  # [count, 3, 3]
    return Rotation.random(count, random_state=seed).as_matrix()


def _awkward_rotations() -> list[np.ndarray]:
    """Identity, half turns and near-half turns: the branch edges of Shepperd's method."""
    out = [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
           np.diag([-1.0, -1.0, 1.0])]
    for axis in np.eye(3):
        for angle in (1e-9, math.pi / 2, -math.pi / 2, math.pi - 1e-9, math.pi):
            out.append(Rotation.from_rotvec(axis * angle).as_matrix())
    diagonal = np.ones(3) / math.sqrt(3.0)
    out += [Rotation.from_rotvec(diagonal * a).as_matrix() for a in (2 * math.pi / 3, math.pi)]
    return out


def test_quat_to_mat_closed_form_axis_angle():
    # q = (cos(a/2), sin(a/2) n) is the rotation by a about n (Rodrigues' closed form)
    rng = np.random.default_rng(0)
    for _ in range(20):
        axis = rng.standard_normal(3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(-math.pi, math.pi)
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        closed = np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k
        quat = np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
        np.testing.assert_allclose(G.quat_to_mat(3.7 * quat), closed, atol=1e-14)
        np.testing.assert_allclose(G.rotvec_to_mat(angle * axis), closed, atol=1e-14)
    # a quarter turn about z takes x to y
    np.testing.assert_allclose(G.quat_to_mat([math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)])
                               @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-15)


def test_quaternions_match_scipy_batched_and_single():
    rot = Rotation.random(200, random_state=1)
    quats = _wxyz(rot) * np.random.default_rng(1).uniform(0.2, 5.0, (200, 1))
    batch = G.quat_to_mat(quats)
    assert batch.shape == (200, 3, 3)
    np.testing.assert_allclose(batch, rot.as_matrix(), atol=1e-14)
    for q, m in zip(quats[:20], batch[:20], strict=True):
        np.testing.assert_allclose(G.quat_to_mat(q), m, atol=1e-15)
    back = G.mat_to_quat(rot.as_matrix())
    assert back.shape == (200, 4) and (back[:, 0] >= 0).all()
    np.testing.assert_allclose(np.abs(np.sum(back * _wxyz(rot), axis=1)), 1.0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(G.quat_normalize(quats), axis=1), 1.0, atol=1e-15)
    other = Rotation.random(200, random_state=2)
    np.testing.assert_allclose(G.quat_to_mat(G.quat_mul(_wxyz(rot), _wxyz(other))),
                               (rot * other).as_matrix(), atol=1e-14)


def test_batched_mat_to_quat_agrees_up_to_sign():
    mats = np.concatenate([_random_rotations(300, seed=9), np.stack(_awkward_rotations())])
    batch = G.mat_to_quat_batch(mats)
    single = G.mat_to_quat(mats)
    np.testing.assert_allclose(np.abs(np.sum(batch * single, axis=1)), 1.0, atol=1e-12)
    np.testing.assert_allclose(G.quat_to_mat(batch), mats, atol=1e-12)


def test_mat_to_quat_round_trip_at_branch_edges():
    for m in _awkward_rotations():
        q = G.mat_to_quat(m)
        assert q[0] >= 0 and abs(np.linalg.norm(q) - 1.0) < 1e-15
        np.testing.assert_allclose(G.quat_to_mat(q), m, atol=1e-12)


def test_mat_to_quat_is_mujocos_bit_for_bit():
    mujoco = pytest.importorskip("mujoco")
    mats = list(_random_rotations(3000, seed=3)) + _awkward_rotations()
    mats += list(G.quat_to_mat(np.random.default_rng(4).standard_normal((500, 4))))
    for m in mats:
        expected = np.zeros(4)
        mujoco.mju_mat2Quat(expected, np.ascontiguousarray(m).reshape(9))
        expected = expected if expected[0] >= 0 else -expected
        assert np.array_equal(G.mat_to_quat(m), expected), m


def test_rotvec_round_trips_match_scipy():
    rot = Rotation.random(100, random_state=5)
    for r, m, v in zip(rot, rot.as_matrix(), rot.as_rotvec(), strict=True):
        np.testing.assert_allclose(G.rotvec_to_mat(v), m, atol=1e-12)
        np.testing.assert_allclose(G.mat_to_rotvec(m), v, atol=1e-9)
        np.testing.assert_allclose(G.rotvec_to_mat(G.mat_to_rotvec(m)), m, atol=1e-12)
        assert np.linalg.norm(G.mat_to_rotvec(r.as_matrix())) <= math.pi + 1e-12
    np.testing.assert_array_equal(G.rotvec_to_mat(np.zeros(3)), np.eye(3))
    np.testing.assert_array_equal(G.mat_to_rotvec(np.eye(3)), np.zeros(3))


def test_slerps_match_scipy():
    keys = Rotation.random(2, random_state=6)
    spline = Slerp([0.0, 1.0], keys)
    for t in (0.0, 0.25, 0.5, 0.9, 1.0):
        expected = spline([t]).as_matrix()[0]
        q = G.quat_slerp(_wxyz(keys[0]), _wxyz(keys[1]), t)
        np.testing.assert_allclose(G.quat_to_mat(q), expected, atol=1e-12)
        np.testing.assert_allclose(G.slerp_mat(*keys.as_matrix(), t), expected, atol=1e-12)


def test_similarity_compose_invert_apply_match_matrices():
    rng = np.random.default_rng(7)
    rots = _random_rotations(2, seed=7)
    a = G.Similarity(2.5, rots[0], rng.standard_normal(3))
    b = G.Similarity(0.4, rots[1], rng.standard_normal(3))
    points = rng.standard_normal((50, 3))
    homogeneous = np.concatenate([points, np.ones((50, 1))], axis=1)
    np.testing.assert_allclose(a.apply_points(points), (homogeneous @ a.matrix().T)[:, :3],
                               atol=1e-12)
    np.testing.assert_allclose(a.compose(b).matrix(), a.matrix() @ b.matrix(), atol=1e-12)
    np.testing.assert_allclose(a.inverse().matrix(), np.linalg.inv(a.matrix()), atol=1e-12)
    np.testing.assert_allclose(a.compose(a.inverse()).matrix(), np.eye(4), atol=1e-12)
    decomposed = G.Similarity.from_matrix(a.matrix())
    assert decomposed.scale == pytest.approx(2.5, abs=1e-12)
    np.testing.assert_allclose(decomposed.rotation, rots[0], atol=1e-12)
    reflection = np.diag([1.0, 1.0, -1.0, 1.0])
    with pytest.raises(BenchError, match="determinant"):
        G.Similarity.from_matrix(reflection)


def test_look_at_closed_form_and_errors():
    # from (0, -2, 0) towards the origin with z up: forward +y, right +x, down -z
    view = G.look_at((0.0, -2.0, 0.0), (0.0, 0.0, 0.0))
    np.testing.assert_allclose(view[:3, :3], [[1, 0, 0], [0, 0, 1], [0, -1, 0]], atol=1e-15)
    np.testing.assert_array_equal(view[:3, 3], [0.0, -2.0, 0.0])
    rot = G.look_at((0.3, -1.1, 0.7), (0.1, 0.2, -0.3))[:3, :3]
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-15)
    assert np.linalg.det(rot) == pytest.approx(1.0, abs=1e-14)
    with pytest.raises(ValueError, match="coincide"):
        G.look_at((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="parallel"):
        G.look_at((0.0, 0.0, 1.0), (0.0, 0.0, 0.0))


def test_pose_helpers():
    np.testing.assert_allclose(G.yaw_mat(0.3), Rotation.from_euler("z", 0.3).as_matrix(),
                               atol=1e-15)
    for yaw in (-2.0, 0.0, 0.3, math.pi):
        np.testing.assert_allclose(G.quat_to_mat(G.yaw_quat(yaw)), G.yaw_mat(yaw), atol=1e-15)
    down = G.top_down_mat(0.4)
    np.testing.assert_allclose(down @ [0.0, 0.0, 1.0], [0.0, 0.0, -1.0], atol=1e-15)
    assert np.linalg.det(down) == pytest.approx(1.0, abs=1e-14)
    assert G.wrap_angle(3 * math.pi) == pytest.approx(-math.pi)
    transform = G.pose(np.eye(3), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(transform @ [0.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 1.0])


# --------------------------------------------------------------------------- twins
def _twin_quats() -> np.ndarray:  # [N, 4] not unit
    return np.random.default_rng(8).standard_normal((257, 4))


def test_torch_twin_agrees():
    torch = pytest.importorskip("torch")
    from bench.render.torch_raster import quat_to_rotmat

    quats = _twin_quats()
    expected = G.quat_to_mat(quats)
    got64 = quat_to_rotmat(torch.tensor(quats, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got64, expected, atol=1e-12)
    got32 = quat_to_rotmat(torch.tensor(quats, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got32, expected, atol=1e-6)


def test_warp_backend_twin_agrees():
    pytest.importorskip("warp")
    from bench.render.warp_backend import _quat_to_rotmat

    quats = _twin_quats()
    unit = G.quat_normalize(quats)  # the renderer normalises before its conversion
    np.testing.assert_allclose(_quat_to_rotmat(unit), G.quat_to_mat(quats), atol=1e-12)


def test_warp_kernel_twin_agrees():
    wp = pytest.importorskip("warp")
    from bench.render import warp_grad

    @wp.kernel
    def rotations(quats: wp.array(dtype=wp.vec4), out: wp.array(dtype=wp.mat33)):
        i = wp.tid()
        out[i] = warp_grad._quat_rotation(quats[i])

    quats = G.quat_normalize(_twin_quats())
    src = wp.array(quats.astype(np.float32), dtype=wp.vec4, device="cpu")
    out = wp.zeros(len(quats), dtype=wp.mat33, device="cpu")
    wp.launch(rotations, dim=len(quats), inputs=[src, out], device="cpu")
    np.testing.assert_allclose(out.numpy(), G.quat_to_mat(quats), atol=1e-6)
