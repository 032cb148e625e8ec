"""Find the table in a raw scan and register the scan into the bench's world frame.

Pipeline (:func:`register_scan`), every random draw from one ``numpy.random.Generator``:

1. **Points**: Gaussian centres with opacity >= ``min_opacity``, weighted by
   opacity; a uniform random subset of at most ``max_points`` is used for the
   search (the final fit uses every Gaussian). Scan size ``diameter`` = length of
   the 2nd-98th percentile box diagonal; all distances scale with it.
2. **Planes**: sequential RANSAC. Each round draws ``iterations`` hypotheses
   from a random seed point and two of its ``neighbours`` nearest neighbours
   (local sampling: a table holding 10 % of the scan is found in a few hundred
   draws), scores them by the opacity-weighted inlier mass (distance <
   ``inlier_fraction * diameter``) on a scoring subset, refines the best by
   weighted least squares (smallest principal axis of the inliers, twice), then
   removes its inliers and repeats, ``planes`` times. With ``up`` given only
   hypotheses within ``max_tilt_deg`` of it are drawn.
3. **Patches**: each plane's inliers (flat Gaussians only when their own normal,
   the shortest axis, is within 45 degrees of the plane's: walls and box sides
   crossing the plane stay out) are gridded in the plane (cell
   ``cell_fraction * diameter``) and split into 8-connected components. A patch
   counts when it holds >= ``min_patch_fraction`` of the scan mass and stands
   out of its surroundings (its mass / the mass in two equally thick slabs just
   above and below over the same cells >= ``min_contrast``: a plane, not a
   slice through a volume).
4. **Table**: the patch with the largest ``mass / (1 + (distance to the scan's
   weighted median / (0.25 diameter))^2)`` among the *two-sided* patches (scan
   mass both above and below its footprint: a floor has nothing below, a
   ceiling nothing above); if none is two-sided, the best one-sided patch with
   a warning. ``near`` (``--table-center``) picks the patch nearest that point.
5. **Fit**: weighted least-squares plane on every Gaussian within the inlier
   distance over the patch's cells (twice); in the plane, the dense core of those
   inliers less thin side fringes, its ``cv2.minAreaRect`` yaw, and the sides where
   the opacity-weighted density across each falls to a quarter of its median
   (:func:`density_edges`; never past the points): centre, side lengths, yaw. Long
   side = table x.
6. **Gravity sign** (``up`` decides when given): large planes parallel to the
   table (>= 30 % of its mass) on both sides -> the nearer side is the floor
   (tables stand ~0.75 m above a floor and ~1.5 m or more below a ceiling); on
   one side only -> that side is the floor; none -> more mass in the slab just
   above the footprint (objects rest on a table) than below; the rule used is
   recorded.
7. **Registration**: ``world_from_splat = [[s R, t], [0, 1]]`` with the rows of
   ``R`` the table's long axis, short axis and up, ``t`` putting the rectangle
   centre at (0, 0, ``table_height``). Scale ``s`` from ``--table-size W D``
   (mean of W / long side and D / short side), ``--known-distance P1 P2 M``
   (M / |P1 - P2|), else 1 with a warning.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from bench.errors import BenchError, count_noun
from bench.geometry import Similarity
from bench.scene.bundle import TableSpec
from bench.scene.gaussians import GaussianSplats

TOOL = "scene-init/1"


class RegistrationWarning(UserWarning):
    """Registration finished but a result needs a human look (unknown scale, one-sided table)."""


class NoTableError(BenchError):
    """No table-like plane was found; the message says what was searched and how to fix it."""


@dataclass(frozen=True)
class RegisterConfig:
    """Parameters of the table search (the single source of their defaults).

    Attributes:
        seed: Seed of the ``numpy.random.Generator`` used for subsampling and RANSAC.
        max_points: Gaussians used for the plane search (uniform random subset).
        min_opacity: Gaussians below this opacity are ignored (floaters, haze).
        planes: Planes extracted by sequential RANSAC.
        iterations: Hypotheses per plane.
        neighbours: Nearest neighbours a hypothesis' second and third point come from.
        score_points: Points each hypothesis is scored on.
        inlier_fraction: Inlier distance as a fraction of the scan diameter.
        cell_fraction: Patch grid cell as a fraction of the scan diameter.
        min_patch_fraction: Smallest patch mass, fraction of the scan's mass.
        min_contrast: Patch mass over the mass of the slabs beside it.
        two_sided_fraction: Mass above and below a footprint (fraction of the
            patch mass) that makes a patch two-sided.
        max_tilt_deg: Largest tilt from ``up`` when ``up`` is given.
        min_gaussians: Fewest usable Gaussians a scan must have.
    """

    seed: int = 0
    max_points: int = 120_000
    min_opacity: float = 0.1
    planes: int = 10
    iterations: int = 300
    neighbours: int = 24
    score_points: int = 10_000
    inlier_fraction: float = 0.004
    cell_fraction: float = 0.015
    min_patch_fraction: float = 0.01
    min_contrast: float = 5.0
    two_sided_fraction: float = 0.03
    max_tilt_deg: float = 15.0
    min_gaussians: int = 100

    def __post_init__(self) -> None:
        for name in ("max_points", "planes", "iterations", "neighbours", "score_points",
                     "min_gaussians"):
            if int(getattr(self, name)) < 1:
                raise BenchError(f"RegisterConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("inlier_fraction", "cell_fraction", "min_patch_fraction", "min_contrast",
                     "max_tilt_deg"):
            if not float(getattr(self, name)) > 0:
                raise BenchError(f"RegisterConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.seed < 0:
            raise BenchError(f"seed must be a non-negative integer, got {self.seed}")


@dataclass(frozen=True)
class PlanePatch:
    """One connected planar patch found by RANSAC (splat / input coordinates).

    Attributes:
        normal: [3] unit normal.
        offset: Plane ``normal . p = offset``.
        mass: Opacity-weighted inlier mass (search subset).
        count: Inlier Gaussians (search subset).
        centroid: [3] weighted centroid of the patch.
        size: (long, short) side lengths of its minimum-area rectangle.
        above: Mass above the footprint (along ``normal``) / patch mass.
        below: Mass below the footprint / patch mass.
        contrast: Patch mass / mass of the slabs beside it.
        plane_index: Which RANSAC plane it came from.
    """

    normal: np.ndarray
    offset: float
    mass: float
    count: int
    centroid: np.ndarray
    size: tuple[float, float]
    above: float
    below: float
    contrast: float
    plane_index: int
    cells: np.ndarray = field(repr=False, default=None)  # [G, G] bool footprint in plane grid
    grid: tuple = field(repr=False, default=None)  # (origin2d, e1, e2, cell, shape)

    def two_sided(self, fraction: float) -> bool:
        """True when at least ``fraction`` of the points lie on each side of the plane."""
        return self.above >= fraction and self.below >= fraction

    def tilt_deg(self, up: np.ndarray) -> float:
        """Angle between the plane normal and ``up``, degrees in [0, 90]."""
        return float(np.degrees(np.arccos(min(1.0, abs(float(self.normal @ up))))))

    def summary(self, up: np.ndarray | None = None) -> dict:
        """The plane candidate as rounded JSON (normal, offset, size, sides; tilt given ``up``)."""
        out = {"normal": self.normal.round(6).tolist(), "offset": round(self.offset, 6),
               "mass": round(self.mass, 3), "count": self.count,
               "centroid": self.centroid.round(6).tolist(),
               "size": [round(v, 6) for v in self.size], "above": round(self.above, 4),
               "below": round(self.below, 4), "contrast": round(self.contrast, 3),
               "plane": self.plane_index}
        if up is not None:
            out["tilt_deg"] = round(self.tilt_deg(up), 3)
        return out


@dataclass(frozen=True)
class TableFit:
    """The fitted table in input coordinates.

    Attributes:
        up: [3] unit up direction (table normal, gravity sign resolved).
        center: [3] centre of the footprint rectangle on the plane.
        long_axis: [3] unit direction of the rectangle's long side.
        size: (long, short) side lengths (input units).
        rms: RMS distance of the inliers to the plane (input units).
        inliers: Number of Gaussians in the final fit.
        gravity_rule: Which rule set the up sign.
        two_sided: Whether the patch had scan mass on both sides.
        patches: Every patch considered (for the manifest).
    """

    up: np.ndarray
    center: np.ndarray
    long_axis: np.ndarray
    size: tuple[float, float]
    rms: float
    inliers: int
    gravity_rule: str
    two_sided: bool
    patches: tuple[PlanePatch, ...] = ()
    diameter: float = 1.0

    @property
    def short_axis(self) -> np.ndarray:  # [3]
        """Unit axis across the table (up x long axis)."""
        return np.cross(self.up, self.long_axis)

    def rotation(self) -> np.ndarray:  # [3, 3] world_from_input rotation (rows: x, y, z)
        """World-from-input rotation [3, 3] with rows long axis, short axis, up."""
        return np.stack([self.long_axis, self.short_axis, self.up])


# ----------------------------------------------------------------- helpers
def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def plane_basis(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [3] -> ([3], [3])
    """Two unit in-plane axes ``(e1, e2)``.

    ``e1`` = input +x projected into the plane (+y when x is within 25 degrees of the
    normal), ``e2 = normal x e1``. ``--table-yaw`` is measured from ``e1``.
    """
    normal = _unit(normal)
    ref = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = _unit(ref - (ref @ normal) * normal)
    return e1, np.cross(normal, e1)


def weighted_plane(points: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Weighted least-squares plane: (unit normal [3], offset, rms distance)."""
    w = weights / weights.sum()
    centroid = w @ points
    d = points - centroid
    cov = (d * w[:, None]).T @ d
    _, vecs = np.linalg.eigh(cov)
    normal = vecs[:, 0]
    dist = d @ normal
    return normal, float(normal @ centroid), float(np.sqrt(w @ (dist * dist)))


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, 0.5 * cum[-1])])


