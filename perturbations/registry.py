"""The perturbation registry: editors and their study presets, keyed by string.

Entries are editors (``hole``, ``floaters``, ``warp``) and presets, which are
the same editors with fixed parameters (``hole-54`` = hole with a 54-degree
half-angle). Metadata of every entry: ``kind`` (editor name), ``version``,
``params_type`` (the dataclass), ``preset`` (parameter overrides, {} for a bare
editor), ``description`` and ``copies_sh_rest`` (True: every output row's SH
rest is a copy of its source row's, new rows get their own; the editor never
computes SH rest from other values, so :func:`perturbations.apply.perturb_scene`
may hand it the splat-frame SH instead of rotating the scene's SH into the world).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.registry import Entry, Registry
from perturbations import floaters as _floaters
from perturbations import hole as _hole
from perturbations import warp as _warp

PERTURBATIONS: Registry = Registry("perturbation")

_EDITORS = {
    "hole": (_hole.hole, _hole.HoleParams, _hole.VERSION,
             "remove background Gaussians in an upward cone above the table"),
    "floaters": (_floaters.floaters, _floaters.FloaterParams, _floaters.VERSION,
                 "append opaque Gaussian clusters in a height band above the table"),
    "warp": (_warp.warp, _warp.WarpParams, _warp.VERSION,
             "lift table-region Gaussians with smooth domes"),
}
PRESETS = {
    "hole-54": ("hole", {"half_angle_deg": 54.0}),
    "hole-90": ("hole", {"half_angle_deg": 90.0}),
    "floaters-low": ("floaters", {"band": _floaters.BANDS["low"]}),
    "floaters-mid": ("floaters", {"band": _floaters.BANDS["mid"]}),
    "floaters-high": ("floaters", {"band": _floaters.BANDS["high"]}),
    "warp": ("warp", {}),
}

for _name, (_fn, _params, _version, _text) in _EDITORS.items():
    if _name not in PRESETS:  # "warp" is both the editor and its (default) preset
        PERTURBATIONS.register(_name, _fn, kind=_name, version=_version, params_type=_params,
                               preset={}, description=_text, copies_sh_rest=True)
for _name, (_kind, _overrides) in PRESETS.items():
    _fn, _params, _version, _text = _EDITORS[_kind]
    PERTURBATIONS.register(_name, _fn, kind=_kind, version=_version, params_type=_params,
                           preset=dict(_overrides), description=f"{_text} ({_name})",
                           copies_sh_rest=True)


def preset_names() -> list[str]:
    """The study's artifact conditions, in study order."""
    return list(PRESETS)


def editor_names() -> list[str]:
    """The bare editors (``hole``, ``floaters``, ``warp``), in registration order."""
    return list(_EDITORS)


def tool_id(name: str) -> str:
    """``"<editor>/<version>"`` for an entry, e.g. ``"hole/1"``."""
    entry = PERTURBATIONS.entry(name)
    return f"{entry.meta['kind']}/{entry.meta['version']}"


def make_params(name: str, **overrides: Any) -> Any:
    """Resolved parameter dataclass of an entry: preset values, then ``overrides``."""
    entry: Entry = PERTURBATIONS.entry(name)
    params_type = entry.meta["params_type"]
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{entry.meta['kind']} has no parameter(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return params_type(**{**entry.meta["preset"], **overrides})
