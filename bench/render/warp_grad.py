"""Differentiable CPU rasterizer: Warp kernels with hand-written reverse mode, torch around them.

The split (measured in ``benchmarks/bench_train.py``; see docs/cpu-trainer.md): pinhole EWA
projection in Warp (:class:`WarpProjectPinhole`, forward and reverse mode; fisheye cameras
use :func:`bench.render.torch_raster.project` under torch autograd), SH colour and sigmoid
opacity in torch (:func:`~bench.render.torch_raster.gaussian_colors`), and the per-pixel
work, where the time goes, in Warp kernels compiled for device ``"cpu"`` behind one
:class:`torch.autograd.Function` (:class:`WarpComposite`). Gradients reach ``means``,
``quats``, ``log_scales``, ``opacity_logits``, ``sh_dc`` and ``sh_rest``. The compositing:

0. ``_prep_kernel`` (one thread per visible Gaussian, after Warp's stable radix sort by
   depth): tile rectangle (radius square cut to the tiles with alpha >= ALPHA_MIN pixels)
   and the half-extents of that ellipse.
1. ``_bin_kernel`` (serial): counting sort of (tile, Gaussian) pairs by tile, stable, so
   each tile's list stays in depth order; it also records, per Gaussian, the list slots
   it occupies (in tile order) for the gradient reduction.
2. ``_forward_tile_kernel`` (one thread per tile, a C++ snippet in clang vector types
   that evaluates 8-pixel chunks of a tile row branch-free with fused multiply-adds):
   front-to-back blending; writes the accumulated colour ``C``, the accumulated
   ``alpha x depth`` ``D``, the final transmittance ``T`` and, per pixel, the list
   position of the last Gaussian that contributed.
3. ``_backward_tile_kernel`` (one thread per tile, C++ snippet): replays each pixel front
   to back from ``T = 1`` with the same float operations as the forward pass, up to its
   last contributor. With ``g = dL/dC``, ``dL/dD``, ``dL/dT`` of the pixel and
   ``S_i = sum_{j <= i} w_j (c_j . g_C + d_j g_D)`` the running weighted sum, the colour
   behind Gaussian ``i`` is known from the final values (3DGS, Kerbl et al. 2023, eq. of
   the appendix, here in front-to-back form)::

       dL/dalpha_i = T_i (c_i . g_C + d_i g_D) - (B - S_i) / (1 - alpha_i),
       B = C . g_C + D g_D + T_final g_T,

   from which ``alpha = min(0.99, o exp(-power))`` gives the opacity, 2D mean and conic
   gradients; ``w_i g`` gives the colour and depth gradients. Each Gaussian's per-tile sums
   (per lane over its rows, then over the chunks and a fixed pairwise tree over the 8
   lanes) go into its own slot of the tile's list (no atomics).
4. ``_reduce_kernel`` (one thread per Gaussian): sums its slots in tile order.

Every buffer a thread writes belongs to its tile or its Gaussian, and every sum runs in
a fixed order, so results are byte-identical for any number of threads. Threads are
Python threads, each launching the tile kernels over an interleaved share of the tiles
(Warp runs a CPU launch on the calling thread; its ctypes call releases the GIL).

The screen-space gradient used by densification is ``out.means2d.grad`` as in
:func:`bench.render.torch_raster.rasterize` (same signature and outputs, plus ``threads``).
Everything runs in float32; the float64 reference is ``torch_raster.rasterize``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import warp as wp

from bench.render import constants as K
from bench.render import warp_backend  # also its quiet wp.init()
from bench.render.output import resolve_sh_degree
from bench.render.torch_raster import (
    _STORED_DEGREE,
    Projection,
    RasterOutput,
    _as_background,
    gaussian_colors,
    project,
)
from bench.scene.cameras import Camera

wp.set_module_options({"enable_backward": False})  # gradients are hand-written below
DEVICE = "cpu"
_TILE_BUFFER = warp_backend._TILE_BUFFER  # largest tile side the snippets handle (their TS)
_GRADS = 10  # per-Gaussian gradient row: mean x, y; conic a, b, c; opacity; r, g, b; depth


# --------------------------------------------------------------------------- binning
_ALPHA_MIN = wp.constant(K.ALPHA_MIN)


@wp.kernel
def _prep_kernel(
    order: wp.array(dtype=wp.int32),  # [M] Gaussian index per depth rank
    xy: wp.array(dtype=wp.vec2),  # [N]
    conic: wp.array(dtype=wp.vec3),  # [N]
    opacity: wp.array(dtype=float),  # [N]
    radii: wp.array(dtype=wp.int32),  # [N]
    tile_size: int,
    tiles_x: int,
    tiles_y: int,
    rect: wp.array(dtype=wp.vec4i),  # [M] out: tiles (x0, x1, y0, y1), half-open
    ext: wp.array(dtype=wp.vec2),  # [M] out: half-extents of alpha >= ALPHA_MIN, -1: none
    area: wp.array(dtype=wp.int32),  # [M] out: tiles touched
):
    k = wp.tid()
    g = order[k]
    m = xy[g]
    q = conic[g]
    r = float(radii[g])
    ts = float(tile_size)
    # The radius-square's tiles (forward model step 4) ...
    x0 = wp.clamp(int(wp.floor((m[0] - r) / ts)), 0, tiles_x)
    x1 = wp.clamp(int(wp.ceil((m[0] + r) / ts)), 0, tiles_x)
    y0 = wp.clamp(int(wp.floor((m[1] - r) / ts)), 0, tiles_y)
    y1 = wp.clamp(int(wp.ceil((m[1] + r) / ts)), 0, tiles_y)
    # ... cut to those holding pixels where alpha can reach ALPHA_MIN: 0.5 d^T conic d <=
    # level = ln(opacity / ALPHA_MIN), an ellipse spanning |dx| <= sqrt(2 level cov_xx).
    level = wp.float64(wp.log(opacity[g] / _ALPHA_MIN))
    q0 = wp.float64(q[0])
    q1 = wp.float64(q[1])
    q2 = wp.float64(q[2])
    det = wp.max(q0 * q2 - q1 * q1, wp.float64(1.0e-300))
    ext[k] = wp.vec2(-1.0, -1.0)
    if level > wp.float64(0.0):
        hx = wp.sqrt(wp.float64(2.0) * level * q2 / det)
        hy = wp.sqrt(wp.float64(2.0) * level * q0 / det)
        ext[k] = wp.vec2(float(hx) * 1.01 + 0.01, float(hy) * 1.01 + 0.01)
        bx = float(hx) * 1.001 + 1.0
        by = float(hy) * 1.001 + 1.0
        x0 = wp.max(x0, int(wp.floor((m[0] - bx) / ts)))
        x1 = wp.min(x1, int(wp.floor((m[0] + bx) / ts)) + 1)
        y0 = wp.max(y0, int(wp.floor((m[1] - by) / ts)))
        y1 = wp.min(y1, int(wp.floor((m[1] + by) / ts)) + 1)
    else:
        x1 = x0
    if x1 <= x0 or y1 <= y0:
        rect[k] = wp.vec4i(0, 0, 0, 0)
        area[k] = 0
    else:
        rect[k] = wp.vec4i(x0, x1, y0, y1)
        area[k] = (x1 - x0) * (y1 - y0)


@wp.kernel
def _bin_kernel(
    rect: wp.array(dtype=wp.vec4i),  # [M] from _prep_kernel, depth order
    num: int,
    num_tiles: int,
    tiles_x: int,
    slot_start: wp.array(dtype=wp.int32),  # [M + 1] out: prefix sums of the rect areas
    tile_start: wp.array(dtype=wp.int32),  # [num_tiles + 1] out
    cursor: wp.array(dtype=wp.int32),  # [num_tiles] scratch
    isect: wp.array(dtype=wp.int32),  # [total] out: rank per list position
    slots: wp.array(dtype=wp.int32),  # [total] out: list positions per rank, tile order
):
    for t in range(num_tiles + 1):
        tile_start[t] = 0
    slot_start[0] = 0
    for k in range(num):
        r = rect[k]
        slot_start[k + 1] = slot_start[k] + (r[1] - r[0]) * (r[3] - r[2])
        for ty in range(r[2], r[3]):
            for tx in range(r[0], r[1]):
                tile_start[ty * tiles_x + tx + 1] += 1
    warp_backend.tile_starts(tile_start, cursor, num_tiles)
    for k in range(num):
        r = rect[k]
        j = slot_start[k]
        for ty in range(r[2], r[3]):
            for tx in range(r[0], r[1]):
                t = ty * tiles_x + tx
                isect[cursor[t]] = k
                slots[j] = cursor[t]
                cursor[t] += 1
                j += 1


@wp.kernel
def _reduce_kernel(
    order: wp.array(dtype=wp.int32),  # [M]
    slot_start: wp.array(dtype=wp.int32),  # [M + 1]
    slots: wp.array(dtype=wp.int32),  # [total]
    slot_grads: wp.array2d(dtype=float),  # [total, _GRADS]
    out: wp.array2d(dtype=float),  # [N, _GRADS], zero on entry
):
    k = wp.tid()
    g = order[k]
    for j in range(slot_start[k], slot_start[k + 1]):
        s = slots[j]
        for c in range(_GRADS):
            out[g, c] = out[g, c] + slot_grads[s, c]


@wp.kernel
def _pack_kernel(
    order: wp.array(dtype=wp.int32),  # [M]
    xy: wp.array(dtype=wp.vec2),  # [N]
    conic: wp.array(dtype=wp.vec3),  # [N]
    opacity: wp.array(dtype=float),  # [N]
    color: wp.array(dtype=wp.vec3),  # [N]
    depth: wp.array(dtype=float),  # [N]
    ext: wp.array(dtype=wp.vec2),  # [M]
    packed: wp.array2d(dtype=float),  # [M, 12] out
):
    """Per-rank copies in depth order: the tile loops then read memory in sequence."""
    k = wp.tid()
    g = order[k]
    m = xy[g]
    q = conic[g]
    c = color[g]
    e = ext[k]
    packed[k, 0] = m[0]
    packed[k, 1] = m[1]
    packed[k, 2] = q[0]
    packed[k, 3] = q[1]
    packed[k, 4] = q[2]
    packed[k, 5] = opacity[g]
    packed[k, 6] = c[0]
    packed[k, 7] = c[1]
    packed[k, 8] = c[2]
    packed[k, 9] = depth[g]
    packed[k, 10] = e[0]
    packed[k, 11] = e[1]


# --------------------------------------------------------------------------- tile snippets
# Both snippets work on 8-lane chunks of a tile row with clang vector types (v8f / v8i):
# the tile's pixel state lives in 32-byte aligned stack buffers, so a chunk is one aligned
# load / store per buffer. The forward and the backward pass share the alpha code
# (_CHUNK_ALPHA: Cephes' single-precision exp, as warp_backend.LANE_EXP_NEG_POWER, here
# with explicit fused multiply-adds), so they compute bit-identical alphas, and each lane's
# result does not depend on the chunking (lanes are independent; no reassociation).
_VECTOR_TYPES = """
    typedef float v8f __attribute__((ext_vector_type(8)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    auto sel = [](const v8i m, const v8f a, const v8f b) -> v8f {  // m ? a : b per lane
        return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
    };
    auto seli = [](const v8i m, const v8i a, const v8i b) -> v8i { return (a & m) | (b & ~m); };
    auto ld = [](const float* p) -> v8f { return *(const v8f*)p; };  // p 32-byte aligned
    auto ldi = [](const int* p) -> v8i { return *(const v8i*)p; };
    auto st = [](float* p, const v8f v) { *(v8f*)p = v; };
    auto sti = [](int* p, const v8i v) { *(v8i*)p = v; };
    // min(a, b) / max(a, b) as wp::min / wp::max for non-NaN operands
    auto vmin = [&](const v8f a, const v8f b) -> v8f { return sel(a <= b, a, b); };
    auto vmax = [&](const v8f a, const v8f b) -> v8f { return sel(a >= b, a, b); };
    auto fma = [](const v8f a, const v8f b, const v8f c) -> v8f {  // a * b + c, one rounding
        return __builtin_elementwise_fma(a, b, c);
    };
    auto vexp_neg = [&](const v8f power) -> v8f {  // Cephes expf of -power, lane-parallel
        const v8f x = vmin(vmax(-power, (v8f)(-87.0f)), (v8f)(0.0f));
        const v8f fn = __builtin_elementwise_floor(
            fma(x, (v8f)(1.44269504088896341f), (v8f)(0.5f)));
        v8f rr = fma(fn, (v8f)(-0.693359375f), x);
        rr = fma(fn, (v8f)(2.12194440e-4f), rr);
        v8f pe = (v8f)(1.9875691500e-4f);
        pe = fma(pe, rr, (v8f)(1.3981999507e-3f));
        pe = fma(pe, rr, (v8f)(8.3334519073e-3f));
        pe = fma(pe, rr, (v8f)(4.1665795894e-2f));
        pe = fma(pe, rr, (v8f)(1.6666665459e-1f));
        pe = fma(pe, rr, (v8f)(5.0000001201e-1f));
        const v8i bits = (__builtin_convertvector(fn, v8i) + 127) << 23;
        return (fma(pe, rr * rr, rr) + 1.0f) * (v8f)bits;
    };
    const v8i IOTA = {0, 1, 2, 3, 4, 5, 6, 7};
"""
_TILE_SETUP = """
    const int TS = $TILE_BUFFER;
    const int tile = tile_offset + tid * tile_stride;
    const int ty = tile / tiles_x;
    const int tx = tile - ty * tiles_x;
    const int px0 = tx * tile_size;
    const int py0 = ty * tile_size;
    const int px1 = wp::min(px0 + tile_size, width);
    const int py1 = wp::min(py0 + tile_size, height);
    const int tw = px1 - px0;
    const int th = py1 - py0;
    const float alpha_min = $ALPHA_MIN;
    alignas(32) float PXC[TS];  // pixel centres' x
    for (int l = 0; l < TS; ++l) PXC[l] = (float)(px0 + l) + 0.5f;
""" + _VECTOR_TYPES
_GAUSSIAN_RECT = """
        const int rank = isect.data[n];
        const float* __restrict P = packed.data + (size_t)rank * 12;
        const float e0 = P[10], e1 = P[11];
        if (e0 < 0.0f) SKIP;
        const float m0 = P[0], m1 = P[1];
        const int cx0 = wp::max(px0, (int)wp::floor(m0 - e0 - 0.5f));
        const int cx1 = wp::min(px1, (int)wp::floor(m0 + e0 - 0.5f) + 1);
        const int cy0 = wp::max(py0, (int)wp::floor(m1 - e1 - 0.5f));
        const int cy1 = wp::min(py1, (int)wp::floor(m1 + e1 - 0.5f) + 1);
        if (cx0 >= cx1 || cy0 >= cy1) SKIP;
        const float q0 = P[2], q1 = P[3], q2 = P[4];
        const float o = P[5];
        const float cr = P[6], cg = P[7], cb = P[8], cz = P[9];
        const int rx0 = cx0 - px0;
        const int rx1 = cx1 - px0;
"""
# dx and the Gaussian's power at a chunk (dy, q2dydy = q2 * dy * dy: the row's constants)
_CHUNK_ALPHA = """
                const v8f dx = m0 - ld(PXC + l0);
                const v8f power = fma(q1 * dx, (v8f)(dy), 0.5f * fma(q0 * dx, dx, (v8f)(q2dydy)));
                const v8f ex = vexp_neg(power);
                const v8f raw = o * ex;
                const v8f alpha = vmin((v8f)($ALPHA_MAX), raw);
"""

_FORWARD_SNIPPET = warp_backend.native_snippet(_TILE_SETUP + """
    alignas(32) float T[TS * TS];  // transmittance; negated (-T) once the pixel is done
    alignas(32) float A0[TS * TS], A1[TS * TS], A2[TS * TS], A3[TS * TS];
    alignas(32) int LAST[TS * TS];
    alignas(32) float OCC[TS * TS];  // occluder depth of the tile's pixels (inf: none / outside)
    int row_left[TS];
    int remaining = 0;
    for (int r = 0; r < th; ++r) {
        int left = 0;
        const int* vrow = valid.data + (py0 + r) * width + px0;
        for (int l = 0; l < TS; ++l) {
            const int j = r * TS + l;
            A0[j] = 0.0f; A1[j] = 0.0f; A2[j] = 0.0f; A3[j] = 0.0f;
            LAST[j] = -1;
            OCC[j] = (use_occluder && l < tw) ? occluder.data[(py0 + r) * width + px0 + l]
                                              : INFINITY;
            const bool open = l < tw && vrow[l] != 0;
            T[j] = open ? 1.0f : -1.0f;
            left += open;
        }
        row_left[r] = left;
        remaining += left;
    }
    const v8i vn_init = (v8i)(0);
    for (int n = tile_start.data[tile]; n < tile_start.data[tile + 1] && remaining > 0; ++n) {
""" + _GAUSSIAN_RECT.replace("SKIP", "continue") + """
        const v8i vn = vn_init + n;
        for (int py = cy0; py < cy1; ++py) {
            const int r = py - py0;
            if (row_left[r] == 0) continue;
            const float dy = m1 - ((float)py + 0.5f);
            const float q2dydy = q2 * dy * dy;
            v8i stops = (v8i)(0);
            // 8-lane chunks covering [rx0, rx1); the lanes outside it are masked.
            // rx1 <= tw <= TS and chunks start at multiples of 8.
            for (int l0 = rx0 & ~7; l0 < rx1; l0 += 8) {
                const int j = r * TS + l0;
                const v8f t = ld(T + j);
                const v8i li = IOTA + l0;
                const v8i open = (li >= rx0) & (li < rx1) & (t >= 0.0f);
                if (!__builtin_reduce_or(open)) continue;  // nothing to blend: no change
                const v8i hidden = open & ((v8f)(cz) >= ld(OCC + j));
""" + _CHUNK_ALPHA + """
                const v8f t_next = t * (1.0f - alpha);
                const v8i hit = open & ~hidden & (power >= 0.0f) & (alpha >= alpha_min);
                const v8i stop = (hit & (t_next < $TRANSMITTANCE_MIN)) | hidden;
                const v8i ok = hit & ~stop;
                const v8f w = sel(ok, alpha * t, (v8f)(0.0f));
                st(A0 + j, fma((v8f)(cr), w, ld(A0 + j)));
                st(A1 + j, fma((v8f)(cg), w, ld(A1 + j)));
                st(A2 + j, fma((v8f)(cb), w, ld(A2 + j)));
                st(A3 + j, fma((v8f)(cz), w, ld(A3 + j)));
                sti(LAST + j, seli(ok, vn, ldi(LAST + j)));
                st(T + j, sel(ok, t_next, sel(stop, -t, t)));
                stops -= stop;  // stop lanes are -1
            }
            const int stopped = __builtin_reduce_add(stops);
            row_left[r] -= stopped;
            remaining -= stopped;
        }
    }
    for (int r = 0; r < th; ++r) {
        for (int l = 0; l < tw; ++l) {
            const int j = r * TS + l;
            const int i = (py0 + r) * width + px0 + l;
            out_c.data[i] = wp::vec3(A0[j], A1[j], A2[j]);
            out_d.data[i] = A3[j];
            out_t.data[i] = wp::abs(T[j]);
            out_last.data[i] = LAST[j];
        }
    }
""")

_BACKWARD_SNIPPET = warp_backend.native_snippet(_TILE_SETUP + """
    alignas(32) float T[TS * TS];  // transmittance before the current Gaussian
    alignas(32) float SW[TS * TS];  // running sum of w_j (c_j . g_C + d_j g_D)
    alignas(32) float B[TS * TS];  // C . g_C + D g_D + T_final g_T
    alignas(32) float G0[TS * TS], G1[TS * TS], G2[TS * TS], G3[TS * TS];  // g_C, g_D
    alignas(32) int LAST[TS * TS];
    int row_last[TS];
    int tile_last = -1;
    for (int r = 0; r < th; ++r) {
        int rl = -1;
        for (int l = 0; l < TS; ++l) {
            const int j = r * TS + l;
            T[j] = 1.0f; SW[j] = 0.0f;
            if (l < tw) {
                const int i = (py0 + r) * width + px0 + l;
                const wp::vec3 g = grad_c.data[i];
                const wp::vec3 c = fin_c.data[i];
                G0[j] = g[0]; G1[j] = g[1]; G2[j] = g[2]; G3[j] = grad_d.data[i];
                B[j] = c[0] * g[0] + c[1] * g[1] + c[2] * g[2] + fin_d.data[i] * G3[j]
                       + fin_t.data[i] * grad_t.data[i];
                LAST[j] = fin_last.data[i];
            } else {
                G0[j] = 0.0f; G1[j] = 0.0f; G2[j] = 0.0f; G3[j] = 0.0f; B[j] = 0.0f;
                LAST[j] = -1;
            }
            rl = wp::max(rl, LAST[j]);
        }
        row_last[r] = rl;
        tile_last = wp::max(tile_last, rl);
    }
    // Per-lane sums of the current Gaussian (all 0 between Gaussians): mean x, y; conic
    // a, b, c; opacity; r, g, b; depth.
    alignas(32) float acc[10][TS];
    for (int c = 0; c < 10; ++c)
        for (int l = 0; l < TS; ++l) acc[c][l] = 0.0f;
    const v8i vn_init = (v8i)(0);
    for (int n = tile_start.data[tile]; n < tile_start.data[tile + 1]; ++n) {
        float* __restrict slot = slot_grads.data + (size_t)n * 10;
        for (int c = 0; c < 10; ++c) slot[c] = 0.0f;
        if (n > tile_last) continue;
""" + _GAUSSIAN_RECT.replace("SKIP", "continue") + """
        const v8i vn = vn_init + n;
        for (int py = cy0; py < cy1; ++py) {
            const int r = py - py0;
            if (row_last[r] < n) continue;
            const float dy = m1 - ((float)py + 0.5f);
            const float q2dydy = q2 * dy * dy;
            const float q1dy = q1 * dy, q2dy = q2 * dy, hdydy = 0.5f * dy * dy;
            for (int l0 = rx0 & ~7; l0 < rx1; l0 += 8) {  // as in the forward pass
                const int j = r * TS + l0;
                const v8i li = IOTA + l0;
                const v8i open = (li >= rx0) & (li < rx1) & (vn <= ldi(LAST + j));
                if (!__builtin_reduce_or(open)) continue;  // every lane would add 0
                const v8f t = ld(T + j);
""" + _CHUNK_ALPHA + """
                const v8i hit = open & (power >= 0.0f) & (alpha >= alpha_min);
                const v8f g0 = ld(G0 + j), g1 = ld(G1 + j), g2 = ld(G2 + j), g3 = ld(G3 + j);
                const v8f w = sel(hit, alpha * t, (v8f)(0.0f));
                const v8f gdot =
                    fma((v8f)(cz), g3, fma((v8f)(cb), g2, fma((v8f)(cg), g1, cr * g0)));
                const v8f sw_old = ld(SW + j);
                const v8f sw = fma(w, gdot, sw_old);
                const v8f one_minus = 1.0f - alpha;
                const v8f dalpha = fma(t, gdot, -((ld(B + j) - sw) / one_minus));
                const v8i live = hit & (raw <= $ALPHA_MAX);  // the clamp passes no gradient
                const v8f dpow = sel(live, -dalpha * raw, (v8f)(0.0f));
                float* a = &acc[0][l0];
                st(a + 0 * TS, fma(dpow, fma((v8f)(q0), dx, (v8f)(q1dy)), ld(a + 0 * TS)));
                st(a + 1 * TS, fma(dpow, fma((v8f)(q1), dx, (v8f)(q2dy)), ld(a + 1 * TS)));
                st(a + 2 * TS, fma(dpow, 0.5f * dx * dx, ld(a + 2 * TS)));
                st(a + 3 * TS, fma(dpow, dx * dy, ld(a + 3 * TS)));
                st(a + 4 * TS, fma(dpow, (v8f)(hdydy), ld(a + 4 * TS)));
                st(a + 5 * TS, ld(a + 5 * TS) + sel(live, dalpha * ex, (v8f)(0.0f)));
                st(a + 6 * TS, fma(w, g0, ld(a + 6 * TS)));
                st(a + 7 * TS, fma(w, g1, ld(a + 7 * TS)));
                st(a + 8 * TS, fma(w, g2, ld(a + 8 * TS)));
                st(a + 9 * TS, fma(w, g3, ld(a + 9 * TS)));
                st(SW + j, sel(hit, sw, sw_old));
                st(T + j, sel(hit, t * one_minus, t));
            }
        }
        // Lane sums: the chunks added in order, then a fixed pairwise tree over the 8
        // lanes; lanes outside [rx0, rx1) only ever add 0. The chunks are zeroed again.
        for (int c = 0; c < 10; ++c) {
            float* a = &acc[c][0];
            v8f v = (v8f)(0.0f);
            for (int l0 = rx0 & ~7; l0 < rx1; l0 += 8) {
                v += ld(a + l0);
                st(a + l0, (v8f)(0.0f));
            }
            slot[c] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        }
    }
""")


@wp.func_native(_FORWARD_SNIPPET)
def _forward_tile(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    packed: wp.array2d(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    valid: wp.array(dtype=wp.int32),
    occluder: wp.array(dtype=float),
    use_occluder: int,
    out_c: wp.array(dtype=wp.vec3),
    out_d: wp.array(dtype=float),
    out_t: wp.array(dtype=float),
    out_last: wp.array(dtype=wp.int32),
    tile_offset: int,
    tile_stride: int,
    tid: int,
): ...


@wp.kernel
def _forward_tile_kernel(
    tile_start: wp.array(dtype=wp.int32),  # [tiles + 1]
    isect: wp.array(dtype=wp.int32),  # [total] ranks, grouped by tile, depth order inside
    packed: wp.array2d(dtype=float),  # [M, 12] per rank, see _pack_kernel
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    valid: wp.array(dtype=wp.int32),  # [H * W]
    occluder: wp.array(dtype=float),  # [H * W]
    use_occluder: int,
    out_c: wp.array(dtype=wp.vec3),  # [H * W]
    out_d: wp.array(dtype=float),  # [H * W]
    out_t: wp.array(dtype=float),  # [H * W]
    out_last: wp.array(dtype=wp.int32),  # [H * W]
    tile_offset: int,
    tile_stride: int,
):
    _forward_tile(tile_start, isect, packed, width, height,
                  tile_size, tiles_x, valid, occluder, use_occluder, out_c, out_d, out_t,
                  out_last, tile_offset, tile_stride, wp.tid())


@wp.func_native(_BACKWARD_SNIPPET)
def _backward_tile(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    packed: wp.array2d(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    fin_c: wp.array(dtype=wp.vec3),
    fin_d: wp.array(dtype=float),
    fin_t: wp.array(dtype=float),
    fin_last: wp.array(dtype=wp.int32),
    grad_c: wp.array(dtype=wp.vec3),
    grad_d: wp.array(dtype=float),
    grad_t: wp.array(dtype=float),
    slot_grads: wp.array2d(dtype=float),
    tile_offset: int,
    tile_stride: int,
    tid: int,
): ...


@wp.kernel
def _backward_tile_kernel(
    tile_start: wp.array(dtype=wp.int32),
    isect: wp.array(dtype=wp.int32),
    packed: wp.array2d(dtype=float),
    width: int,
    height: int,
    tile_size: int,
    tiles_x: int,
    fin_c: wp.array(dtype=wp.vec3),  # [H * W] forward outputs
    fin_d: wp.array(dtype=float),
    fin_t: wp.array(dtype=float),
    fin_last: wp.array(dtype=wp.int32),
    grad_c: wp.array(dtype=wp.vec3),  # [H * W] dL/dC
    grad_d: wp.array(dtype=float),  # [H * W] dL/dD
    grad_t: wp.array(dtype=float),  # [H * W] dL/dT
    slot_grads: wp.array2d(dtype=float),  # [total, _GRADS] per list position
    tile_offset: int,
    tile_stride: int,
):
    _backward_tile(tile_start, isect, packed, width, height,
                   tile_size, tiles_x, fin_c, fin_d, fin_t, fin_last, grad_c, grad_d, grad_t,
                   slot_grads, tile_offset, tile_stride, wp.tid())


# --------------------------------------------------------------------------- pinhole projection
_LOW_PASS = wp.constant(K.LOW_PASS_PX)
_SIGMA_EXTENT = wp.constant(K.SIGMA_EXTENT)
_EIGEN_FLOOR = wp.constant(K.EIGEN_FLOOR)
_NEAR = wp.constant(K.NEAR_PLANE)
_FAR = wp.constant(K.FAR_PLANE)


@wp.func
def _quat_rotation(q: wp.vec4) -> wp.mat33:  # unit (w, x, y, z)
    w = q[0]
    x = q[1]
    y = q[2]
    z = q[3]
    return wp.mat33(
        1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
        2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
        2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y),
    )


@wp.func
def _scaled_rotation(quat: wp.vec4, log_scale: wp.vec3) -> wp.mat33:
    """M = R(q / |q|) diag(exp(log_scale)), so that Sigma_3d = M M^T."""
    rq = _quat_rotation(quat / wp.length(quat))
    s = wp.vec3(wp.exp(log_scale[0]), wp.exp(log_scale[1]), wp.exp(log_scale[2]))
    return wp.mat33(rq[0, 0] * s[0], rq[0, 1] * s[1], rq[0, 2] * s[2],
                    rq[1, 0] * s[0], rq[1, 1] * s[1], rq[1, 2] * s[2],
                    rq[2, 0] * s[0], rq[2, 1] * s[1], rq[2, 2] * s[2])


@wp.kernel
def _project_pinhole_kernel(
    means: wp.array(dtype=wp.vec3),  # [N]
    quats: wp.array(dtype=wp.vec4),  # [N] (w, x, y, z), any norm
    log_scales: wp.array(dtype=wp.vec3),  # [N]
    rot: wp.mat33,  # camera_from_world rotation
    trans: wp.vec3,
    intr: wp.vec4,  # fx, fy, cx, cy
    lim: wp.vec4,  # FRUSTUM_CLAMP limits of x/z (max, -min) and y/z (max, -min)
    width: int,
    height: int,
    out_xy: wp.array(dtype=wp.vec2),  # [N]
    out_conic: wp.array(dtype=wp.vec3),  # [N]
    out_depth: wp.array(dtype=float),  # [N]
    out_radius: wp.array(dtype=wp.int32),  # [N] 0 = culled
):
    """Steps 1-3 of the forward model for a pinhole camera (torch_raster.project's maths)."""
    g = wp.tid()
    p = rot * means[g] + trans
    z = p[2]
    out_depth[g] = z
    out_radius[g] = 0
    out_xy[g] = wp.vec2(0.0, 0.0)
    out_conic[g] = wp.vec3(0.0, 0.0, 0.0)
    if z < _NEAR or z > _FAR:
        return
    fx = intr[0]
    fy = intr[1]
    xr = wp.clamp(p[0] / z, -lim[1], lim[0])
    yr = wp.clamp(p[1] / z, -lim[3], lim[2])
    rt = wp.transpose(rot)
    a0 = rt * wp.vec3(fx / z, 0.0, -fx * xr / z)  # rows of J W
    a1 = rt * wp.vec3(0.0, fy / z, -fy * yr / z)
    mt = wp.transpose(_scaled_rotation(quats[g], log_scales[g]))
    t0 = mt * a0  # rows of J W M
    t1 = mt * a1
    a = wp.dot(t0, t0) + _LOW_PASS
    b = wp.dot(t0, t1)
    c = wp.dot(t1, t1) + _LOW_PASS
    det = a * c - b * b
    if not (det > 0.0):
        return
    mid = 0.5 * (a + c)
    lam = mid + wp.sqrt(wp.max(mid * mid - det, _EIGEN_FLOOR))
    radius = wp.ceil(_SIGMA_EXTENT * wp.sqrt(wp.max(lam, 0.0)))
    u = fx * p[0] / z + intr[2]
    v = fy * p[1] / z + intr[3]
    out_xy[g] = wp.vec2(u, v)
    out_conic[g] = wp.vec3(c / det, -b / det, a / det)
    if radius <= 0.0:
        return
    if u + radius > 0.0 and u - radius < float(width) and v + radius > 0.0 and (
            v - radius < float(height)):
        out_radius[g] = int(radius)


@wp.kernel
def _project_pinhole_backward_kernel(
    means: wp.array(dtype=wp.vec3),
    quats: wp.array(dtype=wp.vec4),
    log_scales: wp.array(dtype=wp.vec3),
    rot: wp.mat33,
    trans: wp.vec3,
    intr: wp.vec4,
    lim: wp.vec4,
    radius: wp.array(dtype=wp.int32),  # [N] forward output; 0 = no gradient
    grad_xy: wp.array(dtype=wp.vec2),  # [N]
    grad_conic: wp.array(dtype=wp.vec3),  # [N]
    grad_depth: wp.array(dtype=float),  # [N]
    out_means: wp.array(dtype=wp.vec3),  # [N]
    out_quats: wp.array(dtype=wp.vec4),  # [N]
    out_log_scales: wp.array(dtype=wp.vec3),  # [N]
):
    """Reverse mode of _project_pinhole_kernel (depth for every Gaussian, the rest if drawn)."""
    g = wp.tid()
    p = rot * means[g] + trans
    gp = wp.vec3(0.0, 0.0, grad_depth[g])
    out_quats[g] = wp.vec4(0.0, 0.0, 0.0, 0.0)
    out_log_scales[g] = wp.vec3(0.0, 0.0, 0.0)
    if radius[g] > 0:
        x = p[0]
        y = p[1]
        z = p[2]
        fx = intr[0]
        fy = intr[1]
        xz = x / z
        yz = y / z
        xr = wp.clamp(xz, -lim[1], lim[0])
        yr = wp.clamp(yz, -lim[3], lim[2])
        rt = wp.transpose(rot)
        a0 = rt * wp.vec3(fx / z, 0.0, -fx * xr / z)
        a1 = rt * wp.vec3(0.0, fy / z, -fy * yr / z)
        q = quats[g]
        qlen = wp.length(q)
        qn = q / qlen
        rq = _quat_rotation(qn)
        ls = log_scales[g]
        s = wp.vec3(wp.exp(ls[0]), wp.exp(ls[1]), wp.exp(ls[2]))
        m = _scaled_rotation(q, ls)
        mt = wp.transpose(m)
        t0 = mt * a0
        t1 = mt * a1
        a = wp.dot(t0, t0) + _LOW_PASS
        b = wp.dot(t0, t1)
        c = wp.dot(t1, t1) + _LOW_PASS
        inv = 1.0 / (a * c - b * b)
        inv2 = inv * inv
        gq = grad_conic[g]
        ga = -gq[0] * c * c * inv2 + gq[1] * b * c * inv2 + gq[2] * (inv - a * c * inv2)
        gb = 2.0 * gq[0] * b * c * inv2 - gq[1] * (inv + 2.0 * b * b * inv2) + (
            2.0 * gq[2] * a * b * inv2)
        gc = gq[0] * (inv - a * c * inv2) + gq[1] * a * b * inv2 - gq[2] * a * a * inv2
        gt0 = 2.0 * ga * t0 + gb * t1
        gt1 = gb * t0 + 2.0 * gc * t1
        gm = wp.outer(a0, gt0) + wp.outer(a1, gt1)  # dL/dM
        ga0 = m * gt0
        ga1 = m * gt1
        # M = R diag(s): dL/dR and dL/dlog_scale
        gr = wp.mat33(gm[0, 0] * s[0], gm[0, 1] * s[1], gm[0, 2] * s[2],
                      gm[1, 0] * s[0], gm[1, 1] * s[1], gm[1, 2] * s[2],
                      gm[2, 0] * s[0], gm[2, 1] * s[1], gm[2, 2] * s[2])
        out_log_scales[g] = wp.vec3(
            (gm[0, 0] * rq[0, 0] + gm[1, 0] * rq[1, 0] + gm[2, 0] * rq[2, 0]) * s[0],
            (gm[0, 1] * rq[0, 1] + gm[1, 1] * rq[1, 1] + gm[2, 1] * rq[2, 1]) * s[1],
            (gm[0, 2] * rq[0, 2] + gm[1, 2] * rq[1, 2] + gm[2, 2] * rq[2, 2]) * s[2])
        w = qn[0]
        qx = qn[1]
        qy = qn[2]
        qz = qn[3]
        gw = 2.0 * (-qz * gr[0, 1] + qy * gr[0, 2] + qz * gr[1, 0] - qx * gr[1, 2]
                    - qy * gr[2, 0] + qx * gr[2, 1])
        gx = 2.0 * (qy * gr[0, 1] + qz * gr[0, 2] + qy * gr[1, 0] - 2.0 * qx * gr[1, 1]
                    - w * gr[1, 2] + qz * gr[2, 0] + w * gr[2, 1] - 2.0 * qx * gr[2, 2])
        gy = 2.0 * (-2.0 * qy * gr[0, 0] + qx * gr[0, 1] + w * gr[0, 2] + qx * gr[1, 0]
                    + qz * gr[1, 2] - w * gr[2, 0] + qz * gr[2, 1] - 2.0 * qy * gr[2, 2])
        gz = 2.0 * (-2.0 * qz * gr[0, 0] - w * gr[0, 1] + qx * gr[0, 2] + w * gr[1, 0]
                    - 2.0 * qz * gr[1, 1] + qy * gr[1, 2] + qx * gr[2, 0] + qy * gr[2, 1])
        gqn = wp.vec4(gw, gx, gy, gz)
        out_quats[g] = (gqn - qn * wp.dot(qn, gqn)) / qlen
        # A = J W: dL/dJ rows, then J's dependence on p (clamped x/z, y/z pass no gradient)
        gj0 = rot * ga0
        gj1 = rot * ga1
        iz2 = 1.0 / (z * z)
        gpx = 0.0
        gpy = 0.0
        gpz = -gj0[0] * fx * iz2 - gj1[1] * fy * iz2
        if xz >= -lim[1] and xz <= lim[0]:
            gpx = gpx - gj0[2] * fx * iz2
            gpz = gpz + gj0[2] * 2.0 * fx * x * iz2 / z
        else:
            gpz = gpz + gj0[2] * fx * xr * iz2
        if yz >= -lim[3] and yz <= lim[2]:
            gpy = gpy - gj1[2] * fy * iz2
            gpz = gpz + gj1[2] * 2.0 * fy * y * iz2 / z
        else:
            gpz = gpz + gj1[2] * fy * yr * iz2
        gxy = grad_xy[g]
        gpx = gpx + gxy[0] * fx / z
        gpy = gpy + gxy[1] * fy / z
        gpz = gpz - gxy[0] * fx * x * iz2 - gxy[1] * fy * y * iz2
        gp = gp + wp.vec3(gpx, gpy, gpz)
    out_means[g] = wp.transpose(rot) * gp


def _camera_args(camera: Camera) -> list:
    from bench.render.warp_backend import _frustum_limits

    view = camera.camera_from_world.astype(np.float32)
    return [wp.mat33(view[:3, :3]), wp.vec3(view[:3, 3]),
            wp.vec4(camera.fx, camera.fy, camera.cx, camera.cy), _frustum_limits(camera)]


class WarpProjectPinhole(torch.autograd.Function):
    """EWA projection for a pinhole camera in Warp, forward and reverse mode.

    ``apply(means [N, 3], quats [N, 4], log_scales [N, 3], camera)`` -> ``(means2d [N, 2],
    conics [N, 3], depths [N], radii [N] int32)``, the values of
    :func:`bench.render.torch_raster.project` (float32 round-off apart).
    """

    @staticmethod
    def forward(ctx, means, quats, log_scales, camera):
        """Project the N Gaussians; returns xy [N, 2], conic [N, 3], depth [N], radius [N] int32."""
        n = len(means)
        ins = [t.detach().contiguous() for t in (means, quats, log_scales)]
        xy, conic, depth = torch.empty(n, 2), torch.empty(n, 3), torch.empty(n)
        radius = torch.empty(n, dtype=torch.int32)
        cam = _camera_args(camera)
        if n:
            wp.launch(_project_pinhole_kernel, dim=n, device=DEVICE, inputs=[
                _wp(ins[0], wp.vec3), _wp(ins[1], wp.vec4), _wp(ins[2], wp.vec3), *cam,
                camera.width, camera.height, _wp(xy, wp.vec2), _wp(conic, wp.vec3),
                _wp(depth, float), _wp(radius, wp.int32)])
        ctx.cam = cam
        ctx.save_for_backward(*ins, radius)
        ctx.mark_non_differentiable(radius)
        return xy, conic, depth, radius

    @staticmethod
    def backward(ctx, grad_xy, grad_conic, grad_depth, _grad_radius):
        """Gradients for means [N, 3], quats [N, 4], log_scales [N, 3] (None for the camera)."""
        means, quats, log_scales, radius = ctx.saved_tensors
        n = len(means)

        def dense(g, shape):
            return torch.zeros(shape) if g is None else g.float().contiguous()

        g_xy, g_conic = dense(grad_xy, (n, 2)), dense(grad_conic, (n, 3))
        g_depth = dense(grad_depth, (n,))
        out_m, out_q, out_s = torch.empty(n, 3), torch.empty(n, 4), torch.empty(n, 3)
        if n:
            wp.launch(_project_pinhole_backward_kernel, dim=n, device=DEVICE, inputs=[
                _wp(means, wp.vec3), _wp(quats, wp.vec4), _wp(log_scales, wp.vec3), *ctx.cam,
                _wp(radius, wp.int32), _wp(g_xy, wp.vec2), _wp(g_conic, wp.vec3),
                _wp(g_depth, float), _wp(out_m, wp.vec3), _wp(out_q, wp.vec4),
                _wp(out_s, wp.vec3)])
        return out_m, out_q, out_s, None


def project_pinhole(
    means: torch.Tensor,  # [N, 3] float32
    quats: torch.Tensor,  # [N, 4]
    log_scales: torch.Tensor,  # [N, 3]
    camera: Camera,
) -> Projection:
    """:func:`bench.render.torch_raster.project` for pinhole cameras, in Warp kernels."""
    xy, conic, depth, radius = WarpProjectPinhole.apply(means, quats, log_scales, camera)
    radii = radius.to(torch.int64)
    return Projection(xy, conic, depth, radii, radii > 0)


# --------------------------------------------------------------------------- host side
_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOAD_LOCK = threading.Lock()
_LOADED = False


def _ensure_loaded() -> None:
    """Compile / load this module's kernels once, before threads launch them."""
    global _LOADED
    with _LOAD_LOCK:
        if not _LOADED:
            wp.load_module(module=__name__, device=DEVICE)
            _LOADED = True


def _launch_tiles(kernel, num_tiles: int, inputs: list, threads: int) -> None:
    """Run ``kernel`` over all tiles, tile ``i`` on thread ``i % threads`` (disjoint outputs)."""
    _ensure_loaded()
    threads = max(1, min(threads, num_tiles))
    if threads == 1:
        wp.launch(kernel, dim=num_tiles, inputs=[*inputs, 0, 1], device=DEVICE)
        return
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(max_workers=threads - 1)

    def part(offset: int) -> None:
        count = len(range(offset, num_tiles, threads))
        if count:
            wp.launch(kernel, dim=count, inputs=[*inputs, offset, threads], device=DEVICE)

    futures = [pool.submit(part, offset) for offset in range(1, threads)]
    part(0)
    for future in futures:
        future.result()


def _wp(tensor: torch.Tensor, dtype) -> wp.array:
    if dtype is float:
        dtype = wp.float32
    return wp.from_torch(tensor.contiguous(), dtype=dtype, requires_grad=False)


class Tiles:
    """Visible Gaussians in depth order, binned into tiles (shared by forward and backward)."""

    def __init__(
        self,
        depths: torch.Tensor,  # [N] float32 view depth
        visible: torch.Tensor,  # [N] bool
        xy: torch.Tensor,  # [N, 2] float32 pixels
        conic: torch.Tensor,  # [N, 3]
        opac: torch.Tensor,  # [N]
        radii: torch.Tensor,  # [N] int
        camera_size: tuple[int, int],  # (width, height)
        tile_size: int,
    ) -> None:
        width, height = camera_size
        self.width, self.height, self.tile_size = width, height, tile_size
        self.tiles_x = math.ceil(width / tile_size)
        self.tiles_y = math.ceil(height / tile_size)
        self.num_tiles = self.tiles_x * self.tiles_y
        index = torch.nonzero(visible).squeeze(1).to(torch.int32)
        num = self.num = len(index)
        # Depth order, ties by index: Warp's stable radix sort (2x room for its scratch).
        keys = torch.empty(2 * max(num, 1))
        values = torch.empty(2 * max(num, 1), dtype=torch.int32)
        keys[:num] = depths.detach()[index.long()]
        values[:num] = index
        wp.utils.radix_sort_pairs(_wp(keys, wp.float32), _wp(values, wp.int32), num)
        self.order = values[:num].contiguous()
        self.ext = torch.empty(max(num, 1), 2)
        rect = torch.empty(max(num, 1), 4, dtype=torch.int32)
        area = torch.zeros(max(num, 1), dtype=torch.int32)
        if num:
            wp.launch(_prep_kernel, dim=num, device=DEVICE, inputs=[
                _wp(self.order, wp.int32), _wp(xy.detach(), wp.vec2),
                _wp(conic.detach(), wp.vec3), _wp(opac.detach(), float),
                _wp(radii.to(torch.int32), wp.int32), tile_size, self.tiles_x, self.tiles_y,
                _wp(rect, wp.vec4i), _wp(self.ext, wp.vec2), _wp(area, wp.int32)])
        self.total = total = int(area.sum(dtype=torch.int64))
        self.slot_start = torch.zeros(num + 1, dtype=torch.int32)
        self.tile_start = torch.zeros(self.num_tiles + 1, dtype=torch.int32)
        self.isect = torch.zeros(max(total, 1), dtype=torch.int32)
        self.slots = torch.zeros(max(total, 1), dtype=torch.int32)
        cursor = torch.zeros(self.num_tiles, dtype=torch.int32)
        wp.launch(_bin_kernel, dim=1, device=DEVICE, inputs=[
            _wp(rect, wp.vec4i), num, self.num_tiles, self.tiles_x,
            _wp(self.slot_start, wp.int32), _wp(self.tile_start, wp.int32),
            _wp(cursor, wp.int32), _wp(self.isect, wp.int32), _wp(self.slots, wp.int32)])


class WarpComposite(torch.autograd.Function):
    """Front-to-back compositing of 2D Gaussians in tiles, forward and backward in Warp.

    ``apply(xy [N, 2], conic [N, 3], opac [N], depth [N], color [N, 3], tiles, valid [H*W]
    int32, occluder [H*W] or None, threads)`` -> ``(C [H, W, 3], D [H, W], T [H, W])``:
    accumulated colour, accumulated ``alpha x depth`` and final transmittance (no
    background), over the visible Gaussians of ``tiles`` in its depth order. Gradients flow
    to the five per-Gaussian tensors (float32, CPU; zero for Gaussians not drawn).
    """

    @staticmethod
    def forward(ctx, xy, conic, opac, depth, color, tiles: Tiles, valid, occluder, threads):
        """Composite the tiles; returns C [H, W, 3], D [H, W], T [H, W] (float32)."""
        h, w = tiles.height, tiles.width
        p = h * w
        out_c = torch.empty(p, 3)
        out_d = torch.empty(p)
        out_t = torch.empty(p)
        out_last = torch.empty(p, dtype=torch.int32)
        use_occ = occluder is not None
        occ = occluder if use_occ else torch.empty(1)
        ins = [t.detach().contiguous() for t in (xy, conic, opac, depth, color)]
        packed = _pack(tiles, ins)
        _launch_tiles(_forward_tile_kernel, tiles.num_tiles, [
            *_tile_inputs(tiles, packed), _wp(valid, wp.int32), _wp(occ, float), int(use_occ),
            _wp(out_c, wp.vec3), _wp(out_d, float), _wp(out_t, float),
            _wp(out_last, wp.int32)], threads)
        ctx.tiles, ctx.threads = tiles, threads
        ctx.num = len(xy)
        ctx.save_for_backward(packed, out_c, out_d, out_t, out_last)
        return out_c.reshape(h, w, 3), out_d.reshape(h, w), out_t.reshape(h, w)

    @staticmethod
    def backward(ctx, grad_c, grad_d, grad_t):
        """Gradients for xy, conic, opac, depth and color (None for the other inputs)."""
        tiles: Tiles = ctx.tiles
        packed, fin_c, fin_d, fin_t, fin_last = ctx.saved_tensors
        p = tiles.height * tiles.width

        def flat(g, shape):
            return torch.zeros(shape) if g is None else g.reshape(shape).float().contiguous()

        g_c, g_d, g_t = flat(grad_c, (p, 3)), flat(grad_d, (p,)), flat(grad_t, (p,))
        slot_grads = torch.empty(max(tiles.total, 1), _GRADS)
        _launch_tiles(_backward_tile_kernel, tiles.num_tiles, [
            *_tile_inputs(tiles, packed), _wp(fin_c, wp.vec3), _wp(fin_d, float),
            _wp(fin_t, float), _wp(fin_last, wp.int32), _wp(g_c, wp.vec3), _wp(g_d, float),
            _wp(g_t, float), _wp(slot_grads, float)], ctx.threads)
        grads = torch.zeros(ctx.num, _GRADS)
        if tiles.num:
            wp.launch(_reduce_kernel, dim=tiles.num, device=DEVICE, inputs=[
                _wp(tiles.order, wp.int32), _wp(tiles.slot_start, wp.int32),
                _wp(tiles.slots, wp.int32), _wp(slot_grads, float), _wp(grads, float)])
        return (grads[:, 0:2], grads[:, 2:5], grads[:, 5], grads[:, 9], grads[:, 6:9],
                None, None, None, None)


def _pack(tiles: Tiles, ins: Sequence[torch.Tensor]) -> torch.Tensor:  # -> [M, 12]
    xy, conic, opac, depth, color = ins
    packed = torch.empty(max(tiles.num, 1), 12)
    if tiles.num:
        wp.launch(_pack_kernel, dim=tiles.num, device=DEVICE, inputs=[
            _wp(tiles.order, wp.int32), _wp(xy, wp.vec2), _wp(conic, wp.vec3),
            _wp(opac, float), _wp(color, wp.vec3), _wp(depth, float),
            _wp(tiles.ext, wp.vec2), _wp(packed, float)])
    return packed


def _tile_inputs(tiles: Tiles, packed: torch.Tensor) -> list:
    return [_wp(tiles.tile_start, wp.int32), _wp(tiles.isect, wp.int32), _wp(packed, float),
            tiles.width, tiles.height, tiles.tile_size, tiles.tiles_x]


_VALID_CACHE: dict[tuple, torch.Tensor] = {}


def _valid_pixels(camera: Camera) -> torch.Tensor:  # -> [H * W] int32, 1 inside the image
    if camera.model != "fisheye":
        return torch.ones(camera.width * camera.height, dtype=torch.int32)
    key = (camera.width, camera.height, camera.fx, camera.fy, camera.cx, camera.cy,
           tuple(camera.distortion), camera.max_theta)
    valid = _VALID_CACHE.get(key)
    if valid is None:
        if len(_VALID_CACHE) > 64:
            _VALID_CACHE.clear()
        _, mask = camera.pixel_rays()
        valid = torch.as_tensor(np.asarray(mask).reshape(-1).astype(np.int32))
        _VALID_CACHE[key] = valid
    return valid


def rasterize(
    means: torch.Tensor,  # [N, 3] float32
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
    threads: int = 1,
    project_in_warp: bool = True,
) -> RasterOutput:
    """Render one camera with autograd; outputs as :func:`bench.render.torch_raster.rasterize`.

    Args:
        means: Centres (float32 CPU tensors here and below; gradients flow to all six).
        quats: (w, x, y, z) rotations, any norm.
        log_scales: Log standard deviations.
        opacity_logits: Opacities before the sigmoid.
        sh_dc: SH DC coefficients.
        sh_rest: Higher SH coefficients (0, 3, 8 or 15 per channel).
        camera: Pinhole or fisheye (direct Kannala-Brandt model) camera.
        background: RGB blended behind the Gaussians.
        sh_degree: Active SH degree (None: the stored degree).
        tile_size: Tile side in pixels (<= 32).
        occluder_depth: Per-pixel depth of an opaque surface (inf = none).
        threads: CPU threads for the tile kernels (results do not depend on it).
        project_in_warp: Pinhole projection in Warp kernels (False: torch autograd, as
            fisheye cameras always are).

    Returns:
        A :class:`bench.render.torch_raster.RasterOutput`.
    """
    if means.dtype != torch.float32 or means.device.type != "cpu":
        raise ValueError(f"the Warp rasterizer takes float32 CPU tensors, got {means.dtype} on "
                         f"{means.device}; use bench.render.torch_raster.rasterize otherwise")
    if not 1 <= tile_size <= _TILE_BUFFER:
        raise ValueError(f"tile_size must be 1-{_TILE_BUFFER}, got {tile_size}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    width, height = camera.width, camera.height
    degree = resolve_sh_degree(_STORED_DEGREE[sh_rest.shape[1]], sh_degree)
    bg = _as_background(background, means.dtype, means.device)
    if camera.model == "pinhole" and project_in_warp:
        proj = project_pinhole(means, quats, log_scales, camera)
    else:
        proj = project(means, quats, log_scales, camera)
    means2d = proj.means2d
    if means2d.requires_grad:
        means2d.retain_grad()
    opac = torch.sigmoid(opacity_logits)
    # Colours of all Gaussians (most are visible in training views; no gathers to undo).
    if degree == 0:  # gaussian_colors' values without its (unused) view directions
        colors = torch.clamp_min(K.SH_C0 * sh_dc + K.SH_OFFSET, 0.0)
    else:
        colors = gaussian_colors(means, sh_dc, sh_rest[:, : (degree + 1) ** 2 - 1], camera,
                                 degree)
    tiles = Tiles(proj.depths, proj.visible, means2d.detach(), proj.conics.detach(),
                  opac.detach(), proj.radii, (width, height), tile_size)
    occ = None
    if occluder_depth is not None:
        occ = torch.as_tensor(occluder_depth, dtype=torch.float32).reshape(-1).contiguous()
    acc_c, acc_d, trans = WarpComposite.apply(means2d, proj.conics, opac, proj.depths, colors,
                                              tiles, _valid_pixels(camera), occ, threads)
    alpha_img = 1.0 - trans
    rgb = acc_c + trans[..., None] * bg
    has = alpha_img > 0
    depth = torch.where(has, acc_d / torch.where(has, alpha_img, 1.0), torch.inf)
    return RasterOutput(rgb, depth, alpha_img, means2d, proj.radii, proj.depths)