def min_area_rect(xy: np.ndarray) -> tuple[np.ndarray, tuple[float, float], float]:
    """``cv2.minAreaRect`` of 2D points [N, 2].

    Returns:
        (centre [2], (long, short), angle of the long side from +x in radians, in [0, pi)).
    """
    import cv2

    shift = xy.mean(axis=0)
    (cx, cy), (w, h), angle = cv2.minAreaRect((xy - shift).astype(np.float32))
    theta = math.radians(angle)
    if h > w:
        w, h, theta = h, w, theta + math.pi / 2.0
    theta %= math.pi
    return np.array([cx, cy]) + shift, (float(w), float(h)), theta


def rect_at_yaw(xy: np.ndarray, theta: float) -> tuple[np.ndarray, tuple[float, float]]:
    """Bounding rectangle of [N, 2] points with its first side at angle ``theta``."""
    c, s = math.cos(theta), math.sin(theta)
    u = xy @ np.array([c, s])
    v = xy @ np.array([-s, c])
    cu, cv = (u.min() + u.max()) / 2.0, (v.min() + v.max()) / 2.0
    centre = cu * np.array([c, s]) + cv * np.array([-s, c])
    return centre, (float(u.max() - u.min()), float(v.max() - v.min()))


NORMAL_AGREEMENT_DEG = 45.0  # a flat Gaussian belongs to a plane only if its normal is this close
FLAT_RATIO = 0.5  # smallest / middle scale below which a Gaussian counts as a flat surfel


def surface_normals(quats: np.ndarray,  # [N, 4] (w, x, y, z)
                    log_scales: np.ndarray) -> np.ndarray:  # [N, 3] -> [N, 3] float32
    """Unit normal (shortest axis) of each flat Gaussian; zeros for the non-flat ones.

    A Gaussian is flat when its smallest scale is below ``FLAT_RATIO`` x its middle one
    (trained surfaces are covered by such surfels); its normal is the rotation's column
    of the smallest axis, computed without building [N, 3, 3] matrices.
    """
    q = quats.astype(np.float64)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
    w, x, y, z = q.T
    axis = np.argmin(log_scales, axis=1)
    out = np.zeros((len(q), 3), np.float32)
    columns = (
        lambda m: np.stack([1 - 2 * (y[m] ** 2 + z[m] ** 2), 2 * (x[m] * y[m] + w[m] * z[m]),
                            2 * (x[m] * z[m] - w[m] * y[m])], 1),
        lambda m: np.stack([2 * (x[m] * y[m] - w[m] * z[m]), 1 - 2 * (x[m] ** 2 + z[m] ** 2),
                            2 * (y[m] * z[m] + w[m] * x[m])], 1),
        lambda m: np.stack([2 * (x[m] * z[m] + w[m] * y[m]), 2 * (y[m] * z[m] - w[m] * x[m]),
                            1 - 2 * (x[m] ** 2 + y[m] ** 2)], 1),
    )
    ordered = np.sort(log_scales.astype(np.float64), axis=1)
    flat = ordered[:, 0] - ordered[:, 1] < math.log(FLAT_RATIO)
    for k in range(3):
        m = flat & (axis == k)
        out[m] = columns[k](m)
    return out


def _agrees(normals: np.ndarray | None, normal: np.ndarray) -> np.ndarray | bool:
    """Mask of Gaussians that may lie on a plane with ``normal`` (non-flat ones always may)."""
    if normals is None:
        return True
    dot = np.abs(normals.astype(np.float64) @ normal)
    return (dot >= math.cos(math.radians(NORMAL_AGREEMENT_DEG))) | ~normals.any(axis=1)


@dataclass
class _Search:
    """Working state of the plane search on the subset (internal)."""

    points: np.ndarray  # [M, 3]
    weights: np.ndarray  # [M]
    centre: np.ndarray  # [3]
    diameter: float
    threshold: float
    cell: float
    total: float
    normals: np.ndarray | None = None  # [M, 3] surfel normals (zeros: not flat)


