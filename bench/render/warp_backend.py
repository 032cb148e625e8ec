"""The ``cpu`` backend: NVIDIA Warp kernels compiled for device ``"cpu"``.

Pipeline per frame (the forward model is in :mod:`bench.render.constants`):

1. ``_project_kernel`` (one thread per Gaussian): cull, EWA projection,
   radius, tile rectangle, SH colour for survivors only, and the half-extents
   of the ``alpha >= ALPHA_MIN`` ellipse used to skip pixels cheaply.
2. numpy picks the visible Gaussians; Warp's stable radix sort orders them by depth.
3. ``_bin_kernel`` (a single serial thread: Warp runs CPU launches serially):
   counting sort of (tile, Gaussian) pairs by tile, stable so each tile's list
   stays in depth order, and packs per-Gaussian data contiguously in depth order.
4. ``_raster_tile_kernel`` (one thread per tile): walks the tile's Gaussians front
   to back and blends each over the rows of its ``alpha >= ALPHA_MIN`` rectangle
   (rows whose pixels are all done are skipped, and a tile stops once every pixel is
   done); writes rgb, depth, alpha. Its body is a C++ snippet that keeps the tile in
   stack buffers and evaluates whole 16-pixel rows branch-free with the rectangle as a
   lane mask, so clang vectorises it (a Gaussian's span on a row averages ~5 pixels,
   too short for a vector loop over the span alone). ``_raster_kernel`` is the same
   model in plain Warp (it visits only the analytic x-span where
   ``power <= ln(opacity / ALPHA_MIN)`` on each row), used for tiles larger than 32
   pixels and compared with the native one in the tests (they agree to float round-off;
   the exp differs by ~1 ulp).

Per-splats device arrays (means, covariances, opacities, SH) are uploaded
once and cached on the :class:`GaussianSplats` object identity (a weak
reference, so they are freed with the splats); per-image buffers are reused
between frames. Everything is float32.
"""

from __future__ import annotations

import math
import string
import weakref

import numpy as np
import warp as wp

from bench.render import constants as K
from bench.render.output import RenderOutput, resolve_sh_degree
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

if wp.config.log_level == wp.LOG_INFO:  # Warp's default: silence the init banner
    wp.config.log_level = wp.LOG_ERROR
DEVICE = "cpu"
_NO_DRIVER_NOTICE = "Could not find or load the NVIDIA CUDA driver"


def _init_warp_quietly() -> None:
    """``wp.init()`` without Warp's "no CUDA driver" notice on CPU-only machines.

    Warp's C++ core prints that notice with ``fprintf(stderr)`` on every run without
    a GPU driver (``log_level`` cannot silence it), so fd 2 is captured during the
    init and everything else it printed is passed on.
    """
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            sys.stderr.write("".join(line for line in text.splitlines(keepends=True)
                                     if _NO_DRIVER_NOTICE not in line))


_init_warp_quietly()
wp.set_module_options({"enable_backward": False})  # forward only: faster first compile

# Constants of bench.render.constants as Warp compile-time constants.
_C0 = wp.constant(K.SH_C0)
_C1 = wp.constant(K.SH_C1)
_C2_0, _C2_1, _C2_2, _C2_3, _C2_4 = (wp.constant(c) for c in K.SH_C2)
_C3_0, _C3_1, _C3_2, _C3_3, _C3_4, _C3_5, _C3_6 = (wp.constant(c) for c in K.SH_C3)
_SH_OFFSET = wp.constant(K.SH_OFFSET)
_LOW_PASS = wp.constant(K.LOW_PASS_PX)
_SIGMA_EXTENT = wp.constant(K.SIGMA_EXTENT)
_EIGEN_FLOOR = wp.constant(K.EIGEN_FLOOR)
_ALPHA_MAX = wp.constant(K.ALPHA_MAX)
_ALPHA_MIN = wp.constant(K.ALPHA_MIN)
_T_MIN = wp.constant(K.TRANSMITTANCE_MIN)
_NEAR = wp.constant(K.NEAR_PLANE)
_FAR = wp.constant(K.FAR_PLANE)
_SPAN_MARGIN = wp.constant(0.05)  # px of slack on the analytic alpha >= ALPHA_MIN span
_MODEL_IDS = {"pinhole": 0, "fisheye": 1}
_mat23 = wp.types.matrix(shape=(2, 3), dtype=wp.float32)  # projection Jacobian


# --------------------------------------------------------------------------- device functions
@wp.func
def _sh_color(sh: wp.array2d(dtype=wp.vec3), g: int, degree: int, d: wp.vec3) -> wp.vec3:
    c = sh[g, 0] * _C0
    if degree >= 1:
        x = d[0]
        y = d[1]
        z = d[2]
        c = c - sh[g, 1] * (_C1 * y) + sh[g, 2] * (_C1 * z) - sh[g, 3] * (_C1 * x)
        if degree >= 2:
            xx = x * x
            yy = y * y
            zz = z * z
            c = c + sh[g, 4] * (_C2_0 * x * y) + sh[g, 5] * (_C2_1 * y * z)
            c = c + sh[g, 6] * (_C2_2 * (2.0 * zz - xx - yy))
            c = c + sh[g, 7] * (_C2_3 * x * z) + sh[g, 8] * (_C2_4 * (xx - yy))
            if degree >= 3:
                c = c + sh[g, 9] * (_C3_0 * y * (3.0 * xx - yy))
                c = c + sh[g, 10] * (_C3_1 * x * y * z)
                c = c + sh[g, 11] * (_C3_2 * y * (4.0 * zz - xx - yy))
                c = c + sh[g, 12] * (_C3_3 * z * (2.0 * zz - 3.0 * xx - 3.0 * yy))
                c = c + sh[g, 13] * (_C3_4 * x * (4.0 * zz - xx - yy))
                c = c + sh[g, 14] * (_C3_5 * z * (xx - yy))
                c = c + sh[g, 15] * (_C3_6 * x * (xx - 3.0 * yy))
    c = c + wp.vec3(_SH_OFFSET, _SH_OFFSET, _SH_OFFSET)
    return wp.vec3(wp.max(c[0], 0.0), wp.max(c[1], 0.0), wp.max(c[2], 0.0))


