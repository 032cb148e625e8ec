"""Which way is better for each quality metric (torch-free; shared by metrics and protocols).

The reliability classifier predicts "unreliable" when an *oriented* score
(higher is better) falls below a threshold, so every metric's direction must be
known without importing torch. Directions are declared where a metric is
registered (:func:`metrics.registry.register_scorer`'s ``lower_better``, plugins
included; :func:`metrics.registry.register_direction` for metrics the bench only
reads, such as CrossScore); this module reads that table, so the two can never
disagree. :mod:`metrics.registry` imports numpy only (scorers load torch when built).
"""

from __future__ import annotations

from typing import Any


def lower_better_table() -> dict[str, bool]:
    """Lower-case metric name -> True when a lower value means better quality."""
    from metrics.registry import directions

    return directions()


def __getattr__(name: str) -> Any:
    if name == "LOWER_BETTER":  # the table, read when asked for (plugins may add to it)
        return lower_better_table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_lower_better(metric: str) -> bool:
    """Direction of ``metric`` (case-insensitive; method labels like "LPIPS Test" accepted).

    Raises:
        ValueError: if the metric is unknown; pass the direction explicitly instead.
    """
    table = lower_better_table()
    key = metric.strip().lower()
    if key in table:
        return table[key]
    head = key.split()[0] if key else key
    if head in table:
        return table[head]
    raise ValueError(
        f"unknown direction for metric {metric!r}; known: {', '.join(sorted(table))}. "
        "Pass lower_better=True/False explicitly."
    )


def orient(metric: str, value: float, *, lower_better: bool | None = None) -> float:
    """Return ``value`` oriented so that higher is better (negated when lower is better)."""
    lb = is_lower_better(metric) if lower_better is None else lower_better
    return -value if lb else value
