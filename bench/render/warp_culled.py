"""Warp kernels of the culled exact path (:func:`bench.render.culling.render_runs`).

Same forward model and the same float operations as :mod:`bench.render.warp_backend`
(today's ``render_cpu``, kept unchanged as the reference), arranged so that work that
cannot change a pixel is never done. Every change keeps the image bit for bit:

- **Tight tile lists.** Today a Gaussian is listed in every tile its ``3 sigma``
  radius-square overlaps, and the rasterizer then skips it in each tile where its
  ``alpha >= ALPHA_MIN`` rectangle (``ext``, the opacity-bounded extent) holds no
  pixel centre of the tile. :func:`_project_tight_kernel` computes that same
  rectangle with the rasterizer's own float expressions and lists the Gaussian only
  in the tiles where it is not empty; a Gaussian whose rectangle holds no pixel centre
  at all (or whose opacity is below ``ALPHA_MIN``) is dropped before the depth sort.
  The skipped entries are exactly those the rasterizer would have passed over.
- **Counted in the projection, scattered once.** Per-tile counts are accumulated
  while projecting (CPU launches run serially, so the counts are deterministic);
  :func:`_scatter_kernel` then only writes each Gaussian's id into its tiles' lists in
  depth order. Nothing is packed: the rasterizer reads the projected arrays by
  Gaussian id (the values it reads are the same).
- **One ``atan2`` per fisheye Gaussian** (today's kernel evaluates the same
  ``atan2(r, z)`` twice: for the angle cull and in the Kannala-Brandt scale).
- **Narrow lane windows.** The native tile blender evaluates a whole 16-pixel tile
  row for every row a Gaussian touches; a sub-pixel Gaussian spans ~3-4 pixels of a
  row. :data:`RASTER_WINDOW_SNIPPET` evaluates a 4- or 8-lane window that contains
  the span when it fits (the lanes outside the span are masked exactly as before).
"""

from __future__ import annotations

import warp as wp

from bench.render import warp_backend as wb

_NEAR = wb._NEAR
_FAR = wb._FAR
_LOW_PASS = wb._LOW_PASS
_SIGMA_EXTENT = wb._SIGMA_EXTENT
_EIGEN_FLOOR = wb._EIGEN_FLOOR
_ALPHA_MIN = wb._ALPHA_MIN
_mat23 = wb._mat23


