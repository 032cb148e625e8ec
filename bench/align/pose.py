"""Positional alignment: Gaussian centres <-> robot/object model points, per-link segmentation, FK.

Pipeline (real2sim-eval Sec. III-C2 / A-B2):

1. sample ``per_link`` (2,000) surface points from every link's mesh in the model frame
   (``trimesh.sample.sample_surface``), each labelled with its link;
2. RANSAC initialisation: correspondences by nearest rotation-invariant descriptor (distance
   to the centroid and the square roots of the local covariance eigenvalues, z-scored), then
   minimal 3-point samples -> Kabsch transform, scored by the count of centres within
   ``inlier_distance`` of their matched model point; the identity (the user's coarse
   alignment) competes as one more hypothesis; the best few are refined by ICP and the one
   with the lowest RMSE wins;
3. point-to-point ICP (nearest neighbours by ``scipy.spatial.cKDTree``, Kabsch update) until
   the RMSE changes by less than ``tolerance``;
4. segmentation: each aligned Gaussian takes the link of its nearest sampled point;
5. forward kinematics: a segmented Gaussian keeps its pose in its link's frame, so moving the
   links (e.g. from MuJoCo ``xpos``/``xquat``) moves the Gaussians rigidly with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def kabsch(source: np.ndarray, target: np.ndarray, weights: np.ndarray | None = None
           ) -> np.ndarray:  # [M, 3], [M, 3] -> [4, 4] target ~ T @ source
    """Least-squares rigid transform (no scale) taking ``source`` onto ``target``."""
    w = np.ones(len(source)) if weights is None else np.asarray(weights, np.float64)
    w = w / w.sum()
    cs, ct = w @ source, w @ target
    h = (source - cs).T @ ((target - ct) * w[:, None])
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T))
    rot = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rot, ct - rot @ cs
    return out


def transform_points(t: np.ndarray, p: np.ndarray) -> np.ndarray:  # [4, 4], [M, 3] -> [M, 3]
    """Apply a rigid [4, 4] transform to points."""
    return p @ t[:3, :3].T + t[:3, 3]


@dataclass(frozen=True)
class ICPResult:
    """Aligned transform ``model_from_splat`` ([4, 4]), final RMSE (m), iterations, inliers."""

    transform: np.ndarray
    rmse: float
    iterations: int
    inlier_fraction: float


def icp(
    source: np.ndarray,  # [M, 3] Gaussian centres
    target: np.ndarray,  # [P, 3] model points
    *,
    init: np.ndarray | None = None,  # [4, 4]
    iterations: int = 100,
    tolerance: float = 1e-9,
    max_distance: float | None = None,
    tree=None,
) -> ICPResult:
    """Point-to-point ICP; pairs farther than ``max_distance`` are ignored (None: all)."""
    from scipy.spatial import cKDTree

    tree = tree or cKDTree(target)
    t = np.eye(4) if init is None else np.asarray(init, np.float64).copy()
    previous, rmse, done = np.inf, np.inf, 0
    for step in range(1, iterations + 1):
        done = step
        moved = transform_points(t, source)
        dist, idx = tree.query(moved)
        keep = np.ones(len(source), bool) if max_distance is None else dist < max_distance
        if keep.sum() < 3:
            break
        t = kabsch(moved[keep], target[idx[keep]]) @ t
        rmse = float(np.sqrt((dist[keep] ** 2).mean()))
        if abs(previous - rmse) < tolerance:
            break
        previous = rmse
    dist, _ = tree.query(transform_points(t, source))
    rmse = float(np.sqrt((dist**2).mean()))
    inl = float((dist < (max_distance or np.inf)).mean())
    return ICPResult(t, rmse, done, inl)


def descriptors(points: np.ndarray, *, k: int = 20) -> np.ndarray:  # [M, 3] -> [M, 4]
    """Rotation-invariant point descriptors: centroid distance + local covariance spread."""
    from scipy.spatial import cKDTree

    _, idx = cKDTree(points).query(points, k=min(k, len(points)))
    local = points[idx] - points[idx].mean(1, keepdims=True)
    cov = np.einsum("mki,mkj->mij", local, local) / idx.shape[1]
    eig = np.sqrt(np.maximum(np.linalg.eigvalsh(cov), 0.0))
    centre = np.linalg.norm(points - points.mean(0), axis=1)
    return np.column_stack([centre, eig])


def ransac_init(
    source: np.ndarray,  # [M, 3]
    target: np.ndarray,  # [P, 3]
    *,
    seed: int,
    trials: int = 2000,
    inlier_distance: float = 0.01,
    refine: int = 5,
    tree=None,
) -> np.ndarray:  # -> [4, 4]
    """RANSAC over descriptor correspondences (module doc, step 2)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    ds, dt = descriptors(source), descriptors(target)
    scale = np.maximum(dt.std(0), 1e-12)
    _, match = cKDTree(dt / scale).query(ds / scale)
    matched = target[match]
    tree = tree or cKDTree(target)
    hypotheses = [(-1, np.eye(4))]
    scored = []
    for _ in range(trials):
        pick = rng.choice(len(source), 3, replace=False)
        a = source[pick]
        if np.linalg.norm(np.cross(a[1] - a[0], a[2] - a[0])) < 1e-8:
            continue
        t = kabsch(a, matched[pick])
        count = int((np.linalg.norm(transform_points(t, source) - matched, axis=1)
                     < inlier_distance).sum())
        scored.append((count, t))
    scored.sort(key=lambda item: -item[0])
    hypotheses += scored[:refine]
    best, best_rmse = np.eye(4), np.inf
    for _, t in hypotheses:
        result = icp(source, target, init=t, iterations=30, tree=tree)
        if result.rmse < best_rmse:
            best, best_rmse = result.transform, result.rmse
    return best


