"""Warp kernels of the culled exact path (:func:`bench.render.culling.render_runs`).

Same forward model and the same float operations as :mod:`bench.render.warp_backend`
(today's ``render_cpu``, kept unchanged as the reference; the per-Gaussian functions
are shared with it), arranged so that work that cannot change a pixel is never done and
the rest is done with fewer instructions and cache misses. Every change keeps the image
bit for bit:

- **Tight tile lists.** Today a Gaussian is listed in every tile its ``3 sigma``
  radius-square overlaps, and the rasterizer then skips it in each tile where its
  ``alpha >= ALPHA_MIN`` rectangle (``ext``, the opacity-bounded extent) holds no
  pixel centre of the tile. The projection computes that same rectangle with the
  rasterizer's own float expressions and lists the Gaussian only in the tiles where it
  is not empty; a Gaussian whose rectangle holds no pixel centre at all (or whose
  opacity is below ``ALPHA_MIN``) is dropped before the depth sort.
- **SIMD projection** (:data:`PROJECT_CHUNK_SNIPPET`, 8 Gaussians per thread in clang
  vector types): today's operations in today's order lane for lane (Warp's matrix
  products are chains of ``fmaf``; libm's ``atan2f`` per lane), branch-free, with
  ``ln(opacity / ALPHA_MIN)`` computed once per scene; a lane whose floor, ceil or
  cull threshold falls in a guard band is deferred to :func:`_project_rows_kernel`
  (today's arithmetic in Warp), so culls, radii and tile rectangles are today's even
  if the compiler fused a multiply-add differently. The kernel appends the drawn rows
  and their depth keys to the sort's input.
- **Counted in the projection, scattered once.** Per-tile counts are accumulated
  while projecting (CPU launches run serially, so the counts are deterministic);
  :func:`_scatter_prefetch_kernel` then only writes each Gaussian's id into its tiles'
  lists in depth order (the next rectangles prefetched; :func:`_scatter_kernel` is its
  plain reference).
- **One sort pass** (:func:`_depth_sort_kernel`): a stable LSD radix sort of the depth
  bits with the depth ties ordered by original index in the same C++ pass (the
  reference: Warp's radix sort + ``culling.ties_by_original_index``).
- **One 64-byte record per row** (``warp_backend.RECORD_FIELDS``): the blender
  (:data:`RASTER_PACKED_SNIPPET`) reads one cache line per tile-list entry, prefetched
  a few entries ahead, instead of six arrays; its row loop evaluates a 4- or 8-lane
  window holding the Gaussian's span when it fits (:data:`RASTER_WINDOW_SNIPPET`, the
  lanes outside the span masked exactly as in a full 16-lane row).
- **One ``atan2`` per fisheye Gaussian** (today's kernel evaluates the same
  ``atan2(r, z)`` twice: for the angle cull and in the Kannala-Brandt scale).
"""

from __future__ import annotations

import string

import warp as wp

from bench.render import constants as K
from bench.render import warp_backend as wb

_NEAR = wb._NEAR
_FAR = wb._FAR
_ALPHA_MIN = wb._ALPHA_MIN
_mat23 = wb._mat23


@wp.kernel
def _project_rows_kernel(
    rows: wp.array(dtype=wp.int32),
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    levels: wp.array(dtype=float),  # ln(opacity / ALPHA_MIN) per row (culling._levels)
    sh: wp.array2d(dtype=wp.vec3),
    degree: int,
    merged_from: int,  # rows from here on are evaluated at merged_degree (LOD's merged pool)
    merged_degree: int,
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
    out_opacity: wp.array(dtype=float),
):
    """Today's per-Gaussian arithmetic on the rows listed in ``rows``, tight tile lists.

    ``warp_backend._project_kernel``'s operations (its shared functions); the exact path's
    scalar projection, and the lanes the SIMD kernel defers.
    """
    g = rows[wp.tid()]
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
        theta = float(0.0)  # noqa: UP018
        if g >= merged_from:  # LOD's merged pool: the SIMD kernel's approximate angle
            theta = _merged_atan2(wp.sqrt(r2), p[2])
        else:
            theta = wp.atan2(wp.sqrt(r2), p[2])
        if theta >= max_theta:
            return
        sgd = wb._fisheye_scale_theta(p, dist, r2, theta)
        u = fx * sgd[0] * p[0] + intr[2]
        v = fy * sgd[0] * p[1] + intr[3]
        jac = wb._fisheye_jacobian(p, sgd, fx, fy)
    abcd = wb._screen_covariance(cov_a, cov_b, g, rot, jac)
    a = abcd[0]
    b = abcd[1]
    c = abcd[2]
    det = abcd[3]
    if not (det > 0.0):
        return
    radius = wb._footprint_radius(a, c, det)
    if radius <= 0.0:
        return
    r = wb._radius_tiles(u, v, radius, width, height, tile_size, tiles_x, tiles_y)
    x0 = r[0]
    x1 = r[1]
    y0 = r[2]
    y1 = r[3]
    if (x1 - x0) * (y1 - y0) <= 0:
        return
    level = levels[g]
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
    row_degree = degree
    if g >= merged_from:
        row_degree = merged_degree
    out_color[g] = wb._sh_color(sh, g, row_degree, wp.normalize(means[g] - centre))
    out_opacity[g] = opacity[g]


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


