"""The perturbation registry: editors and their study presets, keyed by string.

Entries are editors (``hole``, ``floaters``, ``warp``) and presets, which are
the same editors with fixed parameters (``hole-54`` = hole with a 54-degree
half-angle). An editor is registered once, with :func:`register_editor` (the
built-in ones below; a plugin's from its ``splatbench.editors`` entry point, see
docs/extending.md), which also registers its bare entry and its presets.
Metadata of every entry: ``kind`` (editor name), ``version``, ``params_type``
(the dataclass), ``preset`` (parameter overrides, {} for a bare editor),
``description``, ``flags`` (parameter field -> ``bench perturb`` flag name, where
they differ) and ``copies_sh_rest``, which every editor declares (True: every
output row's SH rest is a copy of its source row's, new rows get their own; the
editor never computes SH rest from other values, so
:func:`perturbations.apply.perturb_scene` may hand it the splat-frame SH instead of
rotating the scene's SH into the world; False: it gets world-frame SH).

:func:`resolve_edit` turns an entry name and parameter overrides into a
:class:`ResolvedEdit` (editor, resolved parameters, tool id): the one place an
edit's parameters are resolved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.registry import Entry, Registry
from perturbations import floaters as _floaters
from perturbations import hole as _hole
from perturbations import warp as _warp

PERTURBATIONS: Registry = Registry("perturbation", group="splatbench.editors")

#: Flags of ``bench perturb`` that are not editor parameters (an editor's flag may not take
#: one of these names).
RESERVED_FLAGS = frozenset({"help", "kind", "preset", "scene", "out", "seed", "overwrite",
                            "drop-nonfinite"})


def _editor_meta(kind: str, params_type: type, *, version: Any, description: str,
                 copies_sh_rest: bool, flags: Mapping[str, str] | None) -> dict[str, Any]:
    """The metadata every entry of editor ``kind`` carries (checked; ``preset`` added later)."""
    if not isinstance(copies_sh_rest, bool):
        raise TypeError(f"editor {kind!r}: copies_sh_rest must be True or False, "
                        f"got {copies_sh_rest!r}")
    if not dataclasses.is_dataclass(params_type):
        raise TypeError(f"editor {kind!r}: params_type must be a dataclass, got {params_type!r}")
    fields = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(flags or {}) - fields)
    if unknown:
        raise ValueError(f"editor {kind!r}: flags name no field(s) {', '.join(unknown)} of "
                         f"{params_type.__name__}")
    meta = {"kind": kind, "version": version, "params_type": params_type,
            "description": description, "flags": dict(flags or {}),
            "copies_sh_rest": copies_sh_rest}
    _check_flags(meta)
    return meta


def _register_entry(name: str, editor: Callable[..., Any], meta: Mapping[str, Any],
                    overrides: Mapping[str, Any], *, description: str) -> None:
    params_type = meta["params_type"]
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"preset {name!r}: {meta['kind']} has no parameter(s) "
                         f"{', '.join(unknown)}")
    PERTURBATIONS.register(name, editor, **{**meta, "preset": dict(overrides),
                                            "description": description})


def register_editor(kind: str, editor: Callable[..., Any], params_type: type, *,
                    version: Any, description: str, copies_sh_rest: bool,
                    flags: Mapping[str, str] | None = None,
                    presets: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Register an editor: its bare entry ``kind`` (the dataclass defaults) and its presets.

    Args:
        kind: Editor name (``bench perturb --kind``; the tool id is ``kind/version``).
        editor: ``editor(splats, params, rng, *, table, keepouts) -> (splats, EditStats)``
            (:mod:`perturbations.base`).
        params_type: Frozen parameter dataclass; every field with ``metadata["help"]``
            becomes a ``bench perturb`` flag (:mod:`bench.cli_fields`).
        version: Implementation version (bump it when outputs change).
        description: One line for listings.
        copies_sh_rest: Required: True when every output row's SH rest is a copy of its
            source row's (new rows get their own), so the editor may be handed splat-frame
            SH rest; False when it computes SH rest from other values.
        flags: Field name -> flag name (without ``--``) where they differ; a flag that
            another editor has too must mean the same (same field, default and help).
        presets: Preset name -> parameter overrides; a preset named ``kind`` is the bare
            entry itself and must have no overrides.
    """
    meta = _editor_meta(kind, params_type, version=version, description=description,
                        copies_sh_rest=copies_sh_rest, flags=flags)
    presets = dict(presets or {})
    if presets.get(kind):
        raise ValueError(f"editor {kind!r}: a preset named like the editor has no overrides")
    if kind not in presets:
        _register_entry(kind, editor, meta, {}, description=description)
    for name, overrides in presets.items():
        _register_entry(name, editor, meta, overrides, description=f"{description} ({name})")