def _prepare(means: np.ndarray, opacity: np.ndarray, cfg: RegisterConfig,
             rng: np.random.Generator,
             normals: np.ndarray | None = None) -> tuple[_Search, np.ndarray]:
    usable = np.flatnonzero((opacity >= cfg.min_opacity) & np.isfinite(means).all(1))
    if len(usable) < cfg.min_gaussians:
        raise NoTableError(
            f"no table found: only {count_noun(len(usable), 'Gaussian')} "
            f"{'has' if len(usable) == 1 else 'have'} opacity >= {cfg.min_opacity} "
            f"(need >= {cfg.min_gaussians} to fit a table plane); pass the full scan export "
            "(a cropped or haze-only scan has too few opaque Gaussians)")
    if len(usable) > cfg.max_points:
        usable = np.sort(rng.choice(usable, cfg.max_points, replace=False))
    points = means[usable].astype(np.float64)
    weights = opacity[usable].astype(np.float64)
    lo, hi = np.percentile(points, [2.0, 98.0], axis=0)
    diameter = float(np.linalg.norm(hi - lo))
    if not diameter > 0:
        raise NoTableError("no table found: the scan's Gaussian centres all coincide "
                           "(zero extent); re-export the scan")
    centre = np.array([_weighted_median(points[:, i], weights) for i in range(3)])
    return _Search(points, weights, centre, diameter, cfg.inlier_fraction * diameter,
                   cfg.cell_fraction * diameter, float(weights.sum()),
                   None if normals is None else normals[usable]), usable


def _hypotheses(search: _Search, active: np.ndarray, tree, cfg: RegisterConfig,
                rng: np.random.Generator, up: np.ndarray | None) -> np.ndarray:
    """[T, 4] candidate planes (normal, offset) from local point triplets."""
    pool = np.flatnonzero(active)
    seeds = pool[rng.integers(0, len(pool), cfg.iterations)]
    k = min(cfg.neighbours, len(search.points) - 1)
    _, nbrs = tree.query(search.points[seeds], k=k + 1)
    pick = rng.integers(1, k + 1, (cfg.iterations, 2))
    a = search.points[seeds]
    b = search.points[nbrs[np.arange(cfg.iterations), pick[:, 0]]]
    c = search.points[nbrs[np.arange(cfg.iterations), pick[:, 1]]]
    normals = np.cross(b - a, c - a)
    norm = np.linalg.norm(normals, axis=1)
    ok = norm > 1e-12 * search.diameter ** 2
    normals = normals[ok] / norm[ok, None]
    a = a[ok]
    if up is not None:
        keep = np.abs(normals @ up) >= math.cos(math.radians(cfg.max_tilt_deg))
        # seed points also propose the exact up-plane through themselves
        normals = np.concatenate([normals[keep], np.tile(up, (len(seeds), 1))])
        a = np.concatenate([a[keep], search.points[seeds]])
    return np.concatenate([normals, np.einsum("ij,ij->i", normals, a)[:, None]], axis=1)


def _best_plane(search: _Search, active: np.ndarray, planes: np.ndarray, cfg: RegisterConfig,
                rng: np.random.Generator, up: np.ndarray | None) -> tuple[np.ndarray, float]:
    pool = np.flatnonzero(active)
    if len(pool) > cfg.score_points:
        pool = pool[rng.choice(len(pool), cfg.score_points, replace=False)]
    pts, w = search.points[pool].astype(np.float32), search.weights[pool].astype(np.float32)
    # float32 relative to the pool's mean: scoring only ranks hypotheses
    mean = pts.mean(axis=0)
    offsets = (planes[:, 3] - planes[:, :3] @ mean).astype(np.float32)
    dist = np.abs((pts - mean) @ planes[:, :3].T.astype(np.float32) - offsets)  # [S, T]
    score = w @ (dist < np.float32(search.threshold)).astype(np.float32)
    best = planes[int(np.argmax(score))]
    normal, offset = best[:3], float(best[3])
    for _ in range(2):  # weighted least-squares refinement on the active inliers
        inl = active & (np.abs(search.points @ normal - offset) < search.threshold)
        if inl.sum() < 3:
            break
        refined, refined_offset, _ = weighted_plane(search.points[inl], search.weights[inl])
        if refined @ normal < 0:
            refined, refined_offset = -refined, -refined_offset
        if up is not None and abs(refined @ up) < math.cos(math.radians(cfg.max_tilt_deg)):
            break
        normal, offset = refined, refined_offset
    return normal, offset


THICKNESS_SIGMAS = 3.0  # a patch's flatness band reaches this many robust SDs of its spread


def band_half_width(signed: np.ndarray, weights: np.ndarray,  # [K], [K]
                    threshold: float) -> float:
    """Half-width of the band a patch's flatness (contrast) is measured over.

    ``THICKNESS_SIGMAS`` x the robust spread (1.4826 x weighted median |distance|) of the
    column's Gaussians within 2 inlier distances of the plane, kept in [1, 2] x
    ``threshold``: a thin surface keeps the inlier distance (the test unchanged); a thick
    band of Gaussians gets a band that holds it, and its slabs lie beyond its tails.
    """
    near = np.abs(signed) < 2.0 * threshold
    if near.sum() < 10:
        return threshold
    spread = 1.4826 * _weighted_median(np.abs(signed[near]), weights[near])
    return float(np.clip(THICKNESS_SIGMAS * spread, threshold, 2.0 * threshold))


def _patches(search: _Search, active: np.ndarray, normal: np.ndarray, offset: float,
             index: int, cfg: RegisterConfig) -> tuple[list[PlanePatch], np.ndarray]:
    """Connected patches of one plane; returns them and the plane's inlier mask."""
    from scipy import ndimage

    signed = search.points @ normal - offset
    inl = active & (np.abs(signed) < search.threshold)
    removed = inl.copy()  # the whole band leaves the pool, members or not
    agree = _agrees(search.normals, normal)
    inl &= agree
    if inl.sum() < 3:
        return [], removed
    e1, e2 = plane_basis(normal)
    xy_all = np.stack([search.points @ e1, search.points @ e2], axis=1)
    xy = xy_all[inl]
    origin = xy.min(axis=0) - search.cell
    shape = tuple((np.ceil((xy.max(axis=0) - origin) / search.cell) + 2).astype(int))
    if shape[0] * shape[1] > 4_000_000:  # a plane spanning a huge sparse scan: coarser grid
        factor = math.sqrt(shape[0] * shape[1] / 4_000_000)
        cell = search.cell * factor
        shape = tuple((np.ceil((xy.max(axis=0) - origin) / cell) + 2).astype(int))
    else:
        cell = search.cell
    ij = np.floor((xy - origin) / cell).astype(int)
    occupied = np.zeros(shape, bool)
    occupied[ij[:, 0], ij[:, 1]] = True
    # components of the occupied cells grown by one: the grown cells are the patch's footprint
    # (the column the above / below / contrast masses are counted in, and the cells the
    # final fit takes Gaussians from), so sparse sampling does not leave holes in it
    labels, count = ndimage.label(ndimage.binary_dilation(occupied), structure=np.ones((3, 3)))
    point_label = labels[ij[:, 0], ij[:, 1]]
    w = search.weights[inl]
    mass = np.bincount(point_label, weights=w, minlength=count + 1)
    # every search point's grid cell (for the above / below / contrast masses)
    ij_all = np.floor((xy_all - origin) / cell).astype(int)
    inside = ((ij_all >= 0) & (ij_all < np.array(shape))).all(1)
    all_label = np.zeros(len(search.points), int)
    all_label[inside] = labels[ij_all[inside, 0], ij_all[inside, 1]]
    out = []
    pts_inl = search.points[inl]
    for lab in np.flatnonzero(mass >= cfg.min_patch_fraction * search.total):
        if lab == 0:
            continue
        member = point_label == lab
        if member.sum() < 10:
            continue
        column = all_label == lab
        patch_mass = float(mass[lab])
        # flatness at the patch's own thickness: a trained real top is a band of Gaussians
        # ~2 cm either side of the surface, whose tails fill the slabs beside a band one
        # inlier distance wide; a slice through a volume scores ~1 at any band width
        half = band_half_width(signed[column], search.weights[column], search.threshold)
        # like with like: band and slabs both count the Gaussians that may lie on the plane
        # (non-flat ones, surfels facing along its normal; mug sides and walls count in neither)
        band_mass = float(search.weights[column & agree & (np.abs(signed) < half)].sum())
        near_side = column & agree & (np.abs(signed) >= half) & (np.abs(signed) < 2 * half)
        side = float(search.weights[near_side].sum())
        contrast = band_mass / max(side, 1e-9 * band_mass)
        beyond = 2.0 * half
        above = search.weights[column & (signed > beyond)].sum() / patch_mass
        below = search.weights[column & (signed < -beyond)].sum() / patch_mass
        _, size, _ = min_area_rect(xy[member])
        wm = w[member]
        out.append(PlanePatch(
            normal=normal.copy(), offset=offset, mass=patch_mass, count=int(member.sum()),
            centroid=(wm @ pts_inl[member]) / wm.sum(), size=size, above=float(above),
            below=float(below), contrast=float(contrast), plane_index=index,
            cells=labels == lab, grid=(origin, e1, e2, cell, shape)))
    return out, removed


