"""Level-of-detail rendering (opt-in, approximate): a tree of moment-matched Gaussians.

Off by default; turned on with ``render(..., lod=LodConfig(...))`` (``cpu`` backend)
or ``bench render --lod-pixels PX``, and then recorded in the render manifest.

Hierarchy (built once per splats object, on top of the block index of
:mod:`bench.render.culling`, cached with it): every block is the root of a 4-ary tree.
Each level cuts every node in two twice, at the median of the feature its members
spread most in (position, and the surface normal scaled by :data:`NORMAL_SCALE`, so a
node stops growing across a wall meeting the floor), or, where its members lie in two
layers along their mean normal (a light panel 1 cm under the ceiling), at the gap
between the layers (:func:`layer_cuts`); the last level is single Gaussians. Every node
with more than one member is merged into one Gaussian by moment matching (weights
``w = opacity x area``, area = pi x product of the two largest standard deviations),
straight from its members:

- mean = weighted mean of the means;
- covariance = weighted mean of ``Sigma_i + (mu_i - mu)(mu_i - mu)^T``;
- SH coefficients (all bands) = weighted mean;
- opacity from coverage (:func:`coverage_opacity`): its integrated alpha equals the
  light its members absorb over its footprint, so a surface tiled by near-opaque
  Gaussians stays opaque (an effective opacity above 1 gives a flat-topped footprint;
  the per-pixel clamp at ``ALPHA_MAX`` still applies) and a sparse node fades.

Per frame (:func:`bench.render.warp_lod.frame_cut`, a native kernel; :func:`choose_rows` is its
numpy reference) the tree is cut top-down from the visible blocks: a node is drawn merged
when its own largest standard deviation, projected at its block's distance, is at most
``pixel_size`` pixels (inflated by the node's colour spread over ``colour_tolerance``);
else its children are tested; single Gaussians are drawn as they are. Merged nodes on the
far side of a layered cut, seen from the camera, are sorted behind the near layer
(:func:`far_layer_bias`). A merged node's drawn extent ends where its alpha falls to
:data:`MERGED_ALPHA_MIN` (:func:`merged_levels`). The originals (tree order) and the
merged pool sit in one set of device arrays (uploaded once per scene), so a frame is a
list of rows of it, rendered by the exact path's driver
(:func:`bench.render.culling.render_runs`). With a tiny ``pixel_size``
every original is drawn and the image equals the exact one bit for bit. The merged pool is
approximate by construction, so it is also projected more cheaply: a fisheye's angle from
the axis by a vector atan2 (within 2.6e-7 rad), and its colour at
``LodConfig.merged_sh_degree`` when that is set.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass

import numpy as np

from bench.render import constants as K
from bench.render import culling
from bench.render.lod_nodes import NODE_DTYPE, layer_codes
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

SPLITS_PER_LEVEL = 2  # binary median splits between two levels: 4 children per node
HIERARCHY = "kd-moment-layers/3"  # id of the hierarchy written into manifests
NORMAL_SCALE = 0.1  # metres one unit of normal counts as when the tree picks a split feature
LAYER_MIN_MEMBERS = 8  # members a node needs before the tree looks for two layers in it
LAYER_GAP = 3.0  # gap along a node's mean normal / its two sides' summed stds: two layers
LAYER_BIAS = 6.0  # far layer's sort-key push, in lateral standard deviations of its node
# A merged Gaussian's drawn extent ends where its alpha falls to this (an original's, as in
# the exact path, at ALPHA_MIN = 1/255), or at half its peak for one fainter than twice it.
# Measured on the 3 M room, 128 px fisheye, 8 poses, pixel_size 0.8 / colour 0.05: PSNR
# 35.05 / 35.07 / 35.08 / 35.07 / 34.99 / 34.67 dB at 1/255, 1/32, 1/16, 1/8, 1/4, 1/2, blend
# time 7.5 -> 5.5 ms at 1/8 (a flat-topped node's faint rim is under its neighbours').
MERGED_ALPHA_MIN = 1.0 / 8.0
CUTS = ("native", "reference")  # the per-frame cut: warp_lod's kernel / choose_rows (numpy)
CUT = "native"
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
        merged_sh_degree: Spherical-harmonics degree a merged node's colour is evaluated
            at (0: its mean colour, view-independent); None: every band the originals
            use. Originals are always coloured as in the exact path.
    """

    pixel_size: float = 0.5
    colour_tolerance: float | None = 0.05
    merged_sh_degree: int | None = None

    def __post_init__(self) -> None:
        if not (self.pixel_size > 0 and np.isfinite(self.pixel_size)):
            raise ValueError(f"LodConfig.pixel_size must be a positive number of pixels, "
                             f"got {self.pixel_size}")
        tol = self.colour_tolerance
        if tol is not None and not (tol > 0 and np.isfinite(tol)):
            raise ValueError(f"LodConfig.colour_tolerance must be a positive rgb standard "
                             f"deviation or None (colour ignored), got {tol}")
        deg = self.merged_sh_degree
        if deg is not None and (isinstance(deg, bool) or not isinstance(deg, int | np.integer)
                                or not 0 <= deg <= 3):
            raise ValueError(f"LodConfig.merged_sh_degree must be an SH degree 0..3 or None "
                             f"(the originals' bands), got {deg!r}")

    def to_json(self) -> dict:
        """This config as a JSON-ready dict (``mode``, ``hierarchy`` and its fields)."""
        return {"mode": "lod", "hierarchy": HIERARCHY, "branching": 2 ** SPLITS_PER_LEVEL,
                "normal_scale": NORMAL_SCALE, "footprint_area": FOOTPRINT_AREA,
                "layer_gap": LAYER_GAP, "layer_bias": LAYER_BIAS,
                "merged_alpha_min": MERGED_ALPHA_MIN, **asdict(self)}


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
        nodes: [sum K_k] one 32-byte record per node
            (:data:`~bench.render.lod_nodes.NODE_DTYPE`; what the per-frame cut reads, one
            cache line per two siblings), seen through:
        child_lo, child_hi: global ids of each node's children are
            ``child_lo[j]:child_hi[j]`` (the next level; empty for single Gaussians).
        node_row: device row drawn for the node: its position in ``order`` for single
            Gaussians, ``M +`` its index in ``merged`` otherwise.
        node_sigma: largest standard deviation of the node's Gaussian (0 for single
            Gaussians: never merged).
        node_mixed: the node's members lie in two layers (a layered cut split it or one
            of its halves): never drawn merged, its children are.
        node_colour_std: weighted standard deviation of the members' rgb (0 for single
            Gaussians).
        node_block: [sum K_k] block of each node.
        merged: the merged Gaussians of every node with more than one member (opacity
            clipped to what the storage form holds).
        merged_opacity: [P] their effective opacity (:func:`coverage_opacity`; may exceed
            1), the value the renderer uses.
        merged_layer: [P] the layered split (:func:`layer_cuts`) nearest above each merged
            Gaussian, -1 for none; ``merged_side`` [P] its side of that split's gap;
            ``merged_covered`` [P] its centre lies in the other side's box.
        layer_mean, layer_thin: [Q, 3] every layered split's mean and thin axis;
            ``layer_gap`` [Q] its gap along the axis, ``layer_spread`` [Q] its lateral std.
    """

    order: np.ndarray
    level_start: tuple[np.ndarray, ...]
    level_offset: np.ndarray
    nodes: np.ndarray
    node_block: np.ndarray
    merged: GaussianSplats
    merged_opacity: np.ndarray
    merged_layer: np.ndarray
    merged_side: np.ndarray
    merged_covered: np.ndarray
    layer_mean: np.ndarray
    layer_thin: np.ndarray
    layer_gap: np.ndarray
    layer_spread: np.ndarray

    # Views of the node records (one field of ``nodes`` each; documented above).
    child_lo = property(lambda self: self.nodes["child_lo"])  # [sum K_k] int32
    child_hi = property(lambda self: self.nodes["child_hi"])  # [sum K_k] int32
    node_row = property(lambda self: self.nodes["row"])  # [sum K_k] int32
    node_sigma = property(lambda self: self.nodes["sigma"])  # [sum K_k] float64
    node_mixed = property(lambda self: self.nodes["mixed"])  # [sum K_k] bool
    node_colour_std = property(lambda self: self.nodes["colour_std"])  # [sum K_k] float64


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
    order, cut = _median_order(features, order, starts)
    return order, np.union1d(starts, cut[np.diff(starts) > 1])


def _median_order(features: np.ndarray, order: np.ndarray,
                  starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [M], [K]
    """:func:`median_split`'s reordered rows and each segment's cut position."""
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
    return order[perm], starts[:-1] + sizes // 2


@dataclass(frozen=True)
class LayerCuts:
    """Segments whose members lie in two separate layers (see :func:`layer_cuts`).

    Attributes:
        segments: [Q] ids of the layered segments.
        positions: [R] positions in ``order`` of their members; ``rows`` their rows
            sorted along each segment's thin axis (segment by segment).
        owner: [R] index into ``segments`` of each member's segment.
        side: [R] -1 for members before the largest gap, +1 after it.
        cut: [Q] position in ``order`` of each segment's first member after the gap.
        mean, thin: [Q, 3] each segment's mean and unit axis (its members' mean normal).
        gap: [Q] coordinate along ``thin`` (from ``mean``) of the gap's middle.
        spread: [Q] lateral standard deviation (the two larger axes together).
        box_lo, box_hi: [Q, 2, 3] bounding box of each side's member centres (side -1
            first).
    """

    segments: np.ndarray
    positions: np.ndarray
    rows: np.ndarray
    owner: np.ndarray
    side: np.ndarray
    cut: np.ndarray
    mean: np.ndarray
    thin: np.ndarray
    gap: np.ndarray
    spread: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray


def layer_cuts(points: np.ndarray, order: np.ndarray,  # [N, 7] split features; [M]
               starts: np.ndarray) -> LayerCuts | None:  # [K + 1]
    """Segments whose members form two layers along their mean normal, or None.

    ``points`` are :func:`split_features` (position, scaled normal, thickness). A segment
    of at least :data:`LAYER_MIN_MEMBERS` members whose normals agree (their mean keeps
    90 % of their length) is layered when the widest gap between its members'
    coordinates along that mean normal is more than :data:`LAYER_GAP` times the summed
    standard deviations of the two sides (each side at least 2 members) and than the
    members' mean thickness (smallest std): a light panel or a poster 1 cm in front of a
    wall, a table top above the floor. Moment matching would average the layers' colours
    into one Gaussian (a grey panel), so such a segment is cut at the gap instead of at
    its median.
    """
    sizes = np.diff(starts)
    big = np.flatnonzero(sizes >= LAYER_MIN_MEMBERS)
    if len(big) == 0:
        return None
    counts = sizes[big]
    positions = culling._concat_ranges(np.stack([starts[big], starts[big + 1]], axis=1))
    sub = np.r_[0, np.cumsum(counts)[:-1]]
    seg = np.repeat(np.arange(len(big)), counts)
    p = points[order[positions], :3].astype(np.float64)
    mean = np.add.reduceat(p, sub, axis=0) / counts[:, None]
    d = p - mean[seg]
    # The thin axis is the members' mean normal: the covariance's own thin axis tilts
    # where a panel covers part of the node (position and layer correlate there).
    unit = points[order[positions], 3:6].astype(np.float64)
    unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-30)
    normal = np.add.reduceat(unit, sub, axis=0)
    length = np.linalg.norm(normal, axis=1)
    thin = normal / np.maximum(length, 1e-30)[:, None]
    aligned = length > 0.9 * counts  # one orientation (not a corner or a sphere)
    t = np.einsum("ij,ij->i", d, thin[seg])
    perm = np.lexsort((t, seg))
    ts = t[perm]
    last = np.r_[sub[1:], len(ts)] - 1
    gap = np.r_[np.diff(ts), 0.0]
    gap[last] = 0.0  # no gap across segments
    widest = np.maximum.reduceat(gap, sub)
    at = np.where(gap == widest[seg], np.arange(len(ts)), len(ts))
    first_all = np.minimum.reduceat(at, sub)  # last member before each widest gap
    # Thickness of the two sides: their standard deviations along the thin axis.
    c1, c2 = np.r_[0.0, np.cumsum(ts)], np.r_[0.0, np.cumsum(ts * ts)]
    ends = np.r_[sub[1:], len(ts)]

    def side_std(lo, hi):
        n = np.maximum(hi - lo, 1)
        avg = (c1[hi] - c1[lo]) / n
        return np.sqrt(np.maximum((c2[hi] - c2[lo]) / n - avg * avg, 0.0))

    thickness = side_std(sub, first_all + 1) + side_std(first_all + 1, ends)
    # and wider than the members are thick (noise inside one surface is not a gap)
    own = np.add.reduceat(points[order[positions], 6].astype(np.float64), sub) / counts
    layered = aligned & (widest > LAYER_GAP * thickness) & (widest > LAYER_GAP * own) \
        & (np.minimum(first_all + 1 - sub, ends - first_all - 1) >= 2)
    if not layered.any():
        return None
    first = first_all[layered]
    keep = layered[seg]
    owner = (np.cumsum(layered) - 1)[seg[keep]]
    before = (np.arange(len(ts)) - sub[seg])[keep] <= (first - sub[layered])[owner]
    sides = p[perm][keep]  # layered members, sorted along the axis segment by segment
    side_start = np.r_[0, np.cumsum(counts[layered])[:-1]]
    # Lateral spread of the layered segments only (their covariances' two larger axes).
    dk = d[keep]
    cov = np.add.reduceat(dk[:, :, None] * dk[:, None, :], side_start, axis=0) \
        / counts[layered][:, None, None]
    lam = np.linalg.eigvalsh(cov)
    bounds = np.stack([side_start, side_start + (first - sub[layered]) + 1], axis=1).ravel()
    return LayerCuts(
        box_lo=np.minimum.reduceat(sides, bounds, axis=0).reshape(-1, 2, 3),
        box_hi=np.maximum.reduceat(sides, bounds, axis=0).reshape(-1, 2, 3),
        segments=big[layered], positions=positions[keep], rows=order[positions[perm]][keep],
        owner=owner,
        side=np.where(before, -1, 1).astype(np.int8),
        cut=starts[big[layered]] + (first - sub[layered]) + 1, mean=mean[layered],
        thin=thin[layered], gap=0.5 * (ts[first] + ts[first + 1]),
        spread=np.sqrt(lam[:, 1] + lam[:, 2]))


_LAYER_FIELDS = {"mean": (3,), "thin": (3,), "gap": (), "spread": (), "box_lo": (2, 3),
                 "box_hi": (2, 3)}  # LayerCuts fields kept per cut, and their shapes


def split_segments(features: np.ndarray, order: np.ndarray,  # [N, F], [M]
                   starts: np.ndarray):  # [K + 1]
    """One split of the tree: layered segments at their gap, the others at the median.

    Returns the reordered rows, the new segment starts and the :class:`LayerCuts` (or
    None).
    """
    order, cut = _median_order(features[:, :6], order, starts)
    layers = layer_cuts(features, order, starts)
    if layers is not None:
        order[layers.positions] = layers.rows
        cut[layers.segments] = layers.cut
    return order, np.union1d(starts, cut[np.diff(starts) > 1]), layers


def split_features(splats: GaussianSplats, *,
                   normal_scale: float) -> np.ndarray:  # [N, 7] float32
    """Position, scaled normal and thickness of every Gaussian (the tree's split space).

    The first six columns are what median cuts choose from; the seventh, the smallest
    standard deviation, is only read by :func:`layer_cuts`.

    The normal is the axis of the smallest scale, its sign fixed so that its largest
    component is positive; ``normal_scale`` is the metres one unit of normal counts as,
    so surfaces of different orientation (a wall meeting the floor, a table's top and
    edge) are split apart before a node grows across both. Colour is not a split
    feature (splitting a noisy surface by colour gives children that overlap in space),
    nor is the plane offset ``n . x`` (measured: the normals' jitter times metres of
    position makes it noise, and the tree doubled in cut size).
    """
    from bench.render.warp_backend import _quat_to_rotmat

    out = np.empty((splats.num, 7), np.float32)
    for start in range(0, splats.num, _CHUNK):
        rows = slice(start, start + _CHUNK)
        q = splats.quats[rows].astype(np.float64)
        rot = _quat_to_rotmat(q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30))
        thin = np.argmin(splats.log_scales[rows], axis=1)
        normal = rot[np.arange(len(thin)), :, thin]
        big = np.argmax(np.abs(normal), axis=1)
        normal *= np.sign(normal[np.arange(len(big)), big])[:, None]
        out[rows, :3] = splats.means[rows]
        out[rows, 3:6] = normal_scale * normal
        out[rows, 6] = np.exp(splats.log_scales[rows].min(axis=1))
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
# a / sqrt(12), area 12 s1 s2; more than that makes the flat top reach the corners where
# merged nodes meet (with 12 they showed as see-through dots). Measured with the layered
# tree on the 3 M room, 128 px fisheye, 4 poses, PSNR at pixel_size 1.5 / 0.7
# (colour_tolerance 0.05): 16: 28.5 / 31.9 dB, 24: 31.3 / 34.9, 32: 32.1 / 35.7,
# 36: 31.5 / 34.7, 48: 29.0 / 31.1 (a bigger flat top bleeds over its neighbours' edges).
FOOTPRINT_AREA = 32.0


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
    """Split every block into a 4-ary tree of median / layer cuts, merge each node (module doc)."""
    m = len(index.order)
    features = split_features(splats, normal_scale=NORMAL_SCALE)
    order, starts = index.order.copy(), index.block_start.astype(np.int64)
    level_start = [starts]
    # Per original: the latest layered split above it and its side (-1 / +1) of the gap.
    layer_of = np.full(splats.num, -1, np.int32)
    side_of = np.zeros(splats.num, np.int8)
    node_layer, node_side = [layer_of[order[starts[:-1]]]], [side_of[order[starts[:-1]]]]
    layer_parts = {name: [] for name in _LAYER_FIELDS}  # per layered cut, in cut order
    num_cuts = 0
    node_mixed = []  # per level: nodes whose members lie in two layers (never drawn merged)
    while len(starts) - 1 < m:  # until every node is a single Gaussian
        parent = starts
        mixed = np.zeros(len(parent) - 1, bool)
        for _ in range(SPLITS_PER_LEVEL):
            segment_start = starts[:-1]
            order, starts, layers = split_segments(features, order, starts)
            if layers is not None:
                mixed[np.searchsorted(parent, segment_start[layers.segments], side="right")
                      - 1] = True
                layer_of[layers.rows] = num_cuts + layers.owner
                side_of[layers.rows] = layers.side
                num_cuts += len(layers.segments)
                for name, part in layer_parts.items():
                    part.append(getattr(layers, name))
        node_mixed.append(mixed)
        level_start.append(starts)
        node_layer.append(layer_of[order[starts[:-1]]])
        node_side.append(side_of[order[starts[:-1]]])
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
    if max(level_offset[-1], m + sum(map(len, multi))) >= 2 ** 31:  # pragma: no cover
        raise ValueError(f"{splats.num} Gaussians are more than one LOD tree holds; "
                         "split the scene")
    nodes = np.zeros(level_offset[-1], NODE_DTYPE)
    nodes["row"] = np.concatenate([s[:-1] for s in level_start])  # single: position in order
    merged_ids = np.concatenate([level_offset[k] + j for k, j in enumerate(multi)])
    nodes["row"][merged_ids] = m + np.arange(len(merged_ids))
    nodes["sigma"][merged_ids] = np.concatenate(sigma) if sigma else np.zeros(0)
    nodes["colour_std"][merged_ids] = (np.concatenate(colour_std) if colour_std
                                       else np.zeros(0))
    nodes["mixed"] = np.concatenate([*node_mixed, np.zeros(len(starts) - 1, bool)])
    node_block = (np.searchsorted(index.block_start, np.concatenate(
        [s[:-1] for s in level_start]), side="right") - 1).astype(np.int32)
    for k in range(len(level_start) - 1):
        s, nxt = level_start[k], level_start[k + 1]
        ids = slice(level_offset[k], level_offset[k + 1])
        nodes["child_lo"][ids] = level_offset[k + 1] + np.searchsorted(nxt, s[:-1])
        nodes["child_hi"][ids] = level_offset[k + 1] + np.searchsorted(nxt, s[1:])
    layer = {name: np.concatenate(part) if part else np.zeros((0, *_LAYER_FIELDS[name]))
             for name, part in layer_parts.items()}
    merged_layer = np.concatenate(node_layer)[merged_ids].astype(np.int32)
    merged_side = np.concatenate(node_side)[merged_ids].astype(np.int8)
    # A far-side node is pushed back only where the other side lies over it (its centre
    # within one of its own stds of that side's box), not beside a panel, where the
    # panel's rim would win.
    covered = np.zeros(len(merged_ids), bool)
    has = np.flatnonzero(merged_layer >= 0)
    if len(has):
        q, other = merged_layer[has], (merged_side[has] < 0).astype(np.int64)
        lo, hi, thin = layer["box_lo"][q, other], layer["box_hi"][q, other], layer["thin"][q]
        centre = pool.means[has].astype(np.float64)
        middle = 0.5 * (lo + hi)  # the centre moved onto the other side's plane
        centre -= thin * np.einsum("ij,ij->i", centre - middle, thin)[:, None]
        reach = np.concatenate(sigma)[has, None] if sigma else 0.0  # node's largest std
        covered[has] = ((centre >= lo - reach) & (centre <= hi + reach)).all(axis=1)
    nodes["layered"][merged_ids] = layer_codes(merged_layer, merged_side, covered) >= 0
    return LodHierarchy(order=order, level_start=tuple(level_start), level_offset=level_offset,
                        nodes=nodes, node_block=node_block, merged=pool,
                        merged_opacity=np.concatenate(opacity).astype(np.float32) if opacity
                        else np.zeros(0, np.float32),
                        merged_layer=merged_layer, merged_side=merged_side,
                        merged_covered=covered,
                        layer_mean=layer["mean"], layer_thin=layer["thin"],
                        layer_gap=layer["gap"], layer_spread=layer["spread"])


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
    tested. A node whose members lie in two layers is never drawn merged (its colour
    would mix them). Single Gaussians are always drawn as they are.
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
        draw = (px <= config.pixel_size) & ~h.node_mixed[frontier]  # singles: sigma 0
        rows.append(h.node_row[frontier[draw]])
        split = frontier[~draw]
        frontier = culling._concat_ranges(np.stack([h.child_lo[split], h.child_hi[split]],
                                                   axis=1))
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def far_layer_bias(hierarchy: LodHierarchy, camera: Camera,
                   rows: np.ndarray) -> np.ndarray:  # [R] device rows -> [R] float32 metres
    """Depth-sort push of each drawn row: the merged nodes on a layered split's far side.

    Gaussians are blended in the order of their centres' distance, which for two merged
    layers 1 cm apart but centimetres wide is a coin toss per pair (a ceiling node drawn
    over the light panel in front of it). A merged node whose nearest layered split
    (:func:`layer_cuts`) has the camera on the other side of the gap is pushed back by
    :data:`LAYER_BIAS` times that split's lateral std, behind the near layer's nodes,
    where the near side lies over it (``merged_covered``).
    Originals are never pushed (a tiny ``pixel_size`` stays the exact image).
    """
    h, m = hierarchy, len(hierarchy.order)
    bias = np.zeros(len(rows), np.float32)
    merged = rows >= m
    layer = np.full(len(rows), -1, np.int32)
    layer[merged] = h.merged_layer[rows[merged] - m]
    hit = np.flatnonzero(layer >= 0)
    if len(hit):
        q = layer[hit]
        offset = np.einsum("ij,ij->i", camera.position[None, :] - h.layer_mean[q],
                           h.layer_thin[q]) - h.layer_gap[q]
        far = (np.sign(offset) * h.merged_side[rows[hit] - m] < 0) \
            & h.merged_covered[rows[hit] - m]
        bias[hit[far]] = LAYER_BIAS * h.layer_spread[q[far]]
    return bias


_FIELDS = ("means", "cov_a", "cov_b", "opacity", "sh")  # the per-Gaussian device inputs


class _Buffers:
    """Device arrays of the originals (tree order) followed by the merged pool.

    Built once per scene: a frame's Gaussians are rows of these (the cut of the tree)
    and nothing is gathered per frame.
    """

    def __init__(self, splats: GaussianSplats, hierarchy: LodHierarchy) -> None:
        import warp as wp

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
        # The projection's extent level ln(opacity / alpha at the rim): the originals' as
        # the exact path computes it, the merged ones' rim at MERGED_ALPHA_MIN.
        culling._levels(self.arrays).numpy()[m:] = merged_levels(hierarchy.merged_opacity)
        # Depth ties: originals by their index (as the exact path), merged ones after them.
        self.original = np.r_[hierarchy.order, splats.num + np.arange(merged.num)]
        # Per row: its sort-key push this frame (far_layer_bias; read for drawn rows only).
        self.row_bias = wp.zeros(self.arrays.num, dtype=float, device=wb.DEVICE)
        self.row_bias_np = self.row_bias.numpy()


def merged_levels(opacity: np.ndarray) -> np.ndarray:  # [P] effective opacity -> [P] float32
    """``ln(opacity / rim alpha)`` of merged Gaussians (the projection's extent level).

    The rim at :data:`MERGED_ALPHA_MIN`, at half the peak for ones fainter than twice
    that, never beyond the exact path's rim (``ALPHA_MIN``).
    """
    o = np.asarray(opacity, np.float64)
    with np.errstate(divide="ignore"):
        exact = np.log(o / K.ALPHA_MIN)
        return np.minimum(exact, np.maximum(np.log(o / MERGED_ALPHA_MIN), np.log(2.0))
                          ).astype(np.float32)


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
    merged_degree = degree if config.merged_sh_degree is None else int(config.merged_sh_degree)
    common = dict(degree=degree, background=background, occluder_depth=occluder_depth,
                  tile_size=tile_size, original=buffers.original, gather=True,
                  merged=(len(hierarchy.order), merged_degree))
    if CUT not in CUTS:  # pragma: no cover - a developer's switch, not a user input
        raise ValueError(f"lod.CUT must be one of {CUTS}, got {CUT!r}")
    if CUT == "reference":
        rows = choose_rows(index, hierarchy, camera, culling.visible_blocks(index, camera),
                           config)
        buffers.row_bias_np[rows] = far_layer_bias(hierarchy, camera, rows)
        return culling.render_runs(buffers.arrays, rows_to_runs(rows), camera,
                                   key_bias=buffers.row_bias, **common)
    from bench.render import warp_lod

    tree = getattr(hierarchy, "_tree", None)
    if tree is None:
        tree = warp_lod.TreeArrays(hierarchy, index, buffers.row_bias)
        object.__setattr__(hierarchy, "_tree", tree)
    rows = warp_lod.frame_cut(tree, camera, pixel_size=config.pixel_size,
                              colour_tolerance=config.colour_tolerance, layer_bias=LAYER_BIAS)
    return culling.render_runs(buffers.arrays, None, camera, rows=rows,
                               key_bias=buffers.row_bias, **common)
