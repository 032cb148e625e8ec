"""A straightforward, differentiable pure-torch tile rasterizer.

It implements the forward model of :mod:`bench.render.constants` with plain
torch ops, so autograd flows to every Gaussian parameter (``means``,
``quats``, ``log_scales``, ``opacity_logits``, ``sh_dc``, ``sh_rest``). The CPU
3DGS trainer (``bench.recon``) calls :func:`rasterize`; the benchmark uses it as
the obvious CPU alternative to the Warp backend; :mod:`bench.render.reference`
reuses :func:`project` and :func:`eval_sh` in float64.

The front-to-back loop is a cumulative product, which is exact: with skipped
alphas set to 0, the pixel "stops before the Gaussian whose next transmittance
would fall below TRANSMITTANCE_MIN", and transmittance only decreases, so the
kept Gaussians are a prefix of the depth order. The plain path
(``dense_tiles=True``) evaluates all (tile pixel x tile Gaussian) pairs densely
with autograd. The default path works on 4 x 4 pixel blocks in padded batches:
a no-grad pass marks the pairs that get a blending weight and autograd runs only
on those (same image and gradients up to float round-off, tested against the
plain path; about 3x faster training steps, ``benchmarks/bench_train.py``).

Signature (kept stable for the trainer)::

    out = rasterize(means, quats, log_scales, opacity_logits, sh_dc, sh_rest, camera,
                    background=(0, 0, 0), sh_degree=None, tile_size=16)
    out.rgb [H, W, 3], out.depth [H, W] (inf where empty), out.alpha [H, W],
    out.means2d [N, 2] (pixels; ``retain_grad()`` is called on it when it requires
    grad, so after ``loss.backward()`` ``out.means2d.grad`` is the screen-space
    gradient used by 3DGS densification), out.radii [N] (int, 0 = culled),
    out.depths [N] (per-Gaussian view depth; pinhole z, fisheye distance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from bench.render import constants as K
from bench.render.output import resolve_sh_degree
from bench.scene.cameras import Camera

_STORED_DEGREE = {0: 0, 3: 1, 8: 2, 15: 3}  # rest coefficients per channel -> SH degree


class Projection(NamedTuple):
    """Per-Gaussian screen-space quantities (all [N, ...], culled rows are masked out)."""

    means2d: torch.Tensor  # [N, 2] pixels
    conics: torch.Tensor  # [N, 3] inverse 2D covariance (a, b, c) of [[a, b], [b, c]]
    depths: torch.Tensor  # [N] pinhole z / fisheye distance
    radii: torch.Tensor  # [N] int64 footprint radius in pixels, 0 where culled
    visible: torch.Tensor  # [N] bool


class RasterOutput(NamedTuple):
    """Result of :func:`rasterize`."""

    rgb: torch.Tensor  # [H, W, 3]
    depth: torch.Tensor  # [H, W]
    alpha: torch.Tensor  # [H, W]
    means2d: torch.Tensor  # [N, 2]
    radii: torch.Tensor  # [N]
    depths: torch.Tensor  # [N]


def quat_to_rotmat(quats: torch.Tensor) -> torch.Tensor:  # [N, 4] -> [N, 3, 3]
    """Rotation matrices from (w, x, y, z) quaternions (normalised here).

    The differentiable torch twin of :func:`bench.geometry.quat_to_mat` (same closed form;
    tested against it in float64).
    """
    q = quats / quats.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(-1, 3, 3)


def eval_sh(coeffs: torch.Tensor, dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """Colour from real SH coefficients (3DGS convention), before the +0.5 offset.

    Args:
        coeffs: [N, (D+1)^2, 3] with the DC term first, D >= ``degree``.
        dirs: [N, 3] unit view directions (mean - camera centre).
        degree: Active SH degree (0-3).

    Returns:
        [N, 3] SH sum.
    """
    out = K.SH_C0 * coeffs[:, 0]
    if degree < 1:
        return out
    x, y, z = (dirs[:, i : i + 1] for i in range(3))
    out = out - K.SH_C1 * y * coeffs[:, 1] + K.SH_C1 * z * coeffs[:, 2] - K.SH_C1 * x * coeffs[:, 3]
    if degree < 2:
        return out
    xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
    c2 = K.SH_C2
    out = (
        out
        + c2[0] * xy * coeffs[:, 4]
        + c2[1] * yz * coeffs[:, 5]
        + c2[2] * (2 * zz - xx - yy) * coeffs[:, 6]
        + c2[3] * xz * coeffs[:, 7]
        + c2[4] * (xx - yy) * coeffs[:, 8]
    )
    if degree < 3:
        return out
    c3 = K.SH_C3
    return (
        out
        + c3[0] * y * (3 * xx - yy) * coeffs[:, 9]
        + c3[1] * xy * z * coeffs[:, 10]
        + c3[2] * y * (4 * zz - xx - yy) * coeffs[:, 11]
        + c3[3] * z * (2 * zz - 3 * xx - 3 * yy) * coeffs[:, 12]
        + c3[4] * x * (4 * zz - xx - yy) * coeffs[:, 13]
        + c3[5] * z * (xx - yy) * coeffs[:, 14]
        + c3[6] * x * (xx - 3 * yy) * coeffs[:, 15]
    )


def _pinhole_jacobian(p: torch.Tensor, camera: Camera) -> tuple[torch.Tensor, torch.Tensor]:
    x, y, z = p.unbind(-1)
    u = camera.fx * x / z + camera.cx
    v = camera.fy * y / z + camera.cy
    extra = K.FRUSTUM_CLAMP - 1.0
    tan_x, tan_y = 0.5 * camera.width / camera.fx, 0.5 * camera.height / camera.fy
    lim_xp = (camera.width - camera.cx) / camera.fx + extra * tan_x
    lim_xn = camera.cx / camera.fx + extra * tan_x
    lim_yp = (camera.height - camera.cy) / camera.fy + extra * tan_y
    lim_yn = camera.cy / camera.fy + extra * tan_y
    tx = z * torch.clamp(x / z, -lim_xn, lim_xp)
    ty = z * torch.clamp(y / z, -lim_yn, lim_yp)
    zero = torch.zeros_like(z)
    jac = torch.stack(
        [camera.fx / z, zero, -camera.fx * tx / (z * z),
         zero, camera.fy / z, -camera.fy * ty / (z * z)],
        dim=-1,
    ).reshape(-1, 2, 3)
    return torch.stack([u, v], -1), jac


def _fisheye_jacobian(p: torch.Tensor, camera: Camera) -> tuple[torch.Tensor, torch.Tensor]:
    """Kannala-Brandt projection and its exact Jacobian (p must be away from the origin)."""
    k1, k2, k3, k4 = camera.distortion
    x, y, z = p.unbind(-1)
    r2 = x * x + y * y
    rho2 = r2 + z * z
    near_axis = r2 < 1e-12 * rho2
    r = torch.sqrt(torch.where(near_axis, torch.ones_like(r2), r2))
    theta = torch.atan2(r, z)
    t2 = theta * theta
    theta_d = theta * (1 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))))
    dtheta_d = 1 + t2 * (3 * k1 + t2 * (5 * k2 + t2 * (7 * k3 + t2 * 9 * k4)))
    # s = theta_d / r and g = (ds/dx) / x = (ds/dy) / y; near the axis use their limits
    # (Taylor expansion in r/z: s -> 1/z, g -> (2 k1 - 2/3) / z^3).
    z_safe = torch.where(z.abs() > 0, z, torch.ones_like(z))
    s = torch.where(near_axis, 1.0 / z_safe, theta_d / r)
    g = torch.where(near_axis, (2 * k1 - 2.0 / 3.0) / z_safe**3,
                    (dtheta_d * z / rho2 - theta_d / r) / torch.where(near_axis, 1.0, r2))
    ds_dz = -dtheta_d / rho2
    ds_dz = torch.where(near_axis, -1.0 / (z_safe * z_safe), ds_dz)
    u = camera.fx * s * x + camera.cx
    v = camera.fy * s * y + camera.cy
    jac = torch.stack(
        [
            camera.fx * (s + x * x * g), camera.fx * x * y * g, camera.fx * x * ds_dz,
            camera.fy * x * y * g, camera.fy * (s + y * y * g), camera.fy * y * ds_dz,
        ],
        dim=-1,
    ).reshape(-1, 2, 3)
    return torch.stack([u, v], -1), jac


def project(
    means: torch.Tensor,  # [N, 3]
    quats: torch.Tensor,  # [N, 4]
    log_scales: torch.Tensor,  # [N, 3]
    camera: Camera,
) -> Projection:
    """EWA projection of 3D Gaussians (steps 1-3 of :mod:`bench.render.constants`)."""
    dtype, device = means.dtype, means.device
    view = torch.as_tensor(camera.camera_from_world, dtype=dtype, device=device)
    rot_w, t_w = view[:3, :3], view[:3, 3]
    p = means @ rot_w.T + t_w
    if camera.model == "pinhole":
        depth = p[:, 2]
        front = (depth >= K.NEAR_PLANE) & (depth <= K.FAR_PLANE)
    else:
        depth = p.norm(dim=-1)
        theta = torch.atan2(p[:, :2].norm(dim=-1), p[:, 2])
        front = (depth >= K.NEAR_PLANE) & (depth <= K.FAR_PLANE) & (theta < camera.max_theta)
    # Replace culled points by a harmless one so no NaN enters autograd.
    safe = torch.tensor([0.0, 0.0, 1.0], dtype=dtype, device=device)
    p_safe = torch.where(front[:, None], p, safe)
    if camera.model == "pinhole":
        means2d, jac = _pinhole_jacobian(p_safe, camera)
    else:
        means2d, jac = _fisheye_jacobian(p_safe, camera)
    rot = quat_to_rotmat(quats)
    m = rot * torch.exp(log_scales)[:, None, :]  # [N, 3, 3], Sigma_3d = m m^T
    # Sigma_2d = (J W m)(J W m)^T; the [2, 3] x [3, 3] products are written out elementwise
    # (batched matmuls of tiny matrices are ~20x slower on CPU, forward and backward).
    jw = jac @ rot_w  # [N, 2, 3]
    t = (jw[:, :, :, None] * m[:, None, :, :]).sum(2)  # [N, 2, 3]
    a = (t[:, 0] * t[:, 0]).sum(-1) + K.LOW_PASS_PX
    b = (t[:, 0] * t[:, 1]).sum(-1)
    c = (t[:, 1] * t[:, 1]).sum(-1) + K.LOW_PASS_PX
    det = a * c - b * b
    ok = front & (det > 0)
    det_safe = torch.where(ok, det, torch.ones_like(det))
    conics = torch.stack([c / det_safe, -b / det_safe, a / det_safe], -1)
    with torch.no_grad():
        mid = 0.5 * (a + c)
        lam = mid + torch.sqrt(torch.clamp(mid * mid - det, min=K.EIGEN_FLOOR))
        radii = torch.ceil(K.SIGMA_EXTENT * torch.sqrt(torch.clamp(lam, min=0))).to(torch.int64)
        u, v = means2d[:, 0], means2d[:, 1]
        on_screen = (u + radii > 0) & (u - radii < camera.width) & (v + radii > 0) & (
            v - radii < camera.height
        )
        visible = ok & (radii > 0) & on_screen
        radii = torch.where(visible, radii, torch.zeros_like(radii))
    return Projection(means2d, conics, depth, radii, visible)


def tile_ranges(means2d: torch.Tensor, radii: torch.Tensor, width: int, height: int,
                tile_size: int) -> torch.Tensor:  # -> [N, 4] (x0, x1, y0, y1), half-open
    """Tiles overlapped by each Gaussian's radius-square (step 4 of the forward model)."""
    tiles_x = math.ceil(width / tile_size)
    tiles_y = math.ceil(height / tile_size)
    with torch.no_grad():
        u, v = means2d[:, 0].detach(), means2d[:, 1].detach()
        r = radii.to(u.dtype)
        x0 = torch.floor((u - r) / tile_size).clamp(0, tiles_x)
        x1 = torch.ceil((u + r) / tile_size).clamp(0, tiles_x)
        y0 = torch.floor((v - r) / tile_size).clamp(0, tiles_y)
        y1 = torch.ceil((v + r) / tile_size).clamp(0, tiles_y)
        return torch.stack([x0, x1, y0, y1], -1).to(torch.int64)


