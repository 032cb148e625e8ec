"""Ceiling hole: remove background Gaussians inside an upward cone above the table.

A Gaussian with centre ``p`` is *in the cone* iff ``p_z > a_z`` and the angle
between ``p - a`` and +z is at most ``half_angle_deg`` (apex ``a`` defaults to
the table centre at table height). It is *protected* iff it lies in the table
footprint expanded by ``margin`` (tested in the table's own, yawed frame) and
either ``|p_z - h| <= slab`` or ``p_z < h``. Removed = in cone and not
protected; nothing else changes (the ceiling straight above the table stays
eligible, as in YUBI-Real2Sim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.errors import BenchError
from bench.scene.bundle import KeepoutBox, TableSpec
from bench.scene.gaussians import GaussianSplats
from perturbations.base import EditStats, check_non_negative

VERSION = 1


@dataclass(frozen=True)
class HoleParams:
    """Parameters of the hole editor.

    Attributes:
        half_angle_deg: Cone half-angle from vertical, degrees, in (0, 90].
        apex: Cone apex (x, y, z) in metres; None = (table centre, table height).
        margin: Footprint expansion of the protected region, metres.
        slab: Half-thickness of the protected slab about the table top, metres.
    """

    half_angle_deg: float = field(default=54.0, metadata={
        "help": "cone half-angle from vertical", "unit": "degrees in (0, 90]"})
    apex: tuple[float, float, float] | None = field(default=None, metadata={
        "help": "cone apex", "unit": "metres (world)", "metavar": ("X", "Y", "Z"),
        "default_help": "table centre at table height"})
    margin: float = field(default=0.04, metadata={
        "help": "table footprint expansion", "unit": "metres"})
    slab: float = field(default=0.06, metadata={
        "help": "half-thickness of the band about the table top", "unit": "metres"})

    def __post_init__(self) -> None:
        angle = self.half_angle_deg
        if not (isinstance(angle, int | float) and math.isfinite(angle) and 0 < angle <= 90):
            raise BenchError(f"hole half-angle must be in (0, 90] degrees, got {angle!r}; "
                             "the study uses 54 and 90")
        object.__setattr__(self, "half_angle_deg", float(angle))
        if self.apex is not None:
            apex = tuple(float(v) for v in self.apex)
            if len(apex) != 3 or not all(math.isfinite(v) for v in apex):
                raise BenchError(f"hole apex must be three finite numbers (x y z, metres), "
                                 f"got {self.apex!r}")
            object.__setattr__(self, "apex", apex)
        object.__setattr__(self, "margin", check_non_negative(self.margin, "hole margin", "metres"))
        object.__setattr__(self, "slab", check_non_negative(self.slab, "hole slab", "metres"))


def resolve_apex(params: HoleParams, table: TableSpec) -> np.ndarray:  # [3]
    """The cone apex [3] in metres: the given one, else the table centre at table height."""
    if params.apex is not None:
        return np.asarray(params.apex, dtype=np.float64)
    return np.array([table.center[0], table.center[1], table.height], dtype=np.float64)


def cone_mask(means: np.ndarray, apex: np.ndarray, half_angle_deg: float) -> np.ndarray:  # [N]
    """Whether centres lie in the upward cone: above the apex, within the half-angle of +z."""
    d = means.astype(np.float64) - apex
    above = d[:, 2] > 0
    # angle <= theta  <=>  cos(angle) = dz/|d| >= cos(theta)  (dz > 0 here)
    return above & (d[:, 2] >= math.cos(math.radians(half_angle_deg)) * np.linalg.norm(d, axis=1))


def protected_mask(means: np.ndarray, table: TableSpec, *, margin: float,
                   slab: float) -> np.ndarray:  # [N]
    """Table slab and below-table space inside the footprint expanded by ``margin``."""
    z = means[:, 2].astype(np.float64)
    in_footprint = table.contains_xy(means[:, :2], margin=margin)
    return in_footprint & ((np.abs(z - table.height) <= slab) | (z < table.height))


def hole(splats: GaussianSplats, params: HoleParams, rng: np.random.Generator | None = None, *,
         table: TableSpec,
         keepouts: tuple[KeepoutBox, ...] = ()) -> tuple[GaussianSplats, EditStats]:
    """Remove the Gaussians in the cone that are not protected (draws nothing from ``rng``).

    Args:
        splats: Background Gaussians, world frame.
        params: Cone and protection parameters.
        rng: Unused (the hole is deterministic); accepted for a uniform editor API.
        table: The table spec (footprint, yaw, height).
        keepouts: Unused by this editor.

    Returns:
        The kept Gaussians (original order) and the edit statistics.
    """
    del rng, keepouts
    apex = resolve_apex(params, table)
    removed = cone_mask(splats.means, apex, params.half_angle_deg)
    removed &= ~protected_mask(splats.means, table, margin=params.margin, slab=params.slab)
    kept_index = np.flatnonzero(~removed)
    stats = EditStats(removed=int(removed.sum()), added=0, moved=0, source_index=kept_index,
                      details={"apex": apex.tolist()},
                      changed=np.zeros(len(kept_index), dtype=bool))
    return splats.subset(kept_index), stats
