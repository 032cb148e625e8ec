"""Hierarchical frustum and opacity culling in front of the render backends.

A real scan holds 1-5 M Gaussians, most of them outside a pinhole view. The
``cpu`` backend projects every Gaussian every frame; this module builds, once
per :class:`~bench.scene.gaussians.GaussianSplats` object, a :class:`SpatialIndex`:

- Gaussians whose opacity is below ``ALPHA_MIN`` are dropped (their alpha,
  ``min(ALPHA_MAX, opacity * exp(-power))``, can never reach ``ALPHA_MIN``, so the
  rasterizer skips them anyway);
- the rest are sorted into a regular grid of *blocks* (cells of Gaussian
  centres), block after block, each block keeping the bounding box of its centres
  and the largest standard deviation of its Gaussians; blocks are grouped into
  *super-blocks* (4 x 4 x 4 blocks) with the same bounds.

Per frame, :func:`visible_blocks` tests super-blocks, then the blocks inside the
kept super-blocks, against a conservative frustum (vectorised numpy): a block is
dropped only when no Gaussian in it can pass the backend's own per-Gaussian cull
(near plane, footprint square outside the image, fisheye angle). The kept blocks
are projected, binned and blended by the kernels of :mod:`bench.render.warp_culled`
(one launch over 8-row chunks of the contiguous runs of blocks), which keep the float
operations of :mod:`bench.render.warp_backend` and only skip work the rasterizer would
have passed over (tight tile lists), so every drawn Gaussian goes through exactly
today's arithmetic and the image is the same to the bit: ties in depth keep their
original index order, as in :func:`~bench.render.warp_backend.render_cpu`.

The conservative pinhole bound: with ``J`` the (clamped) projection Jacobian,
``||J||_2 <= (f / z) sqrt(1 + Lx^2 + Ly^2)`` (``L`` the clamp limits), so a
Gaussian of largest standard deviation ``s`` at depth ``z`` has a footprint
radius of at most ``3 (f / z) k s + 3 sqrt(LOW_PASS + EIGEN_FLOOR^0.5) + 1`` px
(``k = sqrt(1 + Lx^2 + Ly^2)``, the 1 for the ``ceil``). Its square overlaps the
image only if the centre lies inside the frustum widened by that many pixels and
by ``3 k s`` metres, which is a set of planes through the camera centre tested
against each block's box grown by ``3 k s_max``.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from bench.render import constants as K
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

TARGET_PER_BLOCK = 512  # Gaussians per block on average (launch overhead vs culling grain)
CULL_MIN_GAUSSIANS = 100_000  # below this the index saves less than it costs; render() skips it
SUPER = 4  # blocks per super-block side
_PIXEL_MARGIN = 3.0 * math.sqrt(K.LOW_PASS_PX + math.sqrt(K.EIGEN_FLOOR)) + 1.0 + 1e-3


@dataclass(frozen=True)
class SpatialIndex:
    """Block index of one splats object (built once by :func:`spatial_index`).

    Attributes:
        order: [M] original indices of the kept Gaussians, block by block (ascending
            inside a block).
        block_start: [B + 1] offsets of each block in ``order``.
        lo, hi: [B, 3] bounding box of the block's centres (world).
        sigma: [B] largest standard deviation (max scale) of the block's Gaussians.
        super_of: [B] super-block of each block.
        super_lo, super_hi: [S, 3]; super_sigma: [S].
        dropped_transparent: Gaussians left out because opacity < ALPHA_MIN.
    """

    order: np.ndarray
    block_start: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sigma: np.ndarray
    super_of: np.ndarray
    super_lo: np.ndarray
    super_hi: np.ndarray
    super_sigma: np.ndarray
    dropped_transparent: int

    @property
    def num_blocks(self) -> int:
        """The number of blocks B."""
        return len(self.lo)


_INDEX: weakref.WeakKeyDictionary[GaussianSplats, SpatialIndex] = weakref.WeakKeyDictionary()


def spatial_index(splats: GaussianSplats, *, per_block: int = TARGET_PER_BLOCK) -> SpatialIndex:
    """The block index of ``splats``, built on first use and cached with the object.

    The cache is keyed on the object's identity (a weak reference, freed with the
    splats); GaussianSplats are treated as immutable by every editor (they return
    new objects), so a cached index never goes stale.
    """
    index = _INDEX.get(splats)
    if index is None:
        index = build_index(splats, per_block=per_block)
        _INDEX[splats] = index
    return index


def build_index(splats: GaussianSplats, *, per_block: int = TARGET_PER_BLOCK) -> SpatialIndex:
    """Sort the non-transparent Gaussians of ``splats`` into grid blocks (see module doc)."""
    if per_block < 1:
        raise ValueError(f"per_block must be >= 1, got {per_block}")
    opaque = splats.opacities() >= K.ALPHA_MIN
    keep = np.flatnonzero(opaque)
    means = splats.means[keep].astype(np.float64)
    sigma = np.exp(splats.log_scales[keep].astype(np.float64).max(axis=1))
    n = len(keep)
    if n == 0:
        empty3 = np.zeros((0, 3))
        return SpatialIndex(keep, np.zeros(1, np.int64), empty3, empty3,
                            np.zeros(0), np.zeros(0, np.int64), empty3, empty3, np.zeros(0),
                            int(splats.num))
    lo_all, hi_all = means.min(axis=0), means.max(axis=0)
    extent = np.maximum(hi_all - lo_all, 1e-9)
    cells = max(1, n // per_block)
    # Cell side from the occupied volume; at most 256 cells per axis.
    side = (np.prod(extent) / cells) ** (1.0 / 3.0)
    dims = np.clip(np.ceil(extent / max(side, 1e-12)), 1, 256).astype(np.int64)
    # Super-block major, then block, so a super-block's blocks are contiguous.
    cell = np.minimum(((means - lo_all) / extent * dims).astype(np.int64), dims - 1)
    sup = cell // SUPER
    sdims = -(-dims // SUPER)
    sub = cell % SUPER
    key = (((sup[:, 0] * sdims[1] + sup[:, 1]) * sdims[2] + sup[:, 2]) * SUPER ** 3
           + (sub[:, 0] * SUPER + sub[:, 1]) * SUPER + sub[:, 2])
    perm = np.argsort(key, kind="stable")
    key_sorted = key[perm]
    starts = np.flatnonzero(np.r_[True, key_sorted[1:] != key_sorted[:-1]])
    block_start = np.r_[starts, n].astype(np.int64)
    m_sorted = means[perm]
    lo = np.minimum.reduceat(m_sorted, starts, axis=0)
    hi = np.maximum.reduceat(m_sorted, starts, axis=0)
    sig = np.maximum.reduceat(sigma[perm], starts)
    super_key = key_sorted[starts] // SUPER ** 3
    s_starts = np.flatnonzero(np.r_[True, super_key[1:] != super_key[:-1]])
    super_of = np.cumsum(np.r_[False, super_key[1:] != super_key[:-1]]).astype(np.int64)
    order = keep[perm]
    return SpatialIndex(
        order=order, block_start=block_start, lo=lo, hi=hi,
        sigma=sig, super_of=super_of,
        super_lo=np.minimum.reduceat(lo, s_starts, axis=0),
        super_hi=np.maximum.reduceat(hi, s_starts, axis=0),
        super_sigma=np.maximum.reduceat(sig, s_starts), dropped_transparent=int(splats.num - n),
    )


def pinhole_planes(camera: Camera) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The widened pinhole frustum's four side planes, as :func:`_boxes_visible` tests them.

    Returns their inward unit normals [4, 3] (camera frame, through the centre), the
    vectors [4, 3] a box's half extents (world axes) are dotted with for its half width
    along each normal (``|R|^T |n|``), and the footprint growth [4] per metre of sigma.
    """
    rot = camera.camera_from_world[:3, :3]
    absrot = np.abs(rot)
    extra = K.FRUSTUM_CLAMP - 1.0
    tan_x, tan_y = 0.5 * camera.width / camera.fx, 0.5 * camera.height / camera.fy
    lim = ((camera.width - camera.cx) / camera.fx + extra * tan_x,
           camera.cx / camera.fx + extra * tan_x,
           (camera.height - camera.cy) / camera.fy + extra * tan_y,
           camera.cy / camera.fy + extra * tan_y)
    k = math.sqrt(1.0 + max(lim[0], lim[1]) ** 2 + max(lim[2], lim[3]) ** 2)
    f_max = max(camera.fx, camera.fy)
    m = _PIXEL_MARGIN
    # Inward normals (camera frame) of the widened frustum's planes through the centre:
    # u > -m: f x + (cx + m) z > 0, u < W + m: -f x + (W - cx + m) z > 0, same for v.
    normals = np.array([
        [camera.fx, 0.0, camera.cx + m],
        [-camera.fx, 0.0, camera.width - camera.cx + m],
        [0.0, camera.fy, camera.cy + m],
        [0.0, -camera.fy, camera.height - camera.cy + m],
    ])
    norms = np.linalg.norm(normals, axis=1)
    normals /= norms[:, None]
    support = np.stack([absrot.T @ np.abs(nrm) for nrm in normals])
    grow = np.array([3.0 * k * f_max / norm for norm in norms])  # footprint radius bound
    return normals, support, grow