def _sh_coeffs(sh_dc: torch.Tensor, sh_rest: torch.Tensor) -> torch.Tensor:
    return torch.cat([sh_dc[:, None, :], sh_rest], dim=1)


def gaussian_colors(means: torch.Tensor, sh_dc: torch.Tensor, sh_rest: torch.Tensor,
                    camera: Camera, degree: int) -> torch.Tensor:  # -> [N, 3]
    """View-dependent colour (step 5): SH of the direction from the camera centre, + 0.5, >= 0."""
    centre = torch.as_tensor(camera.position, dtype=means.dtype, device=means.device)
    dirs = means - centre
    dirs = dirs / dirs.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.clamp_min(eval_sh(_sh_coeffs(sh_dc, sh_rest), dirs, degree) + K.SH_OFFSET, 0.0)


def blend(alpha: torch.Tensor, colors: torch.Tensor, depths: torch.Tensor) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor
]:
    """Front-to-back compositing of depth-sorted Gaussians for a batch of pixels.

    Args:
        alpha: [P, M] raw alphas ``opacity * exp(-power)`` (0 where power < 0 or
            outside the Gaussian's tiles), columns in depth order.
        colors: [M, 3] per-Gaussian colours.
        depths: [M] per-Gaussian depths.

    Returns:
        ``(C [P, 3], D [P], T [P])``: accumulated colour, depth and final transmittance.
    """
    alpha = torch.clamp(alpha, max=K.ALPHA_MAX)
    alpha = torch.where(alpha < K.ALPHA_MIN, torch.zeros_like(alpha), alpha)
    trans_after = torch.cumprod(1.0 - alpha, dim=1)
    keep = trans_after >= K.TRANSMITTANCE_MIN
    trans_before = torch.cat([torch.ones_like(trans_after[:, :1]), trans_after[:, :-1]], dim=1)
    weights = alpha * trans_before * keep
    acc = weights.sum(dim=1)
    return weights @ colors, weights @ depths, 1.0 - acc