# --------------------------------------------------------------------------- SIMD projection
#: A lane whose discrete decision (a floor, ceil or cull threshold) lies within
#: ``GUARD_ABS + GUARD_REL |x|`` of its boundary is deferred to the scalar kernel
#: (``_project_rows_kernel``, today's arithmetic), so culls, radii and tile rectangles
#: equal today's even where the compiler contracted a multiply-add differently from Warp's
#: generated code (the values would then differ by round-off only; on this build they
#: are today's to the bit, tested).
GUARD_ABS = 1e-4
GUARD_REL = 4e-6
GUARD_RADIUS_REL = 2e-5
GUARD_THETA = 1e-5


def _c_float(value: float) -> str:
    """``value`` as the C++ float ``(float)(double literal)`` (numpy's float32 of the double)."""
    return f"((float){float(value)!r})"


_PROJECT_CONSTANTS = {
    **wb.NATIVE_CONSTANTS,
    "GUARD_ABS": _c_float(GUARD_ABS), "GUARD_REL": _c_float(GUARD_REL),
    "GUARD_RADIUS_REL": _c_float(GUARD_RADIUS_REL), "GUARD_THETA": _c_float(GUARD_THETA),
    "NEAR_PLANE": _c_float(K.NEAR_PLANE), "FAR_PLANE": _c_float(K.FAR_PLANE),
    "LOW_PASS": _c_float(K.LOW_PASS_PX), "EIGEN_FLOOR": _c_float(K.EIGEN_FLOOR),
    "RECORD_FLOATS": str(wb.RECORD_FLOATS),
    **{f"REC_{name.upper()}": str(at) for name, at in wb.RECORD_FIELDS.items()},
    "SIGMA_EXTENT": _c_float(K.SIGMA_EXTENT), "SH_C0": _c_float(K.SH_C0),
    "SH_C1": _c_float(K.SH_C1), "SH_OFFSET": _c_float(K.SH_OFFSET),
    **{f"SH_C2_{i}": _c_float(c) for i, c in enumerate(K.SH_C2)},
    **{f"SH_C3_{i}": _c_float(c) for i, c in enumerate(K.SH_C3)},
}

# atan2(y, x) for y >= 0 of LOD's merged rows (approximate by construction, so libm's
# correctly rounded atan2f is not needed): Cephes' atanf polynomial after reducing the
# ratio to [0, tan(pi / 8)], error at most 2.6e-7 rad (measured on 200,000 angles; one
# float32 ulp of an angle in [1, pi] is 1.2e-7 to 2.4e-7); with explicit fma, so the SIMD
# kernel's lane-parallel copy (vatan2) gives the same bits.
_ATAN_CONSTANTS = {"ATAN_SPLIT": "0.41421356237309503f", "ATAN_C4": "8.05374449538e-2f",
                   "ATAN_C3": "-1.38776856032e-1f", "ATAN_C2": "1.99777106478e-1f",
                   "ATAN_C1": "-3.33329491539e-1f", "QUARTER_PI": "0.78539816339744831f",
                   "HALF_PI": "1.57079632679489662f", "PI": "3.14159265358979324f"}
MERGED_ATAN2_SNIPPET = string.Template("""
    const float ax = __builtin_fabsf(x);
    const float hi = y > ax ? y : ax;
    const float lo = y > ax ? ax : y;
    const float a = hi > 0.0f ? lo / hi : 0.0f;
    const bool big = a > $ATAN_SPLIT;
    const float t = big ? (a - 1.0f) / (a + 1.0f) : a;
    const float t2 = t * t;
    const float q = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf($ATAN_C4, t2, $ATAN_C3), t2,
                                                  $ATAN_C2), t2, $ATAN_C1);
    float at = __builtin_fmaf(q * t2, t, t);
    at = at + (big ? $QUARTER_PI : 0.0f);
    at = y > ax ? $HALF_PI - at : at;
    return x < 0.0f ? $PI - at : at;
""").substitute(_ATAN_CONSTANTS)


@wp.func_native(MERGED_ATAN2_SNIPPET)
def _merged_atan2(y: float, x: float) -> float: ...


