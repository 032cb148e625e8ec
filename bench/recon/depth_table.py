"""The table as the sensors measured it: a plane fit to raw depth, and registration checks.

Acceptance of ``bench scene init`` on a real RGB-D capture is measured against the sequence's
own sensors, never against the reconstruction:

- **up**: minus the accelerometer's gravity direction (``gravity-direction.txt``);
- **table plane**: the raw depth of the held-out frames back-projected with their poses
  (every ``stride``-th pixel, invalid depth and depth edges dropped), heights along the
  measured up histogrammed in 1 cm bins; the table is the most populated bin's points that
  form the largest connected footprint (a counter at the same height is a separate patch),
  refit by least squares (free normal, three passes shrinking to 3 x RMS);
- **footprint**: ``cv2.minAreaRect`` of the dense core of those inliers (the registration's
  own :func:`bench.scene.register.dense_core`, so both rectangles are found the same way),
  giving centre, side lengths and yaw;
- **floor**: the most populated height bin at least ``min_floor_gap`` below the table, refit
  the same way; floor-to-table = the distance between the two planes at the table centre.

:func:`compare_registration` turns a :class:`bench.scene.register.Registration` (scan frame =
the capture's world frame) into the four acceptance numbers and their pass flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError


@dataclass(frozen=True)
class AcceptanceConfig:
    """Tolerances of the real-table acceptance (issue 34) and the depth-plane fit settings."""

    up_deg: float = 2.0
    plane_m: float = 0.02
    footprint_m: float = 0.05
    floor_m: float = 0.03
    stride: int = 2
    bin_m: float = 0.01
    cell_m: float = 0.02
    min_floor_gap: float = 0.55
    min_floor_points: int = 2000


@dataclass(frozen=True)
class DepthPlane:
    """A plane measured from depth: ``normal . p = offset`` (normal along the measured up)."""

    normal: np.ndarray  # [3]
    offset: float
    rms: float
    inliers: int


@dataclass(frozen=True)
class DepthTable:
    """The measured table (and floor when visible) in the capture's world frame."""

    up: np.ndarray  # [3] measured up (minus gravity)
    plane: DepthPlane
    center: np.ndarray  # [3] footprint centre on the plane
    long_axis: np.ndarray  # [3]
    size: tuple[float, float]  # (long, short) metres
    floor: DepthPlane | None
    points: int  # back-projected depth points used
    frames: int

    @property
    def floor_to_table(self) -> float | None:
        """Distance between the floor and table planes at the table centre (metres)."""
        if self.floor is None:
            return None
        return float(self.floor.normal @ self.center - self.floor.offset)

    def corners(self) -> np.ndarray:  # [4, 3]
        """The footprint rectangle's corners."""
        return _corners(self.center, self.long_axis, np.cross(self.plane.normal, self.long_axis),
                        self.size)


def _corners(center: np.ndarray, long_axis: np.ndarray, short_axis: np.ndarray,
             size: tuple[float, float]) -> np.ndarray:  # -> [4, 3]
    a, b = 0.5 * size[0] * long_axis, 0.5 * size[1] * short_axis
    return np.stack([center + a + b, center - a + b, center - a - b, center + a - b])


def _refit(points: np.ndarray, normal: np.ndarray, offset: float, start: float) -> DepthPlane:
    """Least-squares plane through the points near ``normal . p = offset`` (3 passes)."""
    threshold = start
    rms = float("nan")
    count = 0
    for _ in range(3):
        near = np.abs(points @ normal - offset) < threshold
        count = int(near.sum())
        if count < 3:
            raise BenchError("the depth plane fit lost its inliers; check the depth scale")
        sel = points[near]
        centroid = sel.mean(axis=0)
        _, _, vt = np.linalg.svd(sel - centroid, full_matrices=False)
        fitted = vt[2] if float(vt[2] @ normal) > 0 else -vt[2]
        normal, offset = fitted, float(fitted @ centroid)
        rms = float(np.sqrt(np.mean((sel @ normal - offset) ** 2)))
        threshold = max(3.0 * rms, 0.005)
    return DepthPlane(normal=normal, offset=offset, rms=rms, inliers=count)