def _boxes_visible(camera: Camera, lo: np.ndarray, hi: np.ndarray,
                   sigma: np.ndarray) -> np.ndarray:  # [B, 3], [B, 3], [B] -> [B] bool
    """Conservative: False only if no Gaussian centred in the box can be drawn."""
    view = camera.camera_from_world
    rot, trans = view[:3, :3], view[:3, 3]
    centre_w = 0.5 * (lo + hi)
    half_w = 0.5 * (hi - lo)
    c = centre_w @ rot.T + trans  # box centre in camera coordinates
    if camera.model == "pinhole":
        visible = np.ones(len(lo), bool)
        for nrm, along, g in zip(*pinhole_planes(camera), strict=True):
            support = half_w @ along  # the box's half width along nrm
            grow = g * sigma  # footprint radius bound, in metres
            visible &= c @ nrm + support + grow >= 0.0
        # The near plane tests the centre only (no growth), like the kernel.
        visible &= c[:, 2] + half_w @ np.abs(rot)[2] >= K.NEAR_PLANE
        return visible
    # Fisheye: the cone of half-angle max_theta around +z, against the box's bounding sphere.
    radius = np.linalg.norm(half_w, axis=1)
    dist = np.linalg.norm(c, axis=1)
    inside = dist <= radius + K.NEAR_PLANE
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.arctan2(np.hypot(c[:, 0], c[:, 1]), c[:, 2])
        spread = np.arcsin(np.clip(radius / dist, 0.0, 1.0))
    far_enough = dist - radius <= K.FAR_PLANE
    return inside | ((theta - spread < camera.max_theta + 1e-6) & far_enough)