#: 8 Gaussians per thread in clang vector types (8-lane chunks, branch-free), with today's
#: float operations in today's order lane for lane (the matrix products as Warp's chains
#: of fmaf, libm's atan2f per lane), so every projected value equals warp_backend's; lanes
#: near a discrete boundary are still deferred to the scalar kernel (see GUARD_ABS). Rows
#: from ``merged_from`` on (LOD's merged pool) take MERGED_ATAN2_SNIPPET's angle and SH
#: degree ``merged_degree``.
PROJECT_CHUNK_SNIPPET = string.Template("""
    typedef float v8f __attribute__((ext_vector_type(8)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    auto sel = [](const v8i m, const v8f a, const v8f b) -> v8f {  // m ? a : b per lane
        return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
    };
    auto fma = [](const v8f a, const v8f b, const v8f c) -> v8f {
        return __builtin_elementwise_fma(a, b, c);
    };
    auto vmin = [](const v8f a, const v8f b) -> v8f { return __builtin_elementwise_min(a, b); };
    auto vmax = [](const v8f a, const v8f b) -> v8f { return __builtin_elementwise_max(a, b); };
    auto vsqrt = [](const v8f a) -> v8f { return __builtin_elementwise_sqrt(a); };
    auto vabs = [](const v8f a) -> v8f { return __builtin_elementwise_abs(a); };
    auto vfloor = [](const v8f a) -> v8f { return __builtin_elementwise_floor(a); };
    // MERGED_ATAN2_SNIPPET lane-parallel: the same operations (explicit fma), so a merged
    // row deferred to the scalar kernel gets the same angle.
    auto vatan2 = [&](const v8f y, const v8f x) -> v8f {
        const v8f ax = vabs(x);
        const v8f hi = vmax(y, ax), lo = vmin(y, ax);
        const v8f a = sel(hi > 0.0f, lo / hi, (v8f)(0.0f));  // in [0, 1]
        const v8i big = a > $ATAN_SPLIT;
        const v8f t = sel(big, (a - 1.0f) / (a + 1.0f), a);
        const v8f t2 = t * t;
        const v8f q = fma(fma(fma((v8f)($ATAN_C4), t2, (v8f)($ATAN_C3)), t2, (v8f)($ATAN_C2)),
                          t2, (v8f)($ATAN_C1));
        v8f at = fma(q * t2, t, t);
        at = at + sel(big, (v8f)($QUARTER_PI), (v8f)(0.0f));
        at = sel(y > ax, $HALF_PI - at, at);
        return sel(x < 0.0f, $PI - at, at);
    };
    // x within the guard band of an integer, and in [lo - 1, hi + 1] (where it matters)
    auto near_int = [&](const v8f x, const float lo, const float hi, const float rel) -> v8i {
        const v8f d = vabs(x - vfloor(x + 0.5f));
        return (d <= $GUARD_ABS + rel * vabs(x)) & (x >= lo - 1.0f) & (x <= hi + 1.0f);
    };
    const int g0 = chunk_start.data[chunk];
    const int n = chunk_len.data[chunk];
    // gathered: the chunk is 8 entries of the row list ``rows`` (a frame's LOD cut), else
    // 8 consecutive rows; the arithmetic per row is the same either way.
    auto row_of = [&](const int i) -> int { return gathered ? rows.data[i] : i; };
    if (gathered) {  // the rows two chunks ahead (24 padding entries follow the list):
        // every line they read or write requested now, so that their random misses
        // overlap (3 M room, 128 px fisheye LOD cut: 7.9 -> 4.7 ms; 1 chunk ahead 5.8)
        for (int l = 0; l < 8; ++l) {
            const int h = rows.data[g0 + 16 + l];
            __builtin_prefetch(means.data + h);
            __builtin_prefetch(cov_a.data + h);
            __builtin_prefetch(cov_b.data + h);
            __builtin_prefetch(level.data + h);
            __builtin_prefetch(opacity.data + h);
            const char* shp = (const char*)(sh.data + (size_t)h * sh_row);
            const int coeffs = h >= merged_from ? (merged_degree + 1) * (merged_degree + 1)
                                                : sh_row;  // the ones the colour reads
            for (int b = 0; b < coeffs * 12; b += 64) __builtin_prefetch(shp + b);
            __builtin_prefetch(record.data + (size_t)h * $RECORD_FLOATS, 1);
            __builtin_prefetch(out_rect.data + h, 1);
            __builtin_prefetch(out_touched.data + h, 1);
            if (use_key_bias) __builtin_prefetch(key_bias.data + h);
        }
    }
    alignas(32) float P0[8], P1[8], P2[8], DEPTH[8], CA0[8], CA1[8], CA2[8], CB0[8], CB1[8],
        CB2[8], LEVEL[8];
    bool merged_lane[8];  // a row of LOD's merged pool (approximate: see theta below)
    int num_merged = 0;
    for (int l = 0; l < 8; ++l) {
        const int g = row_of(g0 + (l < n ? l : 0));  // padding lanes repeat the first row
        merged_lane[l] = g >= merged_from;
        num_merged += merged_lane[l];
        // The depth key with warp_backend's own operations (bit-identical): rot * mean + trans.
        const wp::vec3 p = wp::add(wp::mul(rot, means.data[g]), trans);
        P0[l] = p[0]; P1[l] = p[1]; P2[l] = p[2];
        DEPTH[l] = model == 0 ? p[2] : wp::length(p);
        const wp::vec3 ca = cov_a.data[g];
        const wp::vec3 cb = cov_b.data[g];
        CA0[l] = ca[0]; CA1[l] = ca[1]; CA2[l] = ca[2];
        CB0[l] = cb[0]; CB1[l] = cb[1]; CB2[l] = cb[2];
        LEVEL[l] = level.data[g];
    }
    auto ld = [](const float* p) -> v8f { return *(const v8f*)p; };
    const v8f x = ld(P0), y = ld(P1), z = ld(P2), depth = ld(DEPTH);
    const float fx = intr[0], fy = intr[1], cx = intr[2], cy = intr[3];
    v8i live = (depth >= $NEAR_PLANE) & (depth <= $FAR_PLANE);
    v8i guard = (v8i)(0);
    v8i axis = (v8i)(0);
    v8f u, v, j00, j01, j02, j10, j11, j12;
    if (model == 0) {
        u = fx * x / z + cx;
        v = fy * y / z + cy;
        const v8f tx = z * vmin(vmax(x / z, (v8f)(-lim[1])), (v8f)(lim[0]));
        const v8f ty = z * vmin(vmax(y / z, (v8f)(-lim[3])), (v8f)(lim[2]));
        j00 = fx / z; j01 = (v8f)(0.0f); j02 = -fx * tx / (z * z);
        j10 = (v8f)(0.0f); j11 = fy / z; j12 = -fy * ty / (z * z);
    } else {
        const v8f r2 = x * x + y * y;
        const v8f rho2 = r2 + z * z;
        const v8f r = vsqrt(r2);
        v8f theta;  // originals: libm's atan2f per lane, as warp_backend's wp.atan2 (bit-identical)
        // Merged rows (approximate by construction) take a vector atan2 (vatan2, error
        // <= 2.6e-7 rad); every original keeps libm's atan2f, as the exact path.
        if (num_merged > 0) theta = vatan2(r, z);
        if (num_merged < 8)
            for (int l = 0; l < 8; ++l)
                if (!merged_lane[l]) theta[l] = ::atan2f(r[l], z[l]);
        live &= theta < max_theta + $GUARD_THETA;
        guard |= vabs(theta - max_theta) <= $GUARD_THETA;
        axis = r2 < 1.0e-10f * rho2;  // near the axis (the r -> 0 branch): the scalar kernel
        const v8f t2 = theta * theta;
        const v8f theta_d = theta * (1.0f + t2 * (dist[0] + t2 * (dist[1] + t2 * (dist[2]
                                                                        + t2 * dist[3]))));
        const v8f dtheta = 1.0f + t2 * (3.0f * dist[0] + t2 * (5.0f * dist[1] + t2 * (
            7.0f * dist[2] + t2 * 9.0f * dist[3])));
        const v8f s = theta_d / r;
        const v8f gg = (dtheta * z / rho2 - s) / r2;
        const v8f sd = -dtheta / rho2;
        u = fx * s * x + cx;
        v = fy * s * y + cy;
        j00 = fx * (s + x * x * gg); j01 = fx * x * y * gg; j02 = fx * x * sd;
        j10 = fy * x * y * gg; j11 = fy * (s + y * y * gg); j12 = fy * y * sd;
    }
    // cov2 = J (R W R^T) J^T in warp_backend's order: Warp's matrix product is a chain of
    // fmaf per entry (wp::mul -> muladd), repeated here lane-parallel, so a pinhole
    // frame's conics are today's to the bit (its J is the same float expression).
    const v8f w[3][3] = {{ld(CA0), ld(CA1), ld(CA2)}, {ld(CA1), ld(CB0), ld(CB1)},
                         {ld(CA2), ld(CB1), ld(CB2)}};
    v8f rw[3][3], cc[3][3];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            rw[i][j] = fma((v8f)(rot.data[i][2]), w[2][j],
                           fma((v8f)(rot.data[i][1]), w[1][j],
                               fma((v8f)(rot.data[i][0]), w[0][j], (v8f)(0.0f))));
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            cc[i][j] = fma(rw[i][2], (v8f)(rot.data[j][2]),
                           fma(rw[i][1], (v8f)(rot.data[j][1]),
                               fma(rw[i][0], (v8f)(rot.data[j][0]), (v8f)(0.0f))));
    const v8f jm[2][3] = {{j00, j01, j02}, {j10, j11, j12}};
    v8f jc[2][3];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            jc[i][j] = fma(jm[i][2], cc[2][j], fma(jm[i][1], cc[1][j],
                                                    fma(jm[i][0], cc[0][j], (v8f)(0.0f))));
    auto cov2 = [&](const int i, const int j) -> v8f {
        return fma(jc[i][2], jm[j][2], fma(jc[i][1], jm[j][1], fma(jc[i][0], jm[j][0],
                                                                    (v8f)(0.0f))));
    };
    const v8f a = cov2(0, 0) + $LOW_PASS;
    const v8f b = cov2(0, 1);
    const v8f c = cov2(1, 1) + $LOW_PASS;
    const v8f det = a * c - b * b;
    guard |= vabs(det) <= 1.0e-4f * vabs(a * c);
    live &= (det > 0.0f) | (vabs(det) <= 1.0e-4f * vabs(a * c)) | axis;
    const v8f mid = 0.5f * (a + c);
    const v8f lam = mid + vsqrt(vmax(mid * mid - det, (v8f)($EIGEN_FLOOR)));
    const v8f extent = $SIGMA_EXTENT * vsqrt(vmax(lam, (v8f)(0.0f)));
    const v8f radius = __builtin_elementwise_ceil(extent);
    guard |= near_int(extent, 0.0f, 1.0e30f, $GUARD_RADIUS_REL);
    const float wf = (float)width, hf = (float)height, ts = (float)tile_size;
    // The image cull and the radius square's tiles: thresholds at integers of u, v.
    const v8f ul = (u - radius) / ts, uh = (u + radius) / ts;
    const v8f vl = (v - radius) / ts, vh = (v + radius) / ts;
    const float txf = (float)tiles_x, tyf = (float)tiles_y;
    guard |= near_int(u + radius, 0.0f, 0.0f, $GUARD_REL);
    guard |= near_int(u - radius, wf, wf, $GUARD_REL);
    guard |= near_int(v + radius, 0.0f, 0.0f, $GUARD_REL);
    guard |= near_int(v - radius, hf, hf, $GUARD_REL);
    guard |= near_int(ul, 0.0f, txf, $GUARD_REL) | near_int(uh, 0.0f, txf, $GUARD_REL);
    guard |= near_int(vl, 0.0f, tyf, $GUARD_REL) | near_int(vh, 0.0f, tyf, $GUARD_REL);
    const v8f lvl = ld(LEVEL);
    live &= lvl > 0.0f;
    const v8f e0 = vsqrt(2.0f * lvl * a) * 1.01f + 0.01f;
    const v8f e1 = vsqrt(2.0f * lvl * c) * 1.01f + 0.01f;
    const v8f xlo = u - e0 - 0.5f, xhi = u + e0 - 0.5f;
    const v8f ylo = v - e1 - 0.5f, yhi = v + e1 - 0.5f;
    guard |= near_int(xlo, 0.0f, wf, $GUARD_REL) | near_int(xhi, 0.0f, wf, $GUARD_REL);
    guard |= near_int(ylo, 0.0f, hf, $GUARD_REL) | near_int(yhi, 0.0f, hf, $GUARD_REL);
    const v8i defer = live & (guard | axis);
    const v8i inside = (u + radius > 0.0f) & (u - radius < wf) & (v + radius > 0.0f)
                       & (v - radius < hf) & (radius > 0.0f) & (det > 0.0f);
    // The radius square's tiles and the tight rectangle, as today: float floor / ceil
    // converted to int (out-of-range values become INT_MIN, as the scalar conversion),
    // then clamped in int.
    auto to_int = [](const v8f a) -> v8i { return __builtin_convertvector(a, v8i); };
    auto imax = [](const v8i a, const v8i b) -> v8i { return __builtin_elementwise_max(a, b); };
    auto imin = [](const v8i a, const v8i b) -> v8i { return __builtin_elementwise_min(a, b); };
    const v8i zero = (v8i)(0), ntx = (v8i)(tiles_x), nty = (v8i)(tiles_y);
    const v8i x0 = imin(imax(to_int(vfloor(ul)), zero), ntx);
    const v8i x1 = imin(imax(to_int(__builtin_elementwise_ceil(uh)), zero), ntx);
    const v8i y0 = imin(imax(to_int(vfloor(vl)), zero), nty);
    const v8i y1 = imin(imax(to_int(__builtin_elementwise_ceil(vh)), zero), nty);
    const v8i its = (v8i)(tile_size);
    const v8i px_lo = imax(x0 * its, to_int(vfloor(xlo)));
    const v8i px_hi = imin(imin(x1 * its, (v8i)(width)), to_int(vfloor(xhi)) + 1);
    const v8i py_lo = imax(y0 * its, to_int(vfloor(ylo)));
    const v8i py_hi = imin(imin(y1 * its, (v8i)(height)), to_int(vfloor(yhi)) + 1);
    const v8i draw = live & ~guard & inside & ((x1 - x0) * (y1 - y0) > 0) & (px_lo < px_hi)
                     & (py_lo < py_hi);
    // Integer division of non-negative ints below 2^24 by the tile size, exact in float.
    auto tile_of = [&](const v8i a) -> v8i {
        return to_int(vfloor(__builtin_convertvector(a, v8f) / ts));
    };
    const v8i tx0 = tile_of(px_lo), tx1 = tile_of(px_hi - 1) + 1;
    const v8i ty0 = tile_of(py_lo), ty1 = tile_of(py_hi - 1) + 1;
    for (int l = 0; l < n; ++l) {
        const int g = row_of(g0 + l);
        out_touched.data[g] = 0;
        if (defer[l]) {
            deferred.data[counts.data[0]++] = g;
            continue;
        }
        if (!draw[l]) continue;
        const int at = counts.data[1]++;  // drawn: appended to the depth sort's input
        sort_keys.data[at] = use_key_bias ? DEPTH[l] + key_bias.data[g] : DEPTH[l];
        sort_rows.data[at] = g;
        out_touched.data[g] = (tx1[l] - tx0[l]) * (ty1[l] - ty0[l]);
        out_rect.data[g] = wp::vec4i(tx0[l], tx1[l], ty0[l], ty1[l]);
        for (int ty = ty0[l]; ty < ty1[l]; ++ty)
            for (int tx = tx0[l]; tx < tx1[l]; ++tx) tile_count.data[ty * tiles_x + tx] += 1;
        const float dl = det[l];
        float* __restrict R = record.data + (size_t)g * $RECORD_FLOATS;
        R[$REC_XY] = u[l]; R[$REC_XY + 1] = v[l];
        R[$REC_CONIC] = c[l] / dl; R[$REC_CONIC + 1] = -b[l] / dl; R[$REC_CONIC + 2] = a[l] / dl;
        R[$REC_EXT] = e0[l]; R[$REC_EXT + 1] = e1[l]; R[$REC_EXT + 2] = LEVEL[l];
        R[$REC_DEPTH] = DEPTH[l];
        R[$REC_OPACITY] = opacity.data[g];
        // SH colour (warp_backend._sh_color's basis) in the direction centre -> mean.
        const wp::vec3 dir = wp::normalize(wp::sub(means.data[g], centre));
        const wp::vec3* sg = sh.data + (size_t)g * sh_row;
        wp::vec3 col = sg[0] * $SH_C0;
        const int row_degree = g >= merged_from ? merged_degree : degree;
        if (row_degree >= 1) {
            const float dx = dir[0], dy = dir[1], dz = dir[2];
            col = col - sg[1] * ($SH_C1 * dy) + sg[2] * ($SH_C1 * dz) - sg[3] * ($SH_C1 * dx);
            if (row_degree >= 2) {
                const float xx = dx * dx, yy = dy * dy, zz = dz * dz;
                col = col + sg[4] * ($SH_C2_0 * dx * dy) + sg[5] * ($SH_C2_1 * dy * dz);
                col = col + sg[6] * ($SH_C2_2 * (2.0f * zz - xx - yy));
                col = col + sg[7] * ($SH_C2_3 * dx * dz) + sg[8] * ($SH_C2_4 * (xx - yy));
                if (row_degree >= 3) {
                    col = col + sg[9] * ($SH_C3_0 * dy * (3.0f * xx - yy));
                    col = col + sg[10] * ($SH_C3_1 * dx * dy * dz);
                    col = col + sg[11] * ($SH_C3_2 * dy * (4.0f * zz - xx - yy));
                    col = col + sg[12] * ($SH_C3_3 * dz * (2.0f * zz - 3.0f * xx - 3.0f * yy));
                    col = col + sg[13] * ($SH_C3_4 * dx * (4.0f * zz - xx - yy));
                    col = col + sg[14] * ($SH_C3_5 * dz * (xx - yy));
                    col = col + sg[15] * ($SH_C3_6 * dx * (xx - 3.0f * yy));
                }
            }
        }
        R[$REC_COLOR] = wp::max(col[0] + $SH_OFFSET, 0.0f);
        R[$REC_COLOR + 1] = wp::max(col[1] + $SH_OFFSET, 0.0f);
        R[$REC_COLOR + 2] = wp::max(col[2] + $SH_OFFSET, 0.0f);
    }
""").substitute({**_PROJECT_CONSTANTS, **_ATAN_CONSTANTS})


