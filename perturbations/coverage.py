"""Coverage-ablation plans: which capture frames a reduced-coverage retraining keeps.

The YUBI study retrains the background from fewer images (``PAPERS.md``, Coverage).
Every source frame of a capture is reprojected into nine pinhole views (one
forward view ``L_f`` and eight tilted ones, see :mod:`bench.recon.reproject`).
A *plan* says which frames, and which of their views, a retraining may use:

========================  =========================================================
``full``                  every frame, all nine views (the clean reconstruction)
``central-pinhole``       every frame, forward view only
``contiguous``            forward views minus one consecutive interval of
                          ``n_remove`` time-ordered frames; the interval's start is
                          drawn from ``np.random.default_rng(seed)``
``random``                forward views minus ``n_remove`` frames drawn without
                          replacement from ``np.random.default_rng(seed)``
========================  =========================================================

``n_remove = round_half_up(fraction * N)``. Python's built-in ``round()`` rounds
half-way cases to the nearest *even* integer (banker's rounding: ``round(2.5) == 2``),
which is not what "round 30% of N" means in the paper, so this module rounds
half-way cases *up* explicitly (``2.5 -> 3``). The product is computed exactly on the
decimal value of ``fraction`` (``Fraction(repr(fraction))``), so ``0.3 * 150`` is
exactly 45 and not ``44.999...``. With ``fraction = 0.30`` the kept counts are the
paper's: N = 192 -> 134, 150 -> 105, 219 -> 153.

Held-out test views are not frames of a plan: they live in a separate list of the
capture manifest (:mod:`bench.recon.capture`) and can never be kept.

This module imports only the standard library and numpy (no torch, mujoco, warp).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.provenance import read_json
from bench.registry import Registry

PLAN_FORMAT = "splatbench-coverage-plan/1"
TOOL_ID = "coverage/1"

# A plan function: (number of time-ordered frames, n_remove, rng) -> removed frame indices.
PlanFunction = Callable[[int, int, np.random.Generator], np.ndarray]

COVERAGE_PLANS: Registry[PlanFunction] = Registry("coverage plan")


def round_half_up(value: Fraction | int) -> int:
    """Round a non-negative exact number to the nearest integer, half-way cases up.

    Unlike Python's ``round()`` (banker's rounding: ``round(0.5) == 0``,
    ``round(2.5) == 2``), ``round_half_up(Fraction(5, 2)) == 3``.
    """
    value = Fraction(value)
    if value < 0:
        raise ValueError(f"round_half_up expects a non-negative value, got {value}")
    return math.floor(value + Fraction(1, 2))


def removal_count(num_frames: int, fraction: float) -> int:
    """``n_remove = round_half_up(fraction * num_frames)``, computed exactly.

    Args:
        num_frames: Number of time-ordered source frames N (>= 0).
        fraction: Fraction of frames to remove, in [0, 1).

    Returns:
        The number of frames to remove.
    """
    _check_fraction(fraction)
    # repr() is the shortest decimal string that round-trips the float: 0.3 -> "0.3".
    return round_half_up(Fraction(repr(float(fraction))) * num_frames)


def _check_fraction(fraction: float) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise BenchError(f"fraction must be a number in [0, 1), got {fraction!r}")
    if not math.isfinite(fraction) or not 0.0 <= fraction < 1.0:
        raise BenchError(
            f"fraction {fraction} is outside [0, 1); "
            "pass e.g. --fraction 0.3 to remove 30% of the frames"
        )


@COVERAGE_PLANS.register("full", views="all", uses_fraction=False,
                         description="all frames, all nine views per frame")
def _plan_full(num_frames: int, n_remove: int, rng: np.random.Generator) -> np.ndarray:  # [0]
    return np.zeros(0, dtype=np.int64)


@COVERAGE_PLANS.register("central-pinhole", views="forward", uses_fraction=False,
                         description="all frames, forward view L_f only")
def _plan_central(num_frames: int, n_remove: int, rng: np.random.Generator) -> np.ndarray:  # [0]
    return np.zeros(0, dtype=np.int64)


@COVERAGE_PLANS.register("contiguous", views="forward", uses_fraction=True,
                         description="forward views minus one consecutive interval of frames")
def _plan_contiguous(num_frames: int, n_remove: int, rng: np.random.Generator) -> np.ndarray:
    start = int(rng.integers(0, num_frames - n_remove + 1))  # every start position equally likely
    return np.arange(start, start + n_remove, dtype=np.int64)  # [n_remove]


@COVERAGE_PLANS.register("random", views="forward", uses_fraction=True,
                         description="forward views minus frames drawn at random")
def _plan_random(num_frames: int, n_remove: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(num_frames, size=n_remove, replace=False)).astype(np.int64)


@dataclass(frozen=True)
class CoveragePlan:
    """Which time-ordered source frames (and which of their views) a retraining keeps.

    Attributes:
        mode: Registered plan name (``full``, ``central-pinhole``, ``contiguous``, ``random``).
        views: ``"all"`` (nine views per kept frame) or ``"forward"`` (``L_f`` only).
        fraction: Removed fraction for ``contiguous``/``random``; None for the others.
        seed: Seed of ``np.random.default_rng`` used for the draw.
        frames: All frame ids, in time order.
        kept: Kept frame ids, in time order.
        removed: Removed frame ids, in time order.
    """

    mode: str
    views: str
    fraction: float | None
    seed: int
    frames: tuple[str, ...]
    kept: tuple[str, ...]
    removed: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-able manifest (tool id, params, seed, counts, frame lists)."""
        from bench.provenance import make_manifest

        return make_manifest(
            tool=TOOL_ID,
            params={"mode": self.mode, "views": self.views, "fraction": self.fraction},
            seed=self.seed,
            counts={
                "frames": len(self.frames),
                "kept": len(self.kept),
                "removed": len(self.removed),
            },
            extra={
                "format": PLAN_FORMAT,
                "frames": list(self.frames),
                "kept": list(self.kept),
                "removed": list(self.removed),
            },
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan JSON atomically (deterministic bytes)."""
        from bench.provenance import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @staticmethod
    def from_dict(data: dict[str, Any], *, source: str = "plan") -> CoveragePlan:
        """Rebuild and validate a plan from :meth:`to_dict` output."""
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            raise BenchError(
                f"{source} is not a coverage plan (format {PLAN_FORMAT!r} expected); "
                "create one with `bench coverage plan`"
            )
        try:
            params = data["params"]
            plan = CoveragePlan(
                mode=str(params["mode"]),
                views=str(params["views"]),
                fraction=None if params["fraction"] is None else float(params["fraction"]),
                seed=int(data["seed"]),
                frames=tuple(str(f) for f in data["frames"]),
                kept=tuple(str(f) for f in data["kept"]),
                removed=tuple(str(f) for f in data["removed"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(f"{source} is missing or has a malformed field ({exc}); "
                             "recreate it with `bench coverage plan`") from None
        plan.validate(source=source)
        return plan

    @staticmethod
    def load(path: str | os.PathLike) -> CoveragePlan:
        """Read and validate a plan JSON file."""
        path = Path(path)
        data = read_json(path, what="coverage plan", fix="create it with `bench coverage plan`")
        return CoveragePlan.from_dict(data, source=f"coverage plan {path}")

    def validate(self, *, source: str = "plan") -> None:
        """Check internal consistency: kept + removed partition ``frames``, order kept."""
        entry = COVERAGE_PLANS.entry(self.mode)
        if self.views != entry.meta["views"]:
            raise BenchError(f"{source}: mode {self.mode!r} uses views {entry.meta['views']!r}, "
                             f"not {self.views!r}")
        if len(set(self.frames)) != len(self.frames):
            raise BenchError(f"{source}: frame ids are not unique")
        kept, removed, frames = set(self.kept), set(self.removed), set(self.frames)
        problem = None
        if kept & removed:
            problem = f"frame {sorted(kept & removed)[0]!r} is both kept and removed"
        elif (kept | removed) - frames:
            problem = f"frame {sorted((kept | removed) - frames)[0]!r} is not in its frame list"
        elif frames - (kept | removed):
            problem = f"frame {sorted(frames - (kept | removed))[0]!r} is neither kept nor removed"
        elif len(self.kept) + len(self.removed) != len(self.frames):
            problem = "a frame is listed twice in kept or removed"
        if problem:
            raise BenchError(f"{source}: kept and removed frames do not partition the frame list "
                             f"({problem}); recreate the plan with `bench coverage plan`")
        order = {f: i for i, f in enumerate(self.frames)}
        for name, ids in (("kept", self.kept), ("removed", self.removed)):
            positions = [order[f] for f in ids]
            if positions != sorted(positions):
                raise BenchError(f"{source}: {name} frames are not in time order")

    def check_against(self, frame_ids: Sequence[str], *, source: str = "plan") -> None:
        """Refuse a plan made for another capture: its frames must be exactly ``frame_ids``.

        Raises:
            BenchError: naming the first frame the plan references that the manifest lacks
                (or the reverse), and how to fix it.
        """
        known = set(frame_ids)
        missing = [f for f in self.frames if f not in known]
        if missing:
            raise BenchError(
                f"{source} references frame {missing[0]!r} ({len(missing)} in all) that the "
                "capture manifest does not have; recreate the plan from this manifest with "
                "`bench coverage plan`"
            )
        if tuple(self.frames) != tuple(frame_ids):
            raise BenchError(
                f"{source} was made for a different frame list ({len(self.frames)} frames vs "
                f"{len(frame_ids)} in the manifest); recreate it with `bench coverage plan`"
            )


def _frame_ids(frames: Sequence[Any]) -> list[str]:
    ids = [f if isinstance(f, str) else getattr(f, "id", None) for f in frames]
    if any(not isinstance(i, str) or not i for i in ids):
        raise BenchError("frames must be non-empty string ids or objects with an `id` attribute")
    return ids


def make_plan(
    frames: Sequence[Any], mode: str, *, fraction: float = 0.3, seed: int = 0
) -> CoveragePlan:
    """Make a deterministic coverage plan over time-ordered source frames.

    Args:
        frames: Source frames in time order: string ids, or objects with an ``id``
            attribute (e.g. :class:`bench.recon.capture.SourceFrame`).
        mode: A registered plan name: ``full``, ``central-pinhole``, ``contiguous``, ``random``.
        fraction: Fraction of frames removed by ``contiguous``/``random``, in [0, 1);
            ``n_remove = round_half_up(fraction * N)``. Ignored (recorded as None) by
            ``full`` and ``central-pinhole``, but still validated.
        seed: Seed of ``np.random.default_rng`` (>= 0).

    Returns:
        A :class:`CoveragePlan` with ``kept`` and ``removed`` frame ids in time order.

    Raises:
        BenchError: empty or duplicate frame ids, fraction outside [0, 1), negative seed.
        ValueError: unknown mode (with close matches).

    Example:
        >>> plan = make_plan([f"f{i:03d}" for i in range(192)], "random", fraction=0.3, seed=0)
        >>> len(plan.kept), len(plan.removed)
        (134, 58)
    """
    entry = COVERAGE_PLANS.entry(mode)
    ids = _frame_ids(frames)
    if not ids:
        raise BenchError("no frames to plan over: the capture manifest lists no source frames")
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise BenchError(f"frame id {duplicate!r} appears more than once; frame ids must be unique")
    _check_fraction(fraction)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise BenchError(f"seed must be a non-negative integer, got {seed!r}")
    uses_fraction = bool(entry.meta["uses_fraction"])
    n_remove = removal_count(len(ids), fraction) if uses_fraction else 0
    removed_idx = entry.obj(len(ids), n_remove, np.random.default_rng(int(seed)))
    removed_set = {int(i) for i in removed_idx}
    return CoveragePlan(
        mode=mode,
        views=str(entry.meta["views"]),
        fraction=float(fraction) if uses_fraction else None,
        seed=int(seed),
        frames=tuple(ids),
        kept=tuple(f for i, f in enumerate(ids) if i not in removed_set),
        removed=tuple(f for i, f in enumerate(ids) if i in removed_set),
    )
