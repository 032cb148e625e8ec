"""Similarity transforms: decomposition, validation, covariances, SH colour invariance."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from bench.errors import BenchError
from bench.geometry import Similarity, mat_to_quat, quat_mul
from bench.scene.gaussians import GaussianSplats
from bench.scene.transforms import sh_basis, transform_splats


def splats(n=100, k=15, seed=0):
    rng = np.random.default_rng(seed)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return GaussianSplats(f(n, 3), f(n, 4), 0.3 * f(n, 3), f(n), f(n, 3), f(n, k, 3))


def matrix(scale=2.5, euler=(30, -20, 45), t=(0.3, -0.2, 0.5)):
    m = np.eye(4)
    m[:3, :3] = scale * Rotation.from_euler("zyx", euler, degrees=True).as_matrix()
    m[:3, 3] = t
    return m


def covariances(s):  # [N, 3, 3], rotation from scipy (independent of our quaternion code)
    q = s.normalized_quats()
    rot = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix()
    var = np.exp(2 * s.log_scales.astype(np.float64))
    return np.einsum("nij,nj,nkj->nik", rot, var, rot)


def test_decomposition_and_inverse():
    m = matrix()
    sim = Similarity.from_matrix(m)
    assert sim.scale == pytest.approx(2.5)
    np.testing.assert_allclose(sim.matrix(), m, atol=1e-12)
    np.testing.assert_allclose(sim.inverse().matrix() @ m, np.eye(4), atol=1e-12)


@pytest.mark.parametrize("bad,message", [
    (np.diag([1.0, 2.0, 1.0, 1.0]), "not orthonormal"),
    (np.diag([1.0, 1.0, -1.0, 1.0]), "determinant"),
    (np.zeros((3, 3)), "4x4"),
    (np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1.0]]), "last row"),
    (np.full((4, 4), np.nan), "NaN"),
])
def test_rejects_non_similarity(bad, message):
    with pytest.raises(BenchError, match=message):
        Similarity.from_matrix(bad)


def test_quaternion_helpers_match_scipy():
    rot = Rotation.from_euler("zyx", [10, 70, -130], degrees=True)
    q = mat_to_quat(rot.as_matrix())
    expected = rot.as_quat()[[3, 0, 1, 2]]
    np.testing.assert_allclose(q, expected * np.sign(expected[0]), atol=1e-12)
    a, b = Rotation.random(random_state=1), Rotation.random(random_state=2)
    product = quat_mul(a.as_quat()[[3, 0, 1, 2]], b.as_quat()[[3, 0, 1, 2]])
    ab = (a * b).as_quat()[[3, 0, 1, 2]]
    np.testing.assert_allclose(product * np.sign(product[0]), ab * np.sign(ab[0]), atol=1e-12)


def test_means_covariances_and_opacity_transform():
    s, m = splats(), matrix()
    w = transform_splats(s, m)
    sim = Similarity.from_matrix(m)
    np.testing.assert_allclose(w.means, s.means @ m[:3, :3].T + m[:3, 3], atol=1e-5)
    # covariance of a Gaussian under x -> sRx + t is s^2 R C R^T
    expected = 2.5**2 * np.einsum("ij,njk,lk->nil", sim.rotation, covariances(s), sim.rotation)
    np.testing.assert_allclose(covariances(w), expected, rtol=2e-5, atol=1e-6)
    # the stored (unnormalised) quaternion norm is kept
    np.testing.assert_allclose(np.linalg.norm(w.quats, axis=1), np.linalg.norm(s.quats, axis=1),
                               rtol=1e-6)
    assert w.opacity_logits is s.opacity_logits and w.sh_dc is s.sh_dc


@pytest.mark.parametrize("k", [3, 8, 15])
def test_view_dependent_colour_is_invariant(k):
    s, m = splats(k=k), matrix()
    rot = Similarity.from_matrix(m).rotation
    w = transform_splats(s, m)
    dirs = np.random.default_rng(3).standard_normal((20, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    degree = {3: 1, 8: 2, 15: 3}[k]
    # colour seen from world direction d equals the old colour seen from splat direction R^T d
    old = np.einsum("pk,nkc->npc", sh_basis(dirs @ rot, degree), s.sh_rest)
    new = np.einsum("pk,nkc->npc", sh_basis(dirs, degree), w.sh_rest)
    np.testing.assert_allclose(new, old, atol=2e-5)


def test_sh_basis_matches_closed_form_band1():
    # band 1 of the 3DGS convention: (-C1 y, C1 z, -C1 x), C1 = sqrt(3 / (4 pi))
    d = np.array([[0.6, 0.0, 0.8]])
    c1 = math.sqrt(3.0 / (4.0 * math.pi))
    np.testing.assert_allclose(sh_basis(d, 1), [[0.0, c1 * 0.8, -c1 * 0.6]], atol=1e-12)


def test_identity_is_a_no_op_and_round_trip_is_close():
    s = splats()
    assert transform_splats(s, np.eye(4)) is s
    m = matrix()
    back = transform_splats(transform_splats(s, m), Similarity.from_matrix(m).inverse())
    for name in ("means", "quats", "log_scales", "sh_rest"):
        np.testing.assert_allclose(getattr(back, name), getattr(s, name), atol=2e-6)


def test_fast_sh_rotation_matches_reference():
    from bench.scene.transforms import rotate_sh_rest, rotate_sh_rest_reference

    rot = Similarity.from_matrix(matrix()).rotation
    for k in (0, 3, 8, 15):
        sh = splats(k=k).sh_rest
        # float32 products vs float64 reference: a few float32 ulps of the coefficients
        np.testing.assert_allclose(rotate_sh_rest(sh, rot), rotate_sh_rest_reference(sh, rot),
                                   rtol=0, atol=2e-6)