@wp.func
def _fisheye_scale_theta(p: wp.vec3, dist: wp.vec4, r2: float, theta: float) -> wp.vec3:
    """``warp_backend._fisheye_scale`` given ``r2 = x^2 + y^2``, ``theta = atan2(sqrt(r2), z)``."""
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
def _project_one(
    g: int,
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    sh: wp.array2d(dtype=wp.vec3),
    degree: int,
    rot: wp.mat33,
    trans: wp.vec3,
    centre: wp.vec3,
    model: int,
    intr: wp.vec4,
    dist: wp.vec4,
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
    out_rect: wp.array(dtype=wp.vec4i),  # tight tile rectangle (x0, x1, y0, y1)
    out_touched: wp.array(dtype=wp.int32),  # tiles listed (0 = not drawn)
    tile_count: wp.array(dtype=wp.int32),  # [num_tiles] += 1 per listed tile
):
    """``warp_backend._project_kernel`` (same arithmetic) for Gaussian ``g``, tight tile lists."""
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
        jac = wb._pinhole_jacobian(p, fx, fy, lim)
    else:
        depth = wp.length(p)
        if depth < _NEAR or depth > _FAR:
            return
        r2 = p[0] * p[0] + p[1] * p[1]
        theta = wp.atan2(wp.sqrt(r2), p[2])
        if theta >= max_theta:
            return
        sgd = _fisheye_scale_theta(p, dist, r2, theta)
        s = sgd[0]
        gg = sgd[1]
        u = fx * s * p[0] + intr[2]
        v = fy * s * p[1] + intr[3]
        jac = _mat23(
            fx * (s + p[0] * p[0] * gg), fx * p[0] * p[1] * gg, fx * p[0] * sgd[2],
            fy * p[0] * p[1] * gg, fy * (s + p[1] * p[1] * gg), fy * p[1] * sgd[2],
        )
    ca = cov_a[g]
    cb = cov_b[g]
    cov_w = wp.mat33(ca[0], ca[1], ca[2], ca[1], cb[0], cb[1], ca[2], cb[1], cb[2])
    cov_c = rot * cov_w * wp.transpose(rot)
    cov2 = jac * cov_c * wp.transpose(jac)
    a = cov2[0, 0] + _LOW_PASS
    b = cov2[0, 1]
    c = cov2[1, 1] + _LOW_PASS
    det = a * c - b * b
    if not (det > 0.0):
        return
    mid = 0.5 * (a + c)
    lam = mid + wp.sqrt(wp.max(mid * mid - det, _EIGEN_FLOOR))
    radius = wp.ceil(_SIGMA_EXTENT * wp.sqrt(wp.max(lam, 0.0)))
    if radius <= 0.0:
        return
    if u + radius <= 0.0 or u - radius >= float(width):
        return
    if v + radius <= 0.0 or v - radius >= float(height):
        return
    ts = float(tile_size)
    x0 = wp.clamp(int(wp.floor((u - radius) / ts)), 0, tiles_x)
    x1 = wp.clamp(int(wp.ceil((u + radius) / ts)), 0, tiles_x)
    y0 = wp.clamp(int(wp.floor((v - radius) / ts)), 0, tiles_y)
    y1 = wp.clamp(int(wp.ceil((v + radius) / ts)), 0, tiles_y)
    if (x1 - x0) * (y1 - y0) <= 0:
        return
    level = wp.log(opacity[g] / _ALPHA_MIN)
    if not (level > 0.0):  # the rasterizer skips it everywhere (e[0] < 0)
        return
    e0 = wp.sqrt(2.0 * level * a) * 1.01 + 0.01
    e1 = wp.sqrt(2.0 * level * c) * 1.01 + 0.01
    # The rasterizer's pixel rectangle (same float expressions), clipped to the
    # radius-square's tiles and the image: tiles where it is empty skip this Gaussian.
    px_lo = wp.max(x0 * tile_size, int(wp.floor(u - e0 - 0.5)))
    px_hi = wp.min(wp.min(x1 * tile_size, width), int(wp.floor(u + e0 - 0.5)) + 1)
    py_lo = wp.max(y0 * tile_size, int(wp.floor(v - e1 - 0.5)))
    py_hi = wp.min(wp.min(y1 * tile_size, height), int(wp.floor(v + e1 - 0.5)) + 1)
    if px_lo >= px_hi or py_lo >= py_hi:
        return
    tx0 = px_lo / tile_size
    tx1 = (px_hi - 1) / tile_size + 1
    ty0 = py_lo / tile_size
    ty1 = (py_hi - 1) / tile_size + 1
    out_touched[g] = (tx1 - tx0) * (ty1 - ty0)
    out_rect[g] = wp.vec4i(tx0, tx1, ty0, ty1)
    for ty in range(ty0, ty1):
        for tx in range(tx0, tx1):
            wp.atomic_add(tile_count, ty * tiles_x + tx, 1)
    out_xy[g] = wp.vec2(u, v)
    out_conic[g] = wp.vec3(c / det, -b / det, a / det)
    out_depth[g] = depth
    out_ext[g] = wp.vec3(e0, e1, level)
    out_color[g] = wb._sh_color(sh, g, degree, wp.normalize(means[g] - centre))


@wp.kernel
def _project_tight_kernel(
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    sh: wp.array2d(dtype=wp.vec3),
    degree: int,
    rot: wp.mat33,
    trans: wp.vec3,
    centre: wp.vec3,
    model: int,
    intr: wp.vec4,
    dist: wp.vec4,
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
    out_rect: wp.array(dtype=wp.vec4i),  # tight tile rectangle (x0, x1, y0, y1)
    out_touched: wp.array(dtype=wp.int32),  # tiles listed (0 = not drawn)
    tile_count: wp.array(dtype=wp.int32),  # [num_tiles] += 1 per listed tile
):
    """Project rows ``0 .. dim`` (a run of the block-ordered arrays, sliced)."""
    g = wp.tid()
    _project_one(g, means, cov_a, cov_b, opacity, sh, degree, rot, trans, centre, model, intr,
                 dist, lim, max_theta, width, height, tile_size, tiles_x, tiles_y, out_xy,
                 out_conic, out_ext, out_depth, out_color, out_rect, out_touched, tile_count)


