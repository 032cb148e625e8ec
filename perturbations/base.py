"""Shared types of the background editors: edit statistics and parameter validation.

Every editor is a pure function::

    edit(splats, params, rng, *, table, keepouts=()) -> (GaussianSplats, EditStats)

``splats`` are background Gaussians in the WORLD frame (metres, +z up),
``params`` a frozen dataclass of the editor, ``rng`` a ``numpy.random.Generator``
(editors that draw nothing ignore it), ``table`` the scene's
:class:`bench.scene.bundle.TableSpec` and ``keepouts`` its keepout boxes. The
input is never modified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.errors import BenchError


@dataclass(frozen=True, eq=False)
class EditStats:
    """What an editor did.

    Attributes:
        removed: Gaussians deleted.
        added: Gaussians appended.
        moved: Gaussians whose position changed.
        source_index: [N_out] int64, index of the input Gaussian each output row
            comes from, -1 for added Gaussians.
        details: JSON-able specifics (apex, cluster centres, domes ...) for the manifest.
        changed: [N_out] bool, True for output rows copied from an input row and then
            modified (None: unknown; consumers compare rows themselves).
    """

    removed: int
    added: int
    moved: int
    source_index: np.ndarray  # [N_out]
    details: dict[str, Any] = field(default_factory=dict)
    changed: np.ndarray | None = None  # [N_out]

    def counts(self) -> dict[str, int]:
        """The counts as a JSON object (removed, added, moved)."""
        return {"removed": int(self.removed), "added": int(self.added), "moved": int(self.moved)}


def check_positive(value: float, name: str, unit: str) -> float:
    """``value`` as a float; BenchError naming ``name`` and ``unit`` unless finite and > 0."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise BenchError(f"{name} must be a positive number of {unit}, got {value!r}")
    return float(value)


def check_non_negative(value: float, name: str, unit: str) -> float:
    """``value`` as a float; BenchError naming ``name`` and ``unit`` unless finite and >= 0."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise BenchError(f"{name} must be a non-negative number of {unit}, got {value!r}")
    return float(value)


def check_range(value: Any, name: str, unit: str, *, low_min: float = 0.0) -> tuple[float, float]:
    """A (low, high) pair with ``low_min <= low <= high``, both finite."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise BenchError(
            f"{name} must be two numbers (low high) in {unit}, got {value!r}"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low_min <= low <= high):
        raise BenchError(f"{name} must satisfy {low_min} <= low <= high ({unit}), got {value!r}")
    return (low, high)


def check_count(value: Any, name: str) -> int:
    """``value`` as an int; BenchError naming ``name`` unless an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise BenchError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