def visible_blocks(index: SpatialIndex, camera: Camera) -> np.ndarray:  # [V] block ids
    """Blocks that may hold a drawable Gaussian: super-blocks first, then their blocks."""
    if index.num_blocks == 0:
        return np.zeros(0, np.int64)
    keep_super = _boxes_visible(camera, index.super_lo, index.super_hi, index.super_sigma)
    candidates = np.flatnonzero(keep_super[index.super_of])
    keep = _boxes_visible(camera, index.lo[candidates], index.hi[candidates],
                          index.sigma[candidates])
    return candidates[keep]


def block_runs(index: SpatialIndex, blocks: np.ndarray) -> np.ndarray:  # [R, 2] (start, end)
    """Contiguous ranges of the block-ordered Gaussians covered by ``blocks`` (ascending ids)."""
    if len(blocks) == 0:
        return np.zeros((0, 2), np.int64)
    starts = index.block_start[blocks]
    ends = index.block_start[blocks + 1]
    new_run = np.r_[True, starts[1:] != ends[:-1]]
    first = np.flatnonzero(new_run)
    last = np.r_[first[1:], len(blocks)] - 1
    return np.stack([starts[first], ends[last]], axis=1)


def cull_indices(splats: GaussianSplats, camera: Camera) -> np.ndarray:  # [M] ascending
    """Original indices of the Gaussians in the visible blocks (any backend)."""
    index = spatial_index(splats)
    runs = block_runs(index, visible_blocks(index, camera))
    return np.sort(index.order[_concat_ranges(runs)])