@wp.kernel
def _project_rows_kernel(
    rows: wp.array(dtype=wp.int32),
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    sh: wp.array2d(dtype=wp.vec3),
    degree: int,
    rot: wp.mat33,
    trans: wp.vec3,
    centre: wp.vec3,
    model: int,
    intr: wp.vec4,
    dist: wp.vec4,
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
    out_rect: wp.array(dtype=wp.vec4i),  # tight tile rectangle (x0, x1, y0, y1)
    out_touched: wp.array(dtype=wp.int32),  # tiles listed (0 = not drawn)
    tile_count: wp.array(dtype=wp.int32),  # [num_tiles] += 1 per listed tile
):
    """Project the rows listed in ``rows`` (one launch for many short ranges)."""
    g = rows[wp.tid()]
    _project_one(g, means, cov_a, cov_b, opacity, sh, degree, rot, trans, centre, model, intr,
                 dist, lim, max_theta, width, height, tile_size, tiles_x, tiles_y, out_xy,
                 out_conic, out_ext, out_depth, out_color, out_rect, out_touched, tile_count)


@wp.kernel
def _scatter_kernel(
    order: wp.array(dtype=wp.int32),  # [num] Gaussian ids in depth order
    num: int,
    tiles_x: int,
    rect: wp.array(dtype=wp.vec4i),
    cursor: wp.array(dtype=wp.int32),  # [num_tiles] start of each tile's list (advanced)
    isect: wp.array(dtype=wp.int32),  # [total] Gaussian ids, by tile, depth order inside
):
    """One serial pass: each Gaussian's id into its tiles' lists (stable: depth order)."""
    for k in range(num):
        g = order[k]
        r = rect[g]
        for ty in range(r[2], r[3]):
            for tx in range(r[0], r[1]):
                t = ty * tiles_x + tx
                isect[cursor[t]] = g
                cursor[t] += 1


_FULL_ROW = wb.native_snippet("""            int stops = 0;
            if (tw == $TILE_SIZE) {  // the usual full 16-pixel tile row: a constant trip count
                for (int l = 0; l < $TILE_SIZE; ++l) stops += blend(l);
            } else {
                for (int l = 0; l < tw; ++l) stops += blend(l);
            }
""")
_WINDOWED_ROW = wb.native_snippet("""            int stops = 0;
            // The smallest 4/8/16-lane window holding [rx0, rx1); lanes outside the span
            // are masked by blend() itself, exactly as in a full row.
            const int span = rx1 - rx0;
            if (span <= 4 && tw >= 4) {
                const int base = wp::min(rx0, tw - 4);
                for (int l = 0; l < 4; ++l) stops += blend(base + l);
            } else if (span <= 8 && tw >= 8) {
                const int base = wp::min(rx0, tw - 8);
                for (int l = 0; l < 8; ++l) stops += blend(base + l);
            } else if (tw == $TILE_SIZE) {
                for (int l = 0; l < $TILE_SIZE; ++l) stops += blend(l);
            } else {
                for (int l = 0; l < tw; ++l) stops += blend(l);
            }
""")
if _FULL_ROW not in wb._RASTER_TILE_SNIPPET:  # pragma: no cover - guards the text edit below
    raise RuntimeError("warp_backend._RASTER_TILE_SNIPPET changed; update warp_culled")
#: ``warp_backend``'s native tile blender with narrow lane windows (same float operations).
RASTER_WINDOW_SNIPPET = wb._RASTER_TILE_SNIPPET.replace(_FULL_ROW, _WINDOWED_ROW)


@wp.func_native(RASTER_WINDOW_SNIPPET)
def _raster_tile_window(
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
def _raster_window_kernel(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),  # Gaussian ids: the arrays below are read by id
    xy: wp.array(dtype=wp.vec2),
    conic: wp.array(dtype=wp.vec3),
    ext: wp.array(dtype=wp.vec3),
    depth: wp.array(dtype=float),
    color: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
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
    _raster_tile_window(tile_start, isect, xy, conic, ext, depth, color, opacity, width,
                        height, tile_size, tiles_x, background, valid, occluder, use_occluder,
                        out_rgb, out_depth, out_alpha, wp.tid())
