"""The scorer registry: name -> factory + metadata (mode, direction, range, unit, version).

A scorer is registered with :func:`register_scorer`, which takes its direction
(``lower_better``) with the rest of its metadata; :func:`directions` is the one
table of metric directions, read by :mod:`protocols.metric_directions` too, so the
reliability classifier and the scorers can never disagree. Metrics the bench
only reads (scores computed elsewhere, e.g. YUBI's CrossScore) declare their
direction with :func:`register_direction`. Plugins add scorers from the
``splatbench.metrics`` entry-point group (docs/extending.md). ``pyiqa:<name>``
entries are resolved on demand from pyiqa's own model table and carry pyiqa's
own ``lower_better`` and ``metric_mode``.

Example:
    >>> from metrics.registry import get_scorer
    >>> lpips = get_scorer("lpips", device="cpu")
    >>> values = lpips(rendered, captured)  # [N] float64, lower is better
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from bench.registry import Registry, lazy
from metrics.base import Scorer, ScorerInfo, resolve_device

PYIQA_PREFIX = "pyiqa:"

SCORERS: Registry = Registry("scorer", group="splatbench.metrics")

#: Metrics the bench reads but does not compute: name -> lower_better.
_READ_ONLY: dict[str, bool] = {}


def register_scorer(factory: Callable[..., Scorer], *, name: str, mode: str,
                    lower_better: bool, input_range: tuple[float, float], unit: str,
                    version: str, arg_order: str, description: str,
                    min_size: int = 1) -> None:
    """Register a scorer with its metadata (:class:`metrics.base.ScorerInfo`'s fields).

    Args:
        factory: ``factory(info, *, device) -> Scorer``; :func:`bench.registry.lazy` keeps
            a heavy module (torch, weights) unimported until the scorer is built.
        name: Registry key (``bench score --metrics``).
        mode: ``"FR"`` (needs aligned references) or ``"NR"``.
        lower_better: True when a smaller value means better quality (LPIPS); the
            reliability classifier orients scores by it.
        input_range: Range of the float images it accepts.
        unit: ``"image"`` (one value per frame) or ``"sequence"`` (one per view sequence).
        version: Implementation id + version of what it reproduces.
        arg_order: ``"pred, ref"`` or ``"frames"``.
        description: One line for ``bench score --list-metrics``.
        min_size: Smallest image side, pixels, it accepts (1: any); a study refuses frames
            below it before running (``bench.study.preflight``).
    """
    if not isinstance(lower_better, bool):
        raise TypeError(f"scorer {name!r}: lower_better must be True or False, "
                        f"got {lower_better!r}")
    if name.lower() in _READ_ONLY:
        raise ValueError(f"scorer {name!r} is already registered as a read-only metric")
    info = ScorerInfo(name=name, mode=mode, lower_better=lower_better,
                      input_range=input_range, unit=unit, version=version,
                      arg_order=arg_order, description=description, min_size=min_size)
    meta = asdict(info)
    del meta["name"]  # the registry key
    SCORERS.register(info.name, factory, **meta)


def register_direction(name: str, *, lower_better: bool) -> None:
    """Declare the direction of a metric the bench reads but does not compute.

    Its scores come from elsewhere (``bench reliability --scores``); it is no scorer.
    """
    if not isinstance(lower_better, bool):
        raise TypeError(f"metric {name!r}: lower_better must be True or False, "
                        f"got {lower_better!r}")
    key = name.lower()
    if key in _READ_ONLY or key in {e.name.lower() for e in SCORERS.registered()}:
        raise ValueError(f"metric {name!r} already has a direction")
    _READ_ONLY[key] = lower_better


def directions() -> dict[str, bool]:
    """Every known metric's direction (lower-case name -> lower_better), plugins included."""
    return {**{e.name.lower(): e.meta["lower_better"] for e in SCORERS}, **_READ_ONLY}


register_scorer(
    lazy("metrics.psnr", "PSNR"),
    name="psnr",
    mode="FR",
    lower_better=False,
    input_range=(0.0, 1.0),
    unit="image",
    version="psnr/1 (RGB, data range 1)",
    arg_order="pred, ref",
    description="peak signal-to-noise ratio over RGB, dB",
)
register_scorer(
    lazy("metrics.ssim", "SSIM"),
    name="ssim",
    mode="FR",
    lower_better=False,
    input_range=(0.0, 1.0),
    unit="image",
    version="ssim/1 (Gaussian sigma 1.5, K1 0.01, K2 0.03; = scikit-image)",
    arg_order="pred, ref",
    description="structural similarity, per channel then mean",
    min_size=11,  # its Gaussian window (metrics.ssim.WIN_SIZE)
)
register_scorer(
    lazy("metrics.lpips_scorer", "LPIPS"),
    name="lpips",
    mode="FR",
    lower_better=True,
    input_range=(0.0, 1.0),
    unit="image",
    version="lpips/1 (lpips 0.1.4, AlexNet, linear layers v0.1)",
    arg_order="pred, ref (symmetric)",
    description="learned perceptual distance, AlexNet + v0.1 linear layers",
    min_size=31,  # the smallest side AlexNet's conv/pool stack accepts before its 2nd max-pool
)
register_scorer(
    lazy("metrics.nvs_sqa_scorer", "NVSSQA"),
    name="nvs-sqa",
    mode="NR",
    lower_better=False,
    input_range=(0.0, 1.0),
    unit="sequence",
    version="nvs-sqa/1 (nvs-sqa 0.1.1, checkpoint v0.0.1)",
    arg_order="frames (ordered sequence of views)",
    description="no-reference NVS quality (predicted JOD) of an ordered view sequence",
    min_size=69,  # the smallest side for which the view encoder's pools leave 2+ px to pad
)
# CrossScore (YUBI-Real2Sim's published scores; `bench reliability` reads them)
register_direction("crossscore", lower_better=False)


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
