"""Warp: smooth domes that lift table-region Gaussians vertically.

``num_domes`` domes get centres uniform over the table footprint expanded by
``margin`` (in the table's yawed frame), heights ``U(height_range)`` and radii
``U(radius_range)``. A dome of height ``H`` and radius ``R`` displaces by
``H * (1 - (r/R)^2)^2`` at horizontal distance ``r < R`` (0 beyond). Every
Gaussian inside the expanded footprint with ``|p_z - h| <= slab`` moves up by
the sum of all domes at its (x, y) (overlaps add without a cap); only z changes.

Random draws, in this order: dome centres [D, 2] (table frame), heights [D], radii [D].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bench.errors import BenchError
from bench.scene.bundle import KeepoutBox, TableSpec
from bench.scene.gaussians import GaussianSplats
from perturbations.base import EditStats, check_count, check_non_negative, check_range

VERSION = 1


#: Most domes of one warp edit (each is evaluated against every affected Gaussian).
MAX_DOMES = 100_000


@dataclass(frozen=True)
class WarpParams:
    """Parameters of the warp editor.

    Attributes:
        num_domes: Number of domes.
        height_range: (low, high) dome height, metres.
        radius_range: (low, high) dome radius, metres (low > 0).
        margin: Footprint expansion of the warped region and of dome centres, metres.
        slab: Half-thickness of the warped band about the table top, metres.
    """

    num_domes: int = field(default=30, metadata={"help": "number of domes"})
    height_range: tuple[float, float] = field(default=(0.010, 0.030), metadata={
        "help": "dome height range", "unit": "metres", "metavar": ("LOW", "HIGH")})
    radius_range: tuple[float, float] = field(default=(0.030, 0.060), metadata={
        "help": "dome radius range", "unit": "metres", "metavar": ("LOW", "HIGH")})
    margin: float = field(default=0.04, metadata={
        "help": "table footprint expansion", "unit": "metres"})
    slab: float = field(default=0.06, metadata={
        "help": "half-thickness of the band about the table top", "unit": "metres"})

    def __post_init__(self) -> None:
        def put(name, value):
            object.__setattr__(self, name, value)

        put("num_domes", check_count(self.num_domes, "warp dome count"))
        if self.num_domes > MAX_DOMES:
            raise BenchError(f"{self.num_domes:,} warp domes exceed the limit of {MAX_DOMES:,}; "
                             "lower --domes")
        put("height_range", check_range(self.height_range, "warp dome height", "metres"))
        put("radius_range", check_range(self.radius_range, "warp dome radius", "metres",
                                        low_min=1e-9))
        put("margin", check_non_negative(self.margin, "warp margin", "metres"))
        put("slab", check_non_negative(self.slab, "warp slab", "metres"))


def draw_domes(params: WarpParams, rng: np.random.Generator,
               table: TableSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dome centres [D, 2] (world xy), heights [D] and radii [D], metres."""
    half = np.asarray(table.size) / 2.0 + params.margin
    local = rng.uniform(-half, half, size=(params.num_domes, 2))
    heights = rng.uniform(*params.height_range, size=params.num_domes)
    radii = rng.uniform(*params.radius_range, size=params.num_domes)
    return table.to_world(local), heights, radii


def dome_displacement(xy: np.ndarray, centres: np.ndarray, heights: np.ndarray,
                      radii: np.ndarray) -> np.ndarray:  # [N, 2] -> [N]
    """Sum of dome profiles ``H (1 - (r/R)^2)^2`` (r < R) at world points ``xy``."""
    total = np.zeros(len(xy), dtype=np.float64)
    for centre, height, radius in zip(centres, heights, radii, strict=True):
        r2 = ((xy - centre) ** 2).sum(axis=1) / (radius * radius)
        total += np.where(r2 < 1.0, height * (1.0 - r2) ** 2, 0.0)
    return total


def warp(splats: GaussianSplats, params: WarpParams, rng: np.random.Generator, *,
         table: TableSpec,
         keepouts: tuple[KeepoutBox, ...] = ()) -> tuple[GaussianSplats, EditStats]:
    """Lift table-region Gaussians by the summed dome displacement (only z changes).

    Args:
        splats: Background Gaussians, world frame.
        params: Dome layout and warped region.
        rng: Source of the dome draws.
        table: The table spec.
        keepouts: Unused by this editor.

    Returns:
        The warped Gaussians (same order and count) and the edit statistics.
    """
    del keepouts
    centres, heights, radii = draw_domes(params, rng, table)
    z = splats.means[:, 2].astype(np.float64)
    region = table.contains_xy(splats.means[:, :2], margin=params.margin)
    region &= np.abs(z - table.height) <= params.slab
    index = np.flatnonzero(region)
    lift = dome_displacement(splats.means[index, :2].astype(np.float64), centres, heights, radii)
    means = splats.means.copy()
    means[index, 2] = (z[index] + lift).astype(np.float32)
    changed = means[:, 2] != splats.means[:, 2]
    moved = int(changed.sum())
    details = {"domes": [{"center": c.tolist(), "height": float(h), "radius": float(r)}
                         for c, h, r in zip(centres, heights, radii, strict=True)],
               "region_count": int(index.size)}
    stats = EditStats(removed=0, added=0, moved=moved,
                      source_index=np.arange(len(splats), dtype=np.int64), details=details,
                      changed=changed)
    return splats.replace(means=means), stats