# --------------------------------------------------------------------------- cpu driver
def _cpu_arrays(index: SpatialIndex, splats: GaussianSplats):
    """Warp arrays of the index's Gaussians in block order (uploaded once, kept with it).

    Filled chunk by chunk in block order: no block-ordered copy of the splats.
    """
    from bench.render import warp_backend as wb

    arrays = getattr(index, "_cpu", None)
    if arrays is None:
        if splats.count_nonfinite():
            raise ValueError(
                f"splats contain {splats.count_nonfinite()} Gaussians with NaN/Inf values; "
                "drop them first (e.g. read_ply(..., drop_nonfinite=True))"
            )
        arrays = wb._SplatArrays(splats, index.order, packed=True)  # chunked, no subset copy
        object.__setattr__(index, "_cpu", arrays)
    return arrays


def ties_by_original_index(keys: np.ndarray, order: np.ndarray,  # [M] sorted, [M]
                           original: np.ndarray) -> None:  # [rows] original index of each row
    """Reorder runs of equal ``keys`` so ``original[order]`` ascends inside each, in place.

    A frame of millions of float32 depths has ~10^5 ties, nearly all pairs: isolated
    pairs are swapped where needed (vectorised), only longer runs are lexsorted.
    Same result as :func:`ties_by_original_index_reference` (tested).
    """
    tie = keys[1:] == keys[:-1]  # tie[i]: elements i and i + 1 are equal
    pairs = np.flatnonzero(tie)
    if len(pairs) == 0:
        return
    left = np.r_[False, tie][pairs]  # element i also tied with i - 1
    right = np.r_[tie, False][pairs + 1]  # element i + 1 also tied with i + 2
    alone = pairs[~left & ~right]
    a, b = order[alone], order[alone + 1]
    swap = original[a] > original[b]
    order[alone[swap]], order[alone[swap] + 1] = b[swap], a[swap]
    longer = pairs[left | right]
    if len(longer) == 0:
        return
    pos = np.union1d(longer, longer + 1)  # elements of runs of 3 or more, ascending
    new_run = np.ones(len(pos), bool)
    new_run[1:] = ~tie[pos[1:] - 1]
    sub = order[pos]
    order[pos] = sub[np.lexsort((original[sub], np.cumsum(new_run)))]


def ties_by_original_index_reference(keys: np.ndarray, order: np.ndarray,
                                     original: np.ndarray) -> None:
    """Plain whole-array version of :func:`ties_by_original_index`."""
    tie = keys[1:] == keys[:-1]
    if not tie.any():
        return
    member = np.r_[tie, False] | np.r_[False, tie]
    pos = np.flatnonzero(member)
    group = np.cumsum(np.r_[True, ~tie])[pos]  # equal-key group of each tied element
    sub = order[pos]
    order[pos] = sub[np.lexsort((original[sub], group))]


def render_cpu_culled(
    splats: GaussianSplats,
    camera: Camera,
    *,
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W]
    tile_size: int = K.TILE_SIZE,
    projection: str | None = None,
):
    """:func:`bench.render.warp_backend.render_cpu` with block culling in front.

    Same depth keys, same culls, same depth order (ties by original index) and the same
    tile lists as ``render_cpu`` (only Gaussians of blocks that cannot be drawn and fully
    transparent ones are never projected). ``projection="scalar"`` uses today's
    per-Gaussian arithmetic (the output equals ``render_cpu``'s bit for bit);
    the default ``"simd"`` (:data:`PROJECTION`) agrees with it to float round-off.
    """
    from bench.render.output import RenderOutput, resolve_sh_degree

    degree = resolve_sh_degree(splats.sh_degree, sh_degree)
    index = spatial_index(splats)
    if len(index.order) == 0:
        return RenderOutput.empty(camera, background, occluded=occluder_depth is not None)
    arr = _cpu_arrays(index, splats)
    runs = block_runs(index, visible_blocks(index, camera))
    return render_runs(arr, runs, camera, degree=degree, background=background,
                       occluder_depth=occluder_depth, tile_size=tile_size,
                       original=index.order, projection=projection)