@wp.func_native(PROJECT_CHUNK_SNIPPET)
def _project_chunk(
    chunk_start: wp.array(dtype=wp.int32),
    chunk_len: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    gathered: int,
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    level: wp.array(dtype=float),
    sh: wp.array2d(dtype=wp.vec3),
    sh_row: int,
    degree: int,
    merged_from: int,
    merged_degree: int,
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
    record: wp.array2d(dtype=float),  # [N, RECORD_FLOATS] projected values (warp_backend)
    out_rect: wp.array(dtype=wp.vec4i),
    out_touched: wp.array(dtype=wp.int32),
    tile_count: wp.array(dtype=wp.int32),
    deferred: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),  # [2] lanes deferred, rows drawn
    sort_keys: wp.array(dtype=float),  # [>= drawn] depth keys of the drawn rows
    sort_rows: wp.array(dtype=wp.int32),  # [>= drawn] their rows
    key_bias: wp.array(dtype=float),
    use_key_bias: int,
    chunk: int,
): ...


@wp.kernel
def _project_simd_kernel(
    chunk_start: wp.array(dtype=wp.int32),  # [C] first row (gathered: entry of rows) per chunk
    chunk_len: wp.array(dtype=wp.int32),  # [C] rows in the chunk (1..8)
    rows: wp.array(dtype=wp.int32),  # gathered: [R] the rows to project, else unused
    gathered: int,
    means: wp.array(dtype=wp.vec3),
    cov_a: wp.array(dtype=wp.vec3),
    cov_b: wp.array(dtype=wp.vec3),
    opacity: wp.array(dtype=float),
    level: wp.array(dtype=float),  # [N] ln(opacity / ALPHA_MIN), cached per scene
    sh: wp.array2d(dtype=wp.vec3),
    sh_row: int,
    degree: int,
    merged_from: int,
    merged_degree: int,
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
    record: wp.array2d(dtype=float),  # [N, RECORD_FLOATS] projected values (warp_backend)
    out_rect: wp.array(dtype=wp.vec4i),
    out_touched: wp.array(dtype=wp.int32),
    tile_count: wp.array(dtype=wp.int32),
    deferred: wp.array(dtype=wp.int32),  # [N] rows left to _project_rows_kernel
    counts: wp.array(dtype=wp.int32),  # [2] lanes deferred, rows drawn
    sort_keys: wp.array(dtype=float),  # [>= drawn] depth keys of the drawn rows
    sort_rows: wp.array(dtype=wp.int32),  # [>= drawn] their rows
    key_bias: wp.array(dtype=float),  # [N] added to a drawn row's sort key (not its depth)
    use_key_bias: int,
):
    """Project 8 rows per thread in clang vector types (see PROJECT_CHUNK_SNIPPET)."""
    _project_chunk(chunk_start, chunk_len, rows, gathered, means, cov_a, cov_b, opacity, level,
                   sh, sh_row, degree, merged_from, merged_degree, rot, trans, centre, model,
                   intr, dist, lim, max_theta,
                   width, height, tile_size, tiles_x, tiles_y, record, out_rect, out_touched,
                   tile_count, deferred, counts, sort_keys, sort_rows, key_bias, use_key_bias,
                   wp.tid())


