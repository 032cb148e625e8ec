"""The per-frame tree cut of :mod:`bench.render.lod` as one Warp CPU kernel.

:func:`bench.render.lod.choose_rows` (the reference: numpy, level by level) plus
:func:`bench.render.lod.far_layer_bias` cost 6-7 ms of a 30 ms 128 px fisheye frame on the
3 M room, mostly numpy gathers over frontiers of 10^4-10^5 nodes. The kernel walks each
visible block's tree depth first in one serial C++ loop, with the same float64 test per
node (same operations, so the same nodes are drawn), and writes the rows to draw and each
row's depth-sort push.

The tree's arrays are wrapped once per hierarchy (no copy where the dtype already fits).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from bench.render import warp_backend as wb

_STACK = 256  # pending nodes per walk: at most 3 per level are left waiting (9 levels)


@wp.struct
class LodNode:
    """One tree node (``lod.NODE_DTYPE``, the same 32-byte layout)."""

    sigma: wp.float64
    colour_std: wp.float64
    child_lo: wp.int32
    child_hi: wp.int32
    row: wp.int32
    mixed: wp.bool


@wp.kernel
def _cut_kernel(
    blocks: wp.array(dtype=wp.int64),  # [V] visible blocks (level-0 node ids)
    scale: wp.array(dtype=wp.float64),  # [V] their magnification, pixels per metre
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
    stack: wp.array(dtype=wp.int32),  # [_STACK] scratch
    out_rows: wp.array(dtype=wp.int32),  # [capacity] rows to draw (first count[0])
    row_bias: wp.array(dtype=wp.float32),  # [rows of the device arrays] push of each drawn row
    count: wp.array(dtype=wp.int32),  # [1]
):
    one = wp.float64(1.0)
    zero = wp.float64(0.0)
    n = int(0)  # noqa: UP018 - Warp: a variable the loops change
    for b in range(blocks.shape[0]):
        s = scale[b]
        stack[0] = wp.int32(blocks[b])
        top = int(1)  # noqa: UP018
        while top > 0:
            top -= 1
            node = nodes[stack[top]]
            px = node.sigma * s  # the reference's float64 operations, in its order
            if use_colour != 0:
                px = px * wp.max(one, node.colour_std / colour_tolerance)
            if px <= pixel_size and not node.mixed:
                row = int(node.row)
                out_rows[n] = node.row
                n += 1
                bias = wp.float32(0.0)
                if row >= num_originals:
                    code = layer_code[row - num_originals]
                    if code >= 0:
                        q = code // 2
                        d = camera_position - layer_mean[q]
                        t = layer_thin[q]
                        offset = d[0] * t[0] + d[1] * t[1] + d[2] * t[2] - layer_gap[q]
                        if (code % 2 == 1 and offset < zero) or (code % 2 == 0
                                                                 and offset > zero):
                            bias = wp.float32(layer_bias * layer_spread[q])
                row_bias[row] = bias
            else:  # children pushed last first: walked in tree order
                c = node.child_hi - 1
                while c >= node.child_lo:
                    stack[top] = c
                    top += 1
                    c -= 1
    count[0] = n


def _device(values: np.ndarray, dtype) -> wp.array:
    """``values`` as a Warp CPU array (no copy when contiguous and of the right type)."""
    return wp.array(np.ascontiguousarray(values), dtype=dtype, device=wb.DEVICE, copy=False)


class TreeArrays:
    """What the cut reads, as Warp arrays (built once per hierarchy; the nodes not copied)."""

    def __init__(self, hierarchy, num_rows: int) -> None:
        h = hierarchy
        if 4 * len(h.level_start) > _STACK:  # pragma: no cover - 60+ levels
            raise RuntimeError(f"a {len(h.level_start)}-level tree needs a deeper cut stack")
        code = np.where((h.merged_layer >= 0) & (h.merged_side != 0) & h.merged_covered,
                        2 * h.merged_layer + (h.merged_side > 0), -1).astype(np.int32)
        self._keep = [h.nodes, code, np.ascontiguousarray(h.layer_mean, np.float64),
                      np.ascontiguousarray(h.layer_thin, np.float64)]  # aliased: kept alive
        self.nodes = _device(h.nodes, LodNode)
        self.num_originals = len(h.order)
        self.layers = [_device(code, wp.int32), _device(self._keep[2], wp.vec3d),
                       _device(self._keep[3], wp.vec3d), _device(h.layer_gap, wp.float64),
                       _device(h.layer_spread, wp.float64)]
        self.stack = wp.zeros(_STACK, dtype=wp.int32, device=wb.DEVICE)
        self.count = wp.zeros(1, dtype=wp.int32, device=wb.DEVICE)
        self.rows = wp.zeros(max(self.num_originals, 1), dtype=wp.int32, device=wb.DEVICE)
        self.rows_np = self.rows.numpy()
        self.row_bias = wp.zeros(num_rows, dtype=wp.float32, device=wb.DEVICE)
        self.row_bias_np = self.row_bias.numpy()


def cut(tree: TreeArrays, blocks: np.ndarray,  # [V] visible block ids, ascending
        scale: np.ndarray,  # [V] their magnification (lod.block_magnification)
        camera_position: np.ndarray,  # [3] world
        *, pixel_size: float, colour_tolerance: float | None,
        layer_bias: float) -> np.ndarray:  # -> [R] int32 rows, ascending
    """Rows to draw for one frame; their depth-sort push lands in ``tree.row_bias_np``.

    The same rows as ``lod.choose_rows`` and the pushes of ``lod.far_layer_bias`` (tested
    against both). Ascending, as the reference's: the projection then reads the device
    arrays front to back (measured: the walk's own order costs 20-30 % more projection
    and blend time on the 3 M room).
    """
    if len(blocks) == 0:
        return np.zeros(0, np.int32)
    tol = 1.0 if colour_tolerance is None else float(colour_tolerance)
    wp.launch(_cut_kernel, dim=1, device=wb.DEVICE,
              inputs=[wp.array(np.asarray(blocks, np.int64), dtype=wp.int64, device=wb.DEVICE),
                      wp.array(np.asarray(scale, np.float64), dtype=wp.float64,
                               device=wb.DEVICE),
                      tree.nodes, wp.float64(pixel_size), wp.float64(tol),
                      int(colour_tolerance is not None), tree.num_originals, *tree.layers,
                      wp.vec3d(*(float(v) for v in camera_position)), wp.float64(layer_bias),
                      tree.stack, tree.rows, tree.row_bias, tree.count])
    return np.sort(tree.rows_np[:int(tree.count.numpy()[0])])