def _sort_buffers(arr, num: int):
    """(depth keys, row ids) radix-sort buffers of ``arr`` for ``num`` rows (2x room).

    Only these two: the culled path reads the projected arrays by id, so the
    depth-packed ``s_*`` buffers of ``warp_backend`` are never allocated for it.
    """
    import warp as wp

    from bench.render import warp_backend as wb

    buffers = getattr(arr, "_depth_sort", None)
    if buffers is None or buffers[0].shape[0] < 2 * num:
        cap = max(num, min(arr.num, max(1024, num + num // 8)))
        buffers = (wp.zeros(2 * cap, dtype=float, device=wb.DEVICE),
                   wp.zeros(2 * cap, dtype=wp.int32, device=wb.DEVICE))
        arr._depth_sort = buffers
    return buffers


def _concat_ranges(runs: np.ndarray) -> np.ndarray:  # [R, 2] -> [sum of lengths] int64
    lengths = runs[:, 1] - runs[:, 0]
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(runs[:, 0] - np.cumsum(lengths)
                                                        + lengths, lengths)


#: How the exact path projects: ``"simd"`` (8 Gaussians per thread in vector types with
#: today's float operations; lanes near a discrete boundary deferred to the scalar kernel)
#: or ``"scalar"`` (``warp_culled._project_rows_kernel``, the reference). Both give
#: today's image bit for bit (tested).
PROJECTIONS = ("simd", "scalar")
PROJECTION = "simd"
#: Depth sort: ``"native"`` (C++ radix sort with the ties by original index in the same
#: pass) or ``"plain"`` (``wp.utils.radix_sort_pairs`` + :func:`ties_by_original_index`,
#: the reference; same order, tested).
SORT = "native"
#: Tile-list scatter: ``"prefetch"`` (C++, next rectangles prefetched) or ``"plain"``
#: (``warp_culled._scatter_kernel``, the reference; same lists, tested).
SCATTER = "prefetch"
CHUNK = 8  # rows per SIMD projection thread (the snippet's lane count)


def chunks_of_runs(runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [R, 2] -> [C], [C]
    """(first row, length <= CHUNK) of each chunk of the row ranges ``runs``."""
    lengths = runs[:, 1] - runs[:, 0]
    per_run = -(-lengths // CHUNK)
    total = int(per_run.sum())
    first = np.repeat(runs[:, 0], per_run)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_run) - per_run, per_run)
    start = first + CHUNK * within
    length = np.minimum(CHUNK, np.repeat(runs[:, 1], per_run) - start)
    return start.astype(np.int32), length.astype(np.int32)


def _levels(arr):
    """``ln(opacity / ALPHA_MIN)`` of every row of ``arr`` (computed once, kept with it)."""
    import warp as wp

    from bench.render import warp_backend as wb
    from bench.render import warp_culled as wc

    level = getattr(arr, "_level", None)
    if level is None:
        level = wp.zeros(arr.num, dtype=float, device=wb.DEVICE)
        wp.launch(wc._level_kernel, dim=arr.num, device=wb.DEVICE, inputs=[arr.opacity, level])
        arr._level = level
    return level


def _project_rows(arr, rows, shared: list, tile_count, *, num: int | None = None) -> None:
    """Today's per-Gaussian arithmetic (``warp_culled._project_rows_kernel``) on ``rows[:num]``."""
    import warp as wp

    from bench.render import replay
    from bench.render import warp_backend as wb
    from bench.render import warp_culled as wc

    if isinstance(rows, np.ndarray):
        rows = wp.array(rows, dtype=wp.int32, device=wb.DEVICE)
    replay.launch(
        arr, wc._project_rows_kernel, dim=rows.shape[0] if num is None else num,
        device=wb.DEVICE,
        inputs=[rows, arr.means, arr.cov_a, arr.cov_b, arr.opacity, _levels(arr), arr.sh,
                *shared, arr.xy, arr.conic, arr.ext, arr.depth, arr.color, arr.rect,
                arr.touched, tile_count, arr.rec_opacity],
    )


def _project_simd(arr, runs: np.ndarray | None, shared: list, tile_count, *,
                  gather: bool = False, rows: np.ndarray | None = None, key_bias=None):
    """Project ``runs`` with the SIMD kernel; lanes it defers go to the scalar kernel.

    ``gather``: the rows of ``runs`` (or the row list ``rows``, in any order) are projected
    8 per chunk from a row list (for many short runs, such as a level-of-detail cut: full
    chunks instead of one per run), else as chunks of consecutive rows. Returns the
    depth-sort buffers (keys, row ids) holding the ``num`` drawn rows (the kernel appends
    them as it goes; the deferred ones follow), and ``num``. ``key_bias`` ([N] Warp float
    array or None) is added to each drawn row's key.
    """
    import warp as wp

    from bench.render import replay
    from bench.render import warp_backend as wb
    from bench.render import warp_culled as wc

    if rows is None:
        total = int((runs[:, 1] - runs[:, 0]).sum())
    else:
        gather, total = True, len(rows)
    if gather:
        listed = _concat_ranges(runs).astype(np.int32) if rows is None else rows
        row_list, start, length, num_chunks = _gather_lists(arr, listed)
    else:
        row_list = _placeholder(wp.int32)
        start, length = (wp.array(a, dtype=wp.int32, device=wb.DEVICE)
                         for a in chunks_of_runs(runs))
        num_chunks = len(start)
    keys, order = _sort_buffers(arr, total)
    deferred = getattr(arr, "_deferred", None)
    if deferred is None:
        deferred = (wp.zeros(arr.num, dtype=wp.int32, device=wb.DEVICE),
                    wp.zeros(2, dtype=wp.int32, device=wb.DEVICE))
        arr._deferred = deferred
    late_rows, counts = deferred  # counts: [deferred, drawn]
    counts.zero_()
    arr.last_deferred = 0
    if num_chunks == 0:
        return keys, order, 0
    replay.launch(
        arr, wc._project_simd_kernel, dim=num_chunks, device=wb.DEVICE,
        inputs=[start, length, row_list, int(gather),
                arr.means, arr.cov_a,
                arr.cov_b, arr.opacity, _levels(arr), arr.sh, arr.sh.shape[1], *shared,
                arr.record, arr.rect, arr.touched, tile_count, late_rows, counts, keys, order,
                _placeholder(float) if key_bias is None else key_bias, int(key_bias is not None)],
    )
    num_deferred, num = (int(c) for c in counts.numpy())
    arr.last_deferred = num_deferred
    if num_deferred:
        _project_rows(arr, late_rows, shared, tile_count, num=num_deferred)
        late = late_rows.numpy()[:num_deferred]
        late = late[arr.touched_np[late] != 0]
        order.numpy()[num:num + len(late)] = late
        keys.numpy()[num:num + len(late)] = arr.depth_np[late]
        if key_bias is not None:
            keys.numpy()[num:num + len(late)] += key_bias.numpy()[late]
        num += len(late)
    return keys, order, num


def _gather_lists(arr, listed: np.ndarray):  # [R] rows -> Warp row list, starts, lengths, K
    """The gathered projection's inputs in buffers kept with ``arr`` (grown as needed).

    The row list has 24 padding entries (row 0): the kernel prefetches the rows two
    chunks ahead of the one it projects. The chunk starts and lengths are whole buffers
    of which the first ``K`` (returned last) are this list's (no per-frame Warp views).
    """
    import warp as wp

    from bench.render import warp_backend as wb

    total = len(listed)
    lists = getattr(arr, "_gather", None)
    if lists is None or lists[0].shape[0] < total + 24:
        cap = max(1024, total + total // 4) + 24
        chunks = -(-cap // CHUNK)
        lists = (wp.zeros(cap, dtype=wp.int32, device=wb.DEVICE),
                 wp.array(np.arange(0, chunks * CHUNK, CHUNK, dtype=np.int32), device=wb.DEVICE),
                 wp.full(chunks, CHUNK, dtype=wp.int32, device=wb.DEVICE))
        arr._gather, arr._gather_last = lists, -1
    rows, start, length = lists
    rows_np = rows.numpy()
    rows_np[:total] = listed
    rows_np[total:total + 24] = 0
    length_np = length.numpy()
    if arr._gather_last >= 0:  # the previous call's short last chunk: full again
        length_np[arr._gather_last] = CHUNK
    num_chunks = -(-total // CHUNK)
    if num_chunks:
        length_np[num_chunks - 1] = total - CHUNK * (num_chunks - 1)
    arr._gather_last = num_chunks - 1
    return rows, start, length, num_chunks


_PLACEHOLDERS: dict = {}  # (device, dtype) -> a 1-entry array for an unused kernel input


def _placeholder(dtype):
    import warp as wp

    from bench.render import warp_backend as wb

    key = (wb.DEVICE, dtype)
    if key not in _PLACEHOLDERS:
        _PLACEHOLDERS[key] = wp.zeros(1, dtype=dtype, device=wb.DEVICE)
    return _PLACEHOLDERS[key]


def _original_array(arr, original: np.ndarray | None):
    """``original`` as a Warp int64 array (no copy; cached with ``arr`` by identity)."""
    import warp as wp

    from bench.render import warp_backend as wb

    cached = getattr(arr, "_original", None)
    if original is None:
        original = np.zeros(1, np.int64)
    elif cached is not None and cached[0] is original:
        return cached[1]
    values = np.ascontiguousarray(original, dtype=np.int64)
    array = wp.array(values, dtype=wp.int64, device=wb.DEVICE, copy=False)
    arr._original = (original, array, values)  # values: keeps the memory alive
    return array


def render_runs(
    arr,
    runs: np.ndarray | None,  # [R, 2] (start, end) rows of ``arr`` to project, or None
    camera: Camera,
    *,
    degree: int,
    background: tuple[float, float, float],
    occluder_depth: np.ndarray | None,  # [H, W]
    tile_size: int,
    original: np.ndarray | None,  # [rows] original index of each row (depth ties), or None
    projection: str | None = None,
    key_bias=None,  # [rows of arr] Warp float array added to the drawn rows' sort keys
    gather: bool = False,
    rows: np.ndarray | None = None,  # [R] rows to project instead of ``runs`` (gathered)
    merged: tuple[int, int] | None = None,  # LOD's merged pool: (first row, its SH degree)
):
    """Project the rows ``runs`` of the Warp arrays ``arr``, then bin and blend them.

    The host side of ``warp_backend.render_cpu`` with the projection restricted to
    ranges, with the tight-tile-list kernels of :mod:`bench.render.warp_culled` (same
    float operations; same image bit for bit). ``gather`` projects the rows 8 per SIMD
    chunk from a row list (many short runs; needs ``original`` so that depth ties do not
    depend on the order the chunks append rows in); ``rows`` gives that list directly, in
    any order (needs ``original`` too). ``merged = (first, d)``: rows from ``first`` on are
    level of detail's merged pool, approximate by construction: coloured with SH degree
    ``min(d, degree)``, and a fisheye projects them with a vector atan2 (to 2.6e-7 rad)
    instead of libm's; None: every row is projected as the exact path does.
    """
    import warp as wp

    from bench.render import replay
    from bench.render import warp_backend as wb
    from bench.render import warp_culled as wc
    from bench.render.output import RenderOutput

    width, height = camera.width, camera.height
    img = wb.frame_buffers(arr, camera, tile_size)
    num_tiles = img.tiles_x * img.tiles_y
    tile_count = getattr(img, "tile_count", None)
    if tile_count is None:
        tile_count = wp.zeros(num_tiles, dtype=wp.int32, device=wb.DEVICE)
        img.tile_count = tile_count
    tile_count.zero_()
    view = camera.camera_from_world.astype(np.float32)
    merged_from, merged_degree = (arr.num, degree) if merged is None else (
        merged[0], min(merged[1], degree))
    shared = [
        degree, merged_from, merged_degree, wp.mat33(view[:3, :3]), wp.vec3(view[:3, 3]),
        wp.vec3(camera.position.astype(np.float32)), wb._MODEL_IDS[camera.model],
        wp.vec4(camera.fx, camera.fy, camera.cx, camera.cy), wp.vec4(*camera.distortion),
        wb._frustum_limits(camera), camera.max_theta, width, height, tile_size, img.tiles_x,
        img.tiles_y,
    ]
    projection = PROJECTION if projection is None else projection
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    if arr.record is None:  # pragma: no cover - a caller's bug, not the user's
        raise RuntimeError("render_runs needs _SplatArrays(..., packed=True)")
    if projection == "simd":
        keys, order, num = _project_simd(arr, runs, shared, tile_count, gather=gather,
                                         rows=rows, key_bias=key_bias)
        if original is None:  # rows were appended out of order: ties by row, as listed
            original = np.arange(arr.num)
    else:  # today's arithmetic, one launch over the rows of every run
        listed = (_concat_ranges(runs) if rows is None else np.sort(rows)).astype(np.int32)
        _project_rows(arr, listed, shared, tile_count)
        drawn = listed[arr.touched_np[listed] != 0]  # ascending within each run, runs in order
        num = len(drawn)
        keys, order = _sort_buffers(arr, num)
        order.numpy()[:num] = drawn
        np.take(arr.depth_np, drawn, out=keys.numpy()[:num])
        if key_bias is not None:  # LOD: the sort order only, not the depths drawn
            keys.numpy()[:num] += key_bias.numpy()[drawn]
    if SORT == "native":
        replay.launch(arr, wc._depth_sort_kernel, dim=1, device=wb.DEVICE,
                      inputs=[keys, order, num, _original_array(arr, original),
                              int(original is not None)])
    else:
        wp.utils.radix_sort_pairs(keys, order, num)
        if original is not None:
            ties_by_original_index(keys.numpy()[:num], order.numpy()[:num], original)
    counts = tile_count.numpy()
    starts = img.tile_start.numpy()
    starts[0] = 0
    np.cumsum(counts, out=starts[1:])
    total = int(starts[-1])
    if total > arr.isect.shape[0]:
        arr.isect = wp.zeros(int(total * 1.5), dtype=wp.int32, device=wb.DEVICE)
    img.cursor.numpy()[:] = starts[:-1]
    use_occluder = int(occluder_depth is not None)
    if use_occluder:
        img.occluder.assign(np.ascontiguousarray(occluder_depth, np.float32).reshape(-1))
    scatter = wc._scatter_prefetch_kernel if SCATTER == "prefetch" else wc._scatter_kernel
    replay.launch(arr, scatter, dim=1, device=wb.DEVICE,
                  inputs=[order, num, img.tiles_x, arr.rect, img.cursor, arr.isect])
    native = wb._NATIVE_RASTER and tile_size <= wb._TILE_BUFFER
    frame = [width, height, tile_size, img.tiles_x, wp.vec3(*(float(b) for b in background)),
             img.valid, img.occluder, use_occluder]
    if native:
        replay.launch(arr, wc._raster_packed_kernel, dim=num_tiles, device=wb.DEVICE,
                      inputs=[img.tile_start, arr.isect, arr.record, *frame, img.rgb,
                              img.depth, img.alpha])
    else:  # tiles beyond the native buffers: the plain kernel on the record's views
        wp.launch(
            wb._raster_kernel, dim=num_tiles, device=wb.DEVICE,
            inputs=[img.tile_start, arr.isect, arr.xy, arr.conic, arr.ext, arr.depth,
                    arr.color, arr.rec_opacity, *frame, img.acc, img.trans, img.row_left,
                    img.rgb, img.depth, img.alpha],
        )
    return RenderOutput(
        rgb=img.rgb.numpy().reshape(height, width, 3).copy(),
        depth=img.depth.numpy().reshape(height, width).copy(),
        alpha=img.alpha.numpy().reshape(height, width).copy(),
        valid=img.valid_np.copy(),
        occluded=bool(use_occluder),
    )
