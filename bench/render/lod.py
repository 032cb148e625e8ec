"""Level-of-detail rendering (opt-in, approximate): a tree of moment-matched Gaussians.

Off by default; turned on with ``render(..., lod=LodConfig(...))`` (``cpu`` backend)
or ``bench render --lod-pixels PX``, and then recorded in the render manifest.

Hierarchy (built once per splats object, on top of the block index of
:mod:`bench.render.culling`, cached with it): every block is the root of a 4-ary tree.
Each level cuts every node in two twice, at the median of the feature its members
spread most in (position, and the surface normal scaled by :data:`NORMAL_SCALE`, so a
node stops growing across a wall meeting the floor); the last level is single
Gaussians. Every node with more than one member is merged into one Gaussian by moment
matching (weights ``w = opacity x area``, area = pi x product of the two largest
standard deviations), straight from its members:

- mean = weighted mean of the means;
- covariance = weighted mean of ``Sigma_i + (mu_i - mu)(mu_i - mu)^T``;
- SH coefficients (all bands) = weighted mean;
- opacity from coverage (:func:`coverage_opacity`): its integrated alpha equals the
  light its members absorb over its footprint, so a surface tiled by near-opaque
  Gaussians stays opaque (an effective opacity above 1 gives a flat-topped footprint;
  the per-pixel clamp at ``ALPHA_MAX`` still applies) and a sparse node fades.

Per frame (:func:`choose_rows`) the tree is cut top-down from the visible blocks: a
node is drawn merged when its own largest standard deviation, projected at its block's
distance, is at most ``pixel_size`` pixels (inflated by the node's colour spread over
``colour_tolerance``); else its children are tested; single Gaussians are drawn as they
are. The originals (tree order) and the merged pool sit in one set of device arrays
(uploaded once per scene), so a frame is a list of rows of it, rendered by the exact
path's driver (:func:`bench.render.culling.render_runs`). With a tiny ``pixel_size``
every original is drawn and the image equals the exact one bit for bit.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass

import numpy as np

from bench.render import constants as K
from bench.render import culling
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

SPLITS_PER_LEVEL = 2  # binary median splits between two levels: 4 children per node
HIERARCHY = "kd-moment/2"  # id of the hierarchy written into manifests
NORMAL_SCALE = 0.1  # metres one unit of normal counts as when the tree picks a split feature
_CHUNK = 262_144  # Gaussians merged per pass (whole blocks; bounds temporary memory)


@dataclass(frozen=True)
class LodConfig:
    """Level-of-detail mode (approximate; the exact path is the default).

    Attributes:
        pixel_size: Largest projected standard deviation, in pixels, of a merged node
            drawn in place of its members (its own largest axis, at its block's
            distance); smaller is closer to the exact image and slower.
        colour_tolerance: rgb standard deviation of a node's members up to which its
            size counts as it is; a node of more mixed colour counts as that many times
            bigger (textures, edges and a light panel under the ceiling are refined).
            None ignores colour.
    """

    pixel_size: float = 0.5
    colour_tolerance: float | None = 0.05

    def __post_init__(self) -> None:
        if not (self.pixel_size > 0 and np.isfinite(self.pixel_size)):
            raise ValueError(f"LodConfig.pixel_size must be a positive number of pixels, "
                             f"got {self.pixel_size}")
        tol = self.colour_tolerance
        if tol is not None and not (tol > 0 and np.isfinite(tol)):
            raise ValueError(f"LodConfig.colour_tolerance must be a positive rgb standard "
                             f"deviation or None (colour ignored), got {tol}")

    def to_json(self) -> dict:
        """This config as a JSON-ready dict (``mode``, ``hierarchy`` and its fields)."""
        return {"mode": "lod", "hierarchy": HIERARCHY, "branching": 2 ** SPLITS_PER_LEVEL,
                "normal_scale": NORMAL_SCALE, "footprint_area": FOOTPRINT_AREA, **asdict(self)}


@dataclass(frozen=True)
class LodHierarchy:
    """A tree of merged Gaussians over each block of the spatial index (see module doc).

    Node ``j`` of level ``k`` holds the originals at positions ``level_start[k][j]`` to
    ``level_start[k][j + 1]`` of ``order``; level 0 are the blocks, every level cuts each
    node of the previous one into up to 4 contiguous parts, the last level is single
    Gaussians.

    Attributes:
        order: [M] original indices of the index's Gaussians, block by block, in tree order.
        level_start: per level, [K_k + 1] start of each node in ``order``.
        level_offset: [L + 1] first global node id of each level.
        child_lo, child_hi: [sum K_k] global ids of each node's children are
            ``child_lo[j]:child_hi[j]`` (the next level; empty for single Gaussians).
        node_row: [sum K_k] device row drawn for the node: its position in ``order`` for
            single Gaussians, ``M +`` its index in ``merged`` otherwise.
        node_block: [sum K_k] block of each node.
        node_sigma: [sum K_k] largest standard deviation of the node's Gaussian (0 for
            single Gaussians: never merged).
        node_colour_std: [sum K_k] weighted standard deviation of the members' rgb (0 for
            single Gaussians).
        merged: the merged Gaussians of every node with more than one member (opacity
            clipped to what the storage form holds).
        merged_opacity: [P] their effective opacity (:func:`coverage_opacity`; may exceed
            1), the value the renderer uses.
    """

    order: np.ndarray
    level_start: tuple[np.ndarray, ...]
    level_offset: np.ndarray
    child_lo: np.ndarray
    child_hi: np.ndarray
    node_row: np.ndarray
    node_block: np.ndarray
    node_sigma: np.ndarray
    node_colour_std: np.ndarray
    merged: GaussianSplats
    merged_opacity: np.ndarray


_HIERARCHY: weakref.WeakKeyDictionary[GaussianSplats, LodHierarchy] = weakref.WeakKeyDictionary()


def lod_hierarchy(splats: GaussianSplats) -> LodHierarchy:
    """The LOD hierarchy of ``splats``, built on first use and cached with the object."""
    hierarchy = _HIERARCHY.get(splats)
    if hierarchy is None:
        hierarchy = build_hierarchy(splats, culling.spatial_index(splats))
        _HIERARCHY[splats] = hierarchy
    return hierarchy


def _covariances(quats: np.ndarray, log_scales: np.ndarray) -> np.ndarray:  # [N, 3, 3]
    from bench.render.warp_backend import _quat_to_rotmat

    q = quats.astype(np.float64)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
    m = _quat_to_rotmat(q) * np.exp(log_scales.astype(np.float64))[:, None, :]
    return m @ m.transpose(0, 2, 1)


def median_split(features: np.ndarray, order: np.ndarray,  # [N, F], [M] rows of features
                 starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [K + 1]
    """Cut every segment of ``order`` in two at the median of its widest feature.

    Segments are ``order[starts[j]:starts[j + 1]]``; each one with more than one member
    is sorted (stably) along the feature where its members spread most and cut after
    ``n // 2`` members. Returns the reordered rows and the new segment starts.
    """
    sizes = np.diff(starts)
    seg = np.repeat(np.arange(len(sizes)), sizes)
    pts = features[order]
    lo = np.minimum.reduceat(pts, starts[:-1], axis=0)
    hi = np.maximum.reduceat(pts, starts[:-1], axis=0)
    axis = np.argmax(hi - lo, axis=1)
    span = np.maximum((hi - lo)[np.arange(len(sizes)), axis].astype(np.float64), 1e-30)
    rel = (pts[np.arange(len(order)), axis[seg]] - lo[seg, axis[seg]]) / span[seg]
    key = seg + 0.5 * np.clip(rel, 0.0, 1.0)  # segments stay apart, sorted inside
    perm = np.argsort(key, kind="stable")
    cut = starts[:-1][sizes > 1] + sizes[sizes > 1] // 2
    return order[perm], np.union1d(starts, cut)


def split_features(splats: GaussianSplats, *,
                   normal_scale: float) -> np.ndarray:  # [N, 6] float32
    """Position and scaled normal of every Gaussian (the tree's split space).

    The normal is the axis of the smallest scale, its sign fixed so that its largest
    component is positive; ``normal_scale`` is the metres one unit of normal counts as,
    so surfaces of different orientation (a wall meeting the floor, a table's top and
    edge) are split apart before a node grows across both. Colour is not a split
    feature (splitting a noisy surface by colour gives children that overlap in space),
    nor is the plane offset ``n . x`` (measured: the normals' jitter times metres of
    position makes it noise, and the tree doubled in cut size).
    """
    from bench.render.warp_backend import _quat_to_rotmat

    out = np.empty((splats.num, 6), np.float32)
    for start in range(0, splats.num, _CHUNK):
        rows = slice(start, start + _CHUNK)
        q = splats.quats[rows].astype(np.float64)
        rot = _quat_to_rotmat(q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30))
        thin = np.argmin(splats.log_scales[rows], axis=1)
        normal = rot[np.arange(len(thin)), :, thin]
        big = np.argmax(np.abs(normal), axis=1)
        normal *= np.sign(normal[np.arange(len(big)), big])[:, None]
        out[rows, :3] = splats.means[rows]
        out[rows, 3:] = normal_scale * normal
    return out


def _moments(splats: GaussianSplats, rows: np.ndarray):
    """Per-Gaussian weights and moments of ``rows`` (float64) for :func:`_merge`."""
    mean = splats.means[rows].astype(np.float64)
    ls = splats.log_scales[rows].astype(np.float64)
    std = np.sort(np.exp(ls), axis=1)
    area = np.pi * std[:, 1] * std[:, 2]
    alpha = splats.opacities()[rows].astype(np.float64)
    w = alpha * area
    second = _covariances(splats.quats[rows], ls) + mean[:, :, None] * mean[:, None, :]
    # -A_i ln(1 - a_i): summed, the log transmittance over a footprint (coverage opacity).
    absorb = -area * np.log1p(-np.minimum(alpha, K.ALPHA_MAX))
    return (w, mean, second, splats.sh_dc[rows].astype(np.float64),
            splats.sh_rest[rows].astype(np.float64), absorb)


def _merge(starts: np.ndarray, w, mean, second, dc, rest, absorb):
    """Weighted sums per group (groups start at ``starts``; rows sorted by group)."""
    wsum = np.add.reduceat(w, starts)
    mu = np.add.reduceat(w[:, None] * mean, starts) / wsum[:, None]
    # E[x x^T] of the mixture: minus mu mu^T it is the moment-matched covariance.
    m2 = np.add.reduceat(w[:, None, None] * second, starts) / wsum[:, None, None]
    d = np.add.reduceat(w[:, None] * dc, starts) / wsum[:, None]
    r = np.add.reduceat(w[:, None, None] * rest, starts) / wsum[:, None, None]
    d2 = np.add.reduceat(w[:, None] * dc * dc, starts) / wsum[:, None]
    colour_std = K.SH_C0 * np.sqrt(np.maximum(d2 - d * d, 0.0).mean(axis=1))  # rgb units
    return mu, m2, d, r, np.add.reduceat(absorb, starts), colour_std


def _to_splats(mu, m2, dc, rest, absorb) -> tuple[GaussianSplats, np.ndarray, np.ndarray]:
    """Merged Gaussians from mixture moments, their largest stds and effective opacities."""
    from scipy.spatial.transform import Rotation

    cov = m2 - mu[:, :, None] * mu[:, None, :]
    cov = 0.5 * (cov + cov.transpose(0, 2, 1))
    lam, vec = np.linalg.eigh(cov)
    lam = np.maximum(lam, 1e-14)
    flip = np.linalg.det(vec) < 0
    vec[flip, :, 0] *= -1.0
    xyzw = Rotation.from_matrix(vec).as_quat()
    std = np.sqrt(lam)
    opacity = coverage_opacity(absorb, std[:, 1] * std[:, 2], footprint_area=FOOTPRINT_AREA)
    f32 = np.float32
    stored = np.minimum(opacity, K.ALPHA_MAX)  # the storage form holds at most 1
    splats = GaussianSplats(
        means=mu.astype(f32), quats=xyzw[:, [3, 0, 1, 2]].astype(f32),
        log_scales=np.log(std).astype(f32),
        opacity_logits=np.log(stored / (1.0 - stored)).astype(f32),
        sh_dc=dc.astype(f32), sh_rest=rest.astype(f32),
    )
    return splats, std[:, 2], opacity


# Footprint of a merged node, in units of s1 s2: a uniform patch of side a has std
# a / sqrt(12), area 12 s1 s2; twice that makes the flat top reach the corners where
# four merged nodes meet (with 12 they showed as see-through dots; measured on the 3 M
# room: +0.9 dB at the same cut).
FOOTPRINT_AREA = 24.0


def coverage_opacity(absorb: np.ndarray, s1s2: np.ndarray, *,  # [P], [P] -> [P]
                     footprint_area: float) -> np.ndarray:
    """Effective opacity of merged Gaussians from their members' coverage.

    The members absorb ``1 - exp(-absorb / A)`` of the light over the node's footprint
    ``A = footprint_area s1 s2`` (:data:`FOOTPRINT_AREA`; ``absorb`` = sum of
    ``-A_i ln(1 - a_i)``, ``A_i = pi`` x member's two largest stds). The merged Gaussian's
    integrated alpha, ``2 pi s1 s2 F(o)`` with ``F(o) = o`` for ``o <= ALPHA_MAX`` and
    ``ALPHA_MAX (1 + ln(o / ALPHA_MAX))`` above (alpha is clamped at ALPHA_MAX per pixel,
    so an opacity above 1 gives a flat top), is set equal to it. A patch tiled by opaque
    Gaussians gets ``o ~ 9``: opaque over its footprint, so merged neighbours close
    up as the originals do instead of leaving see-through seams between Gaussian bumps.
    """
    footprint = footprint_area * s1s2
    target = footprint * -np.expm1(-absorb / footprint) / (2.0 * np.pi * s1s2)
    amax = K.ALPHA_MAX
    flat = amax * np.exp(np.minimum(target / amax - 1.0, 50.0))
    return np.where(target <= amax, np.maximum(target, 1e-6), flat)


def build_hierarchy(splats: GaussianSplats, index: culling.SpatialIndex) -> LodHierarchy:
    """Split every block into a 4-ary tree of median cuts and merge each node (module doc)."""
    m = len(index.order)
    features = split_features(splats, normal_scale=NORMAL_SCALE)
    order, starts = index.order.copy(), index.block_start.astype(np.int64)
    level_start = [starts]
    while len(starts) - 1 < m:  # until every node is a single Gaussian
        for _ in range(SPLITS_PER_LEVEL):
            order, starts = median_split(features, order, starts)
        level_start.append(starts)
    # Merge every node with more than one member, straight from its originals.
    multi = [np.flatnonzero(np.diff(s) > 1) for s in level_start]
    parts = [[] for _ in level_start]
    bounds = np.unique(np.r_[np.searchsorted(index.block_start, np.arange(0, m, _CHUNK)),
                             index.num_blocks])
    for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True):
        a, b = index.block_start[b0], index.block_start[b1]
        rows = _moments(splats, order[a:b])
        for k, s in enumerate(level_start):
            lo, hi = np.searchsorted(s, [a, b])  # this chunk's nodes (blocks never straddle)
            many = np.diff(s[lo:hi + 1]) > 1
            if many.any():  # reduce over every node (groups end where the next one starts)
                parts[k].append([f[many] for f in _merge(s[lo:hi] - a, *rows)])
    merged, sigma, colour_std, opacity = [], [], [], []
    for k in range(len(level_start)):
        if parts[k]:
            fields = [np.concatenate([p[i] for p in parts[k]]) for i in range(6)]
            merged_k, sigma_k, opacity_k = _to_splats(*fields[:5])
            merged.append(merged_k)
            sigma.append(sigma_k)
            opacity.append(opacity_k)
            colour_std.append(fields[5])
    pool = merged[0] if merged else splats.subset(np.zeros(0, np.int64))
    for extra in merged[1:]:
        pool = GaussianSplats.concat(pool, extra)
    counts = [len(s) - 1 for s in level_start]
    level_offset = np.cumsum([0] + counts)
    node_row = np.concatenate([s[:-1] for s in level_start])  # single: position in order
    node_sigma = np.zeros(level_offset[-1])
    merged_ids = np.concatenate([level_offset[k] + j for k, j in enumerate(multi)])
    node_row[merged_ids] = m + np.arange(len(merged_ids))
    node_sigma[merged_ids] = np.concatenate(sigma) if sigma else np.zeros(0)
    node_colour_std = np.zeros(level_offset[-1])
    node_colour_std[merged_ids] = np.concatenate(colour_std) if colour_std else np.zeros(0)
    node_block = (np.searchsorted(index.block_start, np.concatenate(
        [s[:-1] for s in level_start]), side="right") - 1).astype(np.int32)
    child_lo = np.zeros(level_offset[-1], np.int64)
    child_hi = np.zeros(level_offset[-1], np.int64)
    for k in range(len(level_start) - 1):
        s, nxt = level_start[k], level_start[k + 1]
        ids = slice(level_offset[k], level_offset[k + 1])
        child_lo[ids] = level_offset[k + 1] + np.searchsorted(nxt, s[:-1])
        child_hi[ids] = level_offset[k + 1] + np.searchsorted(nxt, s[1:])
    return LodHierarchy(order=order, level_start=tuple(level_start), level_offset=level_offset,
                        child_lo=child_lo, child_hi=child_hi, node_row=node_row,
                        node_block=node_block, node_sigma=node_sigma,
                        node_colour_std=node_colour_std, merged=pool,
                        merged_opacity=np.concatenate(opacity).astype(np.float32) if opacity
                        else np.zeros(0, np.float32))


def block_magnification(index: culling.SpatialIndex, camera: Camera,
                        blocks: np.ndarray) -> np.ndarray:  # [V] -> [V] pixels per metre
    """Largest local magnification of each block (pixels per metre across the ray).

    At the block's nearest point (distance to its box of centres), with the off-axis
    stretch of the lens at the block's centre: pinhole ``(r / z)^2``, fisheye
    ``theta / sin(theta)`` (equidistant tangential scale), both at least 1.
    """
    c = camera.position
    lo, hi = index.lo[blocks], index.hi[blocks]
    near = np.linalg.norm(np.maximum(np.maximum(lo - c, c - hi), 0.0), axis=1)
    view = camera.camera_from_world
    p = 0.5 * (lo + hi) @ view[:3, :3].T + view[:3, 3]
    r = np.linalg.norm(p, axis=1)
    if camera.model == "pinhole":
        stretch = (r / np.maximum(p[:, 2], 1e-3 * r + 1e-12)) ** 2
    else:
        theta = np.arctan2(np.hypot(p[:, 0], p[:, 1]), p[:, 2])
        stretch = np.where(theta > 1e-6, theta / np.maximum(np.sin(theta), 1e-6), 1.0)
    stretch = np.clip(stretch, 1.0, 1e6)
    return max(camera.fx, camera.fy) / np.maximum(near, K.NEAR_PLANE) * stretch


def choose_rows(index: culling.SpatialIndex, hierarchy: LodHierarchy, camera: Camera,
                blocks: np.ndarray, config: LodConfig) -> np.ndarray:  # [V] -> [R]
    """The cut of the tree for one frame: device rows to draw, ascending.

    Top-down from the visible blocks: a merged node is drawn when its largest standard
    deviation, times its block's magnification (:func:`block_magnification`) and
    times ``max(1, colour std / colour_tolerance)`` (a node of mixed colours counts as
    bigger: its blur shows), is at most ``pixel_size`` pixels; else its children are
    tested. Single Gaussians are always drawn as they are.
    """
    h = hierarchy
    scale = np.zeros(index.num_blocks)
    scale[blocks] = block_magnification(index, camera, blocks)
    frontier = np.asarray(blocks, np.int64)  # level-0 node ids are the block ids
    rows = []
    while len(frontier):
        px = h.node_sigma[frontier] * scale[h.node_block[frontier]]
        if config.colour_tolerance is not None:
            px *= np.maximum(1.0, h.node_colour_std[frontier] / config.colour_tolerance)
        draw = px <= config.pixel_size  # single Gaussians have sigma 0
        rows.append(h.node_row[frontier[draw]])
        split = frontier[~draw]
        frontier = culling._concat_ranges(np.stack([h.child_lo[split], h.child_hi[split]],
                                                   axis=1))
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


_FIELDS = ("means", "cov_a", "cov_b", "opacity", "sh")  # the per-Gaussian device inputs


class _Buffers:
    """Device arrays of the originals (tree order) followed by the merged pool.

    Built once per scene: a frame's Gaussians are rows of these (the cut of the tree)
    and nothing is gathered per frame.
    """

    def __init__(self, splats: GaussianSplats, hierarchy: LodHierarchy) -> None:
        from bench.render import warp_backend as wb

        if splats.count_nonfinite():
            raise ValueError(
                f"splats contain {splats.count_nonfinite()} Gaussians with NaN/Inf values; "
                "drop them first (e.g. read_ply(..., drop_nonfinite=True))"
            )
        merged = hierarchy.merged
        m = len(hierarchy.order)
        # Originals uploaded in tree order without a subset copy (the pool rows get row
        # 0 for now), then the pool rows overwritten with the merged Gaussians.
        self.arrays = wb._SplatArrays(splats, np.r_[hierarchy.order,
                                                    np.zeros(merged.num, np.int64)],
                                      packed=True)
        views = {name: getattr(self.arrays, name).numpy()[m:] for name in _FIELDS}
        wb.fill_device_inputs(merged, views)
        views["opacity"][:] = hierarchy.merged_opacity  # may exceed 1 (flat-topped)
        # Depth ties: originals by their index (as the exact path), merged ones after them.
        self.original = np.r_[hierarchy.order, splats.num + np.arange(merged.num)]


def rows_to_runs(rows: np.ndarray) -> np.ndarray:  # [R] ascending -> [Q, 2] (start, end)
    """Ascending rows as runs of consecutive rows."""
    if len(rows) == 0:
        return np.zeros((0, 2), np.int64)
    new = np.flatnonzero(np.r_[True, np.diff(rows) != 1])
    ends = np.r_[new[1:], len(rows)] - 1
    return np.stack([rows[new], rows[ends] + 1], axis=1).astype(np.int64)


def render_cpu_lod(
    splats: GaussianSplats,
    camera: Camera,
    *,
    config: LodConfig,
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W]
    tile_size: int = K.TILE_SIZE,
):
    """Render with level of detail (approximate; see module doc)."""
    from bench.render.output import RenderOutput, resolve_sh_degree

    degree = resolve_sh_degree(splats.sh_degree, sh_degree)
    index = culling.spatial_index(splats)
    if len(index.order) == 0:
        return RenderOutput.empty(camera, background, occluded=occluder_depth is not None)
    hierarchy = lod_hierarchy(splats)
    buffers = getattr(hierarchy, "_buffers", None)
    if buffers is None:
        buffers = _Buffers(splats, hierarchy)
        object.__setattr__(hierarchy, "_buffers", buffers)
    rows = choose_rows(index, hierarchy, camera, culling.visible_blocks(index, camera), config)
    return culling.render_runs(buffers.arrays, rows_to_runs(rows), camera, degree=degree,
                               background=background, occluder_depth=occluder_depth,
                               tile_size=tile_size, original=buffers.original)
