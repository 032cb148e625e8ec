"""Input checks shared by the protocol modules (messages say how to fix the call)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np


def check_count(name: str, value: object) -> int:
    """Return ``value`` as a non-negative int, or raise a ValueError naming the fix."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a whole number of trials, got {value!r}; pass an int")
    if isinstance(value, numbers.Integral):
        count = int(value)
    else:
        as_float = float(value)
        if not np.isfinite(as_float) or as_float != round(as_float):
            raise ValueError(
                f"{name} must be a whole number of trials, got {value!r}; "
                "pass integer counts (successes = rate x trials, rounded)"
            )
        count = int(round(as_float))
    if count < 0:
        raise ValueError(f"{name} must be >= 0, got {count}; counts cannot be negative")
    return count


def check_successes(
    k: object, n: object, *, k_name: str = "k", n_name: str = "n"
) -> tuple[int, int]:
    """Validate a (successes, trials) pair: 0 <= k <= n, both whole numbers."""
    k_int = check_count(k_name, k)
    n_int = check_count(n_name, n)
    if k_int > n_int:
        raise ValueError(
            f"{k_name}={k_int} successes exceed {n_name}={n_int} trials; "
            f"pass {k_name} <= {n_name} (did you swap the arguments?)"
        )
    return k_int, n_int


def check_confidence(confidence: float) -> float:
    """Validate a confidence level in the open interval (0, 1)."""
    value = float(confidence)
    if not 0.0 < value < 1.0:
        raise ValueError(
            f"confidence must lie strictly between 0 and 1, got {confidence!r}; e.g. 0.95 for 95%"
        )
    return value


def paired_vectors(
    first: Sequence[float], second: Sequence[float], *, names: tuple[str, str], min_len: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Two equal-length finite float vectors, or a ValueError naming the fix."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"{names[0]} and {names[1]} must be 1-D sequences of numbers")
    if a.shape != b.shape:
        raise ValueError(
            f"{names[0]} has {a.size} values but {names[1]} has {b.size}; "
            "pass one value per policy (or item) in the same order in both"
        )
    if a.size < min_len:
        raise ValueError(f"need at least {min_len} paired values, got {a.size}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"{names[0]} and {names[1]} must be finite; drop NaN/inf entries first")
    return a, b
