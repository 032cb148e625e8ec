"""Level-of-detail rendering (opt-in, approximate): merged Gaussians for far blocks.

Off by default; turned on with ``render(..., lod=LodConfig(...))`` (``cpu`` backend)
or ``bench render --lod-pixels PX``, and then recorded in the render manifest.

Hierarchy (built once per splats object, on top of the block index of
:mod:`bench.render.culling`): each block is cut into ``g x g x g`` sub-cells for
``g`` in :data:`LOD_LEVELS` (8, 4, 2, 1), and the Gaussians of a sub-cell are
merged into one by moment matching (weights ``w = opacity x area``, area = pi x
product of the two largest standard deviations):

- mean = weighted mean of the means;
- covariance = weighted mean of ``Sigma_i + (mu_i - mu)(mu_i - mu)^T``;
- SH coefficients (all bands) = weighted mean;
- opacity = ``min(ALPHA_MAX, sum(w) / area(merged))`` (coverage-preserving: a
  sub-cell tiled by opaque Gaussians stays opaque, a sparse one fades).

Coarser levels are merged from the finer level with the same weights, which gives
the same moments as merging the originals. Per frame every visible block takes the
coarsest level whose sub-cell, seen from the camera (block side / g x focal length
/ distance to the block), is at most ``pixel_size`` pixels; blocks nearer than that
render their original Gaussians. The block-ordered originals and the merged pool sit
in one set of device arrays (uploaded once per scene), so a frame is a list of row
ranges of it, rendered by the exact path's driver (:func:`bench.render.culling.render_runs`).
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass

import numpy as np

from bench.render import constants as K
from bench.render import culling
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

LOD_LEVELS = (8, 4, 2, 1)  # sub-cells per block side, fine to coarse
_CHUNK = 262_144  # Gaussians merged per pass at the finest level (bounds temporary memory)


@dataclass(frozen=True)
class LodConfig:
    """Level-of-detail mode (approximate; the exact path is the default).

    Attributes:
        pixel_size: Largest projected side, in pixels, of a merged sub-cell; smaller
            is closer to the exact image and slower.
    """

    pixel_size: float = 1.0

    def __post_init__(self) -> None:
        if not (self.pixel_size > 0 and np.isfinite(self.pixel_size)):
            raise ValueError(f"LodConfig.pixel_size must be a positive number of pixels, "
                             f"got {self.pixel_size}")

    def to_json(self) -> dict:
        """This config as a JSON-ready dict (``mode``, ``levels`` and its fields)."""
        return {"mode": "lod", "levels": list(LOD_LEVELS), **asdict(self)}


@dataclass(frozen=True)
class LodHierarchy:
    """Merged Gaussians of every level (see module doc).

    Attributes:
        merged: all merged Gaussians, level-major, then block, then sub-cell.
        level_block_start: [L, B + 1] offsets of each (level, block) range in ``merged``.
        block_side: [B] largest side of each block's centre box.
    """

    merged: GaussianSplats
    level_block_start: np.ndarray
    block_side: np.ndarray


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


def _merge(starts: np.ndarray, w, mean, second, dc, rest):
    """Weighted sums per group (groups start at ``starts``; rows sorted by group)."""
    wsum = np.add.reduceat(w, starts)
    mu = np.add.reduceat(w[:, None] * mean, starts) / wsum[:, None]
    # E[x x^T] of the mixture, kept as a second moment so levels compose.
    m2 = np.add.reduceat(w[:, None, None] * second, starts) / wsum[:, None, None]
    d = np.add.reduceat(w[:, None] * dc, starts) / wsum[:, None]
    r = np.add.reduceat(w[:, None, None] * rest, starts) / wsum[:, None, None]
    return wsum, mu, m2, d, r


def _to_splats(wsum, mu, m2, dc, rest) -> GaussianSplats:
    from scipy.spatial.transform import Rotation

    cov = m2 - mu[:, :, None] * mu[:, None, :]
    cov = 0.5 * (cov + cov.transpose(0, 2, 1))
    lam, vec = np.linalg.eigh(cov)
    lam = np.maximum(lam, 1e-14)
    flip = np.linalg.det(vec) < 0
    vec[flip, :, 0] *= -1.0
    xyzw = Rotation.from_matrix(vec).as_quat()
    std = np.sqrt(lam)
    area = np.pi * std[:, 1] * std[:, 2]
    opacity = np.clip(wsum / area, 1e-6, K.ALPHA_MAX)
    f32 = np.float32
    return GaussianSplats(
        means=mu.astype(f32), quats=xyzw[:, [3, 0, 1, 2]].astype(f32),
        log_scales=np.log(std).astype(f32),
        opacity_logits=np.log(opacity / (1.0 - opacity)).astype(f32),
        sh_dc=dc.astype(f32), sh_rest=rest.astype(f32),
    )


def build_hierarchy(splats: GaussianSplats, index: culling.SpatialIndex) -> LodHierarchy:
    """Merge every block's Gaussians per sub-cell for each level of :data:`LOD_LEVELS`."""
    nb = index.num_blocks
    side = (index.hi - index.lo).max(axis=1) if nb else np.zeros(0)
    block_of = np.repeat(np.arange(nb), np.diff(index.block_start))
    finest = LOD_LEVELS[0]
    opacity = splats.opacities()
    parts = []  # finest level, built in chunks of whole blocks
    bounds = np.searchsorted(index.block_start, np.arange(0, len(index.order), _CHUNK))
    bounds = np.unique(np.r_[bounds, nb])
    for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True):
        a, b = index.block_start[b0], index.block_start[b1]
        rows = index.order[a:b]
        mean = splats.means[rows].astype(np.float64)
        ls = splats.log_scales[rows].astype(np.float64)
        std = np.sort(np.exp(ls), axis=1)
        w = opacity[rows] * np.pi * std[:, 1] * std[:, 2]
        second = _covariances(splats.quats[rows], ls) + mean[:, :, None] * mean[:, None, :]
        blk = block_of[a:b]
        key = _subcell_key(mean, index.lo[blk], index.hi[blk], blk, finest)
        perm = np.argsort(key, kind="stable")
        key = key[perm]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        merged = _merge(starts, w[perm], mean[perm], second[perm],
                        splats.sh_dc[rows][perm].astype(np.float64),
                        splats.sh_rest[rows][perm].astype(np.float64))
        parts.append((key[starts], *merged))
    level = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    level_splats, level_starts = [], []
    for g in LOD_LEVELS:
        key, wsum, mu, m2, dc, rest = level
        if g != finest:  # merge the previous level's sub-cells into coarser ones
            blk = key // finest ** 3
            key = _subcell_key(mu, index.lo[blk], index.hi[blk], blk, g)
            perm = np.argsort(key, kind="stable")
            key = key[perm]
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            wsum, mu, m2, dc, rest = _merge(starts, wsum[perm], mu[perm], m2[perm], dc[perm],
                                            rest[perm])
            key = key[starts] // g ** 3 * finest ** 3  # keep "block * finest^3" encoding
            level = [key, wsum, mu, m2, dc, rest]
        blk = key // finest ** 3
        level_starts.append(np.searchsorted(blk, np.arange(nb + 1)))
        level_splats.append(_to_splats(wsum, mu, m2, dc, rest))
    offsets = np.cumsum([0] + [s.num for s in level_splats])[:-1]
    merged = level_splats[0]
    for extra in level_splats[1:]:
        merged = GaussianSplats.concat(merged, extra)
    return LodHierarchy(merged=merged,
                        level_block_start=np.stack(level_starts) + offsets[:, None],
                        block_side=side)