@wp.kernel
def _level_kernel(opacity: wp.array(dtype=float), level: wp.array(dtype=float)):
    """``ln(opacity / ALPHA_MIN)`` as warp_backend computes it (bit-identical), once per scene."""
    g = wp.tid()
    level[g] = wp.log(opacity[g] / _ALPHA_MIN)


SCATTER_SNIPPET = """
    for (int k = 0; k < num; ++k) {
        // the rectangle of a Gaussian a few ahead in depth order (a random row): prefetched
        if (k + 16 < num) __builtin_prefetch(rect.data + order.data[k + 16]);
        const int g = order.data[k];
        const wp::vec4i r = rect.data[g];
        for (int ty = r[2]; ty < r[3]; ++ty)
            for (int tx = r[0]; tx < r[1]; ++tx) isect.data[cursor.data[ty * tiles_x + tx]++] = g;
    }
"""


@wp.func_native(SCATTER_SNIPPET)
def _scatter_native(
    order: wp.array(dtype=wp.int32),
    num: int,
    tiles_x: int,
    rect: wp.array(dtype=wp.vec4i),
    cursor: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
): ...


@wp.kernel
def _scatter_prefetch_kernel(
    order: wp.array(dtype=wp.int32),  # [num] Gaussian ids in depth order
    num: int,
    tiles_x: int,
    rect: wp.array(dtype=wp.vec4i),
    cursor: wp.array(dtype=wp.int32),  # [num_tiles] start of each tile's list (advanced)
    isect: wp.array(dtype=wp.int32),  # [total] Gaussian ids, by tile, depth order inside
):
    """:func:`_scatter_kernel` in C++ with the next rectangles prefetched (same lists)."""
    _scatter_native(order, num, tiles_x, rect, cursor, isect)