@wp.func
def _pinhole_jacobian(p: wp.vec3, fx: float, fy: float, lim: wp.vec4) -> _mat23:
    # lim = (x/z max, x/z min magnitude, y/z max, y/z min magnitude): the FRUSTUM_CLAMP limits.
    z = p[2]
    tx = z * wp.clamp(p[0] / z, -lim[1], lim[0])
    ty = z * wp.clamp(p[1] / z, -lim[3], lim[2])
    return _mat23(fx / z, 0.0, -fx * tx / (z * z), 0.0, fy / z, -fy * ty / (z * z))


@wp.func
def _fisheye_scale_theta(p: wp.vec3, dist: wp.vec4, r2: float, theta: float) -> wp.vec3:
    """(s, g, ds/dz) of the Kannala-Brandt map u = fx s x + cx (see torch_raster).

    ``r2 = x^2 + y^2`` and ``theta = atan2(sqrt(r2), z)`` of the camera-frame point ``p``.
    """
    z = p[2]
    rho2 = r2 + z * z
    if r2 < 1.0e-12 * rho2:
        return wp.vec3(1.0 / z, (2.0 * dist[0] - 2.0 / 3.0) / (z * z * z), -1.0 / (z * z))
    r = wp.sqrt(r2)
    t2 = theta * theta
    theta_d = theta * (1.0 + t2 * (dist[0] + t2 * (dist[1] + t2 * (dist[2] + t2 * dist[3]))))
    dtheta = 1.0 + t2 * (
        3.0 * dist[0] + t2 * (5.0 * dist[1] + t2 * (7.0 * dist[2] + t2 * 9.0 * dist[3]))
    )
    s = theta_d / r
    g = (dtheta * z / rho2 - s) / r2
    return wp.vec3(s, g, -dtheta / rho2)


@wp.func
def _fisheye_scale(p: wp.vec3, dist: wp.vec4) -> wp.vec3:
    """:func:`_fisheye_scale_theta` with its own ``atan2`` (today's kernel evaluates it twice)."""
    r2 = p[0] * p[0] + p[1] * p[1]
    return _fisheye_scale_theta(p, dist, r2, wp.atan2(wp.sqrt(r2), p[2]))


@wp.func
def _fisheye_jacobian(p: wp.vec3, sgd: wp.vec3, fx: float, fy: float) -> _mat23:
    """d(u, v)/dp of the fisheye map from its (s, g, ds/dz) = ``sgd``."""
    s = sgd[0]
    gg = sgd[1]
    return _mat23(
        fx * (s + p[0] * p[0] * gg), fx * p[0] * p[1] * gg, fx * p[0] * sgd[2],
        fy * p[0] * p[1] * gg, fy * (s + p[1] * p[1] * gg), fy * p[1] * sgd[2],
    )


@wp.func
def _screen_covariance(cov_a: wp.array(dtype=wp.vec3), cov_b: wp.array(dtype=wp.vec3),
                       g: int, rot: wp.mat33, jac: _mat23) -> wp.vec4:
    """(a, b, c, det) of Gaussian ``g``'s 2D covariance J R W R^T J^T plus the low-pass."""
    ca = cov_a[g]
    cb = cov_b[g]
    cov_w = wp.mat33(ca[0], ca[1], ca[2], ca[1], cb[0], cb[1], ca[2], cb[1], cb[2])
    cov_c = rot * cov_w * wp.transpose(rot)
    cov2 = jac * cov_c * wp.transpose(jac)
    a = cov2[0, 0] + _LOW_PASS
    b = cov2[0, 1]
    c = cov2[1, 1] + _LOW_PASS
    return wp.vec4(a, b, c, a * c - b * b)


@wp.func
def _footprint_radius(a: float, c: float, det: float) -> float:
    """``ceil(3 sqrt(largest eigenvalue))`` of the 2D covariance (a, b; b, c), in pixels."""
    mid = 0.5 * (a + c)
    lam = mid + wp.sqrt(wp.max(mid * mid - det, _EIGEN_FLOOR))
    return wp.ceil(_SIGMA_EXTENT * wp.sqrt(wp.max(lam, 0.0)))


@wp.func
def _radius_tiles(u: float, v: float, radius: float, width: int, height: int, tile_size: int,
                  tiles_x: int, tiles_y: int) -> wp.vec4i:
    """Tiles (x0, x1, y0, y1) of the radius square; empty when it misses the image."""
    if u + radius <= 0.0 or u - radius >= float(width):
        return wp.vec4i(0, 0, 0, 0)
    if v + radius <= 0.0 or v - radius >= float(height):
        return wp.vec4i(0, 0, 0, 0)
    ts = float(tile_size)
    x0 = wp.clamp(int(wp.floor((u - radius) / ts)), 0, tiles_x)
    x1 = wp.clamp(int(wp.ceil((u + radius) / ts)), 0, tiles_x)
    y0 = wp.clamp(int(wp.floor((v - radius) / ts)), 0, tiles_y)
    y1 = wp.clamp(int(wp.ceil((v + radius) / ts)), 0, tiles_y)
    return wp.vec4i(x0, x1, y0, y1)


@wp.func
def tile_starts(tile_start: wp.array(dtype=wp.int32),  # [num_tiles + 1] counts at t + 1 -> starts
                cursor: wp.array(dtype=wp.int32),  # [num_tiles] out: each tile's first slot
                num_tiles: int):
    """The counting sort's prefix sum: per-tile counts into list starts, cursors at the starts.

    ``tile_start[t + 1]`` holds tile ``t``'s count (``tile_start[0] == 0``) on entry and
    the start of tile ``t + 1``'s list on exit. Shared by :func:`_bin_kernel` and the
    differentiable rasterizer's (:mod:`bench.render.warp_grad`).
    """
    for t in range(num_tiles):
        tile_start[t + 1] += tile_start[t]
        cursor[t] = tile_start[t]