def find_planes(search: _Search, cfg: RegisterConfig, rng: np.random.Generator,
                up: np.ndarray | None) -> list[PlanePatch]:
    """Sequential RANSAC + patch split (see module docstring, steps 2-3)."""
    from scipy.spatial import cKDTree

    tree = cKDTree(search.points)
    active = np.ones(len(search.points), bool)
    patches: list[PlanePatch] = []
    for index in range(cfg.planes):
        if search.weights[active].sum() < cfg.min_patch_fraction * search.total \
                or active.sum() < 3:
            break
        planes = _hypotheses(search, active, tree, cfg, rng, up)
        if len(planes) == 0:
            break
        normal, offset = _best_plane(search, active, planes, cfg, rng, up)
        found, inl = _patches(search, active, normal, offset, index, cfg)
        patches += found
        if inl.sum() == 0:
            break
        active &= ~inl
    return patches


def patch_at(search: _Search, near: np.ndarray, cfg: RegisterConfig,
             rng: np.random.Generator, up: np.ndarray | None) -> PlanePatch | None:
    """The planar patch through a user-given point (``--table-center``), or None.

    Hypotheses are seeded at the 64 search points nearest ``near``, must pass within
    the inlier distance of it, and are scored by the inlier mass within 0.05 x the scan
    size of it; the patch is the connected component holding ``near`` (any size).
    """
    from scipy.spatial import cKDTree

    tree = cKDTree(search.points)
    k = min(64, len(search.points))
    _, seeds = tree.query(near, k=k)
    seeds = np.atleast_1d(seeds)
    local = np.zeros(len(search.points), bool)
    local[seeds] = True
    planes = _hypotheses(search, local, tree, cfg, rng, up)
    planes = planes[np.abs(planes[:, :3] @ near - planes[:, 3]) < search.threshold]
    if len(planes) == 0:
        return None
    around = np.linalg.norm(search.points - near, axis=1) < 0.05 * search.diameter
    dist = np.abs(search.points[around] @ planes[:, :3].T - planes[:, 3])
    best = planes[int(np.argmax(search.weights[around] @ (dist < search.threshold)))]
    normal, offset = best[:3], float(best[3])  # refined later on the patch only (fit_table)
    relaxed = dataclasses.replace(cfg, min_patch_fraction=1e-9)
    found, _ = _patches(search, np.ones(len(search.points), bool), normal, offset, -1, relaxed)
    if not found:
        return None
    return min(found, key=lambda p: _distance_to_cells(p, near))


def _distance_to_cells(patch: PlanePatch, point: np.ndarray) -> float:
    """0 when ``point`` projects into the patch's cells, else the distance to its centroid."""
    origin, e1, e2, cell, shape = patch.grid
    ij = np.floor((np.array([point @ e1, point @ e2]) - origin) / cell).astype(int)
    if (ij >= 0).all() and (ij < np.array(shape)).all() and patch.cells[ij[0], ij[1]]:
        return 0.0
    return float(np.linalg.norm(patch.centroid - point))


def _no_table_message(search: _Search, patches: list[PlanePatch], cfg: RegisterConfig,
                      up: np.ndarray | None, n_gaussians: int) -> str:
    what = (f"searched {cfg.planes} RANSAC planes ({cfg.iterations} hypotheses each, inlier "
            f"distance {search.threshold:.4g} = {cfg.inlier_fraction} x scan size "
            f"{search.diameter:.4g}) over {len(search.points):,} of {n_gaussians:,} Gaussians"
            + (f", tilt <= {cfg.max_tilt_deg} deg from --up" if up is not None else ""))
    if patches:
        big = max(patches, key=lambda p: p.mass)
        if up is not None:
            tilt = f"tilt {big.tilt_deg(up):.1f} deg from --up"
        else:
            tilt = (f"tilt {min(big.tilt_deg(np.eye(3)[i]) for i in range(3)):.1f} deg "
                    "from the nearest file axis")
        if big.contrast < cfg.min_contrast:
            why = (f"not flat: contrast {big.contrast:.1f} against the slabs beside it, "
                   f"{cfg.min_contrast:g} needed")
        else:
            why = f"tilted more than {cfg.max_tilt_deg:g} deg"
        largest = (f"the largest plane patch holds {big.count} Gaussians "
                   f"({100 * big.mass / search.total:.1f}% of the mass), {tilt}, {why}")
    else:
        largest = "no plane holds >= " f"{100 * cfg.min_patch_fraction:g}% of the scan's mass"
    thick = ("; a trained real capture's table top is a band a few cm thick: with --up add "
             "--min-contrast 2" if patches and max(patches, key=lambda p: p.mass).contrast
             < cfg.min_contrast and cfg.min_contrast > 2 else "")
    return (f"no table found: {what}; {largest}; fix: pass --up X,Y,Z (the scan's up "
            "direction) and --table-center X,Y,Z (a point on the table top, splat units), "
            f"or register by hand with --world-from-splat FILE{thick}")