def _largest_patch(points: np.ndarray, up: np.ndarray, cell: float) -> np.ndarray:  # -> bool
    """Points of the largest 8-connected footprint (cells of ``cell`` m) in the plane."""
    from scipy import ndimage

    from bench.scene.register import plane_basis

    e1, e2 = plane_basis(up)
    xy = np.stack([points @ e1, points @ e2], axis=1)
    ij = np.floor((xy - xy.min(axis=0)) / cell).astype(np.int64)
    shape = tuple(ij.max(axis=0) + 1)
    grid = np.zeros(shape, dtype=bool)
    grid[ij[:, 0], ij[:, 1]] = True
    labels, count = ndimage.label(grid, structure=np.ones((3, 3)))
    per_point = labels[ij[:, 0], ij[:, 1]]
    sizes = np.bincount(per_point, minlength=count + 1)
    sizes[0] = 0
    return per_point == int(np.argmax(sizes))


def measure_table(points: np.ndarray, up: np.ndarray, *, config: AcceptanceConfig,  # [N, 3]
                  frames: int = 0) -> DepthTable:
    """The table (and floor) planes and footprint in back-projected depth points."""
    from bench.scene.register import dense_core, min_area_rect, plane_basis

    up = np.asarray(up, np.float64) / np.linalg.norm(up)
    h = points @ up
    lo = float(h.min())
    bins = np.floor((h - lo) / config.bin_m).astype(np.int64)
    counts = np.bincount(bins)
    table_bin = int(np.argmax(counts))
    level = lo + (table_bin + 0.5) * config.bin_m
    near = np.abs(h - level) < config.bin_m
    patch = _largest_patch(points[near], up, config.cell_m)
    plane = _refit(points[near][patch], up, level, config.bin_m)
    on = np.abs(points @ plane.normal - plane.offset) < max(3 * plane.rms, 0.005)
    on_idx = np.nonzero(on)[0]
    keep = _largest_patch(points[on_idx], plane.normal, config.cell_m)
    top = points[on_idx[keep]]
    e1, e2 = plane_basis(plane.normal)
    xy = np.stack([top @ e1, top @ e2], axis=1)
    core = dense_core(xy)
    centre2, size, theta = min_area_rect(xy[core])
    long_axis = math.cos(theta) * e1 + math.sin(theta) * e2
    centre = centre2[0] * e1 + centre2[1] * e2
    centre = centre + (plane.offset - centre @ plane.normal) * plane.normal
    floor = None
    below = bins <= table_bin - int(round(config.min_floor_gap / config.bin_m))
    if below.any():
        floor_counts = np.where(np.arange(len(counts)) <= table_bin - int(round(
            config.min_floor_gap / config.bin_m)), counts, 0)
        floor_bin = int(np.argmax(floor_counts))
        if floor_counts[floor_bin] >= config.min_floor_points:
            f_level = lo + (floor_bin + 0.5) * config.bin_m
            f_near = np.abs(h - f_level) < config.bin_m
            floor = _refit(points[f_near], up, f_level, config.bin_m)
    return DepthTable(up=up, plane=plane, center=centre, long_axis=long_axis, size=size,
                      floor=floor, points=len(points), frames=frames)


def depth_points(source, frames, *, config: AcceptanceConfig) -> np.ndarray:  # -> [N, 3]
    """Back-projected raw depth of ``frames`` (invalid depth and depth edges dropped)."""
    from bench.recon.rgbd import RgbdImportConfig, frame_points

    rgbd = RgbdImportConfig(layout=source.layout)
    pts = [frame_points(f, source, rgbd, stride=config.stride)[0] for f in frames]
    return np.concatenate(pts)


def floor_heights(source, frames, plane: DepthPlane, *, config: AcceptanceConfig
                  ) -> list[tuple[str, float]]:
    """(frame id, floor-to-table height in m) of every frame that sees enough floor.

    Per frame: the depth points more than ``min_floor_gap`` below the table plane, their
    most populated 1 cm height bin, refined to the median of the points within 1.5 cm of it.
    One floor plane over all frames mixes frames whose floors disagree by several cm (Kinect
    depth at 3 m and pose drift), so the acceptance compares with the median of the frames.
    """
    out = []
    for frame in frames:
        pts = depth_points(source, [frame], config=config)
        depth_below = plane.offset - pts @ plane.normal  # > 0 below the table top
        low = depth_below[depth_below > config.min_floor_gap]
        if len(low) < config.min_floor_points // max(1, config.stride ** 2 // 4):
            continue
        bins = np.floor(low / config.bin_m).astype(np.int64)
        mode = (int(np.argmax(np.bincount(bins))) + 0.5) * config.bin_m
        out.append((frame.id, float(np.median(low[np.abs(low - mode) < 0.015]))))
    return out