@wp.kernel
def _project_kernel(
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),  # (xx, xy, xz) of the world covariance
    cov_b: wp.array(dtype=wp.vec3),  # (yy, yz, zz)
    opacity: wp.array(dtype=float),
    sh: wp.array2d(dtype=wp.vec3),
    degree: int,
    rot: wp.mat33,  # camera_from_world rotation
    trans: wp.vec3,
    centre: wp.vec3,  # camera centre (world)
    model: int,
    intr: wp.vec4,  # fx, fy, cx, cy
    dist: wp.vec4,  # k1..k4
    lim: wp.vec4,
    max_theta: float,
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    tiles_y: int,
    out_xy: wp.array(dtype=wp.vec2),
    out_conic: wp.array(dtype=wp.vec3),
    out_ext: wp.array(dtype=wp.vec3),
    out_depth: wp.array(dtype=float),
    out_color: wp.array(dtype=wp.vec3),
    out_rect: wp.array(dtype=wp.vec4i),
    out_touched: wp.array(dtype=wp.int32),
):
    g = wp.tid()
    out_touched[g] = 0
    p = rot * means[g] + trans
    fx = intr[0]
    fy = intr[1]
    depth = float(0.0)  # noqa: UP018 - Warp needs typed mutable locals
    jac = _mat23()
    u = float(0.0)  # noqa: UP018
    v = float(0.0)  # noqa: UP018
    if model == 0:
        depth = p[2]
        if depth < _NEAR or depth > _FAR:
            return
        u = fx * p[0] / depth + intr[2]
        v = fy * p[1] / depth + intr[3]
        jac = _pinhole_jacobian(p, fx, fy, lim)
    else:
        depth = wp.length(p)
        if depth < _NEAR or depth > _FAR:
            return
        if wp.atan2(wp.sqrt(p[0] * p[0] + p[1] * p[1]), p[2]) >= max_theta:
            return
        sgd = _fisheye_scale(p, dist)
        u = fx * sgd[0] * p[0] + intr[2]
        v = fy * sgd[0] * p[1] + intr[3]
        jac = _fisheye_jacobian(p, sgd, fx, fy)
    abcd = _screen_covariance(cov_a, cov_b, g, rot, jac)
    a = abcd[0]
    b = abcd[1]
    c = abcd[2]
    det = abcd[3]
    if not (det > 0.0):  # also culls NaN (e.g. an all-zero quaternion)
        return
    radius = _footprint_radius(a, c, det)
    if radius <= 0.0:
        return
    r = _radius_tiles(u, v, radius, width, height, tile_size, tiles_x, tiles_y)
    count = (r[1] - r[0]) * (r[3] - r[2])
    if count <= 0:
        return
    out_touched[g] = count
    out_rect[g] = r
    out_xy[g] = wp.vec2(u, v)
    out_conic[g] = wp.vec3(c / det, -b / det, a / det)
    out_depth[g] = depth
    # Half-extents of {power <= ln(255 opacity)} (alpha >= ALPHA_MIN), 1% + 0.01 px safety margin.
    # The third component is that level, ln(opacity / ALPHA_MIN), reused by the rasterizer.
    level = wp.log(opacity[g] / _ALPHA_MIN)
    if level > 0.0:
        out_ext[g] = wp.vec3(
            wp.sqrt(2.0 * level * a) * 1.01 + 0.01, wp.sqrt(2.0 * level * c) * 1.01 + 0.01, level
        )
    else:
        out_ext[g] = wp.vec3(-1.0, -1.0, level)
    out_color[g] = _sh_color(sh, g, degree, wp.normalize(means[g] - centre))


@wp.kernel
def _bin_kernel(
    order: wp.array(dtype=wp.int32),
    num: int,
    num_tiles: int,
    tiles_x: int,
    rect: wp.array(dtype=wp.vec4i),
    xy: wp.array(dtype=wp.vec2),
    conic: wp.array(dtype=wp.vec3),
    ext: wp.array(dtype=wp.vec3),
    depth: wp.array(dtype=float),
    color: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    tile_start: wp.array(dtype=wp.int32),  # [num_tiles + 1]
    cursor: wp.array(dtype=wp.int32),  # [num_tiles] scratch
    isect: wp.array(dtype=wp.int32),  # [total] ranks, grouped by tile, depth order inside
    s_xy: wp.array(dtype=wp.vec2),  # [num] packed in depth order
    s_conic: wp.array(dtype=wp.vec3),
    s_ext: wp.array(dtype=wp.vec3),
    s_depth: wp.array(dtype=float),
    s_color: wp.array(dtype=wp.vec3),
    s_opacity: wp.array(dtype=float),
):
    for t in range(num_tiles + 1):
        tile_start[t] = 0
    for k in range(num):
        r = rect[order[k]]
        for ty in range(r[2], r[3]):
            for tx in range(r[0], r[1]):
                tile_start[ty * tiles_x + tx + 1] += 1
    tile_starts(tile_start, cursor, num_tiles)
    for k in range(num):
        g = order[k]
        r = rect[g]
        s_xy[k] = xy[g]
        s_conic[k] = conic[g]
        s_ext[k] = ext[g]
        s_depth[k] = depth[g]
        s_color[k] = color[g]
        s_opacity[k] = opacity[g]
        for ty in range(r[2], r[3]):
            for tx in range(r[0], r[1]):
                t = ty * tiles_x + tx
                isect[cursor[t]] = k
                cursor[t] += 1