DEPTH_SORT_SNIPPET = """
    // Keys are depths >= NEAR_PLANE > 0: their float bits sort as unsigned ints. LSD radix
    // sort, four 8-bit digits, stable, ping-ponging between the two halves of each buffer
    // (a pass whose digit is the same for every key is skipped).
    unsigned int* ka = (unsigned int*)keys.data;
    int* va = rows.data;
    const int half = keys.shape[0] / 2;
    unsigned int* kb = ka + half;
    int* vb = va + half;
    int hist[4][256];
    for (int p = 0; p < 4; ++p)
        for (int d = 0; d < 256; ++d) hist[p][d] = 0;
    for (int i = 0; i < num; ++i) {
        const unsigned int k = ka[i];
        hist[0][k & 255u] += 1;
        hist[1][(k >> 8) & 255u] += 1;
        hist[2][(k >> 16) & 255u] += 1;
        hist[3][k >> 24] += 1;
    }
    unsigned int* ks = ka;
    int* vs = va;
    unsigned int* kd = kb;
    int* vd = vb;
    for (int p = 0; p < 4; ++p) {
        const int shift = 8 * p;
        if (num == 0 || hist[p][(ks[0] >> shift) & 255u] == num) continue;  // one digit value
        int at = 0;
        for (int d = 0; d < 256; ++d) {
            const int c = hist[p][d];
            hist[p][d] = at;
            at += c;
        }
        for (int i = 0; i < num; ++i) {
            const unsigned int k = ks[i];
            const int slot = hist[p][(k >> shift) & 255u]++;
            kd[slot] = k;
            vd[slot] = vs[i];
        }
        unsigned int* kt = ks; ks = kd; kd = kt;
        int* vt = vs; vs = vd; vd = vt;
    }
    if (ks != ka) {
        for (int i = 0; i < num; ++i) {
            ka[i] = ks[i];
            va[i] = vs[i];
        }
    }
    // Equal depths: by original index (insertion sort; nearly all runs are pairs).
    if (use_original) {
        for (int i = 0; i + 1 < num; ++i) {
            if (ka[i + 1] != ka[i]) continue;
            int j = i + 1;
            while (j + 1 < num && ka[j + 1] == ka[i]) ++j;
            for (int a = i + 1; a <= j; ++a) {
                const int row = va[a];
                const long long key = original.data[row];
                int b = a - 1;
                while (b >= i && original.data[va[b]] > key) {
                    va[b + 1] = va[b];
                    --b;
                }
                va[b + 1] = row;
            }
            i = j;
        }
    }
"""


