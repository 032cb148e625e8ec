"""Apply a registered editor to a scene bundle, keeping it registered.

Editors work in the world frame. When the bundle's ``world_from_splat`` is not
the identity, every output array that the edit left untouched is taken from the
splat-frame arrays read from disk (bit-exact), and only edited rows are mapped
back through the inverse similarity. So ``hole`` never perturbs a kept
Gaussian, and ``warp`` changes only the means of moved ones.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.geometry import Similarity
from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
from bench.scene.bundle import BACKGROUND_FILE, SCENE_FILE, SceneBundle, write_scene_files
from bench.scene.gaussians import GaussianSplats
from bench.scene.transforms import rotate_sh_rest, transform_splats
from perturbations.base import EditStats
from perturbations.registry import ResolvedEdit, resolve_edit

SIMILARITY_ARRAYS = ("means", "quats", "log_scales", "sh_rest")  # arrays the similarity changes


@dataclass(frozen=True, eq=False)
class PerturbResult:
    """An edited bundle with everything its manifest needs.

    Attributes:
        bundle: The edited scene (background in the world frame; splat frame cached).
        stats: Counts and details of the edit.
        params: The resolved parameter dataclass.
        tool: Editor id + version, e.g. ``"hole/1"``.
        name: Registry entry used (preset or editor name).
        seed: Seed of the Generator.
        source_root: Directory of the input bundle (None if built in code).
        overrides: Parameters given on top of the entry's (a preset with overrides is
            no longer the study condition; the manifest lists them).
    """

    bundle: SceneBundle
    stats: EditStats
    params: Any
    tool: str
    name: str
    seed: int
    source_root: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, edit: ResolvedEdit, bundle: SceneBundle, stats: EditStats, *, seed: int,
           source_root: Path | None) -> PerturbResult:
        """The result of ``edit`` (parameters, tool id, entry, overrides) on a scene."""
        return cls(bundle=bundle, stats=stats, params=edit.params, tool=edit.tool,
                   name=edit.name, seed=seed, source_root=source_root,
                   overrides=dict(edit.overrides))


def _resolved(name: str | ResolvedEdit, overrides: dict[str, Any]) -> ResolvedEdit:
    """``name`` resolved with ``overrides`` (an edit resolved before takes none)."""
    if isinstance(name, ResolvedEdit):
        if overrides:
            raise TypeError("pass parameter overrides to resolve_edit, not with a resolved edit")
        return name
    return resolve_edit(name, **overrides)


def _rows_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # [N, ...] x [N, ...] -> [N]
    return (a == b).all(axis=tuple(range(1, a.ndim)))


def to_splat_frame(edited: GaussianSplats, source_index: np.ndarray, world_in: GaussianSplats,
                   splat_in: GaussianSplats, similarity: Similarity, *,
                   changed: np.ndarray | None = None) -> GaussianSplats:
    """Map an edited world-frame set back to splat coordinates, reusing untouched rows.

    Args:
        edited: Editor output, world frame [N_out].
        source_index: [N_out] input row of each output row, -1 for added ones.
        world_in: Editor input, world frame [N_in].
        splat_in: The same input in splat coordinates, as read from disk [N_in].
        similarity: ``world_from_splat``.
        changed: [N_out] bool, rows the editor modified (None: compare every row).

    Returns:
        The edited set in splat coordinates: rows copied from ``splat_in`` where
        the similarity-affected arrays are unchanged, mapped through the
        inverse similarity elsewhere.
    """
    if similarity.is_identity():
        return edited
    has_source = source_index >= 0
    src = np.where(has_source, source_index, 0)
    if changed is None:
        changed = np.zeros(len(edited), dtype=bool)
        for name in SIMILARITY_ARRAYS:
            changed |= ~_rows_equal(getattr(edited, name), getattr(world_in, name)[src])
    redo = np.flatnonzero(~has_source | changed)
    mapped = transform_splats(edited.subset(redo), similarity.inverse())
    arrays = {}
    for name in SIMILARITY_ARRAYS:
        out = getattr(splat_in, name)[src]  # bit-exact copies of the stored rows
        keep = has_source[redo] & _rows_equal(getattr(edited, name)[redo],
                                               getattr(world_in, name)[src[redo]])
        out[redo[~keep]] = getattr(mapped, name)[~keep]
        arrays[name] = out
    return edited.replace(**arrays)


def apply_perturbation(bundle: SceneBundle, name: str | ResolvedEdit, *, seed: int = 0,
                       **overrides: Any) -> PerturbResult:
    """Apply registry entry ``name`` (editor or preset) to a bundle.

    Args:
        bundle: The input scene (needs a table spec).
        name: ``hole``, ``floaters``, ``warp`` or a preset such as ``hole-54``; or an
            edit resolved by :func:`perturbations.registry.resolve_edit`.
        seed: Seed of the ``numpy.random.Generator`` handed to the editor.
        **overrides: Parameter values replacing the preset's.

    Returns:
        The edited bundle, statistics, resolved parameters and tool id.
    """
    edit = _resolved(name, overrides)
    table = bundle.require_table()
    rng = np.random.default_rng(seed)
    world_in = bundle.background
    edited, stats = edit.editor(world_in, edit.params, rng, table=table,
                                keepouts=bundle.keepouts)
    splat = to_splat_frame(edited, stats.source_index, world_in, bundle.splat_background(),
                           bundle.similarity, changed=stats.changed)
    return PerturbResult.of(edit, bundle.with_background(edited, splat=splat), stats,
                            seed=seed, source_root=bundle.root)


def perturb_manifest(result: PerturbResult, outputs: dict[str, Path]) -> dict[str, Any]:
    """Manifest of one edit: tool, params, seed, input/output sha256, counts, details.

    ``counts`` has ``removed``/``added``/``moved`` of the edit, plus ``dropped_nonfinite``
    when NaN/Inf Gaussians were dropped on load.
    """
    inputs: dict[str, Path] = {}
    source = result.source_root
    if source is not None and (source / SCENE_FILE).is_file():
        scene = json.loads((source / SCENE_FILE).read_text(encoding="utf-8"))
        inputs = {"background": source / scene.get("background", BACKGROUND_FILE),
                  "scene": source / SCENE_FILE}
    counts = result.stats.counts()
    if result.bundle.dropped_nonfinite:  # dropped on load, before the edit (--drop-nonfinite)
        counts["dropped_nonfinite"] = int(result.bundle.dropped_nonfinite)
    return make_manifest(
        tool=result.tool, params=result.params, seed=result.seed, inputs=inputs,
        outputs=outputs, counts=counts,
        extra={"entry": result.name, "overrides": result.overrides,
               "details": result.stats.details, "scene_name": result.bundle.name},
    )


def condition_label(bundle_dir: str | os.PathLike) -> str | None:
    """The condition a perturbed bundle holds, from its ``manifest.json``; None for others.

    The registry entry applied (``hole-54``), with its overrides when any were given
    (``hole[radius=0.05]``). A perturbed bundle keeps the clean scene's name, so this is
    what tells it apart (``bench score``'s default variant label); it is read from the
    manifest every perturbed bundle already has, so no bundle's bytes change.
    """
    path = Path(bundle_dir) / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get("entry") if isinstance(data, dict) else None
    if not isinstance(entry, str) or not entry:
        return None
    overrides = data.get("overrides")
    if isinstance(overrides, dict) and overrides:
        return entry + "[" + ",".join(f"{k}={v}" for k, v in sorted(overrides.items())) + "]"
    return entry


def save_perturbed(result: PerturbResult, out: str | os.PathLike, *,
                   overwrite: bool = False, inputs: tuple = ()) -> Path:
    """Write the edited bundle + ``manifest.json`` into ``out`` (staged, all or nothing).

    ``out`` may not overlap the source bundle or any further ``inputs`` (``bench.safety``).
    """
    out = Path(out)
    inputs = (result.bundle.root, *inputs)
    with staged_output_dir(out, overwrite=overwrite, inputs=inputs) as tmp:
        paths = write_scene_files(result.bundle, tmp)
        atomic_write_json(tmp / "manifest.json", perturb_manifest(result, paths))
    return out


def perturb_scene(path: str | os.PathLike, name: str | ResolvedEdit, *, seed: int = 0,
                  drop_nonfinite: bool = False, **overrides: Any) -> PerturbResult:
    """``apply_perturbation(load_scene(path), name, ...)`` with about half the peak memory.

    The same result bit for bit (tested against that plain path, which stays the
    reference): same edited world-frame background, same splat-frame arrays
    written by :func:`save_perturbed`. Lower memory because the scene's SH rest
    (180 of the 248 bytes of an SH-3 Gaussian) is never rotated into the world
    frame for the edit: editors whose registry entry has ``copies_sh_rest`` only
    copy SH rows, so they get the splat-frame SH (and world-frame geometry); the
    splat-frame output takes those rows as they are, and only the edited result
    is rotated into the world, after the input is released. Other editors go
    through the plain path.

    Args:
        path: Scene bundle directory (or its ``scene.json``).
        name: Registry entry (editor or preset), or an edit resolved by
            :func:`perturbations.registry.resolve_edit` (then no ``overrides``).
        seed: Seed of the editor's Generator.
        drop_nonfinite: Drop NaN/Inf Gaussians on load instead of raising.
        **overrides: Parameter values replacing the preset's.
    """
    from bench.scene.bundle import (
        check_table_in_bounds,
        load_scene,
        read_background,
        read_scene_spec,
    )

    edit = _resolved(name, overrides)
    if not edit.copies_sh_rest:
        bundle = load_scene(path, drop_nonfinite=drop_nonfinite)
        return apply_perturbation(bundle, edit, seed=seed)
    spec, background_path = read_scene_spec(path)
    splat_in, dropped = read_background(background_path, drop_nonfinite=drop_nonfinite)
    similarity = spec.similarity
    # World-frame geometry, SH rest still in the splat frame (editor input only).
    world_in = transform_splats(splat_in, similarity, rotate_sh=False)
    check_table_in_bounds(spec.replace(background=world_in))  # reads the means only
    table = spec.require_table()
    edited, stats = edit.editor(world_in, edit.params, np.random.default_rng(seed), table=table,
                                keepouts=spec.keepouts)
    if similarity.is_identity():  # world_in is splat_in: nothing to map
        world = splat = edited
    else:
        new = np.flatnonzero(stats.source_index < 0)
        new_world_sh = edited.sh_rest[new].copy()  # the editor's own (world-frame) new rows
        splat = _splat_rows(edited, stats, world_in, splat_in, similarity)
        del world_in, splat_in  # the input is not needed any more
        if np.array_equal(similarity.rotation, np.eye(3)):
            world_sh = splat.sh_rest  # no rotation: both frames hold the same SH
        else:  # the edited background in the world frame: rotate the stored rows
            world_sh = rotate_sh_rest(splat.sh_rest, similarity.rotation)
            world_sh[new] = new_world_sh
        world = edited.replace(sh_rest=world_sh)
    bundle = spec.replace(dropped_nonfinite=dropped).with_background(world, splat=splat)
    return PerturbResult.of(edit, bundle, stats, seed=seed, source_root=spec.root)


def _splat_rows(edited: GaussianSplats, stats: EditStats, world_in: GaussianSplats,
                splat_in: GaussianSplats, similarity: Similarity) -> GaussianSplats:
    """:func:`to_splat_frame` for an editor that got splat-frame SH rest (``copies_sh_rest``).

    Geometry as in :func:`to_splat_frame`; SH rest: source rows are already the
    stored (splat-frame) rows, new rows are mapped through the inverse similarity.
    """
    source_index = stats.source_index
    has_source = source_index >= 0
    src = np.where(has_source, source_index, 0)
    changed = stats.changed
    if changed is None:
        changed = np.zeros(len(edited), dtype=bool)
        for name in ("means", "quats", "log_scales"):
            changed |= ~_rows_equal(getattr(edited, name), getattr(world_in, name)[src])
    redo = np.flatnonzero(~has_source | changed)
    mapped = transform_splats(edited.subset(redo), similarity.inverse())
    arrays = {}
    for name in ("means", "quats", "log_scales"):
        out = getattr(splat_in, name)[src]  # bit-exact copies of the stored rows
        keep = has_source[redo] & _rows_equal(getattr(edited, name)[redo],
                                               getattr(world_in, name)[src[redo]])
        out[redo[~keep]] = getattr(mapped, name)[~keep]
        arrays[name] = out
    sh_rest = edited.sh_rest
    new = ~has_source[redo]
    if new.any():  # new rows are few: map them in place unless the array is the input's
        if np.shares_memory(sh_rest, splat_in.sh_rest):
            sh_rest = sh_rest.copy()
        sh_rest[redo[new]] = mapped.sh_rest[new]
    arrays["sh_rest"] = sh_rest
    return edited.replace(**arrays)