@wp.kernel
def _raster_kernel(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    s_xy: wp.array(dtype=wp.vec2),
    s_conic: wp.array(dtype=wp.vec3),
    s_ext: wp.array(dtype=wp.vec3),
    s_depth: wp.array(dtype=float),
    s_color: wp.array(dtype=wp.vec3),
    s_opacity: wp.array(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    background: wp.vec3,
    valid: wp.array(dtype=wp.int32),  # [H * W] 1 = pixel inside the lens image
    occluder: wp.array(dtype=float),  # [H * W] depth of an opaque surface (inf = none)
    use_occluder: int,
    acc: wp.array(dtype=wp.vec4),  # [H * W] scratch: accumulated (r, g, b, depth)
    trans: wp.array(dtype=float),
    row_left: wp.array(dtype=wp.int32),  # [H * tiles_x]
    out_rgb: wp.array(dtype=wp.vec3),
    out_depth: wp.array(dtype=float),
    out_alpha: wp.array(dtype=float),
):
    tile = wp.tid()
    ty = tile / tiles_x
    tx = tile - ty * tiles_x
    px0 = tx * tile_size
    py0 = ty * tile_size
    px1 = wp.min(px0 + tile_size, width)
    py1 = wp.min(py0 + tile_size, height)
    # trans[i] holds the pixel's transmittance T, negated (-T) once the pixel is done, so a
    # single load tells both. row_left counts the pixels still open in each row of the tile.
    remaining = int(0)  # noqa: UP018
    for py in range(py0, py1):
        left = int(0)  # noqa: UP018
        for px in range(px0, px1):
            i = py * width + px
            acc[i] = wp.vec4(0.0, 0.0, 0.0, 0.0)
            if valid[i] != 0:
                trans[i] = 1.0
                left += 1
            else:
                trans[i] = -1.0
        row_left[py * tiles_x + tx] = left
        remaining += left
    for n in range(tile_start[tile], tile_start[tile + 1]):
        if remaining == 0:
            break
        k = isect[n]
        e = s_ext[k]
        if e[0] < 0.0:
            continue
        m = s_xy[k]
        cx0 = wp.max(px0, int(wp.floor(m[0] - e[0] - 0.5)))
        cx1 = wp.min(px1, int(wp.floor(m[0] + e[0] - 0.5)) + 1)
        cy0 = wp.max(py0, int(wp.floor(m[1] - e[1] - 0.5)))
        cy1 = wp.min(py1, int(wp.floor(m[1] + e[1] - 0.5)) + 1)
        if cx0 >= cx1 or cy0 >= cy1:
            continue
        q = s_conic[k]
        o = s_opacity[k]
        col = s_color[k]
        cd = wp.vec4(col[0], col[1], col[2], s_depth[k])
        # Per row, only the x-span where power <= level (alpha >= ALPHA_MIN) can contribute:
        # solve 0.5 q0 dx^2 + q1 dy dx + 0.5 q2 dy^2 - level = 0 for dx = mean_x - pixel_x.
        level = e[2]
        inv_q0 = 1.0 / q[0]
        for py in range(cy0, cy1):
            row = py * tiles_x + tx
            if row_left[row] == 0:
                continue
            dy = m[1] - (float(py) + 0.5)
            qb = q[1] * dy
            disc = qb * qb - q[0] * (q[2] * dy * dy - 2.0 * level)
            if disc < 0.0:
                continue
            root = wp.sqrt(disc)
            lo = m[0] + (qb - root) * inv_q0 - 0.5 - _SPAN_MARGIN
            hi = m[0] + (qb + root) * inv_q0 - 0.5 + _SPAN_MARGIN
            rx0 = wp.max(cx0, int(wp.ceil(lo)))
            rx1 = wp.min(cx1, int(wp.floor(hi)) + 1)
            for px in range(rx0, rx1):
                i = py * width + px
                t = trans[i]
                if t < 0.0:
                    continue
                if use_occluder != 0:
                    if cd[3] >= occluder[i]:  # this and all later Gaussians are hidden
                        trans[i] = -t
                        row_left[row] -= 1
                        remaining -= 1
                        continue
                dx = m[0] - (float(px) + 0.5)
                power = 0.5 * (q[0] * dx * dx + q[2] * dy * dy) + q[1] * dx * dy
                if power < 0.0:
                    continue
                alpha = wp.min(_ALPHA_MAX, o * wp.exp(-power))
                if alpha < _ALPHA_MIN:
                    continue
                t_next = t * (1.0 - alpha)
                if t_next < _T_MIN:
                    trans[i] = -t
                    row_left[row] -= 1
                    remaining -= 1
                    continue
                acc[i] = acc[i] + cd * (alpha * t)
                trans[i] = t_next
    for py in range(py0, py1):
        for px in range(px0, px1):
            i = py * width + px
            t = wp.abs(trans[i])
            a = 1.0 - t
            sums = acc[i]
            out_rgb[i] = wp.vec3(sums[0], sums[1], sums[2]) + background * t
            out_alpha[i] = a
            if a > 0.0:
                out_depth[i] = sums[3] / a
            else:
                out_depth[i] = wp.inf


_TILE_BUFFER = 32  # largest tile side the native rasterizer handles (stack buffers)
_NATIVE_RASTER = True  # False: the plain Warp-language _raster_kernel (tests compare the two)


def _c_float_alpha_min() -> str:
    """ALPHA_MIN as the C++ expression ``(float)(1.0 / 255.0)`` (double quotient, rounded)."""
    denominator = 1.0 / K.ALPHA_MIN
    if 1.0 / denominator != K.ALPHA_MIN:  # pragma: no cover - only if constants.py changes
        raise RuntimeError(f"ALPHA_MIN {K.ALPHA_MIN!r} is not 1 / x for a double x")
    return f"(float)(1.0 / {np.format_float_positional(denominator, trim='0')})"


#: ``$NAME`` in a native snippet -> the C++ spelling of a :mod:`bench.render.constants` value
#: (shortest round-trip decimals, so the compiled code is that of the literals typed in).
NATIVE_CONSTANTS = {
    "ALPHA_MIN": _c_float_alpha_min(),
    "ALPHA_MAX": np.format_float_positional(K.ALPHA_MAX) + "f",
    "TRANSMITTANCE_MIN": np.format_float_scientific(K.TRANSMITTANCE_MIN, trim="0",
                                                    exp_digits=1) + "f",
    "TILE_SIZE": str(int(K.TILE_SIZE)),
    "TILE_BUFFER": str(_TILE_BUFFER),
}


def native_snippet(template: str) -> str:
    """A native C++ snippet with its ``$NAME`` placeholders (:data:`NATIVE_CONSTANTS`) filled."""
    return string.Template(template).substitute(NATIVE_CONSTANTS)


# One tile, front to back, in C++ (a Warp native snippet) so clang can vectorise the pixel
# loop: Warp's own codegen emits a scalar goto loop around a libm expf call, and the
# analytic x-spans average only ~5 pixels, far below a vector's width. Here every row of
# the Gaussian's alpha >= ALPHA_MIN rectangle evaluates the whole tile row (16 lanes, two
# AVX2 vectors) with the lanes outside the rectangle masked, with per-tile state
# (transmittance, accumulators) in stack buffers. The Warp kernel's per-row span (a sqrt
# per row) is not needed: the pixels it excludes lie beyond the alpha >= ALPHA_MIN ellipse
# plus a margin, so the alpha test rejects them too (and evaluating them is cheaper than
# the sqrt). The float operations and their order are those of _raster_kernel; exp is
# Cephes' single-precision polynomial (within ~1 ulp of expf), written out so it vectorises.
#: ``ex = exp(-power)`` for one lane (Cephes expf: x = n ln2 + r, |r| <= ln2 / 2, 2^n from
#: the bits; within ~1 ulp of expf, written out so clang vectorises it). One text for the
#: forward snippet below and the training kernels of bench.render.warp_grad, so forward and
#: backward evaluate alpha with identical float operations.
LANE_EXP_NEG_POWER = """                const float x = wp::min(wp::max(-power, -87.0f), 0.0f);
                const float fn = wp::floor(x * 1.44269504088896341f + 0.5f);
                float rr = x - fn * 0.693359375f;
                rr = rr - fn * -2.12194440e-4f;
                float pe = 1.9875691500e-4f;
                pe = pe * rr + 1.3981999507e-3f;
                pe = pe * rr + 8.3334519073e-3f;
                pe = pe * rr + 4.1665795894e-2f;
                pe = pe * rr + 1.6666665459e-1f;
                pe = pe * rr + 5.0000001201e-1f;
                const int bits = ((int)fn + 127) << 23;
                float scale;
                __builtin_memcpy(&scale, &bits, 4);
                const float ex = (pe * (rr * rr) + rr + 1.0f) * scale;
"""
_RASTER_TILE_SNIPPET = native_snippet("""
    const int TS = $TILE_BUFFER;
    float T[TS * TS];  // transmittance; negated (-T) once the pixel is done
    float A0[TS * TS], A1[TS * TS], A2[TS * TS], A3[TS * TS];
    float no_occluder[TS];
    int row_left[TS];
    for (int l = 0; l < TS; ++l) no_occluder[l] = INFINITY;
    const int ty = tile / tiles_x;
    const int tx = tile - ty * tiles_x;
    const int px0 = tx * tile_size;
    const int py0 = ty * tile_size;
    const int px1 = wp::min(px0 + tile_size, width);
    const int py1 = wp::min(py0 + tile_size, height);
    const int tw = px1 - px0;
    int remaining = 0;
    for (int r = 0; r < py1 - py0; ++r) {
        int left = 0;
        const int* vrow = valid.data + (py0 + r) * width + px0;
        for (int l = 0; l < TS; ++l) {
            const int j = r * TS + l;
            A0[j] = 0.0f; A1[j] = 0.0f; A2[j] = 0.0f; A3[j] = 0.0f;
            const bool open = l < tw && vrow[l] != 0;
            T[j] = open ? 1.0f : -1.0f;
            left += open;
        }
        row_left[r] = left;
        remaining += left;
    }
    const float bits_min = $ALPHA_MIN;
    for (int n = tile_start.data[tile]; n < tile_start.data[tile + 1] && remaining > 0; ++n) {
        const int k = isect.data[n];
        const wp::vec3 e = s_ext.data[k];
        if (e[0] < 0.0f) continue;
        const wp::vec2 m = s_xy.data[k];
        const int cx0 = wp::max(px0, (int)wp::floor(m[0] - e[0] - 0.5f));
        const int cx1 = wp::min(px1, (int)wp::floor(m[0] + e[0] - 0.5f) + 1);
        const int cy0 = wp::max(py0, (int)wp::floor(m[1] - e[1] - 0.5f));
        const int cy1 = wp::min(py1, (int)wp::floor(m[1] + e[1] - 0.5f) + 1);
        if (cx0 >= cx1 || cy0 >= cy1) continue;
        const wp::vec3 q = s_conic.data[k];
        const float q0 = q[0], q1 = q[1], q2 = q[2];
        const float o = s_opacity.data[k];
        const wp::vec3 col = s_color.data[k];
        const float cr = col[0], cg = col[1], cb = col[2], cz = s_depth.data[k];
        for (int py = cy0; py < cy1; ++py) {
            const int r = py - py0;
            if (row_left[r] == 0) continue;
            const float dy = m[1] - ((float)py + 0.5f);
            const int rx0 = cx0 - px0;
            const int rx1 = cx1 - px0;
            const float* occ = use_occluder ? occluder.data + py * width + px0 : no_occluder;
            float* __restrict Tr = T + r * TS;
            float* __restrict a0 = A0 + r * TS;
            float* __restrict a1 = A1 + r * TS;
            float* __restrict a2 = A2 + r * TS;
            float* __restrict a3 = A3 + r * TS;
            auto blend = [&](const int l) -> int {
                const float t = Tr[l];
                const bool open = (l >= rx0) & (l < rx1) & (t >= 0.0f);
                const bool hidden = open & (cz >= occ[l]);
                const float dx = m[0] - ((float)(px0 + l) + 0.5f);
                const float power = 0.5f * (q0 * dx * dx + q2 * dy * dy) + q1 * dx * dy;
                // ex = exp(-power) (LANE_EXP_NEG_POWER)
""" + LANE_EXP_NEG_POWER + """\
                const float alpha = wp::min($ALPHA_MAX, o * ex);
                const float t_next = t * (1.0f - alpha);
                const bool hit = open & !hidden & (power >= 0.0f) & (alpha >= bits_min);
                const bool stop = (hit & (t_next < $TRANSMITTANCE_MIN)) | hidden;
                const bool ok = hit & !stop;
                const float w = ok ? alpha * t : 0.0f;
                a0[l] = a0[l] + cr * w;
                a1[l] = a1[l] + cg * w;
                a2[l] = a2[l] + cb * w;
                a3[l] = a3[l] + cz * w;
                Tr[l] = ok ? t_next : (stop ? -t : t);
                return (int)stop;
            };
            int stops = 0;
            if (tw == $TILE_SIZE) {  // the usual full 16-pixel tile row: a constant trip count
                for (int l = 0; l < $TILE_SIZE; ++l) stops += blend(l);
            } else {
                for (int l = 0; l < tw; ++l) stops += blend(l);
            }
            row_left[r] -= stops;
            remaining -= stops;
        }
    }
    for (int r = 0; r < py1 - py0; ++r) {
        for (int l = 0; l < tw; ++l) {
            const int j = r * TS + l;
            const int i = (py0 + r) * width + px0 + l;
            const float t = wp::abs(T[j]);
            const float a = 1.0f - t;
            out_rgb.data[i] = wp::vec3(A0[j] + background[0] * t, A1[j] + background[1] * t,
                                       A2[j] + background[2] * t);
            out_alpha.data[i] = a;
            out_depth.data[i] = a > 0.0f ? A3[j] / a : INFINITY;
        }
    }
""")


@wp.func_native(_RASTER_TILE_SNIPPET)
def _raster_tile(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    s_xy: wp.array(dtype=wp.vec2),
    s_conic: wp.array(dtype=wp.vec3),
    s_ext: wp.array(dtype=wp.vec3),
    s_depth: wp.array(dtype=float),
    s_color: wp.array(dtype=wp.vec3),
    s_opacity: wp.array(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    background: wp.vec3,
    valid: wp.array(dtype=wp.int32),
    occluder: wp.array(dtype=float),
    use_occluder: int,
    out_rgb: wp.array(dtype=wp.vec3),
    out_depth: wp.array(dtype=float),
    out_alpha: wp.array(dtype=float),
    tile: int,
): ...


@wp.kernel
def _raster_tile_kernel(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    s_xy: wp.array(dtype=wp.vec2),
    s_conic: wp.array(dtype=wp.vec3),
    s_ext: wp.array(dtype=wp.vec3),
    s_depth: wp.array(dtype=float),
    s_color: wp.array(dtype=wp.vec3),
    s_opacity: wp.array(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    background: wp.vec3,
    valid: wp.array(dtype=wp.int32),
    occluder: wp.array(dtype=float),
    use_occluder: int,
    out_rgb: wp.array(dtype=wp.vec3),
    out_depth: wp.array(dtype=float),
    out_alpha: wp.array(dtype=float),
):
    _raster_tile(tile_start, isect, s_xy, s_conic, s_ext, s_depth, s_color, s_opacity, width,
                 height, tile_size, tiles_x, background, valid, occluder, use_occluder, out_rgb,
                 out_depth, out_alpha, wp.tid())


# --------------------------------------------------------------------------- host side
def device_inputs_reference(splats: GaussianSplats) -> dict[str, np.ndarray]:
    """Plain reference of the per-Gaussian inputs :class:`_SplatArrays` uploads.

    means [N, 3], cov_a [N, 3] (xx, xy, xz), cov_b [N, 3] (yy, yz, zz), opacity [N],
    sh [N, 1 + K, 3], all float32, computed on the whole set at once.
    """
    with np.errstate(invalid="ignore", divide="ignore"):  # zero quaternions -> NaN -> culled
        rot = _quat_to_rotmat(splats.normalized_quats())
    m = rot * splats.scales().astype(np.float64)[:, None, :]
    cov = m @ m.transpose(0, 2, 1)
    f32 = np.float32
    sh = np.concatenate([splats.sh_dc[:, None, :], splats.sh_rest], axis=1).astype(f32)
    return {"means": splats.means.astype(f32), "cov_a": cov[:, 0, :].astype(f32),
            "cov_b": np.stack([cov[:, 1, 1], cov[:, 1, 2], cov[:, 2, 2]], 1).astype(f32),
            "opacity": splats.opacities().astype(f32), "sh": np.ascontiguousarray(sh)}


#: Gaussians per chunk when the device inputs are filled (bounds the float64 temporaries).
UPLOAD_CHUNK_ROWS = 16384


def fill_device_inputs(splats: GaussianSplats, out: dict[str, np.ndarray],
                       order: np.ndarray | None = None, *,
                       chunk_rows: int = UPLOAD_CHUNK_ROWS) -> None:
    """Write :func:`device_inputs_reference` of ``splats.subset(order)`` into ``out``.

    Chunk by chunk, straight into the (device) arrays ``out`` holds, without a
    subset copy of the scene or whole-scene float64 temporaries; every value is
    computed by the same row-wise arithmetic, so the arrays are bit-identical
    to the reference's (tested).
    """
    n = splats.num if order is None else len(order)
    for start in range(0, n, chunk_rows):
        rows = slice(start, min(n, start + chunk_rows))
        pick = rows if order is None else order[rows]
        part = GaussianSplats(means=splats.means[pick], quats=splats.quats[pick],
                              log_scales=splats.log_scales[pick],
                              opacity_logits=splats.opacity_logits[pick],
                              sh_dc=splats.sh_dc[pick], sh_rest=splats.sh_rest[pick])
        for name, values in device_inputs_reference(part).items():
            out[name][rows] = values


#: One row's projected values in ``_SplatArrays(..., packed=True).record`` (float offsets):
#: a tile blender reads one 64-byte line per list entry instead of six arrays.
RECORD_FIELDS = {"xy": 0, "conic": 2, "ext": 5, "depth": 8, "color": 9, "opacity": 12}
RECORD_FLOATS = 16


class _SplatArrays:
    """Device copies of one GaussianSplats (uploaded once) + per-frame scratch.

    ``order`` uploads ``splats.subset(order)`` (e.g. the culling index's block
    order) without building that subset. ``packed`` keeps the projected values of a
    row in one 64-byte :data:`RECORD_FIELDS` record (``record``; ``xy`` ... ``color`` are
    strided views of it, same memory as separate arrays plus a copy of the opacity) for
    the exact path's blender.
    """

    def __init__(self, splats: GaussianSplats, order: np.ndarray | None = None, *,
                 packed: bool = False) -> None:
        n = splats.num if order is None else len(order)
        self.num = n
        self.stored_degree = splats.sh_degree
        k = splats.sh_rest.shape[1]
        self.means = wp.zeros(n, dtype=wp.vec3, device=DEVICE)
        self.cov_a = wp.zeros(n, dtype=wp.vec3, device=DEVICE)
        self.cov_b = wp.zeros(n, dtype=wp.vec3, device=DEVICE)
        self.opacity = wp.zeros(n, dtype=float, device=DEVICE)
        self.sh = wp.zeros((n, 1 + k), dtype=wp.vec3, device=DEVICE)
        views = {"means": self.means.numpy(), "cov_a": self.cov_a.numpy(),  # zero-copy (CPU)
                 "cov_b": self.cov_b.numpy(), "opacity": self.opacity.numpy(),
                 "sh": self.sh.numpy()}
        fill_device_inputs(splats, views, order)
        zeros = wp.zeros
        self.record = None
        if packed:  # the projected values as strided views of one 64-byte record per row
            self.record = zeros((n, RECORD_FLOATS), dtype=float, device=DEVICE)
            view = self._record_view
            self.xy, self.conic = view(wp.vec2, "xy"), view(wp.vec3, "conic")
            self.ext, self.depth = view(wp.vec3, "ext"), view(float, "depth")
            self.color = view(wp.vec3, "color")
        else:
            self.xy = zeros(n, dtype=wp.vec2, device=DEVICE)
            self.conic = zeros(n, dtype=wp.vec3, device=DEVICE)
            self.ext = zeros(n, dtype=wp.vec3, device=DEVICE)
            self.depth = zeros(n, dtype=float, device=DEVICE)
            self.color = zeros(n, dtype=wp.vec3, device=DEVICE)
        self.rect = zeros(n, dtype=wp.vec4i, device=DEVICE)
        self.touched = zeros(n, dtype=wp.int32, device=DEVICE)
        self.isect = zeros(max(n, 1024), dtype=wp.int32, device=DEVICE)
        self.touched_np = self.touched.numpy()  # zero-copy views of CPU arrays
        self.depth_np = (self.depth.numpy() if self.record is None  # zero-copy views
                         else self.record.numpy()[:, RECORD_FIELDS["depth"]])
        self.rec_opacity = None if self.record is None else self._record_view(float, "opacity")
        self.sorted_capacity = -1
        self.sorted_buffers(0)
        self.images: dict[tuple[int, int], _ImageBuffers] = {}

    def _record_view(self, dtype, field: str) -> wp.array:
        """Rows of ``record[:, RECORD_FIELDS[field]:]`` as a strided Warp array of ``dtype``."""
        return wp.array(ptr=self.record.ptr + 4 * RECORD_FIELDS[field], dtype=dtype,
                        shape=(self.num,), strides=(4 * RECORD_FLOATS,), device=DEVICE,
                        copy=False)

    def sorted_buffers(self, num: int) -> None:
        """Make the depth-sorted buffers (``order``, ``sort_keys``, ``s_*``) hold ``num``.

        Sized by the Gaussians a frame actually draws, not the scene (a pinhole view
        of a room draws a fraction of it), grown by 1/8 beyond the need when they grow.
        """
        if num <= self.sorted_capacity:
            return
        cap = max(num, min(self.num, max(1024, num + num // 8)))
        zeros = wp.zeros
        self.sorted_capacity = cap
        self.s_xy = zeros(cap, dtype=wp.vec2, device=DEVICE)
        self.s_conic = zeros(cap, dtype=wp.vec3, device=DEVICE)
        self.s_ext = zeros(cap, dtype=wp.vec3, device=DEVICE)
        self.s_depth = zeros(cap, dtype=float, device=DEVICE)
        self.s_color = zeros(cap, dtype=wp.vec3, device=DEVICE)
        self.s_opacity = zeros(cap, dtype=float, device=DEVICE)
        self.order = zeros(2 * cap, dtype=wp.int32, device=DEVICE)  # radix sort needs 2x room
        self.sort_keys = zeros(2 * cap, dtype=float, device=DEVICE)
        self.order_np = self.order.numpy()
        self.sort_keys_np = self.sort_keys.numpy()

    def image_buffers(self, width: int, height: int, tile_size: int) -> _ImageBuffers:
        key = (width, height, tile_size)
        if key not in self.images:
            self.images[key] = _ImageBuffers(width, height, tile_size)
        return self.images[key]


class _ImageBuffers:
    def __init__(self, width: int, height: int, tile_size: int) -> None:
        self.tiles_x = math.ceil(width / tile_size)
        self.tiles_y = math.ceil(height / tile_size)
        num_tiles = self.tiles_x * self.tiles_y
        p = width * height
        self.tile_start = wp.zeros(num_tiles + 1, dtype=wp.int32, device=DEVICE)
        self.cursor = wp.zeros(num_tiles, dtype=wp.int32, device=DEVICE)
        self.acc = wp.zeros(p, dtype=wp.vec4, device=DEVICE)
        self.trans = wp.zeros(p, dtype=float, device=DEVICE)
        self.row_left = wp.zeros(height * self.tiles_x, dtype=wp.int32, device=DEVICE)
        self.rgb = wp.zeros(p, dtype=wp.vec3, device=DEVICE)
        self.depth = wp.zeros(p, dtype=float, device=DEVICE)
        self.alpha = wp.zeros(p, dtype=float, device=DEVICE)
        self.valid_key: object = None  # None = all pixels valid (pinhole)
        self.valid = wp.full(p, 1, dtype=wp.int32, device=DEVICE)
        self.valid_np = np.ones((height, width), bool)
        self.occluder = wp.full(p, np.inf, dtype=float, device=DEVICE)


_CACHE: weakref.WeakKeyDictionary[GaussianSplats, _SplatArrays] = weakref.WeakKeyDictionary()


def _quat_to_rotmat(q: np.ndarray) -> np.ndarray:  # [N, 4] unit (w, x, y, z) -> [N, 3, 3]
    w, x, y, z = q.T
    return np.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        axis=1,
    ).reshape(-1, 3, 3)


def frame_buffers(arr: _SplatArrays, camera: Camera, tile_size: int):
    """``arr``'s image buffers for ``camera``, with the pixel-validity mask set for its model.

    The fisheye mask (pixels inside the image circle) is recomputed only when the
    intrinsics change; a pinhole frame marks every pixel valid.
    """
    width, height = camera.width, camera.height
    img = arr.image_buffers(width, height, tile_size)
    if camera.model == "fisheye":
        key = (camera.fx, camera.fy, camera.cx, camera.cy, camera.distortion, camera.max_theta)
        if img.valid_key != key:
            _, valid = camera.pixel_rays()
            img.valid.assign(valid.reshape(-1).astype(np.int32))
            img.valid_np, img.valid_key = valid, key
    elif img.valid_key is not None:
        img.valid.fill_(1)
        img.valid_np, img.valid_key = np.ones((height, width), bool), None
    return img


def splat_arrays(splats: GaussianSplats) -> _SplatArrays:
    """Device arrays for ``splats``, uploaded on first use and cached with the object."""
    arrays = _CACHE.get(splats)
    if arrays is None:
        if splats.count_nonfinite():
            raise ValueError(
                f"splats contain {splats.count_nonfinite()} Gaussians with NaN/Inf values; "
                "drop them first (e.g. read_ply(..., drop_nonfinite=True))"
            )
        arrays = _SplatArrays(splats)
        _CACHE[splats] = arrays
    return arrays


def _frustum_limits(cam: Camera) -> wp.vec4:
    extra = K.FRUSTUM_CLAMP - 1.0
    tan_x, tan_y = 0.5 * cam.width / cam.fx, 0.5 * cam.height / cam.fy
    return wp.vec4(
        (cam.width - cam.cx) / cam.fx + extra * tan_x, cam.cx / cam.fx + extra * tan_x,
        (cam.height - cam.cy) / cam.fy + extra * tan_y, cam.cy / cam.fy + extra * tan_y,
    )


def render_cpu(
    splats: GaussianSplats,
    camera: Camera,
    *,
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W]
    tile_size: int = K.TILE_SIZE,
) -> RenderOutput:
    """Render ``splats`` from ``camera`` with the Warp CPU kernels (fisheye = direct model).

    ``occluder_depth`` (metres, same convention as the output depth, inf = none)
    drops, per pixel, every Gaussian at or behind it (see :mod:`bench.render.composite`).
    """
    degree = resolve_sh_degree(splats.sh_degree, sh_degree)
    width, height = camera.width, camera.height
    if splats.num == 0:
        return RenderOutput.empty(camera, background, occluded=occluder_depth is not None)
    arr = splat_arrays(splats)
    img = frame_buffers(arr, camera, tile_size)
    view = camera.camera_from_world.astype(np.float32)
    wp.launch(
        _project_kernel, dim=arr.num, device=DEVICE,
        inputs=[
            arr.means, arr.cov_a, arr.cov_b, arr.opacity, arr.sh, degree,
            wp.mat33(view[:3, :3]), wp.vec3(view[:3, 3]),
            wp.vec3(camera.position.astype(np.float32)),
            _MODEL_IDS[camera.model], wp.vec4(camera.fx, camera.fy, camera.cx, camera.cy),
            wp.vec4(*camera.distortion), _frustum_limits(camera), camera.max_theta,
            width, height, tile_size, img.tiles_x, img.tiles_y,
            arr.xy, arr.conic, arr.ext, arr.depth, arr.color, arr.rect, arr.touched,
        ],
    )
    # Depth order of the visible Gaussians: stable radix sort (ties keep index order).
    visible = np.flatnonzero(arr.touched_np)
    num = len(visible)
    arr.sorted_buffers(num)
    arr.sort_keys_np[:num] = arr.depth_np[visible]
    arr.order_np[:num] = visible
    wp.utils.radix_sort_pairs(arr.sort_keys, arr.order, num)
    total = int(arr.touched_np.sum(dtype=np.int64))
    if total > arr.isect.shape[0]:
        arr.isect = wp.zeros(int(total * 1.5), dtype=wp.int32, device=DEVICE)
    num_tiles = img.tiles_x * img.tiles_y
    use_occluder = int(occluder_depth is not None)
    if use_occluder:
        img.occluder.assign(np.ascontiguousarray(occluder_depth, np.float32).reshape(-1))
    occluder = img.occluder
    wp.launch(
        _bin_kernel, dim=1, device=DEVICE,
        inputs=[
            arr.order, num, num_tiles, img.tiles_x, arr.rect, arr.xy, arr.conic, arr.ext,
            arr.depth, arr.color, arr.opacity, img.tile_start, img.cursor, arr.isect,
            arr.s_xy, arr.s_conic, arr.s_ext, arr.s_depth, arr.s_color, arr.s_opacity,
        ],
    )
    native = _NATIVE_RASTER and tile_size <= _TILE_BUFFER
    kernel = _raster_tile_kernel if native else _raster_kernel
    scratch = [] if native else [img.acc, img.trans, img.row_left]
    wp.launch(
        kernel, dim=num_tiles, device=DEVICE,
        inputs=[
            img.tile_start, arr.isect, arr.s_xy, arr.s_conic, arr.s_ext, arr.s_depth,
            arr.s_color, arr.s_opacity, width, height, tile_size, img.tiles_x,
            wp.vec3(*(float(b) for b in background)), img.valid, occluder, use_occluder,
            *scratch, img.rgb, img.depth, img.alpha,
        ],
    )
    return RenderOutput(
        rgb=img.rgb.numpy().reshape(height, width, 3).copy(),
        depth=img.depth.numpy().reshape(height, width).copy(),
        alpha=img.alpha.numpy().reshape(height, width).copy(),
        valid=img.valid_np.copy(),
        occluded=bool(use_occluder),
    )