def compare_registration(registration, truth: DepthTable, *, config: AcceptanceConfig,
                         floor_to_table: float | None = None,
                         depth_floor_to_table: float | None = None) -> dict:
    """The four acceptance numbers of a registration against the measured table.

    Args:
        registration: A :class:`bench.scene.register.Registration` of a scan whose frame is
            the capture's world frame (metres).
        truth: The depth-measured table.
        config: Tolerances.
        floor_to_table: The registration's floor-to-table height (None: not found).
        depth_floor_to_table: The measured height (default: ``truth.floor_to_table``).

    Returns:
        A flat dict: ``up_error_deg``, ``plane_error_m`` (the registered table centre's
        distance to the depth plane, and the tilt between the two planes in degrees),
        ``footprint_error_m`` (largest corner distance, best of the rectangle's symmetric
        corner orders), centre / size / yaw errors, floor-to-table values, and ``*_ok`` flags.
    """
    fit = registration.fit
    scale = registration.scale
    measured = truth.floor_to_table if depth_floor_to_table is None else depth_floor_to_table
    up = fit.up
    up_err = math.degrees(math.acos(min(1.0, float(up @ truth.up))))
    centre = fit.center
    plane_err = abs(float(truth.plane.normal @ centre - truth.plane.offset)) * scale
    tilt = math.degrees(math.acos(min(1.0, abs(float(up @ truth.plane.normal)))))
    reg_corners = _corners(centre, fit.long_axis, fit.short_axis, fit.size) * scale
    true_corners = truth.corners()
    best = float("inf")
    for shift in range(4):  # the same rectangle listed from another corner / direction
        for order in (np.roll(np.arange(4), shift), np.roll(np.arange(4)[::-1], shift)):
            best = min(best, float(np.linalg.norm(reg_corners[order] - true_corners,
                                                  axis=1).max()))
    yaw = math.degrees(math.acos(min(1.0, abs(float(fit.long_axis @ truth.long_axis)))))
    size = (fit.size[0] * scale, fit.size[1] * scale)
    out = {
        "up_error_deg": up_err, "up_ok": up_err <= config.up_deg,
        "plane_error_m": plane_err, "plane_tilt_deg": tilt, "plane_ok": plane_err <= config.plane_m,
        "footprint_error_m": best, "footprint_ok": best <= config.footprint_m,
        "centre_error_m": float(np.linalg.norm(centre * scale - truth.center)),
        "size_registered_m": list(size), "size_depth_m": list(truth.size),
        "size_error_m": max(abs(size[0] - truth.size[0]), abs(size[1] - truth.size[1])),
        "yaw_error_deg": yaw,
        "floor_to_table_depth_m": measured,
        "floor_to_table_registered_m": floor_to_table,
    }
    if measured is not None and floor_to_table is not None:
        err = abs(floor_to_table - measured)
        out["floor_to_table_error_m"] = err
        out["floor_ok"] = err <= config.floor_m
    else:
        out["floor_to_table_error_m"] = None
        out["floor_ok"] = None
    return out


def registered_floor_to_table(registration) -> float | None:
    """Floor-to-table height from the registration's own plane patches (None: no floor).

    The floor is the heaviest patch parallel to the table (within 10 degrees) at least 0.3 m
    below it, in the registration's metres.
    """
    fit = registration.fit
    best = None
    for patch in fit.patches:
        if abs(float(patch.normal @ fit.up)) < math.cos(math.radians(10.0)):
            continue
        gap = float((fit.center - patch.centroid) @ fit.up) * registration.scale
        if gap > 0.3 and (best is None or patch.mass > best[0]):
            best = (patch.mass, gap)
    return None if best is None else best[1]