def _given_registration_fix(message: str, cfg: RegisterConfig, *, near_given: bool) -> str:
    """``message`` with the fix that applies when ``--world-from-splat`` fixed the registration.

    The search then runs in world coordinates with up = +z, so --up / --table-size /
    --world-from-splat (the fixes of the automatic search) do not apply.
    """
    head = message.split("; fix:", 1)[0]
    if head == message:  # not the plane-search message (too few Gaussians, ...): as it is
        return message
    head = head.replace("from --up", "from world +z")  # up is the FILE's, not a --up flag
    pick = ("move --table-center onto the table top (it lies on no plane patch)" if near_given
            else "pass --table-center X,Y,Z (a point on the table top, scan coordinates) to "
            "pick the plane")
    return (f"{head}; with --world-from-splat the table is searched in world coordinates as a "
            f"plane within {cfg.max_tilt_deg:g} deg of +z; fix: {pick}, or check that the FILE's "
            "rotation maps the scan's up to world +z (a table that comes out tilted is not "
            "found)")


def _candidates(patches: list[PlanePatch], search: _Search, cfg: RegisterConfig,
                up: np.ndarray | None) -> list[PlanePatch]:
    keep = [p for p in patches if p.contrast >= cfg.min_contrast
            and p.mass >= cfg.min_patch_fraction * search.total]
    if up is not None:
        keep = [p for p in keep if p.tilt_deg(up) <= cfg.max_tilt_deg]
    return keep


def choose_table(patches: list[PlanePatch], search: _Search, cfg: RegisterConfig, *,
                 up: np.ndarray | None, near: np.ndarray | None,
                 n_gaussians: int) -> PlanePatch:
    """Step 4 of the module docstring; raises :class:`NoTableError` with the one-line answer."""
    candidates = _candidates(patches, search, cfg, up)
    if not candidates:
        raise NoTableError(_no_table_message(search, patches, cfg, up, n_gaussians))
    if near is not None:
        def gap(p: PlanePatch) -> float:
            return float(np.linalg.norm(p.centroid - near)) / search.diameter - p.mass / (
                1e3 * search.total)
        return min(candidates, key=gap)
    scale = 0.25 * search.diameter

    def score(p: PlanePatch) -> float:
        d = float(np.linalg.norm(p.centroid - search.centre))
        return p.mass / (1.0 + (d / scale) ** 2)

    two_sided = [p for p in candidates if p.two_sided(cfg.two_sided_fraction)]
    if two_sided:
        return max(two_sided, key=score)
    best = max(candidates, key=score)
    warnings.warn(
        f"no plane patch has scan content both above and below it; using the best one-sided "
        f"patch ({best.count} Gaussians) as the table - if the previews show the floor or a "
        "wall, pass --table-center X,Y,Z (a point on the table top)",
        RegistrationWarning, stacklevel=3)
    return best


def gravity_sign(table: PlanePatch, patches: list[PlanePatch], search: _Search,
                 cfg: RegisterConfig) -> tuple[float, str]:
    """+1 when ``table.normal`` points up, else -1, and the rule that decided (step 6)."""
    n = table.normal
    parallel = [p for p in patches if p is not table and abs(float(p.normal @ n)) >= math.cos(
        math.radians(10.0)) and p.mass >= 0.3 * table.mass]
    sides = []
    for p in parallel:
        gap = float((p.centroid - table.centroid) @ n)
        if abs(gap) > 3.0 * search.threshold:
            sides.append(gap)
    above = [g for g in sides if g > 0]
    below = [-g for g in sides if g < 0]
    if above and below:
        sign = -1.0 if min(above) < min(below) else 1.0
        return sign, "floor-nearer-than-ceiling"
    if above or below:
        return (-1.0 if above else 1.0), "floor-side"
    # objects rest on a table: compare the mass in a slab just above vs just below
    signed = search.points @ n - table.offset
    origin, e1, e2, cell, shape = table.grid
    ij = np.floor((np.stack([search.points @ e1, search.points @ e2], 1) - origin) / cell)
    ij = ij.astype(int)
    inside = ((ij >= 0) & (ij < np.array(shape))).all(1)
    column = np.zeros(len(signed), bool)
    column[inside] = table.cells[ij[inside, 0], ij[inside, 1]]
    slab = 0.5 * table.size[1]
    beyond = 2.0 * search.threshold
    up_mass = search.weights[column & (signed > beyond) & (signed < slab)].sum()
    down_mass = search.weights[column & (signed < -beyond) & (signed > -slab)].sum()
    return (1.0 if up_mass >= down_mass else -1.0), "objects-on-top"


def dense_core(xy: np.ndarray) -> np.ndarray:  # [N, 2] -> [N] bool
    """Points of the largest dense region of a planar point set (drops stray floaters).

    Grid with cells of 3 x the mean point spacing (from the minimum-area rectangle),
    keep cells holding >= max(2, a quarter of the median occupied cell's count), take
    the heaviest 8-connected group of kept cells, grow it by one cell (the sparse border
    and corner cells of the surface), and return the points in it: stray Gaussians more
    than a cell away from the surface are dropped, its edges are kept.
    """
    from scipy import ndimage

    n = len(xy)
    if n < 50:
        return np.ones(n, bool)
    _, (long, short), _ = min_area_rect(xy)
    spacing = math.sqrt(max(long * short, 1e-300) / n)
    cell = 3.0 * spacing
    origin = xy.min(axis=0)
    ij = np.floor((xy - origin) / cell).astype(np.int64)
    shape = tuple(ij.max(axis=0) + 1)
    if shape[0] * shape[1] > 16_000_000:  # degenerate spread; keep everything
        return np.ones(n, bool)
    flat = ij[:, 0] * shape[1] + ij[:, 1]
    counts = np.bincount(flat, minlength=shape[0] * shape[1])
    occupied = counts[counts > 0]
    keep_cells = counts >= max(2.0, 0.25 * float(np.median(occupied)))
    labels, count = ndimage.label(keep_cells.reshape(shape), structure=np.ones((3, 3)))
    if count == 0:
        return np.ones(n, bool)
    point_label = labels.reshape(-1)[flat]
    sizes = np.bincount(point_label, minlength=count + 1)
    sizes[0] = 0
    core = labels == int(np.argmax(sizes))
    # the sparse cells right at the border (corners, edges) belong to the surface too
    grown = ndimage.binary_dilation(core, structure=np.ones((3, 3)))
    return grown.reshape(-1)[flat]


def _dense_run(coord: np.ndarray, bin_size: float, floor: float) -> np.ndarray:  # [N] -> bool
    """Points in the run of bins around the heaviest one that reach ``floor`` x the median.

    Bins of ``coord``; counts compared with the median occupied bin's; a single sparse bin at
    either end is kept (a side's own partly filled last strip).
    """
    index = np.floor((coord - coord.min()) / bin_size).astype(np.int64)
    counts = np.bincount(index)
    keep = counts >= floor * float(np.median(counts[counts > 0]))
    peak = int(np.argmax(counts))
    lo = peak
    while lo > 0 and keep[lo - 1]:
        lo -= 1
    hi = peak
    while hi + 1 < len(counts) and keep[hi + 1]:
        hi += 1
    # one thin strip at an end is the side's own partly filled last strip, not a fringe
    lo = 0 if lo == 1 else lo
    hi = len(counts) - 1 if hi == len(counts) - 2 else hi
    return (index >= lo) & (index <= hi)


