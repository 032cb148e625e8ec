"""The per-frame tree cut of :mod:`bench.render.lod` as one native Warp CPU kernel.

:func:`bench.render.lod.choose_rows` (the reference: numpy, level by level) plus
:func:`bench.render.lod.far_layer_bias` cost 6-7 ms of a 30 ms 128 px fisheye frame on the
3 M room, mostly numpy gathers over frontiers of 10^4-10^5 nodes. The kernel does the
same level-by-level walk over every visible block in one serial C++ loop, with the same
float64 test per node (the same operations, so the same nodes are drawn), prefetching the
32-byte node records 16 frontier entries ahead (a walk from node to child is a chain of
random reads otherwise), and writes the rows to draw and the depth-sort push of every
row on a layered split (``LodNode.layered``; every other row's push stays 0). The same
launch first finds the visible blocks and their magnification (:data:`VISIBLE_SNIPPET`,
``culling.visible_blocks`` and ``lod.block_magnification`` in C++): :func:`frame_cut`
needs only the camera.

The tree's node records are wrapped once per hierarchy without a copy; two frontiers of
one int32 pair per original (16 bytes per Gaussian) are the kernel's scratch.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from bench.render import constants as K
from bench.render import culling, replay
from bench.render import warp_backend as wb
from bench.render.lod_nodes import layer_codes


@wp.struct
class LodNode:
    """One tree node (``lod_nodes.NODE_DTYPE``, the same 32-byte layout)."""

    sigma: wp.float64
    colour_std: wp.float64
    child_lo: wp.int32
    child_hi: wp.int32
    row: wp.int32
    mixed: wp.bool
    layered: wp.bool


#: The walk in C++: the node record read by its byte offsets (lod_nodes.NODE_DTYPE); the bias
#: with one operation per statement, in far_layer_bias's order (no contraction).
CUT_SNIPPET = """
    const char* base = (const char*)nodes.data;
    int* cur = front.data;
    int* cur_block = front_block.data;
    int* nxt = next.data;
    int* nxt_block = next_block.data;
    for (int b = 0; b < num_blocks; ++b) {
        cur[b] = (int)blocks.data[b];
        cur_block[b] = b;
    }
    int m = num_blocks;
    int n = 0;
    while (m > 0) {
        int k = 0;
        for (int i = 0; i < m; ++i) {
            if (i + 16 < m) __builtin_prefetch(base + (size_t)cur[i + 16] * 32);
            const char* r = base + (size_t)cur[i] * 32;
            double sigma, colour_std;
            int lo, hi, row;
            __builtin_memcpy(&sigma, r, 8);
            __builtin_memcpy(&colour_std, r + 8, 8);
            __builtin_memcpy(&lo, r + 16, 4);
            __builtin_memcpy(&hi, r + 20, 4);
            __builtin_memcpy(&row, r + 24, 4);
            const bool mixed = r[28] != 0;
            const bool layered = r[29] != 0;
            const double s = scale.data[cur_block[i]];
            double px = sigma * s;
            if (use_colour) {
                const double ratio = colour_std / colour_tolerance;
                px = px * (ratio > 1.0 ? ratio : 1.0);
            }
            if (px <= pixel_size && !mixed) {
                out_rows.data[n++] = row;
                if (layered) {  // a merged row on a layered split: its push, or 0
                    const int code = layer_code.data[row - num_originals];
                    const int q = code / 2;
                    const double* mean = (const double*)(layer_mean.data + q);
                    const double* thin = (const double*)(layer_thin.data + q);
                    const double d0 = camera_position[0] - mean[0];
                    const double d1 = camera_position[1] - mean[1];
                    const double d2 = camera_position[2] - mean[2];
                    const double a0 = d0 * thin[0];
                    const double a1 = d1 * thin[1];
                    const double a2 = d2 * thin[2];
                    double offset = a0 + a1;
                    offset = offset + a2;
                    offset = offset - layer_gap.data[q];
                    const bool far = (code % 2 == 1) ? offset < 0.0 : offset > 0.0;
                    const double push = layer_bias * layer_spread.data[q];
                    row_bias.data[row] = far ? (float)push : 0.0f;
                }
            } else {
                for (int c = lo; c < hi; ++c) {
                    nxt[k] = c;
                    nxt_block[k] = cur_block[i];
                    ++k;
                }
            }
        }
        int* t = cur; cur = nxt; nxt = t;
        t = cur_block; cur_block = nxt_block; nxt_block = t;
        m = k;
    }
    count.data[0] = n;
