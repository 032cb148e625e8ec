"""Similarity transforms of Gaussian sets (registration of a splat into the world frame).

The :class:`~bench.geometry.Similarity` itself lives in :mod:`bench.geometry`.

A scene bundle stores ``world_from_splat`` = ``[[s R, t], [0, 1]]`` with ``s > 0``
and ``R`` a proper rotation. Applying it to Gaussians:

- means:      ``p' = s R p + t``
- quats:      ``q' = q_R (x) q`` (Hamilton product; the stored norm is kept)
- log-scales: ``log_scale' = log_scale + log(s)``
- SH rest:    every band ``l`` is rotated with its real Wigner matrix, so the
  view-dependent colour seen from world direction ``d`` equals the old colour
  seen from ``R^T d`` (without this, SH-3 scenes change colour when rotated).

Opacity and SH DC are unchanged. Arithmetic is float64, results float32.
"""

from __future__ import annotations

import numpy as np

from bench.geometry import Similarity, mat_to_quat, quat_mul
from bench.scene.gaussians import SH_C1, SH_C2, SH_C3, GaussianSplats


def sh_basis(dirs: np.ndarray, degree: int) -> np.ndarray:  # [P, 3] -> [P, (deg+1)^2 - 1]
    """Real SH basis values of bands 1..degree (3DGS ordering and signs) at unit ``dirs``."""
    x, y, z = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    cols = []
    if degree >= 1:
        cols += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        cols += [SH_C2[0] * x * y, SH_C2[1] * y * z, SH_C2[2] * (2 * zz - xx - yy),
                 SH_C2[3] * x * z, SH_C2[4] * (xx - yy)]
    if degree >= 3:
        cols += [SH_C3[0] * y * (3 * xx - yy), SH_C3[1] * x * y * z,
                 SH_C3[2] * y * (4 * zz - xx - yy), SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
                 SH_C3[4] * x * (4 * zz - xx - yy), SH_C3[5] * z * (xx - yy),
                 SH_C3[6] * x * (xx - 3 * yy)]
    return np.stack(cols, axis=1) if cols else np.zeros((len(dirs), 0))


