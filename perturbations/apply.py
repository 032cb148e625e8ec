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

from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
from bench.scene.bundle import BACKGROUND_FILE, SCENE_FILE, SceneBundle, write_scene_files
from bench.scene.gaussians import GaussianSplats
from bench.scene.transforms import Similarity, transform_splats
from perturbations.base import EditStats
from perturbations.registry import PERTURBATIONS, make_params, tool_id

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


def apply_perturbation(bundle: SceneBundle, name: str, *, seed: int = 0,
                       **overrides: Any) -> PerturbResult:
    """Apply registry entry ``name`` (editor or preset) to a bundle.

    Args:
        bundle: The input scene (needs a table spec).
        name: ``hole``, ``floaters``, ``warp`` or a preset such as ``hole-54``.
        seed: Seed of the ``numpy.random.Generator`` handed to the editor.
        **overrides: Parameter values replacing the preset's.

    Returns:
        The edited bundle, statistics, resolved parameters and tool id.
    """
    editor = PERTURBATIONS.get(name)
    params = make_params(name, **overrides)
    table = bundle.require_table()
    rng = np.random.default_rng(seed)
    world_in = bundle.background
    edited, stats = editor(world_in, params, rng, table=table, keepouts=bundle.keepouts)
    splat = to_splat_frame(edited, stats.source_index, world_in, bundle.splat_background(),
                           bundle.similarity, changed=stats.changed)
    return PerturbResult(bundle=bundle.with_background(edited, splat=splat), stats=stats,
                         params=params, tool=tool_id(name), name=name, seed=seed,
                         source_root=bundle.root, overrides=dict(overrides))


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
