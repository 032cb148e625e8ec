"""ICP + RANSAC recovers a known rigid transform; segmentation; forward kinematics."""

from __future__ import annotations

import numpy as np
import trimesh
from scipy.spatial.transform import Rotation

from bench.align.pose import LinkFollower, align_pose, sample_links, segment, transform_points


def _two_link_robot() -> dict[str, trimesh.Trimesh]:
    base = trimesh.creation.box(extents=(0.08, 0.06, 0.20))
    base.apply_translation((0.0, 0.0, 0.10))
    arm = trimesh.creation.box(extents=(0.18, 0.04, 0.04))
    arm.apply_translation((0.12, 0.0, 0.22))
    return {"base": base, "arm": arm}


def _gaussians_on(meshes, n_per_link: int, seed: int, noise: float):
    rng = np.random.default_rng(seed)
    points, labels = [], []
    for k, mesh in enumerate(meshes.values()):
        p, _ = trimesh.sample.sample_surface(mesh, n_per_link, seed=seed + 10 + k)
        points.append(p + rng.normal(0, noise, p.shape))
        labels.append(np.full(n_per_link, k))
    return np.concatenate(points), np.concatenate(labels)


def test_icp_ransac_recovers_known_transform_from_30_degrees():
    meshes = _two_link_robot()
    centres, _ = _gaussians_on(meshes, 3000, seed=1, noise=0.0003)
    truth = np.eye(4)
    truth[:3, :3] = Rotation.from_rotvec(np.deg2rad(30) * np.array([1.0, 2.0, 0.5]) /
                                         np.linalg.norm([1.0, 2.0, 0.5])).as_matrix()
    truth[:3, 3] = [0.04, -0.03, 0.05]
    splat_frame = transform_points(np.linalg.inv(truth), centres)  # the scan is 30 deg off
    result = align_pose(splat_frame, meshes, per_link=2000, seed=0)
    err = result.transform @ np.linalg.inv(truth)
    angle = np.rad2deg(np.arccos(np.clip((np.trace(err[:3, :3]) - 1) / 2, -1, 1)))
    assert np.linalg.norm(err[:3, 3]) < 1e-3 and angle < 0.1


def test_segmentation_labels_99_percent_right_on_two_link_robot():
    meshes = _two_link_robot()
    centres, truth = _gaussians_on(meshes, 3000, seed=2, noise=0.001)
    points, labels, names = sample_links(meshes, per_link=2000, seed=0)
    got = segment(centres, points, labels)
    assert names == ["base", "arm"]
    assert (got == truth).mean() >= 0.99


def test_link_follower_moves_segmented_gaussians_rigidly():
    from bench.scene.gaussians import GaussianSplats

    meshes = _two_link_robot()
    centres, labels = _gaussians_on(meshes, 200, seed=3, noise=0.0)
    n = len(centres)
    splats = GaussianSplats(
        means=centres.astype(np.float32), quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.zeros((n, 3), np.float32), opacity_logits=np.zeros(n, np.float32),
        sh_dc=np.zeros((n, 3), np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))
    rest = np.tile(np.eye(4), (2, 1, 1))
    rest[1, :3, 3] = [0.03, 0.0, 0.22]  # the arm's joint
    follower = LinkFollower(splats, labels, rest)
    moved = rest.copy()
    moved[1, :3, :3] = Rotation.from_rotvec([0.0, 0.0, 0.8]).as_matrix()
    out = follower.apply(moved)
    arm = labels == 1
    want = (centres[arm] - rest[1, :3, 3]) @ moved[1, :3, :3].T + rest[1, :3, 3]
    np.testing.assert_allclose(out.means[arm], want, atol=1e-6)
    np.testing.assert_allclose(out.means[~arm], centres[~arm], atol=1e-6)
    np.testing.assert_allclose(np.abs(out.quats[arm][:, 0]), np.cos(0.4), atol=1e-6)