def sparse_side_trim(xy: np.ndarray, theta: float, *, floor: float = 0.25
                     ) -> np.ndarray:  # [N, 2] -> [N] bool
    """Drop thin fringes along the rectangle's sides (a chair back or a bag touching an edge).

    Along each side direction the points are binned in strips (3 x the mean spacing wide);
    strips holding less than ``floor`` x the median strip's count at either end are cut (a
    rectangular top fills its strips evenly; a fringe fills only a few cells of its strip).
    Real scans need it: on the 7-Scenes kitchen the table's dense core reached ~9 cm past
    the edge over a chair back at table height.
    """
    n = len(xy)
    if n < 200:
        return np.ones(n, bool)
    _, (long, short), _ = min_area_rect(xy)
    strip = 3.0 * math.sqrt(max(long * short, 1e-300) / n)
    c, s = math.cos(theta), math.sin(theta)
    u, v = xy @ np.array([c, s]), xy @ np.array([-s, c])
    return _dense_run(u, strip, floor) & _dense_run(v, strip, floor)


EDGE_LEVEL = 0.25  # a side lies where the density falls to this fraction of its median
EDGE_SMOOTH = 2.0  # density profiles are smoothed over this many mean point spacings


def _outer_crossing(coord: np.ndarray, weights: np.ndarray, spacing: float
                    ) -> tuple[float, float]:  # [N], [N] -> (low, high)
    """Outermost positions where the smoothed weighted density of ``coord`` reaches the level.

    Bins one mean spacing wide, Gaussian smoothing of ``EDGE_SMOOTH`` bins, level
    ``EDGE_LEVEL`` x the median smoothed density over occupied bins; each crossing is
    interpolated between bin centres and never lies beyond the points themselves.
    """
    from scipy import ndimage

    pad = int(math.ceil(4 * EDGE_SMOOTH)) + 1
    lo = float(coord.min()) - pad * spacing
    index = np.floor((coord - lo) / spacing).astype(np.int64)
    hist = np.bincount(index, weights=weights, minlength=int(index.max()) + pad + 1)
    dens = ndimage.gaussian_filter1d(hist, EDGE_SMOOTH, mode="constant")
    level = EDGE_LEVEL * float(np.median(dens[hist > 0]))
    above = np.flatnonzero(dens >= level)

    def cross(a: int, b: int) -> float:  # bin position where the profile meets the level
        return a + (level - dens[a]) / (dens[b] - dens[a]) * (b - a)

    low = lo + (cross(above[0] - 1, above[0]) + 0.5) * spacing
    high = lo + (cross(above[-1], above[-1] + 1) + 0.5) * spacing
    return max(low, float(coord.min())), min(high, float(coord.max()))


def density_edges(xy: np.ndarray, weights: np.ndarray,  # [N, 2], [N]
                  theta: float) -> tuple[np.ndarray, tuple[float, float]]:
    """Rectangle at yaw ``theta`` whose sides sit where the surface's density fades.

    Across each side the opacity-weighted point density (bins of one mean spacing, smoothed
    over ``EDGE_SMOOTH`` spacings) is followed outwards to where it falls to ``EDGE_LEVEL``
    (a quarter, the fringe level of :func:`dense_core` and :func:`sparse_side_trim`) of its
    median: a trained real table's edges spill a sparse, faint fringe of Gaussians 3-7 cm
    past the real edge (160 px frames: ~2 cm per pixel), which a bounding rectangle takes in
    whole. The sides never move past the points, so a clean scan keeps its exact extent.

    Returns:
        (centre [2], (side along theta, side across)).
    """
    n = len(xy)
    if n < 200:
        return rect_at_yaw(xy, theta)
    _, (long, short), _ = min_area_rect(xy)
    spacing = math.sqrt(max(long * short, 1e-300) / n)
    c, s = math.cos(theta), math.sin(theta)
    u, v = xy @ np.array([c, s]), xy @ np.array([-s, c])
    w = np.asarray(weights, np.float64)
    u0, u1 = _outer_crossing(u, w, spacing)
    v0, v1 = _outer_crossing(v, w, spacing)
    centre = (u0 + u1) / 2.0 * np.array([c, s]) + (v0 + v1) / 2.0 * np.array([-s, c])
    return centre, (float(u1 - u0), float(v1 - v0))


def fit_table(means: np.ndarray, opacity: np.ndarray, patch: PlanePatch, search: _Search,
              *, normals: np.ndarray | None = None, yaw_override_deg: float | None = None,
              min_opacity: float = 0.1,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple, float, int]:
    """Step 5: refine the plane on every Gaussian over the patch cells, fit the rectangle.

    The inlier distance starts at the search's and shrinks to 3 x the fit's RMS (at
    least a quarter of it) so table edges and objects standing on the top do not tilt
    or shift the plane. The rectangle: yaw from ``cv2.minAreaRect`` of the dense core
    less side fringes, sides from :func:`density_edges` (a given yaw: the bounding
    rectangle at that yaw, as before).

    Returns:
        (normal [3], centre [3], long axis [3], (long, short), rms, inlier count).
    """
    normal, offset = patch.normal, patch.offset
    origin, e1, e2, cell, shape = patch.grid
    usable = opacity >= min_opacity  # the search's opacity floor: haze does not widen the fit
    pts = means.astype(np.float64)

    def members(normal: np.ndarray, offset: float, threshold: float) -> np.ndarray:
        near = usable & (np.abs(pts @ normal - offset) < threshold)
        idx = np.flatnonzero(near)
        if normals is not None:
            idx = idx[_agrees(normals[idx], normal)]
        ij = np.floor((np.stack([pts[idx] @ e1, pts[idx] @ e2], 1) - origin) / cell).astype(int)
        inside = ((ij >= 0) & (ij < np.array(shape))).all(1)
        ok = np.zeros(len(idx), bool)
        ok[inside] = patch.cells[ij[inside, 0], ij[inside, 1]]
        return idx[ok]

    threshold = search.threshold
    idx = members(normal, offset, threshold)
    rms = 0.0
    for _ in range(3):
        if len(idx) < 3:
            break
        refined, refined_offset, rms = weighted_plane(pts[idx], opacity[idx].astype(np.float64))
        if refined @ normal < 0:
            refined, refined_offset = -refined, -refined_offset
        normal, offset = refined, refined_offset
        # tighten to the plane's own spread: drops edges and objects touching the top
        threshold = float(np.clip(3.0 * rms, 0.25 * search.threshold, search.threshold))
        idx = members(normal, offset, threshold)
    if len(idx) < 3:
        raise NoTableError("no table found: the chosen plane patch has fewer than 3 Gaussians "
                           "after refinement; pass --table-center X,Y,Z on the table top")
    b1, b2 = plane_basis(normal)
    xy = np.stack([pts[idx] @ b1, pts[idx] @ b2], axis=1)
    weight = opacity[idx].astype(np.float64)
    core = dense_core(xy)
    xy, weight = xy[core], weight[core]
    if yaw_override_deg is None:
        _, _, theta = min_area_rect(xy)
        trimmed = sparse_side_trim(xy, theta)
        xy, weight = xy[trimmed], weight[trimmed]
        _, _, theta = min_area_rect(xy)
        centre2d, size = density_edges(xy, weight, theta)
        if size[1] > size[0]:  # trimming swapped which side is longer: keep long = x
            size, theta = (size[1], size[0]), (theta + math.pi / 2.0) % math.pi
    else:
        theta = math.radians(yaw_override_deg)
        centre2d, size = rect_at_yaw(xy, theta)
    long_axis = math.cos(theta) * b1 + math.sin(theta) * b2
    centre = centre2d[0] * b1 + centre2d[1] * b2 + offset * normal
    return normal, centre, long_axis, size, rms, len(idx)