@wp.func_native(DEPTH_SORT_SNIPPET)
def _depth_sort_native(
    keys: wp.array(dtype=float),
    rows: wp.array(dtype=wp.int32),
    num: int,
    original: wp.array(dtype=wp.int64),
    use_original: int,
): ...


@wp.kernel
def _depth_sort_kernel(
    keys: wp.array(dtype=float),  # [2 * cap] depth keys (first num), scratch after cap
    rows: wp.array(dtype=wp.int32),  # [2 * cap] their rows
    num: int,
    original: wp.array(dtype=wp.int64),  # [rows] original index of each row (depth ties)
    use_original: int,
):
    """Stable radix sort by depth, then equal depths by original index (serial C++).

    The same order as ``wp.utils.radix_sort_pairs`` + ``culling.ties_by_original_index``.
    """
    _depth_sort_native(keys, rows, num, original, use_original)


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
# Per row, bits of the pixels still open (instead of their count): an entry skips a tile
# row where its span holds no open pixel, since blend() would leave every lane of it as it
# is (the same images bit for bit). Measured interleaved on the 3 M room, 128 px fisheye:
# the exact path 434 -> 380 ms per frame, LOD at 0.8 / 0.05 -0.35 ms. The plain kernel
# (``culling=False``, the renderer the benchmarks call "today") keeps its row counts.
_OPEN_BITS = {
    "    int row_left[TS];\n": """\
    // per row: bit l set while pixel l is open
    unsigned long long open_bits[TS];
""",
    "        int left = 0;\n": "        int left = 0;\n        unsigned long long bits = 0;\n",
    "            left += open;\n": "            left += open;\n"
                                  "            bits |= (unsigned long long)open << l;\n",
    "        row_left[r] = left;\n": "        open_bits[r] = bits;\n",
    "        if (cx0 >= cx1 || cy0 >= cy1) continue;\n": """\
        if (cx0 >= cx1 || cy0 >= cy1) continue;
        const unsigned long long span_bits = ((1ull << (cx1 - px0)) - 1ull)
                                             & ~((1ull << (cx0 - px0)) - 1ull);
""",
    "            if (row_left[r] == 0) continue;\n":
        "            if ((open_bits[r] & span_bits) == 0) continue;\n",
    "            row_left[r] -= stops;\n            remaining -= stops;\n": """\
            remaining -= stops;
            if (stops) {  // pixels of this row closed: its open bits again
                unsigned long long bits = 0;
                for (int l = 0; l < tw; ++l) bits |= (unsigned long long)(Tr[l] >= 0.0f) << l;
                open_bits[r] = bits;
            }
""",
}


