"""LBS: identical node motions give a rigid transform of the Gaussians (to 1e-6)."""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from bench.sim.softbody.lbs import LBSBinding


def test_lbs_with_identical_node_motion_is_rigid():
    rng = np.random.default_rng(0)
    nodes = rng.uniform(-0.1, 0.1, (60, 3))
    means = rng.uniform(-0.1, 0.1, (500, 3))
    quats = rng.normal(size=(500, 4))
    binding = LBSBinding.bind(means, quats, nodes, k=4)
    rot = Rotation.from_rotvec([0.3, -0.7, 0.4])
    shift = np.array([0.05, -0.02, 0.3])
    got_means, got_quats = binding.deform(rot.apply(nodes) + shift)
    np.testing.assert_allclose(got_means, rot.apply(means) + shift, atol=1e-6)
    q0 = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    want = (rot * Rotation.from_quat(q0[:, [1, 2, 3, 0]])).as_matrix()
    got = Rotation.from_quat(got_quats[:, [1, 2, 3, 0]]).as_matrix()
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_lbs_follows_a_bend_locally():
    # a bent bar: Gaussians near the moved end follow it, those at the fixed end stay
    nodes = np.stack([np.linspace(0, 0.3, 31), np.zeros(31), np.zeros(31)], 1)
    means = nodes[[2, 28]] + [0.0, 0.0, 0.005]
    binding = LBSBinding.bind(means, np.tile([1.0, 0, 0, 0], (2, 1)), nodes, k=3)
    bent = nodes.copy()
    bent[15:, 2] += (bent[15:, 0] - 0.15)  # 45 degrees from the middle
    got, _ = binding.deform(bent)
    np.testing.assert_allclose(got[0], means[0], atol=1e-9)
    assert abs(got[1, 2] - (0.13 + 0.005 / np.sqrt(2))) < 1e-6  # offset turned by 45 deg
