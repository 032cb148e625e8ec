"""The per-frame tree cut of :mod:`bench.render.lod` as one native Warp CPU kernel.

:func:`bench.render.lod.choose_rows` (the reference: numpy, level by level) plus
:func:`bench.render.lod.far_layer_bias` cost 6-7 ms of a 30 ms 128 px fisheye frame on the
3 M room, mostly numpy gathers over frontiers of 10^4-10^5 nodes. The kernel does the
same level-by-level walk over every visible block in one serial C++ loop, with the same
float64 test per node (the same operations, so the same nodes are drawn), prefetching the
32-byte node records 16 frontier entries ahead (a walk from node to child is a chain of
random reads otherwise), and writes the rows to draw and the depth-sort push of every
row on a layered split (``LodNode.layered``; every other row's push stays 0).

The tree's node records are wrapped once per hierarchy without a copy; two frontiers of
one int32 pair per original (16 bytes per Gaussian) are the kernel's scratch.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from bench.render import lod
from bench.render import warp_backend as wb


@wp.struct
class LodNode:
    """One tree node (``lod.NODE_DTYPE``, the same 32-byte layout)."""

    sigma: wp.float64
    colour_std: wp.float64
    child_lo: wp.int32
    child_hi: wp.int32
    row: wp.int32
    mixed: wp.bool
    layered: wp.bool


#: The walk in C++: the node record read by its byte offsets (lod.NODE_DTYPE); the bias
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


@wp.kernel
def _cut_kernel(
    blocks: wp.array(dtype=wp.int64),  # [V] visible blocks (level-0 node ids)
    scale: wp.array(dtype=wp.float64),  # [V] their magnification, pixels per metre
    num_blocks: int,
    nodes: wp.array(dtype=LodNode),  # [nodes]
    pixel_size: wp.float64,
    colour_tolerance: wp.float64,
    use_colour: int,
    num_originals: int,
    layer_code: wp.array(dtype=wp.int32),  # [P] 2 x layered split + (side > 0), or -1
    layer_mean: wp.array(dtype=wp.vec3d),  # [Q]
    layer_thin: wp.array(dtype=wp.vec3d),  # [Q]
    layer_gap: wp.array(dtype=wp.float64),  # [Q]
    layer_spread: wp.array(dtype=wp.float64),  # [Q]
    camera_position: wp.vec3d,
    layer_bias: wp.float64,
    front: wp.array(dtype=wp.int32),  # [M] scratch: the level's nodes
    front_block: wp.array(dtype=wp.int32),  # [M] scratch: their entry of ``blocks``
    next: wp.array(dtype=wp.int32),  # [M] scratch
    next_block: wp.array(dtype=wp.int32),  # [M] scratch
    out_rows: wp.array(dtype=wp.int32),  # [M] rows to draw (first count[0])
    row_bias: wp.array(dtype=wp.float32),  # [rows of the device arrays] push of each row
    count: wp.array(dtype=wp.int32),  # [1]
):
    _cut_native(blocks, scale, num_blocks, nodes, pixel_size, colour_tolerance, use_colour,
                num_originals, layer_code, layer_mean, layer_thin, layer_gap, layer_spread,
                camera_position, layer_bias, front, front_block, next, next_block, out_rows,
                row_bias, count)


def _device(values: np.ndarray, dtype) -> wp.array:
    """``values`` as a Warp CPU array (no copy when contiguous and of the right type)."""
    return wp.array(np.ascontiguousarray(values), dtype=dtype, device=wb.DEVICE, copy=False)


class TreeArrays:
    """What the cut reads, as Warp arrays (built once per hierarchy; the nodes not copied)."""

    def __init__(self, hierarchy, row_bias: wp.array) -> None:  # [rows] float32, written
        h = hierarchy
        code = lod.layer_codes(h.merged_layer, h.merged_side, h.merged_covered)
        mean = np.ascontiguousarray(h.layer_mean, np.float64)
        thin = np.ascontiguousarray(h.layer_thin, np.float64)
        self._keep = [h.nodes, code, mean, thin]  # what the Warp views alias: kept alive
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


def cut(tree: TreeArrays, blocks: np.ndarray,  # [V] visible block ids, ascending
        scale: np.ndarray,  # [V] their magnification (lod.block_magnification)
        camera_position: np.ndarray,  # [3] world
        *, pixel_size: float, colour_tolerance: float | None,
        layer_bias: float) -> np.ndarray:  # -> [R] int32 rows, ascending
    """Rows to draw for one frame; the pushes of the layered ones land in ``tree.row_bias``.

    The same rows as ``lod.choose_rows`` and the pushes of ``lod.far_layer_bias`` (tested
    against both), ascending as the reference's (the projection then reads the device
    arrays front to back).
    """
    v = len(blocks)
    if v == 0:
        return np.zeros(0, np.int32)
    tree.blocks.numpy()[:v] = blocks
    tree.scale.numpy()[:v] = scale
    tol = 1.0 if colour_tolerance is None else float(colour_tolerance)
    wp.launch(_cut_kernel, dim=1, device=wb.DEVICE,
              inputs=[tree.blocks, tree.scale, v, tree.nodes, wp.float64(pixel_size),
                      wp.float64(tol), int(colour_tolerance is not None), tree.num_originals,
                      *tree.layers, wp.vec3d(*(float(c) for c in camera_position)),
                      wp.float64(layer_bias), *tree.scratch, tree.rows, tree.row_bias,
                      tree.count])
    return np.sort(tree.rows_np[:int(tree.count.numpy()[0])])