"""


@wp.func_native(CUT_SNIPPET)
def _cut_native(
    blocks: wp.array(dtype=wp.int64),
    scale: wp.array(dtype=wp.float64),
    num_blocks: int,
    nodes: wp.array(dtype=LodNode),
    pixel_size: wp.float64,
    colour_tolerance: wp.float64,
    use_colour: int,
    num_originals: int,
    layer_code: wp.array(dtype=wp.int32),
    layer_mean: wp.array(dtype=wp.vec3d),
    layer_thin: wp.array(dtype=wp.vec3d),
    layer_gap: wp.array(dtype=wp.float64),
    layer_spread: wp.array(dtype=wp.float64),
    camera_position: wp.vec3d,
    layer_bias: wp.float64,
    front: wp.array(dtype=wp.int32),
    front_block: wp.array(dtype=wp.int32),
    next: wp.array(dtype=wp.int32),
    next_block: wp.array(dtype=wp.int32),
    out_rows: wp.array(dtype=wp.int32),
    row_bias: wp.array(dtype=wp.float32),
    count: wp.array(dtype=wp.int32),
): ...


# One frame's camera for the block test, a float64 array (filled by frame_camera):
# rotation (row-major) and translation of camera_from_world, position, fisheye flag,
# max_theta, largest focal length; pinhole: the 4 side planes' normals, half-extent
# vectors and growth (culling.pinhole_planes), and |R| row 2 (the near plane).
CAM_ROT, CAM_TRANS, CAM_POS, CAM_FISHEYE, CAM_MAX_THETA, CAM_FOCAL = 0, 9, 12, 15, 16, 17
CAM_NORMALS, CAM_SUPPORT, CAM_GROW, CAM_NEAR_ROW, CAM_FLOATS = 18, 30, 42, 46, 49
_CAM_POS = wp.constant(CAM_POS)

#: culling.visible_blocks (super-blocks, then their blocks) and lod.block_magnification of
#: the visible ones, in C++ with the same float64 formulas (not the same summation order
#: as numpy's matrix products, and sqrt(x^2 + y^2) for libm's hypot, which Warp's kernels
#: cannot call: equal to rounding, tested against both).
VISIBLE_SNIPPET = """
    const double* C = cam.data;
    const bool fisheye = C[$FISHEYE] != 0.0;
    // The box's centre in camera coordinates and its half extents (world axes).
    auto to_camera = [&](const double* lo, const double* hi, double* c, double* h) {
        double w[3];
        for (int k = 0; k < 3; ++k) {
            w[k] = 0.5 * (lo[k] + hi[k]);
            h[k] = 0.5 * (hi[k] - lo[k]);
        }
        for (int i = 0; i < 3; ++i) {
            const double* r = C + $ROT + 3 * i;
            c[i] = w[0] * r[0] + w[1] * r[1] + w[2] * r[2] + C[$TRANS + i];
        }
    };
    auto norm3 = [](const double* a) -> double {
        return ::sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    };
    // c, h: the box's to_camera values
    auto visible = [&](const double* c, const double* h, const double sigma) -> bool {
        if (!fisheye) {
            for (int p = 0; p < 4; ++p) {
                const double* nrm = C + $NORMALS + 3 * p;
                const double* along = C + $SUPPORT + 3 * p;
                const double dot = c[0] * nrm[0] + c[1] * nrm[1] + c[2] * nrm[2];
                const double support = h[0] * along[0] + h[1] * along[1] + h[2] * along[2];
                if (!(dot + support + C[$GROW + p] * sigma >= 0.0)) return false;
            }
            const double* nr = C + $NEAR_ROW;
            return c[2] + (h[0] * nr[0] + h[1] * nr[1] + h[2] * nr[2]) >= $NEAR;
        }
        const double radius = norm3(h), dist = norm3(c);
        if (dist <= radius + $NEAR) return true;
        const double theta = ::atan2(::sqrt(c[0] * c[0] + c[1] * c[1]), c[2]);
        double ratio = radius / dist;
        ratio = ratio < 0.0 ? 0.0 : (ratio > 1.0 ? 1.0 : ratio);
        return (theta - ::asin(ratio) < C[$MAX_THETA] + 1e-6) && (dist - radius <= $FAR);
    };
    auto magnification = [&](const double* lo, const double* hi, const double* c) -> double {
        double d[3];
        for (int k = 0; k < 3; ++k) {
            const double below = lo[k] - C[$POS + k], above = C[$POS + k] - hi[k];
            const double gap = below > above ? below : above;
            d[k] = gap > 0.0 ? gap : 0.0;
        }
        const double near = norm3(d), r = norm3(c);
        double stretch;
        if (!fisheye) {
            const double floor_z = 1e-3 * r + 1e-12;
            const double q = r / (c[2] > floor_z ? c[2] : floor_z);
            stretch = q * q;
        } else {
            const double theta = ::atan2(::sqrt(c[0] * c[0] + c[1] * c[1]), c[2]);
            const double sine = ::sin(theta);
            stretch = theta > 1e-6 ? theta / (sine > 1e-6 ? sine : 1e-6) : 1.0;
        }
        stretch = stretch < 1.0 ? 1.0 : (stretch > 1e6 ? 1e6 : stretch);
        return C[$FOCAL] / (near > $NEAR ? near : $NEAR) * stretch;
    };
    double c[3], h[3];
    for (int s = 0; s < num_supers; ++s) {
        to_camera((const double*)(super_lo.data + s), (const double*)(super_hi.data + s), c, h);
        super_visible.data[s] = visible(c, h, super_sigma.data[s]);
    }
    int v = 0;
    for (int b = 0; b < num_blocks; ++b) {
        if (!super_visible.data[super_of.data[b]]) continue;
        const double* lo = (const double*)(block_lo.data + b);
        const double* hi = (const double*)(block_hi.data + b);
        to_camera(lo, hi, c, h);
        if (!visible(c, h, block_sigma.data[b])) continue;
        blocks.data[v] = b;
        scale.data[v] = magnification(lo, hi, c);
        ++v;
    }
    num_visible.data[0] = v;