def _subcell_key(mean, lo, hi, blk, g: int) -> np.ndarray:  # [N] int64 block * g^3 + cell
    rel = (mean - lo) / np.maximum(hi - lo, 1e-12)
    cell = np.clip((rel * g).astype(np.int64), 0, g - 1)
    return blk * g ** 3 + (cell[:, 0] * g + cell[:, 1]) * g + cell[:, 2]


def choose_levels(index: culling.SpatialIndex, hierarchy: LodHierarchy, camera: Camera,
                  blocks: np.ndarray, config: LodConfig) -> np.ndarray:  # [V] level or -1
    """Per visible block: index into :data:`LOD_LEVELS`, or -1 for its original Gaussians."""
    c = camera.position
    gap = np.maximum(np.maximum(index.lo[blocks] - c, c - index.hi[blocks]), 0.0)
    dist = np.linalg.norm(gap, axis=1)
    px = hierarchy.block_side[blocks] * max(camera.fx, camera.fy) / np.maximum(dist, 1e-9)
    need = px / config.pixel_size  # sub-cells per side needed
    level = np.full(len(blocks), -1, np.int64)
    for i in range(len(LOD_LEVELS) - 1, -1, -1):  # coarse to fine: keep the coarsest fit
        fits = (LOD_LEVELS[i] >= need) & (level < 0) & (dist > 0)
        level[fits] = i
    return level


_FIELDS = ("means", "cov_a", "cov_b", "opacity", "sh")  # the per-Gaussian device inputs


class _Buffers:
    """Device arrays of the block-ordered originals followed by the merged pool.

    Built once per scene: a frame's Gaussians are then runs of these rows (near blocks'
    originals, far blocks' merged level) and nothing is gathered per frame.
    """

    def __init__(self, splats: GaussianSplats, index: culling.SpatialIndex,
                 hierarchy: LodHierarchy) -> None:
        from bench.render import warp_backend as wb

        if splats.count_nonfinite():
            raise ValueError(
                f"splats contain {splats.count_nonfinite()} Gaussians with NaN/Inf values; "
                "drop them first (e.g. read_ply(..., drop_nonfinite=True))"
            )
        merged = hierarchy.merged
        self.pool_offset = m = len(index.order)
        # Originals uploaded in block order without a subset copy (the pool rows get row
        # 0 for now), then the pool rows overwritten with the merged Gaussians.
        self.arrays = wb._SplatArrays(splats, np.r_[index.order, np.zeros(merged.num, np.int64)],
                                      packed=True)
        views = {name: getattr(self.arrays, name).numpy()[m:] for name in _FIELDS}
        wb.fill_device_inputs(merged, views)
        # Depth ties: originals by their index (as the exact path), merged ones after them.
        self.original = np.r_[index.order, splats.num + np.arange(merged.num)]


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
        buffers = _Buffers(splats, index, hierarchy)
        object.__setattr__(hierarchy, "_buffers", buffers)
    blocks = culling.visible_blocks(index, camera)
    level = choose_levels(index, hierarchy, camera, blocks, config)
    near = blocks[level < 0]
    far, lv = blocks[level >= 0], level[level >= 0]
    pool = buffers.pool_offset
    starts = np.r_[index.block_start[near], pool + hierarchy.level_block_start[lv, far]]
    ends = np.r_[index.block_start[near + 1], pool + hierarchy.level_block_start[lv, far + 1]]
    keep = ends > starts
    runs = np.stack([starts[keep], ends[keep]], axis=1).astype(np.int64)
    return culling.render_runs(buffers.arrays, runs, camera, degree=degree,
                               background=background, occluder_depth=occluder_depth,
                               tile_size=tile_size, original=buffers.original)