def preset_names() -> list[str]:
    """The study's artifact conditions, in study order (the built-in presets)."""
    return list(PRESETS)


def editor_names() -> list[str]:
    """The editors (``hole``, ``floaters``, ``warp``, then plugins'), in registration order."""
    return list(dict.fromkeys(entry.meta["kind"] for entry in PERTURBATIONS))


def registered_presets() -> list[str]:
    """Every preset (``bench perturb --preset``): the study's, then the plugins'."""
    plugins = [e.name for e in PERTURBATIONS
               if e.name != e.meta["kind"] and e.name not in PRESETS]
    return [*PRESETS, *plugins]


def tool_id(name: str) -> str:
    """``"<editor>/<version>"`` for an entry, e.g. ``"hole/1"``."""
    return _tool(PERTURBATIONS.entry(name))


def _tool(entry: Entry) -> str:
    return f"{entry.meta['kind']}/{entry.meta['version']}"


def make_params(name: str, **overrides: Any) -> Any:
    """Resolved parameter dataclass of an entry: preset values, then ``overrides``."""
    return _params(PERTURBATIONS.entry(name), overrides)


def _params(entry: Entry, overrides: Mapping[str, Any]) -> Any:
    params_type = entry.meta["params_type"]
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{entry.meta['kind']} has no parameter(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return params_type(**{**entry.meta["preset"], **overrides})


@dataclass(frozen=True, eq=False)
class ResolvedEdit:
    """A registry entry with its parameters resolved: everything an edit needs but the scene.

    Attributes:
        name: Registry entry (preset or editor name).
        editor: The editor function.
        params: The resolved parameter dataclass (preset values, then ``overrides``).
        tool: Editor id + version, e.g. ``"hole/1"``.
        copies_sh_rest: The editor's declaration (see the module docstring).
        overrides: Parameters given on top of the entry's.
    """

    name: str
    editor: Callable[..., Any]
    params: Any
    tool: str
    copies_sh_rest: bool
    overrides: dict[str, Any] = field(default_factory=dict)


def resolve_edit(name: str, **overrides: Any) -> ResolvedEdit:
    """Entry ``name`` with ``overrides`` applied: the editor, its parameters and tool id.

    Raises:
        ValueError: unknown entry or parameter; BenchError: a parameter out of range.
    """
    entry = PERTURBATIONS.entry(name)
    return ResolvedEdit(name=name, editor=entry.obj, params=_params(entry, overrides),
                        tool=_tool(entry), copies_sh_rest=bool(entry.meta["copies_sh_rest"]),
                        overrides=dict(overrides))


# --------------------------------------------------------------------------- CLI flags


@dataclass(frozen=True)
class EditorFlag:
    """One editor-parameter flag of ``bench perturb``.

    Attributes:
        flag: Flag name without ``--`` (``angle``, ``band-range``).
        field: The parameter field it sets.
        editors: The editors that have it (several when they share the parameter).
        named: For a flag that picks a named value of the field (``--band low``): name ->
            value, from the field's ``metadata["named_values"]``; None for the field's own.
    """

    flag: str
    field: str
    editors: tuple[str, ...]
    named: Mapping[str, Any] | None = None

    @property
    def dest(self) -> str:
        """The argparse dest (``band_range``)."""
        return self.flag.replace("-", "_")


def _field_flags(meta: Mapping[str, Any]) -> list[tuple[str, dataclasses.Field, bool]]:
    """(flag name, field, named) of one editor, in field order; a named flag first."""
    out = []
    for f in dataclasses.fields(meta["params_type"]):
        if "help" not in f.metadata:
            continue
        if "named_values" in f.metadata:
            out.append((f.metadata["named_flag"], f, True))
        out.append((meta["flags"].get(f.name, f.name).replace("_", "-"), f, False))
    return out


def _same_flag(a: dataclasses.Field, b: dataclasses.Field) -> bool:
    return (a.name == b.name and a.type == b.type and a.default == b.default
            and a.default_factory == b.default_factory and dict(a.metadata) == dict(b.metadata))


def _check_flags(meta: Mapping[str, Any]) -> None:
    """Refuse an editor whose flags cannot be built or clash with another editor's."""
    import argparse

    from bench.cli_fields import add_dataclass_arguments

    kind, mine = meta["kind"], _field_flags(meta)
    seen = {}
    for other in PERTURBATIONS.registered():
        if other.meta["kind"] != kind:
            for flag, f, named in _field_flags(other.meta):
                seen.setdefault(flag, (other.meta["kind"], f, named))
    for flag, f, named in mine:
        if flag in RESERVED_FLAGS:
            raise ValueError(f"editor {kind!r}: flag --{flag} is a bench perturb option; "
                             f"name it with flags={{{f.name!r}: ...}}")
        if flag in seen:
            other, g, other_named = seen[flag]
            if named != other_named or not _same_flag(f, g):
                raise ValueError(f"editor {kind!r}: flag --{flag} is editor {other!r}'s with "
                                 f"another meaning; name it with flags={{{f.name!r}: ...}}")
    scratch = argparse.ArgumentParser(add_help=False)  # fails here, not in `bench --help`
    for flag, f, named in mine:
        if named:
            scratch.add_argument(f"--{flag}", choices=list(f.metadata["named_values"]))
        else:
            add_dataclass_arguments(scratch, meta["params_type"], only=(f.name,),
                                    flags={f.name: flag}, parser_defaults=False)


def editor_flags() -> list[EditorFlag]:
    """Every editor-parameter flag of ``bench perturb``, in the order they are checked.

    Each editor's own flags (editors in registration order, fields in dataclass order),
    then the flags several editors share (``--margin``, ``--slab``: hole and warp).
    """
    found: dict[str, tuple[str, list[str], Mapping[str, Any] | None]] = {}
    for kind in editor_names():
        meta = PERTURBATIONS.entry(kind).meta
        for flag, f, named in _field_flags(meta):
            values = f.metadata["named_values"] if named else None
            found.setdefault(flag, (f.name, [], values))[1].append(kind)
    flags = [EditorFlag(flag, name, tuple(editors), values)
             for flag, (name, editors, values) in found.items()]
    order = {kind: i for i, kind in enumerate(editor_names())}
    own = sorted((f for f in flags if len(f.editors) == 1), key=lambda f: order[f.editors[0]])
    return [*own, *[f for f in flags if len(f.editors) > 1]]


# --------------------------------------------------------------------------- built-in editors

# The built-in editors (register_editor's arguments) and the study's presets. Registered in
# two steps so the entries keep their order: bare editors, then presets in study order
# ("warp" is both the editor and its default preset).
_BUILTIN: dict[str, dict[str, Any]] = {
    "hole": dict(editor=_hole.hole, params_type=_hole.HoleParams, version=_hole.VERSION,
                 description="remove background Gaussians in an upward cone above the table",
                 copies_sh_rest=True,  # kept rows are copies; nothing is added
                 flags={"half_angle_deg": "angle"}),
    "floaters": dict(editor=_floaters.floaters, params_type=_floaters.FloaterParams,
                     version=_floaters.VERSION,
                     description="append opaque Gaussian clusters in a height band above the "
                     "table",
                     copies_sh_rest=True,  # originals copied; floaters get zero SH rest
                     flags={"band": "band-range", "num_clusters": "clusters",
                            "scale": "floater-scale"}),
    "warp": dict(editor=_warp.warp, params_type=_warp.WarpParams, version=_warp.VERSION,
                 description="lift table-region Gaussians with smooth domes",
                 copies_sh_rest=True,  # only means move
                 flags={"num_domes": "domes", "height_range": "dome-height",
                        "radius_range": "dome-radius"}),
}
PRESETS = {
    "hole-54": ("hole", {"half_angle_deg": 54.0}),
    "hole-90": ("hole", {"half_angle_deg": 90.0}),
    "floaters-low": ("floaters", {"band": _floaters.BANDS["low"]}),
    "floaters-mid": ("floaters", {"band": _floaters.BANDS["mid"]}),
    "floaters-high": ("floaters", {"band": _floaters.BANDS["high"]}),
    "warp": ("warp", {}),
}

_builtin_meta = {}
for _kind, _spec in _BUILTIN.items():
    _builtin_meta[_kind] = _editor_meta(
        _kind, _spec["params_type"], version=_spec["version"], description=_spec["description"],
        copies_sh_rest=_spec["copies_sh_rest"], flags=_spec["flags"])
    if _kind not in PRESETS:
        _register_entry(_kind, _spec["editor"], _builtin_meta[_kind], {},
                        description=_spec["description"])
for _name, (_kind, _overrides) in PRESETS.items():
    _register_entry(_name, _BUILTIN[_kind]["editor"], _builtin_meta[_kind], _overrides,
                    description=f"{_BUILTIN[_kind]['description']} ({_name})")