"""
for _name, _value in {"$FISHEYE": CAM_FISHEYE, "$ROT": CAM_ROT, "$TRANS": CAM_TRANS,
                      "$NORMALS": CAM_NORMALS, "$SUPPORT": CAM_SUPPORT, "$GROW": CAM_GROW,
                      "$NEAR_ROW": CAM_NEAR_ROW, "$MAX_THETA": CAM_MAX_THETA,
                      "$POS": CAM_POS, "$FOCAL": CAM_FOCAL}.items():
    VISIBLE_SNIPPET = VISIBLE_SNIPPET.replace(_name, str(_value))
VISIBLE_SNIPPET = VISIBLE_SNIPPET.replace("$NEAR", repr(float(K.NEAR_PLANE))).replace(
    "$FAR", repr(float(K.FAR_PLANE)))


@wp.func_native(VISIBLE_SNIPPET)
def _visible_native(
    cam: wp.array(dtype=wp.float64),
    super_lo: wp.array(dtype=wp.vec3d),
    super_hi: wp.array(dtype=wp.vec3d),
    super_sigma: wp.array(dtype=wp.float64),
    num_supers: int,
    super_of: wp.array(dtype=wp.int64),
    block_lo: wp.array(dtype=wp.vec3d),
    block_hi: wp.array(dtype=wp.vec3d),
    block_sigma: wp.array(dtype=wp.float64),
    num_blocks: int,
    super_visible: wp.array(dtype=wp.int32),
    blocks: wp.array(dtype=wp.int64),
    scale: wp.array(dtype=wp.float64),
    num_visible: wp.array(dtype=wp.int32),
): ...


@wp.kernel
def _frame_cut_kernel(
    cam: wp.array(dtype=wp.float64),  # [CAM_FLOATS] (frame_camera)
    super_lo: wp.array(dtype=wp.vec3d),  # [S] the spatial index's super-blocks
    super_hi: wp.array(dtype=wp.vec3d),
    super_sigma: wp.array(dtype=wp.float64),
    num_supers: int,
    super_of: wp.array(dtype=wp.int64),  # [B] the index's blocks
    block_lo: wp.array(dtype=wp.vec3d),
    block_hi: wp.array(dtype=wp.vec3d),
    block_sigma: wp.array(dtype=wp.float64),
    num_blocks: int,
    super_visible: wp.array(dtype=wp.int32),  # [S] scratch
    blocks: wp.array(dtype=wp.int64),  # [B] written: the visible blocks, ascending
    scale: wp.array(dtype=wp.float64),  # [B] written: their magnification
    num_visible: wp.array(dtype=wp.int32),  # [1] written
    nodes: wp.array(dtype=LodNode),
    pixel_size: wp.float64,
    colour_tolerance: wp.float64,
    use_colour: int,
    num_originals: int,
    layer_code: wp.array(dtype=wp.int32),
    layer_mean: wp.array(dtype=wp.vec3d),
    layer_thin: wp.array(dtype=wp.vec3d),
    layer_gap: wp.array(dtype=wp.float64),
    layer_spread: wp.array(dtype=wp.float64),
    layer_bias: wp.float64,
    front: wp.array(dtype=wp.int32),
    front_block: wp.array(dtype=wp.int32),
    next: wp.array(dtype=wp.int32),
    next_block: wp.array(dtype=wp.int32),
    out_rows: wp.array(dtype=wp.int32),
    row_bias: wp.array(dtype=wp.float32),
    count: wp.array(dtype=wp.int32),
):
    camera_position = wp.vec3d(cam[_CAM_POS], cam[_CAM_POS + 1], cam[_CAM_POS + 2])
    _visible_native(cam, super_lo, super_hi, super_sigma, num_supers, super_of, block_lo,
                    block_hi, block_sigma, num_blocks, super_visible, blocks, scale, num_visible)
    _cut_native(blocks, scale, num_visible[0], nodes, pixel_size, colour_tolerance,
                use_colour, num_originals, layer_code, layer_mean, layer_thin, layer_gap,
                layer_spread, camera_position, layer_bias, front, front_block, next,
                next_block, out_rows, row_bias, count)


def frame_camera(camera, out: np.ndarray) -> np.ndarray:  # -> [CAM_FLOATS] float64
    """``camera`` as :data:`VISIBLE_SNIPPET` reads it, written into ``out``."""
    view = camera.camera_from_world
    out[CAM_ROT:CAM_ROT + 9] = view[:3, :3].ravel()
    out[CAM_TRANS:CAM_TRANS + 3] = view[:3, 3]
    out[CAM_POS:CAM_POS + 3] = camera.position
    out[CAM_FISHEYE] = camera.model != "pinhole"
    out[CAM_MAX_THETA] = camera.max_theta
    out[CAM_FOCAL] = max(camera.fx, camera.fy)
    if camera.model == "pinhole":
        normals, support, grow = culling.pinhole_planes(camera)
        out[CAM_NORMALS:CAM_NORMALS + 12] = normals.ravel()
        out[CAM_SUPPORT:CAM_SUPPORT + 12] = support.ravel()
        out[CAM_GROW:CAM_GROW + 4] = grow
        out[CAM_NEAR_ROW:CAM_NEAR_ROW + 3] = np.abs(view[2, :3])
    return out


def _device(values: np.ndarray, dtype) -> wp.array:
    """``values`` as a Warp CPU array (no copy when contiguous and of the right type)."""
    return wp.array(np.ascontiguousarray(values), dtype=dtype, device=wb.DEVICE, copy=False)


class TreeArrays:
    """What the cut reads, as Warp arrays (built once per hierarchy; the nodes not copied)."""

    def __init__(self, hierarchy, index: culling.SpatialIndex,  # the hierarchy's index
                 row_bias: wp.array) -> None:  # [rows] float32, written
        h = hierarchy
        self.index = [_device(index.super_lo, wp.vec3d), _device(index.super_hi, wp.vec3d),
                      _device(index.super_sigma, wp.float64), len(index.super_lo),
                      _device(index.super_of, wp.int64), _device(index.lo, wp.vec3d),
                      _device(index.hi, wp.vec3d), _device(index.sigma, wp.float64),
                      index.num_blocks,
                      wp.zeros(max(len(index.super_lo), 1), dtype=wp.int32, device=wb.DEVICE)]
        self.cam = wp.zeros(CAM_FLOATS, dtype=wp.float64, device=wb.DEVICE)
        self.cam_np = self.cam.numpy()
        self.num_visible = wp.zeros(1, dtype=wp.int32, device=wb.DEVICE)
        code = layer_codes(h.merged_layer, h.merged_side, h.merged_covered)
        mean = np.ascontiguousarray(h.layer_mean, np.float64)
        thin = np.ascontiguousarray(h.layer_thin, np.float64)
        self._keep = [h.nodes, code, mean, thin, index]  # what the Warp views alias
        self.nodes = _device(h.nodes, LodNode)
        self.num_originals = m = len(h.order)
        self.layers = [_device(code, wp.int32), _device(mean, wp.vec3d), _device(thin, wp.vec3d),
                       _device(h.layer_gap, wp.float64), _device(h.layer_spread, wp.float64)]
        cap = max(m, 1)  # a level never holds more nodes than the tree has originals
        self.scratch = [wp.zeros(cap, dtype=wp.int32, device=wb.DEVICE) for _ in range(4)]
        self.blocks = wp.zeros(max(len(h.level_start[0]) - 1, 1), dtype=wp.int64,
                               device=wb.DEVICE)
        self.scale = wp.zeros(self.blocks.shape[0], dtype=wp.float64, device=wb.DEVICE)
        self.count = wp.zeros(1, dtype=wp.int32, device=wb.DEVICE)
        self.rows = wp.zeros(cap, dtype=wp.int32, device=wb.DEVICE)
        self.rows_np = self.rows.numpy()
        self.row_bias = row_bias  # pushes of the layered rows drawn (the others stay 0)
        self.row_bias_np = row_bias.numpy()


def frame_cut(tree: TreeArrays, camera, *, pixel_size: float,
              colour_tolerance: float | None, layer_bias: float) -> np.ndarray:  # -> [R] int32
    """One frame's rows to draw, from the camera alone: block culling, magnification and cut.

    ``culling.visible_blocks``, ``lod.block_magnification`` and the walk (``CUT_SNIPPET``:
    the same rows and pushes as ``lod.choose_rows`` + ``lod.far_layer_bias``, tested) in
    one native launch. The rows come in the walk's order, not sorted (the depth sort
    orders ties by original index, so the image does not depend on it). The visible
    blocks and their magnification are left in ``tree.blocks`` / ``tree.scale`` (the
    first ``tree.num_visible`` entries).
    """
    frame_camera(camera, tree.cam_np)
    tol = 1.0 if colour_tolerance is None else float(colour_tolerance)
    replay.launch(tree, _frame_cut_kernel, dim=1, device=wb.DEVICE,
                  inputs=[tree.cam, *tree.index, tree.blocks, tree.scale, tree.num_visible,
                          tree.nodes, wp.float64(pixel_size), wp.float64(tol),
                          int(colour_tolerance is not None), tree.num_originals,
                          *tree.layers, wp.float64(layer_bias), *tree.scratch, tree.rows,
                          tree.row_bias, tree.count])
    return tree.rows_np[:int(tree.count.numpy()[0])]
