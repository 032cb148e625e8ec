"""Which way is better for each quality metric (torch-free; shared by metrics and protocols).

The reliability classifier predicts "unreliable" when an *oriented* score
(higher is better) falls below a threshold, so every metric's direction must be
known without importing torch. The metrics registry reads this table too, so the
two can never disagree.
"""

from __future__ import annotations

# name -> True when a lower value means better quality
LOWER_BETTER: dict[str, bool] = {
    "psnr": False,
    "ssim": False,
    "lpips": True,
    "nvs-sqa": False,
    "crossscore": False,
}


def is_lower_better(metric: str) -> bool:
    """Direction of ``metric`` (case-insensitive; method labels like "LPIPS Test" accepted).

    Raises:
        ValueError: if the metric is unknown; pass the direction explicitly instead.
    """
    key = metric.strip().lower()
    if key in LOWER_BETTER:
        return LOWER_BETTER[key]
    head = key.split()[0] if key else key
    if head in LOWER_BETTER:
        return LOWER_BETTER[head]
    raise ValueError(
        f"unknown direction for metric {metric!r}; known: {', '.join(sorted(LOWER_BETTER))}. "
        "Pass lower_better=True/False explicitly."
    )


def orient(metric: str, value: float, *, lower_better: bool | None = None) -> float:
    """Return ``value`` oriented so that higher is better (negated when lower is better)."""
    lb = is_lower_better(metric) if lower_better is None else lower_better
    return -value if lb else value
