"""Image-quality scorers and the view protocols they are computed on.

Scorers live in a registry (:mod:`metrics.registry`): ``psnr``, ``ssim``,
``lpips``, ``nvs-sqa`` and ``pyiqa:<name>``. Each carries its mode (FR/NR),
direction, input range, averaging unit and version. View protocols (Test,
OBS-Probe, OBS-Policy) are in :mod:`metrics.views`; ``bench score`` is in
:mod:`metrics.cli`. Heavy imports (torch, lpips, nvs_sqa, pyiqa) happen on use.
New scorers: :func:`metrics.registry.register_scorer` (docs/extending.md; plugins:
entry-point group ``splatbench.metrics``).
"""

from metrics.registry import SCORERS, ScorerInfo, get_scorer, register_scorer, scorer_info

__all__ = ["SCORERS", "ScorerInfo", "get_scorer", "register_scorer", "scorer_info"]