def find_table(means: np.ndarray, opacity: np.ndarray, *, cfg: RegisterConfig | None = None,
               normals: np.ndarray | None = None, up: np.ndarray | None = None,
               near: np.ndarray | None = None, yaw_deg: float | None = None) -> TableFit:
    """Find and fit the table in a point set (steps 1-6).

    Args:
        means: [N, 3] Gaussian centres (input frame).
        opacity: [N] opacities in (0, 1).
        cfg: Search parameters.
        normals: Optional [N, 3] surfel normals (:func:`surface_normals`): flat Gaussians
            join a plane only when their normal is within 45 degrees of it (keeps walls
            and box sides out of a table patch).
        up: Optional [3] up direction (restricts planes to ``max_tilt_deg`` and fixes the sign).
        near: Optional [3] point on the table top (picks the nearest patch, centres the footprint).
        yaw_deg: Optional long-side direction in the plane, degrees from :func:`plane_basis` e1.

    Raises:
        NoTableError: One line saying what was searched and how to fix it.
    """
    cfg = cfg or RegisterConfig()
    rng = np.random.default_rng(cfg.seed)
    up = None if up is None else _unit(up)
    search, _ = _prepare(means, opacity, cfg, rng, normals)
    patches = find_planes(search, cfg, rng, up)
    table = None
    if near is not None:
        table = patch_at(search, near, cfg, rng, up)
        if table is not None:
            patches.append(table)
    if table is None:
        table = choose_table(patches, search, cfg, up=up, near=near, n_gaussians=len(means))
    if up is not None:
        sign, rule = (1.0 if table.normal @ up >= 0 else -1.0), "--up"
    else:
        sign, rule = gravity_sign(table, patches, search, cfg)
    normal, centre, long_axis, size, rms, count = fit_table(
        means, opacity, table, search, normals=normals, yaw_override_deg=yaw_deg,
        min_opacity=cfg.min_opacity)
    if normal @ table.normal < 0:
        normal = -normal
    normal = sign * normal
    if near is not None:  # the user's centre, projected onto the fitted plane
        centre = near - ((near - centre) @ normal) * normal
    # deterministic direction of the long axis: its largest input component positive
    if long_axis[int(np.argmax(np.abs(long_axis)))] < 0:
        long_axis = -long_axis
    return TableFit(up=normal, center=centre, long_axis=_unit(long_axis), size=size, rms=rms,
                    inliers=count, gravity_rule=rule,
                    two_sided=table.two_sided(cfg.two_sided_fraction),
                    patches=tuple(patches), diameter=search.diameter)


# ----------------------------------------------------------------- registration
@dataclass(frozen=True)
class ScaleSpec:
    """Where the metric scale comes from.

    ``table_size`` (W, D) metres, or ``known_distance`` (P1 [3], P2 [3] in input units,
    metres), or ``metric`` (the scan is in metres already: trained from metric poses, e.g.
    an RGB-D or LiDAR capture; scale 1 without a warning), or none of them (scale 1, warned).
    """

    table_size: tuple[float, float] | None = None
    known_distance: tuple[tuple[float, ...], tuple[float, ...], float] | None = None
    metric: bool = False

    def __post_init__(self) -> None:
        given = [n for n, v in (("--table-size", self.table_size),
                                ("--known-distance", self.known_distance),
                                ("--metric", self.metric or None)) if v is not None]
        if len(given) > 1:
            raise BenchError(f"pass one of --table-size, --known-distance, --metric, not "
                             f"{' and '.join(given)}")
        if self.table_size is not None and not (min(self.table_size) > 0
                                                and all(map(math.isfinite, self.table_size))):
            raise BenchError(f"--table-size {list(self.table_size)} must be two positive lengths "
                             "in metres")
        if self.known_distance is not None:
            p1, p2, metres = self.known_distance
            if not metres > 0 or not math.isfinite(metres):
                raise BenchError(f"--known-distance METRES must be > 0, got {metres}")
            if np.linalg.norm(np.subtract(p1, p2)) == 0:
                raise BenchError("--known-distance P1 and P2 coincide; pick two distinct points")

    def resolve(self, fitted: tuple[float, float]) -> tuple[float, str]:
        """(scale in metres per input unit, source name)."""
        if self.table_size is not None:
            want = sorted(self.table_size, reverse=True)
            ratios = [want[0] / fitted[0], want[1] / fitted[1]]
            if abs(ratios[0] / ratios[1] - 1.0) > 0.05:
                warnings.warn(
                    f"--table-size {list(self.table_size)} m and the fitted rectangle "
                    f"{fitted[0]:.4g} x {fitted[1]:.4g} have aspect ratios that differ by "
                    f"{100 * abs(ratios[0] / ratios[1] - 1):.0f}%; check the previews "
                    "(the fit may include a neighbouring surface)", RegistrationWarning,
                    stacklevel=3)
            return float(np.mean(ratios)), "table-size"
        if self.known_distance is not None:
            p1, p2, metres = self.known_distance
            return metres / float(np.linalg.norm(np.subtract(p1, p2))), "known-distance"
        if self.metric:
            return 1.0, "metric"
        warnings.warn("metric scale unknown: the scene is left at scale 1 (1 world 'metre' = 1 "
                      "splat unit); pass --table-size W D or --known-distance P1 P2 METRES so "
                      "that hole angles, floater heights and rollouts are in metres",
                      RegistrationWarning, stacklevel=3)
        return 1.0, "none"


def world_from_fit(fit: TableFit, scale: float, *, table_height: float = 0.0) -> np.ndarray:
    """[4, 4] similarity putting the fitted table at the origin, axes along x/y, top at z = h."""
    rot = fit.rotation()
    matrix = np.eye(4)
    matrix[:3, :3] = scale * rot
    matrix[:3, 3] = -scale * (rot @ fit.center) + np.array([0.0, 0.0, table_height])
    Similarity.from_matrix(matrix)  # validates (right-handed by construction)
    return matrix


@dataclass(frozen=True)
class Registration:
    """Result of :func:`register_scan`: registration, table, and how they were found."""

    world_from_splat: np.ndarray  # [4, 4]
    table: TableSpec
    scale: float
    scale_source: str
    fit: TableFit
    mode: str  # "auto" or "world-from-splat"

    def details(self) -> dict:
        """JSON-able record for the manifest and scene.json."""
        fit = self.fit
        return {
            "tool": TOOL, "mode": self.mode, "scale": self.scale,
            "scale_source": self.scale_source, "gravity_rule": fit.gravity_rule,
            "table_two_sided": fit.two_sided, "plane_rms": fit.rms,
            "plane_rms_m": fit.rms * (self.scale if self.mode == "auto" else 1.0),
            "inliers": fit.inliers, "fitted_size_input_units": list(fit.size),
            "up_input": fit.up.tolist(), "center_input": fit.center.tolist(),
            "long_axis_input": fit.long_axis.tolist(), "scan_diameter": fit.diameter,
            "patches": [p.summary(fit.up) for p in fit.patches],
        }