def _fibonacci_sphere(count: int) -> np.ndarray:  # [count, 3], deterministic
    i = np.arange(count) + 0.5
    z = 1.0 - 2.0 * i / count
    phi = np.pi * (1.0 + 5.0**0.5) * i
    r = np.sqrt(1.0 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def sh_rotation_matrices(rotation: np.ndarray,  # [3, 3]
                         degree: int) -> list[np.ndarray]:  # [2l+1, 2l+1] per band
    """Per band l = 1..degree, the [2l+1, 2l+1] matrix M with ``c_new = M @ c_old``.

    Solved exactly (to float64 round-off) by least squares on 64 directions:
    ``Y_l(R^T d) = Y_l(d) @ M`` holds for every d because each band is closed
    under rotation.
    """
    dirs = _fibonacci_sphere(64)
    before = sh_basis(dirs, degree)
    after = sh_basis(dirs @ np.asarray(rotation, np.float64), degree)  # rows: R^T d
    out, start = [], 0
    for band in range(1, degree + 1):
        width = 2 * band + 1
        cols = slice(start, start + width)
        solution, *_ = np.linalg.lstsq(before[:, cols], after[:, cols], rcond=None)
        out.append(solution)
        start += width
    return out


def rotate_sh_rest(sh_rest: np.ndarray, rotation: np.ndarray) -> np.ndarray:  # [N, K, 3]
    """Rotate higher-band SH coefficients [N, K, 3] by ``rotation`` (float32 out).

    One batched float32 ``np.matmul(M, band)`` per band (``c_new = M @ c_old``
    for every Gaussian and channel): about 0.3 s for 3 M SH-3 Gaussians, 5x
    faster than the float64 einsum of :func:`rotate_sh_rest_reference`.
    """
    n, k = sh_rest.shape[0], sh_rest.shape[1]
    if k == 0:
        return sh_rest
    out = np.empty((n, k, 3), dtype=np.float32)
    start = 0
    for matrix in sh_rotation_matrices(rotation, {3: 1, 8: 2, 15: 3}[k]):
        width = matrix.shape[0]
        np.matmul(matrix.astype(np.float32), sh_rest[:, start:start + width, :],
                  out=out[:, start:start + width, :])
        start += width
    return out


def rotate_sh_rest_reference(sh_rest: np.ndarray,  # [N, K, 3]
                             rotation: np.ndarray) -> np.ndarray:  # [3, 3] -> [N, K, 3]
    """Plain reference of :func:`rotate_sh_rest`: one einsum per band."""
    k = sh_rest.shape[1]
    if k == 0:
        return sh_rest
    out = np.empty_like(sh_rest, dtype=np.float32)
    start = 0
    for matrix in sh_rotation_matrices(rotation, {3: 1, 8: 2, 15: 3}[k]):
        width = matrix.shape[0]
        band = sh_rest[:, start:start + width, :].astype(np.float64)
        out[:, start:start + width, :] = np.einsum("ij,njc->nic", matrix, band)
        start += width
    return out


#: Rows per chunk of the in-place transform (keeps float64 temporaries to a few MiB).
TRANSFORM_CHUNK_ROWS = 65536


def transform_splats(splats: GaussianSplats, transform: Similarity | np.ndarray, *,
                     rotate_sh: bool = True) -> GaussianSplats:
    """Apply a similarity transform to Gaussians (means, quats, log-scales, SH rest).

    Args:
        splats: Gaussians in the source frame.
        transform: A :class:`Similarity` or a 4x4 matrix.
        rotate_sh: False maps only the geometry and leaves ``sh_rest`` in the source
            frame (for code that only copies SH rows, e.g.
            :func:`perturbations.apply.perturb_scene`; the result is not a proper
            target-frame scene).

    Returns:
        The Gaussians in the target frame; the same object for the identity.
        Arrays the transform leaves unchanged are shared, not copied: everything
        but the means when the rotation is exactly the identity and the scale 1;
        quats and SH rest when only the rotation is the identity (a translation
        and uniform scale leave orientation and view-dependent colour alone).
    """
    sim = transform if isinstance(transform, Similarity) else Similarity.from_matrix(transform)
    if sim.is_identity():
        return splats
    changes = {"means": sim.apply_points(splats.means).astype(np.float32)}
    if not _is_identity_rotation(sim):
        changes["quats"] = quat_mul(mat_to_quat(sim.rotation), splats.quats).astype(np.float32)
        if rotate_sh:
            changes["sh_rest"] = rotate_sh_rest(splats.sh_rest, sim.rotation)
    if sim.scale != 1.0:
        changes["log_scales"] = (splats.log_scales.astype(np.float64)
                                 + np.log(sim.scale)).astype(np.float32)
    return splats.replace(**changes)


def _is_identity_rotation(sim: Similarity) -> bool:
    return bool(np.array_equal(sim.rotation, np.eye(3)))


def transform_splats_inplace(splats: GaussianSplats, transform: Similarity | np.ndarray, *,
                             chunk_rows: int = TRANSFORM_CHUNK_ROWS) -> GaussianSplats:
    """:func:`transform_splats` written over ``splats``' own arrays, ``chunk_rows`` at a time.

    Same values, bit for bit (every step is row-wise, so chunking changes no
    arithmetic; tested against :func:`transform_splats`), without a second copy
    of the scene: for a loader that does not keep the source frame (a 3 M SH-3
    scene is 0.7 GB). ``splats`` must not be used afterwards except through the
    returned object (which shares its arrays).
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    sim = transform if isinstance(transform, Similarity) else Similarity.from_matrix(transform)
    if sim.is_identity():
        return splats
    rotate = not _is_identity_rotation(sim)
    q_rot = mat_to_quat(sim.rotation)
    bands = (sh_rotation_matrices(sim.rotation, {3: 1, 8: 2, 15: 3}[splats.sh_rest.shape[1]])
             if rotate and splats.sh_rest.shape[1] else [])
    log_s = np.log(sim.scale)
    for start in range(0, len(splats), chunk_rows):
        rows = slice(start, start + chunk_rows)
        splats.means[rows] = sim.apply_points(splats.means[rows])
        if rotate:
            splats.quats[rows] = quat_mul(q_rot, splats.quats[rows])
            _rotate_bands(splats.sh_rest[rows], bands, out=splats.sh_rest[rows])
        if sim.scale != 1.0:
            splats.log_scales[rows] = splats.log_scales[rows].astype(np.float64) + log_s
    return splats.replace()


def _rotate_bands(sh_rest: np.ndarray, bands: list[np.ndarray], *,
                  out: np.ndarray) -> None:  # [N, K, 3] -> out [N, K, 3] (may alias)
    # Input and output keep the strides of rotate_sh_rest's (band slices of [N, K, 3]
    # arrays), so matmul takes the same code path and rounds the same way.
    source = sh_rest.copy() if np.shares_memory(out, sh_rest) else sh_rest
    start = 0
    for matrix in bands:
        width = matrix.shape[0]
        np.matmul(matrix.astype(np.float32), source[:, start:start + width, :],
                  out=out[:, start:start + width, :])
        start += width
