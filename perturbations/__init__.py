"""Deterministic background editors (hole, floaters, warp) and their registry.

Imports numpy and ``bench.scene`` only (no torch, mujoco or warp)::

    from perturbations import PERTURBATIONS, apply_perturbation
    result = apply_perturbation(bundle, "hole-54", seed=0)
    result = perturb_scene("scenes/room", "hole-54", seed=0)  # same result, ~half the memory

New editors: ``register_editor`` (docs/extending.md; plugins: entry-point group
``splatbench.editors``).
"""

from perturbations.apply import PerturbResult, apply_perturbation, perturb_scene
from perturbations.base import EditStats
from perturbations.floaters import FloaterParams, floaters
from perturbations.hole import HoleParams, hole
from perturbations.registry import (
    PERTURBATIONS,
    ResolvedEdit,
    make_params,
    preset_names,
    register_editor,
    resolve_edit,
    tool_id,
)
from perturbations.warp import WarpParams, warp

__all__ = [
    "PERTURBATIONS", "EditStats", "FloaterParams", "HoleParams", "PerturbResult",
    "ResolvedEdit", "WarpParams", "apply_perturbation", "floaters", "hole", "make_params",
    "perturb_scene", "preset_names", "register_editor", "resolve_edit", "tool_id", "warp",
]