def parse_world_matrix(data) -> np.ndarray:
    """A 4x4 similarity from JSON: a bare 4x4 list, ``{"world_from_splat": ...}`` (scene.json)."""
    if isinstance(data, dict):
        if "world_from_splat" not in data:
            raise BenchError("--world-from-splat file must hold a 4x4 list or an object with "
                             "'world_from_splat' (e.g. a scene.json)")
        data = data["world_from_splat"]
    # JSON numbers only: numpy would read true/false as 1/0 and "1" as 1.0 (issue 30)
    if not isinstance(data, list) or len(data) != 4 or not all(
            isinstance(row, list) and len(row) == 4 for row in data):
        raise BenchError("--world-from-splat must be a 4x4 list of numbers (4 rows of 4); "
                         "fix the file")
    for i, row in enumerate(data):
        for j, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, int | float):
                shown = (f"{str(value).lower()} (a JSON boolean)" if isinstance(value, bool)
                         else f"{value!r:.40}")
                raise BenchError(f"--world-from-splat row {i} column {j} is {shown}, not a "
                                 "number; write the number (e.g. 1 or 0)")
    try:
        matrix = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise BenchError("--world-from-splat must be a 4x4 list of numbers") from None
    Similarity.from_matrix(matrix, source="--world-from-splat")
    return matrix


def register_scan(splats: GaussianSplats, *, cfg: RegisterConfig | None = None,
                  up: np.ndarray | None = None, table_center: np.ndarray | None = None,
                  table_yaw_deg: float | None = None, table_height: float = 0.0,
                  scale: ScaleSpec | None = None,
                  world_from_splat: np.ndarray | None = None) -> Registration:
    """Register a raw scan: find the table, fix gravity, scale and the table axes.

    Args:
        splats: The scan's Gaussians in its own (splat) frame.
        cfg: Search parameters (seeded).
        up: [3] up direction in splat coordinates (``--up``), or None to infer it.
        table_center: [3] point on the table top in splat coordinates (``--table-center``).
        table_yaw_deg: Long-side direction (``--table-yaw``): degrees in the table plane from
            the file's +x projected into it (auto mode), or from world +x (with
            ``world_from_splat``).
        table_height: World z of the table top in metres (``--table-height``).
        scale: Metric scale source (``--table-size`` / ``--known-distance``).
        world_from_splat: A given [4, 4] registration (``--world-from-splat``): only the
            table is fitted, in the world frame, with up = +z.

    Returns:
        The :class:`Registration`.

    Raises:
        NoTableError: No table-like plane (one-line answer with the fixes).
        BenchError: Conflicting options.
    """
    cfg = cfg or RegisterConfig()
    scale = scale or ScaleSpec()
    opacity = splats.opacities()
    normals = surface_normals(splats.quats, splats.log_scales)
    if world_from_splat is not None:
        if up is not None or scale.table_size is not None or scale.known_distance is not None \
                or scale.metric:
            raise BenchError("--world-from-splat fixes the registration (scale and up included); "
                             "drop --up / --table-size / --known-distance / --metric")
        sim = Similarity.from_matrix(world_from_splat)
        world_pts = sim.apply_points(splats.means)
        near = None if table_center is None else sim.apply_points(
            np.asarray(table_center, np.float64)[None])[0]
        try:
            fit = find_table(world_pts, opacity, cfg=cfg, normals=normals @ sim.rotation.T.astype(
                np.float32), up=np.array([0.0, 0.0, 1.0]), near=near, yaw_deg=table_yaw_deg)
        except NoTableError as exc:
            raise NoTableError(_given_registration_fix(str(exc), cfg,
                                                       near_given=near is not None)) from None
        yaw = math.degrees(math.atan2(fit.long_axis[1], fit.long_axis[0]))
        yaw = (yaw + 90.0) % 180.0 - 90.0
        table = TableSpec(center=(float(fit.center[0]), float(fit.center[1])),
                          size=fit.size, yaw_deg=round(yaw, 9), height=float(fit.center[2]))
        return Registration(np.asarray(world_from_splat, np.float64), table, sim.scale,
                            "world-from-splat", fit, "world-from-splat")
    fit = find_table(splats.means, opacity, cfg=cfg, normals=normals, up=up,
                     near=None if table_center is None else np.asarray(table_center, np.float64),
                     yaw_deg=table_yaw_deg)
    s, source = scale.resolve(fit.size)
    matrix = world_from_fit(fit, s, table_height=table_height)
    size = tuple(sorted(scale.table_size, reverse=True)) if scale.table_size else (
        fit.size[0] * s, fit.size[1] * s)
    table = TableSpec(center=(0.0, 0.0), size=size, yaw_deg=0.0, height=table_height)
    return Registration(matrix, table, s, source, fit, "auto")


def replace_config(cfg: RegisterConfig, **changes) -> RegisterConfig:
    """A copy of ``cfg`` with some fields changed (validated)."""
    return dataclasses.replace(cfg, **changes)


def check_scan(splats: GaussianSplats, *, source: str, min_gaussians: int = 100) -> None:
    """Refuse scans no registration can work on, with the fix (one line each).

    NaN/Inf rows are handled by the readers (``--drop-nonfinite``, as ``bench scene
    info``); this checks what the readers accept but registration cannot use: too few
    Gaussians, coordinates beyond 1e6 units (a damaged file or a wrong property order),
    a scan of zero extent, degenerate (all but zero) scales, and Gaussians larger than
    the scan itself (linear scales stored where 3DGS stores log-scales).
    """
    n = len(splats)
    if n < min_gaussians:
        raise BenchError(f"{source}: only {count_noun(n, 'Gaussian')} (need >= {min_gaussians} "
                         "to find a table); pass the full scan export")
    reach = float(np.abs(splats.means).max())
    if reach > 1e6:
        raise BenchError(f"{source}: Gaussian centres reach {reach:.3g} units (absurd for a "
                         "scan); the file is damaged or not in the 3DGS layout - re-export it")
    lo, hi = np.percentile(splats.means, [2.0, 98.0], axis=0)
    diameter = float(np.linalg.norm(hi - lo))
    if not diameter > 0:
        raise BenchError(f"{source}: the Gaussian centres span no volume (extent 0); "
                         "re-export the scan")
    largest = np.exp(splats.log_scales.astype(np.float64).max(axis=1))
    tiny = float(np.mean(largest < 1e-7 * diameter))
    if tiny > 0.5:
        raise BenchError(f"{source}: {100 * tiny:.0f}% of the Gaussians have degenerate scales "
                         f"(< 1e-7 x the scan size {diameter:.3g}); the scale_* properties are "
                         "broken - re-export the scan")
    median = float(np.median(largest))
    if median > diameter:
        raise BenchError(f"{source}: the median Gaussian ({median:.3g}) is larger than the whole "
                         f"scan ({diameter:.3g}); scale_* hold linear sizes instead of log-scales "
                         "- re-export from a 3DGS tool (or convert with log())")
