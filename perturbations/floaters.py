"""Floaters: small opaque Gaussian clusters hovering in a height band above the table.

``num_clusters`` cluster centres are drawn uniformly over the table footprint
(in the table's yawed frame) and the height band ``table.height + band``; a
centre closer than ``clearance`` to the table top or to any keepout box is
rejected and redrawn. Each cluster gets ``per_cluster`` members
``~ N(centre, cluster_std^2 I)``; per-axis scales are log-normal around
``scale``; opacity logits normal around ``logit(opacity)``; rotations uniform;
the colour (SH DC) of each member is the mean SH DC of its ``neighbours``
nearest background Gaussians; SH rest coefficients are zero. The original
Gaussians are unchanged and come first; the floaters are appended.

Random draws, in this order: centres (rejection loop, 3 uniforms per try),
member offsets [C, M, 3], log-scale noise [C*M, 3], opacity-logit noise [C*M],
quaternions [C*M, 4].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.errors import BenchError
from bench.scene.bundle import KeepoutBox, TableSpec
from bench.scene.gaussians import GaussianSplats
from perturbations.base import (
    EditStats,
    check_count,
    check_non_negative,
    check_positive,
    check_range,
)

VERSION = 1
BANDS = {"low": (0.05, 0.15), "mid": (0.15, 0.25), "high": (0.25, 0.35)}  # metres above the table
MAX_TRIES_PER_CLUSTER = 1000
#: ``bench perturb --band``'s help: the named bands.
BANDS_HELP = "height band above the table: " + ", ".join(
    f"{name} {low:g}-{high:g} m" for name, (low, high) in BANDS.items())


#: Most floater Gaussians one edit adds (clusters x per cluster): 10 M x 248 B = 2.5 GB.
MAX_FLOATERS = 10_000_000
#: Most clusters (rejection-sampled one at a time).
MAX_CLUSTERS = 100_000


@dataclass(frozen=True)
class FloaterParams:
    """Parameters of the floaters editor.

    Attributes:
        band: (low, high) height of cluster centres above the table top, metres.
        num_clusters: Number of clusters.
        per_cluster: Gaussians per cluster.
        clearance: Minimum distance of a cluster centre from the table top and
            from every keepout box, metres.
        cluster_std: Standard deviation of member positions about the centre, metres.
        scale: Median per-axis Gaussian scale (standard deviation), metres.
        scale_log_std: Standard deviation of the natural-log scale (dimensionless).
        opacity: Median opacity in (0, 1).
        opacity_logit_std: Standard deviation of the opacity logit (dimensionless).
        neighbours: Background Gaussians averaged for a floater's colour.
    """

    band: tuple[float, float] = field(default=BANDS["low"], metadata={
        "help": "custom height band of cluster centres above the table", "unit": "metres",
        "metavar": ("LOW", "HIGH"),
        # a second flag, --band low|mid|high, picks one of the named bands
        "named_flag": "band", "named_values": BANDS, "named_help": BANDS_HELP})
    num_clusters: int = field(default=8, metadata={"help": "number of clusters"})
    per_cluster: int = field(default=4, metadata={"help": "Gaussians per cluster"})
    clearance: float = field(default=0.01, metadata={
        "help": "min distance of a cluster centre from table top and keepout boxes",
        "unit": "metres"})
    cluster_std: float = field(default=0.018, metadata={
        "help": "std of member positions about the centre", "unit": "metres"})
    scale: float = field(default=0.0316, metadata={
        "help": "median Gaussian scale (std)", "unit": "metres"})
    scale_log_std: float = field(default=0.1, metadata={
        "help": "std of the natural-log scale", "unit": "dimensionless"})
    opacity: float = field(default=0.99, metadata={"help": "median opacity in (0, 1)"})
    opacity_logit_std: float = field(default=0.1, metadata={
        "help": "std of the opacity logit", "unit": "dimensionless"})
    neighbours: int = field(default=8, metadata={
        "help": "nearest background Gaussians averaged for the colour"})

    def __post_init__(self) -> None:
        def put(name, value):
            object.__setattr__(self, name, value)

        put("band", check_range(self.band, "floater band", "metres above the table"))
        put("num_clusters", check_count(self.num_clusters, "floater cluster count"))
        put("per_cluster", check_count(self.per_cluster, "Gaussians per floater cluster"))
        added = self.num_clusters * self.per_cluster
        if added > MAX_FLOATERS:  # checked before any array is allocated
            raise BenchError(f"{self.num_clusters:,} clusters x {self.per_cluster:,} per cluster = "
                             f"{added:,} floaters exceeds the limit of {MAX_FLOATERS:,}; lower "
                             "--clusters or --per-cluster")
        if self.num_clusters > MAX_CLUSTERS:  # clusters are placed one by one
            raise BenchError(f"{self.num_clusters:,} floater clusters exceed the limit of "
                             f"{MAX_CLUSTERS:,}; lower --clusters")
        put("clearance", check_non_negative(self.clearance, "floater clearance", "metres"))
        put("cluster_std", check_non_negative(self.cluster_std, "floater cluster std", "metres"))
        put("scale", check_positive(self.scale, "floater scale", "metres"))
        put("scale_log_std", check_non_negative(self.scale_log_std, "floater scale log-std", "log"))
        put("opacity_logit_std",
            check_non_negative(self.opacity_logit_std, "floater opacity-logit std", "logits"))
        put("neighbours", check_count(self.neighbours, "floater colour neighbours"))
        if not (isinstance(self.opacity, int | float) and 0 < self.opacity < 1):
            raise BenchError(f"floater opacity must be in (0, 1), got {self.opacity!r}")
        put("opacity", float(self.opacity))


def _centre_ok(centre: np.ndarray, table: TableSpec, keepouts, clearance: float) -> bool:  # [3]
    if centre[2] - table.height < clearance:  # centres lie over the footprint: gap = height
        return False
    return all(box.distance(centre[None])[0] >= clearance for box in keepouts)


def draw_centres(params: FloaterParams, rng: np.random.Generator, table: TableSpec,
                 keepouts: tuple[KeepoutBox, ...]) -> np.ndarray:  # [C, 3]
    """Rejection-sample cluster centres over the footprint and band."""
    half = np.asarray(table.size) / 2.0
    low = np.array([-half[0], -half[1], table.height + params.band[0]])
    high = np.array([half[0], half[1], table.height + params.band[1]])
    centres, tries = [], 0
    while len(centres) < params.num_clusters:
        tries += 1
        if tries > MAX_TRIES_PER_CLUSTER * params.num_clusters:
            raise BenchError(f"could not place {params.num_clusters} floater clusters in band "
                             f"{list(params.band)} m clear of the keepout boxes by "
                             f"{params.clearance} m; shrink the keepouts or change the band")
        local = rng.uniform(low, high)
        centre = np.concatenate([table.to_world(local[None, :2])[0], local[2:]])
        if _centre_ok(centre, table, keepouts, params.clearance):
            centres.append(centre)
    return np.array(centres)


def neighbour_colours_reference(background: GaussianSplats, points: np.ndarray,
                                k: int) -> np.ndarray:  # [M, 3]
    """Plain reference: mean SH DC of the ``k`` nearest background Gaussians, full scans."""
    means = background.means.astype(np.float64)
    k = min(k, len(background))
    out = np.empty((len(points), 3), dtype=np.float64)
    for i, p in enumerate(points):  # one O(N) pass per floater
        d2 = ((means - p) ** 2).sum(axis=1)
        nearest = np.argpartition(d2, k - 1)[:k] if k < len(d2) else np.arange(len(d2))
        out[i] = background.sh_dc[np.sort(nearest)].astype(np.float64).mean(axis=0)
    return out.astype(np.float32)


def _nearest_mean(means: np.ndarray, sh_dc: np.ndarray, p: np.ndarray, k: int,
                  index: np.ndarray) -> tuple[np.ndarray, float]:
    # means [M, 3] (candidates), sh_dc [N, 3] (all), p [3], index [M] -> (colour [3], kth d^2)
    d2 = ((means - p) ** 2).sum(axis=1)
    nearest = np.argpartition(d2, k - 1)[:k] if k < len(d2) else np.arange(len(d2))
    # sorted global indices: the mean is summed in the same order as the reference
    chosen = np.sort(index[nearest])
    return sh_dc[chosen].astype(np.float64).mean(axis=0), float(d2[nearest].max())


def neighbour_colours(background: GaussianSplats, points: np.ndarray, k: int, *,
                      pad: float = 0.2) -> np.ndarray:  # [M, 3]
    """Mean SH DC [M, 3] of the ``k`` nearest background Gaussians of each point [M, 3].

    Fast path with the same result as :func:`neighbour_colours_reference`: the
    search runs over the Gaussians inside the points' bounding box grown by
    ``pad`` metres; a point whose k-th neighbour is farther than the box border
    is redone with a doubled pad (finally over all Gaussians), so the answer is exact.
    """
    k = min(k, len(background))
    lo, hi = points.min(axis=0), points.max(axis=0)
    out = np.empty((len(points), 3), dtype=np.float64)
    todo = np.arange(len(points))
    while len(todo):
        inside = np.ones(len(background), dtype=bool)
        for axis in range(3):
            coord = background.means[:, axis]
            inside &= (coord >= lo[axis] - pad) & (coord <= hi[axis] + pad)
        index = np.flatnonzero(inside)
        everything = len(index) == len(background)
        if len(index) < k:
            pad *= 2.0
            continue
        means = background.means[index].astype(np.float64)
        retry = []
        for i in todo:
            p = points[i]
            colour, kth_d2 = _nearest_mean(means, background.sh_dc, p, k, index)
            border = min((p - (lo - pad)).min(), ((hi + pad) - p).min())
            if everything or kth_d2 <= border * border:  # nothing outside can be closer
                out[i] = colour
            else:
                retry.append(i)
        todo = np.array(retry, dtype=np.int64)
        pad *= 2.0
    return out.astype(np.float32)


def floaters(splats: GaussianSplats, params: FloaterParams, rng: np.random.Generator, *,
             table: TableSpec,
             keepouts: tuple[KeepoutBox, ...] = ()) -> tuple[GaussianSplats, EditStats]:
    """Append floater clusters above the table.

    Args:
        splats: Background Gaussians, world frame (at least one, for colours).
        params: Cluster layout and appearance.
        rng: Source of every random draw (see module docstring for the order).
        table: The table spec.
        keepouts: Boxes cluster centres keep ``clearance`` away from.

    Returns:
        Background + floaters, and the edit statistics.
    """
    if len(splats) == 0:
        raise BenchError("floaters need a non-empty background to take colours from")
    centres = draw_centres(params, rng, table, tuple(keepouts))
    c, m = params.num_clusters, params.per_cluster
    positions = (centres[:, None, :] + rng.normal(0.0, params.cluster_std, (c, m, 3)))
    positions = positions.reshape(c * m, 3)
    n = c * m
    log_scales = math.log(params.scale) + rng.normal(0.0, params.scale_log_std, (n, 3))
    logit = math.log(params.opacity / (1.0 - params.opacity))
    opacity_logits = logit + rng.normal(0.0, params.opacity_logit_std, n)
    quats = rng.normal(size=(n, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    new = GaussianSplats(
        means=positions.astype(np.float32),
        quats=quats.astype(np.float32),
        log_scales=log_scales.astype(np.float32),
        opacity_logits=opacity_logits.astype(np.float32),
        sh_dc=neighbour_colours(splats, positions, params.neighbours),
        sh_rest=np.zeros((n, splats.sh_rest.shape[1], 3), dtype=np.float32),
    )
    source = np.concatenate([np.arange(len(splats)), np.full(n, -1)]).astype(np.int64)
    stats = EditStats(removed=0, added=n, moved=0, source_index=source,
                      details={"cluster_centres": centres.tolist()},
                      changed=np.zeros(len(source), dtype=bool))
    return GaussianSplats.concat(splats, new), stats