def sample_links(
    meshes: Mapping[str, object], *, per_link: int = 2000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``per_link`` surface points per link mesh -> points [L*n, 3], labels [L*n], names."""
    import trimesh

    names = list(meshes)
    points, labels = [], []
    for index, name in enumerate(names):
        mesh = meshes[name]
        if not isinstance(mesh, trimesh.Trimesh):
            raise ValueError(f"link {name!r} is not a trimesh.Trimesh")
        sample, _ = trimesh.sample.sample_surface(mesh, per_link, seed=seed + index)
        points.append(np.asarray(sample, np.float64))
        labels.append(np.full(per_link, index, np.int64))
    return np.concatenate(points), np.concatenate(labels), names


def segment(  # centres [M, 3] (model frame), points [P, 3], labels [P] -> [M]
    centres: np.ndarray, points: np.ndarray, labels: np.ndarray
) -> np.ndarray:
    """Each centre takes the link label of its nearest sampled model point."""
    from scipy.spatial import cKDTree

    _, idx = cKDTree(points).query(centres)
    return np.asarray(labels)[idx]


@dataclass(frozen=True)
class PoseAlignment:
    """Result of :func:`align_pose`: transform, ICP fit, per-Gaussian link labels."""

    transform: np.ndarray  # [4, 4] model_from_splat
    icp: ICPResult
    labels: np.ndarray  # [M]
    link_names: list[str]

    def to_dict(self) -> dict:
        """The alignment as JSON (transform, RMSE, iterations, inliers per link)."""
        counts = np.bincount(self.labels, minlength=len(self.link_names))
        return {
            "model_from_splat": self.transform.tolist(),
            "rmse_m": self.icp.rmse,
            "icp_iterations": self.icp.iterations,
            "inlier_fraction": self.icp.inlier_fraction,
            "gaussians_per_link": dict(zip(self.link_names, counts.tolist(), strict=True)),
        }


def align_pose(
    centres: np.ndarray,  # [M, 3]
    meshes: Mapping[str, object],
    *,
    per_link: int = 2000,
    seed: int = 0,
    inlier_distance: float = 0.01,
    ransac_trials: int = 2000,
) -> PoseAlignment:
    """RANSAC + ICP alignment of Gaussian centres to link meshes, then segmentation."""
    from scipy.spatial import cKDTree

    centres = np.asarray(centres, np.float64)
    if centres.ndim != 2 or centres.shape[1] != 3 or len(centres) < 10:
        raise ValueError(f"need >= 10 Gaussian centres [M, 3], got {centres.shape}")
    points, labels, names = sample_links(meshes, per_link=per_link, seed=seed)
    tree = cKDTree(points)
    init = ransac_init(centres, points, seed=seed, trials=ransac_trials,
                       inlier_distance=inlier_distance, tree=tree)
    result = icp(centres, points, init=init, iterations=200, tree=tree)
    aligned = transform_points(result.transform, centres)
    return PoseAlignment(result.transform, result, segment(aligned, points, labels), names)


class LinkFollower:
    """Forward kinematics for segmented Gaussians: each keeps its pose in its link's frame.

    Args:
        splats: The aligned Gaussians (model/world frame).
        labels: [M] link index per Gaussian.
        rest_poses: [L, 4, 4] ``world_from_link`` at the alignment pose.
    """

    def __init__(self, splats, labels: np.ndarray, rest_poses: np.ndarray) -> None:
        from bench.geometry import mat_to_quat_batch

        self.splats, self.labels = splats, np.asarray(labels, np.int64)
        rest = np.asarray(rest_poses, np.float64)
        inv = np.linalg.inv(rest)[self.labels]  # [M, 4, 4]
        means = np.asarray(splats.means, np.float64)
        self.local_means = np.einsum("mij,mj->mi", inv[:, :3, :3], means) + inv[:, :3, 3]
        q = np.asarray(splats.quats, np.float64)
        self.rest_quats = q / np.linalg.norm(q, axis=1, keepdims=True)
        self.rest_link_quats = mat_to_quat_batch(rest[:, :3, :3])

    def apply(self, poses: np.ndarray):  # [L, 4, 4] world_from_link -> GaussianSplats
        """The skinned splats at the given per-link world poses (linear blend of rigid links)."""
        from bench.geometry import mat_to_quat_batch, quat_mul

        poses = np.asarray(poses, np.float64)
        p = poses[self.labels]
        means = np.einsum("mij,mj->mi", p[:, :3, :3], self.local_means) + p[:, :3, 3]
        now = mat_to_quat_batch(poses[:, :3, :3])
        rest_inv = self.rest_link_quats * np.array([1.0, -1.0, -1.0, -1.0])
        delta = quat_mul(now, rest_inv)[self.labels]
        quats = quat_mul(delta, self.rest_quats)
        return self.splats.replace(means=means.astype(np.float32), quats=quats.astype(np.float32))


def mujoco_link_poses(model, data, bodies: list[str]) -> np.ndarray:  # -> [L, 4, 4]
    """``world_from_body`` of named MuJoCo bodies (for :class:`LinkFollower`)."""
    import mujoco

    from bench.geometry import quat_to_mat

    out = np.tile(np.eye(4), (len(bodies), 1, 1))
    for k, name in enumerate(bodies):
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body < 0:
            raise ValueError(f"MuJoCo model has no body {name!r}")
        out[k, :3, :3] = quat_to_mat(data.xquat[body])
        out[k, :3, 3] = data.xpos[body]
    return out