def _windowed_snippet() -> str:
    if _FULL_ROW not in wb._RASTER_TILE_SNIPPET:  # pragma: no cover - guards the text edit
        raise RuntimeError("warp_backend._RASTER_TILE_SNIPPET changed; update warp_culled")
    text = wb._RASTER_TILE_SNIPPET.replace(_FULL_ROW, _WINDOWED_ROW)
    for old, new in _OPEN_BITS.items():
        if text.count(old) != 1:  # pragma: no cover - guards the text edit
            raise RuntimeError(f"warp_backend._RASTER_TILE_SNIPPET changed: {old!r}")
        text = text.replace(old, new)
    return text


#: ``warp_backend``'s native tile blender with narrow lane windows and per-row open-pixel
#: bits (same float operations on every pixel it blends).
RASTER_WINDOW_SNIPPET = _windowed_snippet()


# --------------------------------------------------------------------------- packed blender
_BY_ID_LOADS = {  # RASTER_WINDOW_SNIPPET's per-entry loads -> reads of the row's record
    "        const int k = isect.data[n];\n": wb.native_snippet(
        "        const int k = isect.data[n];\n"
        "        // the record of an entry a few ahead: its (random) cache line arrives in time\n"
        "        if (n + $PREFETCH < end) __builtin_prefetch(record.data\n"
        "            + (size_t)isect.data[n + $PREFETCH] * $RECORD_FLOATS);\n"
        "        const float* __restrict P = record.data + (size_t)k * $RECORD_FLOATS;\n"
        .replace("$PREFETCH", "8").replace("$RECORD_FLOATS", str(wb.RECORD_FLOATS))),
    "s_ext.data[k]": "wp::vec3(P[{0}], P[{0} + 1], P[{0} + 2])".format(wb.RECORD_FIELDS["ext"]),
    "s_xy.data[k]": "wp::vec2(P[{0}], P[{0} + 1])".format(wb.RECORD_FIELDS["xy"]),
    "s_conic.data[k]": "wp::vec3(P[{0}], P[{0} + 1], P[{0} + 2])".format(
        wb.RECORD_FIELDS["conic"]),
    "s_opacity.data[k]": "P[{}]".format(wb.RECORD_FIELDS["opacity"]),
    "s_color.data[k]": "wp::vec3(P[{0}], P[{0} + 1], P[{0} + 2])".format(
        wb.RECORD_FIELDS["color"]),
    "s_depth.data[k]": "P[{}]".format(wb.RECORD_FIELDS["depth"]),
    "for (int n = tile_start.data[tile]; n < tile_start.data[tile + 1] && remaining > 0; ++n)":
        "const int end = tile_start.data[tile + 1];\n"
        "    for (int n = tile_start.data[tile]; n < end && remaining > 0; ++n)",
}


def _packed_snippet() -> str:
    text = RASTER_WINDOW_SNIPPET
    for old, new in _BY_ID_LOADS.items():
        if old not in text:  # pragma: no cover - guards the text edit
            raise RuntimeError(f"RASTER_WINDOW_SNIPPET changed: {old!r} not found")
        text = text.replace(old, new)
    return text


#: :data:`RASTER_WINDOW_SNIPPET` reading each entry's values from its row's 64-byte record
#: (one cache line, prefetched a few entries ahead) instead of six arrays: the same values
#: and float operations, so the same image bit for bit.
RASTER_PACKED_SNIPPET = _packed_snippet()


@wp.func_native(RASTER_PACKED_SNIPPET)
def _raster_tile_packed(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    record: wp.array2d(dtype=float),
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
def _raster_packed_kernel(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),  # row ids: their records are read
    record: wp.array2d(dtype=float),  # [N, RECORD_FLOATS]
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
    _raster_tile_packed(tile_start, isect, record, width, height, tile_size, tiles_x,
                        background, valid, occluder, use_occluder, out_rgb, out_depth,
                        out_alpha, wp.tid())