def _as_background(background, dtype, device) -> torch.Tensor:
    bg = torch.as_tensor(background, dtype=dtype, device=device)
    if bg.shape != (3,):
        raise ValueError(
            f"background must be 3 values (r, g, b) in [0, 1], got shape {tuple(bg.shape)}"
        )
    return bg


def rasterize(
    means: torch.Tensor,  # [N, 3]
    quats: torch.Tensor,  # [N, 4]
    log_scales: torch.Tensor,  # [N, 3]
    opacity_logits: torch.Tensor,  # [N]
    sh_dc: torch.Tensor,  # [N, 3]
    sh_rest: torch.Tensor,  # [N, K, 3]
    camera: Camera,
    *,
    background: Sequence[float] | torch.Tensor = (0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    tile_size: int = K.TILE_SIZE,
    occluder_depth: torch.Tensor | None = None,  # [H, W]
    dense_tiles: bool = False,
) -> RasterOutput:
    """Render one camera with autograd (see the module docstring for outputs).

    Fisheye cameras are rendered with the direct model (per-Gaussian
    Kannala-Brandt projection and Jacobian); pixels outside the fisheye's
    valid circle are left at ``background`` with alpha 0. With
    ``occluder_depth`` (metres, inf = none) every Gaussian at or behind it is
    dropped per pixel. ``dense_tiles=True`` blends every (tile pixel x tile
    Gaussian) pair with autograd (the plain path, slower); the default first
    finds, without autograd, the pairs that carry weight and differentiates only
    those (same result up to float round-off, see :func:`_composite_pruned`).
    """
    dtype, device = means.dtype, means.device
    width, height = camera.width, camera.height
    degree = resolve_sh_degree(_STORED_DEGREE[sh_rest.shape[1]], sh_degree)
    bg = _as_background(background, dtype, device)
    proj = project(means, quats, log_scales, camera)
    means2d = proj.means2d
    if means2d.requires_grad:
        means2d.retain_grad()
    order = torch.nonzero(proj.visible).squeeze(1)
    order = order[torch.argsort(proj.depths.detach()[order], stable=True)]

    xy = means2d[order]
    conic = proj.conics[order]
    opac = torch.sigmoid(opacity_logits[order])
    depth_g = proj.depths[order]
    colors = gaussian_colors(means[order], sh_dc[order], sh_rest[order][:, : (degree + 1) ** 2 - 1],
                             camera, degree)

    occ = None if occluder_depth is None else torch.as_tensor(
        occluder_depth, dtype=dtype, device=device)
    composite = _composite_dense if dense_tiles else _composite_pruned
    rgb, depth, trans = composite(xy, conic, opac, depth_g, colors, proj.radii[order],
                                  width, height, tile_size, occ)

    if camera.model == "fisheye":
        _, valid_np = camera.pixel_rays()
        valid = torch.as_tensor(np.array(valid_np), device=device)
        rgb = torch.where(valid[..., None], rgb, 0.0)
        depth = torch.where(valid, depth, 0.0)
        trans = torch.where(valid, trans, 1.0)
    alpha_img = 1.0 - trans
    rgb = rgb + trans[..., None] * bg
    has = alpha_img > 0
    depth = torch.where(has, depth / torch.where(has, alpha_img, 1.0), torch.inf)
    return RasterOutput(rgb, depth, alpha_img, means2d, proj.radii, proj.depths)


def bin_to_tiles(
    means2d: torch.Tensor,  # [M, 2] depth-ordered
    radii: torch.Tensor,  # [M]
    width: int,
    height: int,
    tile_size: int,
) -> tuple[torch.Tensor, list[int]]:  # -> [pairs] Gaussian ranks, [tiles] end offsets
    """Duplicate each Gaussian into every tile its footprint overlaps, sorted by tile.

    Returns:
        ``(ranks, ends)``: Gaussian indices grouped by tile (depth order kept within a
        tile, the sort is stable) and each tile's end offset into ``ranks`` (row-major).
    """
    tiles_x, tiles_y = math.ceil(width / tile_size), math.ceil(height / tile_size)
    rect = tile_ranges(means2d, radii, width, height, tile_size)
    ranks, counts = _group_by_cell(rect, tiles_x, tiles_y)
    return ranks, torch.cumsum(counts, 0).tolist()


def _group_by_cell(
    rect: torch.Tensor,  # [M, 4] (x0, x1, y0, y1) cells, half-open (empty when x1 <= x0)
    cells_x: int,
    cells_y: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # -> [pairs] ranks, [cells] counts
    """Each rank repeated into every cell of its rect, grouped by cell (rank order kept)."""
    device = rect.device
    counts = (rect[:, 1] - rect[:, 0]).clamp_min(0) * (rect[:, 3] - rect[:, 2]).clamp_min(0)
    rank = torch.repeat_interleave(torch.arange(len(rect), device=device), counts)
    start = torch.cumsum(counts, 0) - counts
    local = torch.arange(int(counts.sum()), device=device) - torch.repeat_interleave(start, counts)
    span = (rect[:, 1] - rect[:, 0])[rank].clamp_min(1)
    cell = (rect[rank, 2] + local // span) * cells_x + rect[rank, 0] + local % span
    perm = torch.argsort(cell, stable=True)  # keeps depth order within a cell
    return rank[perm], torch.bincount(cell, minlength=cells_x * cells_y)


def _tighten_to_alpha_box(
    rect: torch.Tensor,  # [M, 4] (x0, x1, y0, y1) tiles, half-open
    means2d: torch.Tensor,  # [M, 2]
    conics: torch.Tensor,  # [M, 3]
    opacities: torch.Tensor,  # [M]
    tile_size: int,
) -> torch.Tensor:  # -> [M, 4]; empty ranges (x1 <= x0) for Gaussians that never reach it
    """Intersect tile ranges with the tiles holding pixels where alpha can reach ALPHA_MIN."""
    with torch.no_grad():
        a, b, c = conics.detach().double().unbind(-1)
        u, v = means2d.detach().double().unbind(-1)
        # alpha >= ALPHA_MIN  <=>  0.5 d^T conic d <= log(opacity / ALPHA_MIN) =: t;
        # the ellipse d^T conic d <= 2 t spans |dx| <= sqrt(2 t cov_xx), cov = conic^-1.
        t = torch.log(opacities.detach().double() / K.ALPHA_MIN)
        det = (a * c - b * b).clamp_min(1e-300)
        reach = t > 0
        t = t.clamp_min(0)
        hx = torch.sqrt(2 * t * c / det) * 1.001 + 1.0
        hy = torch.sqrt(2 * t * a / det) * 1.001 + 1.0
        tight = torch.stack([
            torch.floor((u - hx) / tile_size), torch.floor((u + hx) / tile_size) + 1,
            torch.floor((v - hy) / tile_size), torch.floor((v + hy) / tile_size) + 1,
        ], -1).clamp(-1, 1 << 30).to(torch.int64)
        out = torch.stack([torch.maximum(rect[:, 0], tight[:, 0]),
                           torch.minimum(rect[:, 1], tight[:, 1]),
                           torch.maximum(rect[:, 2], tight[:, 2]),
                           torch.minimum(rect[:, 3], tight[:, 3])], -1)
        return torch.where(reach[:, None], out, rect[:, [0, 0, 2, 2]])


def _tile_alphas(
    xy: torch.Tensor,  # [G, 2] pixel positions of the tile's Gaussians
    conic: torch.Tensor,  # [G, 3] inverse 2-D covariance (a, b, c)
    opacity: torch.Tensor,  # [G]
    depth: torch.Tensor,  # [G]
    rows: slice,
    cols: slice,
    occluder: torch.Tensor | None,  # [h, w] metres, inf = none
) -> torch.Tensor:  # -> [h * w, G]
    """Per-pixel alpha of every Gaussian of one tile (before the 1/255 skip and clamp)."""
    dtype, device = xy.dtype, xy.device
    py, px = torch.meshgrid(
        torch.arange(rows.start, rows.stop, dtype=dtype, device=device) + 0.5,
        torch.arange(cols.start, cols.stop, dtype=dtype, device=device) + 0.5,
        indexing="ij",
    )
    dx = xy[:, 0][None, :] - px.reshape(-1, 1)
    dy = xy[:, 1][None, :] - py.reshape(-1, 1)
    power = 0.5 * (conic[:, 0] * dx * dx + conic[:, 2] * dy * dy) + conic[:, 1] * dx * dy
    keep = power >= 0
    if occluder is not None:  # depth-sorted, so dropping these = stopping at the occluder
        keep = keep & (depth[None, :] < occluder.reshape(-1, 1))
    return torch.where(keep, opacity * torch.exp(-power.clamp_min(0)), 0.0)


def _composite_dense(
    xy: torch.Tensor,  # [M, 2] depth-ordered
    conic: torch.Tensor,  # [M, 3]
    opac: torch.Tensor,  # [M]
    depth_g: torch.Tensor,  # [M]
    colors: torch.Tensor,  # [M, 3]
    radii: torch.Tensor,  # [M]
    width: int,
    height: int,
    tile_size: int,
    occ: torch.Tensor | None,  # [H, W]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # -> [H, W, 3], [H, W], [H, W]
    """Plain path: every (tile pixel x tile Gaussian) pair blended with autograd, tile by tile."""
    dtype, device = xy.dtype, xy.device
    rank_sorted, bounds = bin_to_tiles(xy, radii, width, height, tile_size)
    tiles_x = math.ceil(width / tile_size)
    rgb = torch.zeros(height, width, 3, dtype=dtype, device=device)
    depth = torch.zeros(height, width, dtype=dtype, device=device)
    trans = torch.ones(height, width, dtype=dtype, device=device)
    begin = 0
    for tile, end in enumerate(bounds):
        ids = rank_sorted[begin:end]
        begin = end
        if len(ids) == 0:
            continue
        rows, cols = _tile_slices(tile, tiles_x, tile_size, width, height)
        alpha = _tile_alphas(xy[ids], conic[ids], opac[ids], depth_g[ids], rows, cols,
                             None if occ is None else occ[rows, cols])
        col, dep, tr = blend(alpha, colors[ids], depth_g[ids])
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        rgb[rows, cols] = col.reshape(*shape, 3)
        depth[rows, cols] = dep.reshape(shape)
        trans[rows, cols] = tr.reshape(shape)
    return rgb, depth, trans


def _tile_slices(tile: int, tiles_x: int, tile_size: int, width: int,
                 height: int) -> tuple[slice, slice]:
    ty, tx = divmod(tile, tiles_x)
    y0, x0 = ty * tile_size, tx * tile_size
    return slice(y0, min(y0 + tile_size, height)), slice(x0, min(x0 + tile_size, width))


_BLOCK = 4  # pixels per side of the blocks the pruned path works on
_BATCH_ELEMENTS = 1 << 22  # cap on (blocks x pixels x Gaussians) of one batched block op


def _composite_pruned(
    xy: torch.Tensor,  # [M, 2] depth-ordered
    conic: torch.Tensor,  # [M, 3]
    opac: torch.Tensor,  # [M]
    depth_g: torch.Tensor,  # [M]
    colors: torch.Tensor,  # [M, 3]
    radii: torch.Tensor,  # [M]
    width: int,
    height: int,
    tile_size: int,
    occ: torch.Tensor | None,  # [H, W]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # -> [H, W, 3], [H, W], [H, W]
    """Same result as :func:`_composite_dense`, differentiating only the pairs with weight.

    Each tile is cut into ``_BLOCK x _BLOCK`` pixel blocks. A block gets the Gaussians of
    its tile whose ``alpha >= ALPHA_MIN`` region (bounding box of the ellipse, see
    :func:`_tighten_to_alpha_box`) reaches it; the others have alpha 0 on the whole block.
    Blocks of similar list length are processed in padded batches: pass 1 (no autograd)
    marks the pairs that get a blending weight (alpha >= ALPHA_MIN, before the pixel's
    transmittance stop) and keeps per block only the Gaussians weighted at one of its
    pixels; pass 2 (autograd) blends those with the marked pairs as a constant mask.
    This is exact up to float summation order: a pixel's weighted pairs are a prefix of
    its depth order among its non-zero alphas, so a dropped Gaussian is a factor 1 for
    every pixel still blending behind it, and unmarked pairs have zero weight and zero
    gradient in the plain path as well.
    """
    dtype, device = xy.dtype, xy.device
    block = _BLOCK if tile_size % _BLOCK == 0 else tile_size
    per_tile = tile_size // block
    blocks_x, blocks_y = math.ceil(width / block), math.ceil(height / block)
    rect = tile_ranges(xy, radii, width, height, tile_size) * per_tile
    rect = torch.minimum(rect, torch.tensor([blocks_x, blocks_x, blocks_y, blocks_y],
                                            device=device))
    rect = _tighten_to_alpha_box(rect, xy, conic, opac, block)
    ranks, counts = _group_by_cell(rect, blocks_x, blocks_y)
    starts = torch.cumsum(counts, 0) - counts
    rgb = torch.zeros(height * width, 3, dtype=dtype, device=device)
    depth = torch.zeros(height * width, dtype=dtype, device=device)
    trans = torch.ones(height * width, dtype=dtype, device=device)
    offs = torch.arange(block, device=device)
    grad = torch.is_grad_enabled()
    for group in _length_groups(counts.tolist(), block * block):
        cells = torch.tensor(group, device=device)
        lengths = counts[cells]
        slot = torch.arange(int(lengths.max()), device=device)
        present = slot[None, :] < lengths[:, None]  # [B, L]
        ids = ranks[torch.where(present, starts[cells][:, None] + slot, 0)]  # [B, L]
        rows = (cells // blocks_x)[:, None, None] * block + offs[None, :, None]  # [B, b, 1]
        cols = (cells % blocks_x)[:, None, None] * block + offs[None, None, :]  # [B, 1, b]
        inside = ((rows < height) & (cols < width)).reshape(len(group), -1)  # [B, P]
        pix = (rows.clamp(max=height - 1) * width + cols.clamp(max=width - 1)).reshape(
            len(group), -1)
        with torch.no_grad():
            allowed = inside[:, :, None] & present[:, None, :]  # [B, P, L]
            if occ is not None:
                allowed &= depth_g[ids][:, None, :] < occ.reshape(-1)[pix][:, :, None]
            alpha = torch.clamp(_block_alphas(xy, conic, opac, ids, pix, width), max=K.ALPHA_MAX)
            alpha = torch.where(allowed & (alpha >= K.ALPHA_MIN), alpha, 0.0)
            weighted = (alpha > 0) & (torch.cumprod(1.0 - alpha, dim=2) >= K.TRANSMITTANCE_MIN)
            if not grad:  # no autograd pass needed: blend right here
                col, dep, tr = _blend_marked(alpha, weighted, colors[ids], depth_g[ids])
            else:
                used = weighted.any(dim=1)  # [B, L]
                keep = int(used.sum(dim=1).max())
                if keep == 0:
                    continue
                first = torch.argsort((~used).to(torch.uint8), dim=1, stable=True)[:, :keep]
                ids = torch.gather(ids, 1, first)  # [B, keep], depth order kept
                weighted = torch.gather(weighted, 2,
                                        first[:, None, :].expand(-1, pix.shape[1], -1))
        if grad:
            alpha = torch.clamp(_block_alphas(xy, conic, opac, ids, pix, width),
                                max=K.ALPHA_MAX)
            col, dep, tr = _blend_marked(alpha, weighted, colors[ids], depth_g[ids])
        real = pix[inside]
        rgb = rgb.index_put((real,), col[inside])
        depth = depth.index_put((real,), dep[inside])
        trans = trans.index_put((real,), tr[inside])
    return rgb.reshape(height, width, 3), depth.reshape(height, width), trans.reshape(
        height, width)


def _blend_marked(
    alpha: torch.Tensor,  # [B, P, L] clamped alphas
    marked: torch.Tensor,  # [B, P, L] bool: pairs that get a blending weight
    colors: torch.Tensor,  # [B, L, 3]
    depths: torch.Tensor,  # [B, L]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # -> [B, P, 3], [B, P], [B, P]
    """Front-to-back blending of the marked pairs (the others are factors of 1)."""
    alpha = torch.where(marked, alpha, torch.zeros_like(alpha))
    trans_after = torch.cumprod(1.0 - alpha, dim=2)
    trans_before = torch.cat([torch.ones_like(trans_after[..., :1]), trans_after[..., :-1]],
                             dim=2)
    weights = alpha * trans_before
    return (torch.bmm(weights, colors), torch.bmm(weights, depths[..., None])[..., 0],
            1.0 - weights.sum(dim=2))


def _block_alphas(
    xy: torch.Tensor,  # [M, 2]
    conic: torch.Tensor,  # [M, 3]
    opac: torch.Tensor,  # [M]
    ids: torch.Tensor,  # [B, L] Gaussian ranks per block
    pix: torch.Tensor,  # [B, P] flat pixel indices per block
    width: int,
) -> torch.Tensor:  # -> [B, P, L]
    """``opacity * exp(-power)`` (0 where power < 0) of every (block pixel, block Gaussian)."""
    px = (pix % width).to(xy.dtype) + 0.5
    py = torch.div(pix, width, rounding_mode="floor").to(xy.dtype) + 0.5
    # Index each component separately: contiguous [B, L] operands broadcast fastest.
    dx = xy[:, 0][ids][:, None, :] - px[:, :, None]  # [B, P, L]
    dy = xy[:, 1][ids][:, None, :] - py[:, :, None]
    a, b, c = (conic[:, k][ids][:, None, :] for k in range(3))
    power = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    return torch.where(power >= 0, opac[ids][:, None, :] * torch.exp(-power.clamp_min(0)), 0.0)


def _length_groups(lengths: list[int], pixels: int) -> list[list[int]]:
    """Non-empty cells grouped by similar length (padding <= ~25 %), bounded batch size."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lengths.__getitem__)
    groups: list[list[int]] = []
    first = 0
    for i in order:
        n = lengths[i]
        if (not groups or n > 1.25 * first + 8
                or (len(groups[-1]) + 1) * n * pixels > _BATCH_ELEMENTS):
            groups.append([])
            first = n
        groups[-1].append(i)
    return groups
