"""The scorer registry: name -> factory + metadata (mode, direction, range, unit, version).

Directions of the built-in scorers come from
:data:`protocols.metric_directions.LOWER_BETTER`, so the reliability
classifier and the scorers can never disagree. ``pyiqa:<name>`` entries are
resolved on demand from pyiqa's own model table and carry pyiqa's own
``lower_better`` and ``metric_mode``.

Example:
    >>> from metrics.registry import get_scorer
    >>> lpips = get_scorer("lpips", device="cpu")
    >>> values = lpips(rendered, captured)  # [N] float64, lower is better
"""

from __future__ import annotations

from dataclasses import asdict

from bench.registry import Registry, lazy
from metrics.base import Scorer, ScorerInfo, resolve_device
from protocols.metric_directions import is_lower_better

PYIQA_PREFIX = "pyiqa:"

SCORERS: Registry = Registry("scorer")


def _register(factory, **fields) -> None:
    info = ScorerInfo(lower_better=is_lower_better(fields["name"]), **fields)
    meta = asdict(info)
    del meta["name"]  # the registry key
    SCORERS.register(info.name, factory, **meta)


_register(
    lazy("metrics.psnr", "PSNR"),
    name="psnr",
    mode="FR",
    input_range=(0.0, 1.0),
    unit="image",
    version="psnr/1 (RGB, data range 1)",
    arg_order="pred, ref",
    description="peak signal-to-noise ratio over RGB, dB",
)
_register(
    lazy("metrics.ssim", "SSIM"),
    name="ssim",
    mode="FR",
    input_range=(0.0, 1.0),
    unit="image",
    version="ssim/1 (Gaussian sigma 1.5, K1 0.01, K2 0.03; = scikit-image)",
    arg_order="pred, ref",
    description="structural similarity, per channel then mean",
)
_register(
    lazy("metrics.lpips_scorer", "LPIPS"),
    name="lpips",
    mode="FR",
    input_range=(0.0, 1.0),
    unit="image",
    version="lpips/1 (lpips 0.1.4, AlexNet, linear layers v0.1)",
    arg_order="pred, ref (symmetric)",
    description="learned perceptual distance, AlexNet + v0.1 linear layers",
)
_register(
    lazy("metrics.nvs_sqa_scorer", "NVSSQA"),
    name="nvs-sqa",
    mode="NR",
    input_range=(0.0, 1.0),
    unit="sequence",
    version="nvs-sqa/1 (nvs-sqa 0.1.1, checkpoint v0.0.1)",
    arg_order="frames (ordered sequence of views)",
    description="no-reference NVS quality (predicted JOD) of an ordered view sequence",
)


def scorer_info(name: str) -> ScorerInfo:
    """Metadata of a registered scorer or of ``pyiqa:<name>``."""
    if name.startswith(PYIQA_PREFIX):
        from metrics.pyiqa_adapter import pyiqa_info

        return pyiqa_info(name[len(PYIQA_PREFIX) :])
    entry = SCORERS.entry(name)
    return ScorerInfo(name=entry.name, **entry.meta)


def get_scorer(name: str, *, device: str = "cpu") -> Scorer:
    """Build a scorer by name on ``device`` (``cpu``, ``cuda`` or ``auto``).

    Raises:
        ValueError: unknown name (with close matches), or a pyiqa metric whose
            weights are not available offline (naming the missing file).
    """
    if name.startswith(PYIQA_PREFIX):
        from metrics.pyiqa_adapter import PyiqaScorer

        return PyiqaScorer(name[len(PYIQA_PREFIX) :], device=resolve_device(device))
    entry = SCORERS.entry(name)
    return entry.obj(ScorerInfo(name=entry.name, **entry.meta), device=resolve_device(device))


def available() -> list[str]:
    """Names of the built-in scorers (pyiqa metrics are addressed as ``pyiqa:<name>``)."""
    return SCORERS.names()
