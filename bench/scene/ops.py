"""Library side of ``bench scene init | edit | crop``: build, edit and crop bundles.

Each operation returns a :class:`BundleResult` (the bundle, with camera files and
previews in ``bundle.files``, plus what its manifest records); :func:`write_bundle`
writes it into a staged directory with its ``manifest.json``, so an output is
complete or absent.

``scene.json`` of an initialised bundle carries a ``registration`` object
(tool, mode, scale and its source, gravity rule, plane RMS, source file and
format, ``cameras: "generated"``) and an ``edits`` list that ``edit`` appends to.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.geometry import Similarity
from bench.provenance import (
    atomic_write_json,
    make_manifest,
    read_json,
    sha256_file,
    staged_output_dir,
)
from bench.scene.bundle import KeepoutBox, SceneBundle, TableSpec, load_scene, write_scene_files
from bench.scene.register import TOOL as INIT_TOOL
from bench.scene.register import (
    RegisterConfig,
    Registration,
    ScaleSpec,
    check_scan,
    parse_world_matrix,
    register_scan,
)
from bench.scene.transforms import transform_splats

EDIT_TOOL = "scene-edit/1"
CROP_TOOL = "scene-crop/1"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
CAMERA_ROLES = {"test": "cameras/test.json", "obs_probe": "cameras/probe.json"}


@dataclass
class BundleResult:
    """A bundle ready to write, and its manifest content.

    Attributes:
        bundle: The scene (background in the world frame; extra files in ``bundle.files``).
        tool: Manifest tool id (``scene-init/1`` ...).
        params: Resolved parameters.
        seed: Seed used (None for deterministic-only operations).
        inputs: Name -> {"path", "sha256"} of the inputs, hashed before writing.
        counts: Integer counts.
        extra: Further manifest fields.
        registration: The registration (init and re-fitting edits).
        fmt: Input scan format (init).
    """

    bundle: SceneBundle
    tool: str
    params: dict[str, Any]
    seed: int | None
    inputs: dict[str, dict[str, str]]
    counts: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    registration: Registration | None = None
    fmt: str = ""


def _hash_inputs(paths: dict[str, Path]) -> dict[str, dict[str, str]]:
    return {k: {"path": Path(p).name, "sha256": sha256_file(p)} for k, p in paths.items()}


def _bundle_inputs(path: Path) -> dict[str, dict[str, str]]:
    from bench.scene.bundle import SCENE_FILE, read_scene_spec

    spec, background = read_scene_spec(path)
    return _hash_inputs({"scene": spec.root / SCENE_FILE, "background": background})


def write_bundle(result: BundleResult, out: str | Path, *, overwrite: bool,
                 inputs: tuple = (), in_place: bool = False) -> Path:
    """Write the bundle + ``manifest.json`` into ``out`` (staged; nothing half-written).

    ``inputs`` (paths or ``(flag, path)`` pairs) must not overlap ``out`` (bench.safety).
    ``in_place``: ``out`` is the bundle that was read; only its own files are replaced
    (:func:`bench.scene.bundle.bundle_owned_files`), the user's files in it are kept.
    """
    from bench.scene.bundle import bundle_owned_files

    out = Path(out)
    with staged_output_dir(out, overwrite=overwrite, inputs=inputs,
                           owned_files=bundle_owned_files if in_place else None) as tmp:
        written = write_scene_files(result.bundle, tmp)
        outputs = dict(written)
        for rel in sorted(result.bundle.files):
            outputs[rel] = tmp / rel
        manifest = make_manifest(tool=result.tool, params=result.params, seed=result.seed,
                                 inputs=None, outputs=outputs, counts=result.counts,
                                 extra=result.extra)
        manifest["inputs"] = result.inputs
        atomic_write_json(tmp / "manifest.json", manifest)
    return out


def _check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise BenchError(f"scene name {name!r} must match [A-Za-z0-9][A-Za-z0-9._-]*; "
                         "pass --name with letters, digits, '.', '_' or '-'")
    return name


def _previews(bundle: SceneBundle, *, previews: bool, backend: str) -> dict[str, bytes]:
    if not previews or bundle.table is None:
        return {}
    from bench.scene.preview import render_previews

    return render_previews(bundle.background, bundle.table, bundle.keepouts, backend=backend)


def _keepouts(raw: Sequence[Sequence[float]]) -> tuple[KeepoutBox, ...]:
    return tuple(KeepoutBox(center=tuple(k[:3]), size=tuple(k[3:])) for k in raw)


# --------------------------------------------------------------------------- init
def build_init_bundle(scan: Path, *, name: str, cfg: RegisterConfig | None = None,
                      scale: ScaleSpec | None = None, up: Sequence[float] | None = None,
                      table_center: Sequence[float] | None = None,
                      table_yaw_deg: float | None = None, table_height: float = 0.0,
                      world_from_splat_file: str | Path | None = None,
                      keepouts: Sequence[Sequence[float]] = (), drop_nonfinite: bool = False,
                      previews: bool = True, backend: str = "cpu") -> BundleResult:
    """Read a raw scan, register it and build the bundle.

    Registration is :func:`bench.scene.register.register_scan`; the bundle holds the
    background, registration, table, keepouts, Test / OBS-Probe cameras and previews.

    Raises:
        BenchError: Unreadable or broken scan, no table (one line with the fixes), bad options.
    """
    from bench.scene.formats import read_scan
    from bench.scene.preview import camera_files

    cfg = cfg or RegisterConfig()
    _check_name(name)
    if not math.isfinite(table_height):
        raise BenchError(f"--table-height must be finite, got {table_height}")
    splats, fmt, dropped = read_scan(scan, drop_nonfinite=drop_nonfinite)
    if dropped:
        warnings.warn(f"{scan}: dropped {dropped} Gaussians with NaN/Inf values "
                      f"({len(splats)} kept)", stacklevel=2)
    check_scan(splats, source=str(scan), min_gaussians=cfg.min_gaussians)
    matrix = None
    input_paths = {"scan": Path(scan)}
    if world_from_splat_file is not None:
        path = Path(world_from_splat_file)
        matrix = parse_world_matrix(read_json(path, what="--world-from-splat file",
                                              fix="pass a JSON 4x4 list or a scene.json"))
        input_paths["world_from_splat"] = path
    reg = register_scan(splats, cfg=cfg, up=None if up is None else np.asarray(up, float),
                        table_center=None if table_center is None else np.asarray(table_center,
                                                                                  float),
                        table_yaw_deg=table_yaw_deg, table_height=table_height, scale=scale,
                        world_from_splat=matrix)
    world = transform_splats(splats, reg.world_from_splat)
    boxes = _keepouts(keepouts)
    record = {"tool": INIT_TOOL, "mode": reg.mode, "scale": reg.scale,
              "scale_source": reg.scale_source, "gravity_rule": reg.fit.gravity_rule,
              "plane_rms": reg.fit.rms, "source": {"file": Path(scan).name, "format": fmt},
              "cameras": "generated"}
    bundle = SceneBundle(
        name=name, background=world, world_from_splat=reg.world_from_splat, table=reg.table,
        keepouts=boxes, cameras=dict(CAMERA_ROLES), files=camera_files(reg.table),
        extra_json={"registration": record, "edits": []}, stored=(world, splats))
    bundle.files.update(_previews(bundle, previews=previews, backend=backend))
    params = {"scan": str(scan), "name": name, "format": fmt, "config": dataclasses.asdict(cfg),
              "table_size": None if scale is None else scale.table_size,
              "known_distance": None if scale is None else scale.known_distance,
              "up": up, "table_center": table_center, "table_yaw_deg": table_yaw_deg,
              "table_height": table_height,
              "world_from_splat": None if matrix is None else str(world_from_splat_file),
              "keepouts": [b.to_json() for b in boxes], "previews": previews,
              "backend": backend}
    counts = {"gaussians": len(splats), "dropped_nonfinite": dropped,
              "table_inliers": reg.fit.inliers, "plane_patches": len(reg.fit.patches)}
    return BundleResult(bundle, INIT_TOOL, params, cfg.seed, _hash_inputs(input_paths), counts,
                        {"registration": reg.details(), "table": reg.table.to_json()},
                        registration=reg, fmt=fmt)


# --------------------------------------------------------------------------- edit
def _given(value: Any) -> bool:
    """An option the user set (0 and 0.0 are values; None, () and False are not)."""
    return not (value is None or value is False or (isinstance(value, tuple) and not value))


@dataclass(frozen=True)
class EditSpec:
    """What ``bench scene edit`` changes (world frame, metres and degrees; None = keep).

    Registration edits are applied first (rotate about +z, then scale, then
    translate, all about the world origin) and carry the table and keepouts with
    the scene; ``world_from_splat_file`` replaces the registration and re-fits the
    table; the table and keepout fields are applied last.
    """

    rotate_z_deg: float | None = None
    translate: tuple[float, float, float] | None = None
    scale: float | None = None
    world_from_splat_file: str | Path | None = None
    table_center: tuple[float, float] | None = None
    table_size: tuple[float, float] | None = None
    table_yaw_deg: float | None = None
    table_height: float | None = None
    add_keepouts: tuple[tuple[float, ...], ...] = ()
    remove_keepouts: tuple[int, ...] = ()
    clear_keepouts: bool = False
    seed: int = 0

    def is_empty(self) -> bool:
        """True when no operation is requested (every option unset; the seed does not count)."""
        fields = dataclasses.asdict(self)
        fields.pop("seed")
        return not any(_given(v) for v in fields.values())

    def delta(self) -> np.ndarray:  # [4, 4] world_new_from_world_old
        """The similarity of the registration edits (rotate, scale, translate)."""
        yaw = math.radians(self.rotate_z_deg or 0.0)
        c, s = math.cos(yaw), math.sin(yaw)
        k = self.scale if self.scale is not None else 1.0
        if not (k > 0 and math.isfinite(k)):
            raise BenchError(f"--scale must be a positive number, got {self.scale}")
        matrix = np.eye(4)
        matrix[:3, :3] = k * np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        if self.translate is not None:
            matrix[:3, 3] = self.translate
        return matrix


def carry_table(table: TableSpec, delta: Similarity) -> TableSpec:
    """The table moved with the scene by a similarity that turns about +z only."""
    centre = delta.apply_points(np.array([[*table.center, table.height]]))[0]
    yaw = math.degrees(math.atan2(delta.rotation[1, 0], delta.rotation[0, 0]))
    return TableSpec(center=(float(centre[0]), float(centre[1])),
                     size=(table.size[0] * delta.scale, table.size[1] * delta.scale),
                     yaw_deg=(table.yaw_deg + yaw + 180.0) % 360.0 - 180.0,
                     height=float(centre[2]))


def carry_keepout(box: KeepoutBox, delta: Similarity) -> KeepoutBox:
    """A keepout moved with the scene: the axis-aligned box around its moved corners.

    The box grows when the turn is not a multiple of 90 degrees (keepouts are axis-aligned).
    """
    c, h = np.asarray(box.center), np.asarray(box.size) / 2.0
    signs = np.array([[a, b, d] for a in (-1, 1) for b in (-1, 1) for d in (-1, 1)])
    moved = delta.apply_points(c + signs * h)
    lo, hi = moved.min(axis=0), moved.max(axis=0)
    return KeepoutBox(center=tuple(((lo + hi) / 2).tolist()),
                      size=tuple(np.round(hi - lo, 12).tolist()))


def edit_bundle(path: Path, spec: EditSpec, *, previews: bool = True,
                backend: str = "cpu") -> BundleResult:
    """Apply an :class:`EditSpec` to a bundle (see ``bench scene edit --help``)."""
    from bench.scene.preview import camera_files

    bundle = load_scene(path)
    inputs = _bundle_inputs(path)
    splat = bundle.splat_background()
    old = bundle.similarity
    table, keepouts = bundle.table, tuple(bundle.keepouts)
    matrix = bundle.world_from_splat
    refit = None
    if spec.world_from_splat_file is not None:
        new = parse_world_matrix(read_json(spec.world_from_splat_file,
                                           what="--world-from-splat file",
                                           fix="pass a JSON 4x4 list or a scene.json"))
        delta = Similarity.from_matrix(new @ old.inverse().matrix())
        refit = register_scan(splat, cfg=RegisterConfig(seed=spec.seed), world_from_splat=new)
        table, matrix = refit.table, new
        keepouts = tuple(carry_keepout(k, delta) for k in keepouts)
    delta = Similarity.from_matrix(spec.delta())
    if not delta.is_identity():
        matrix = delta.matrix() @ matrix
        table = None if table is None else carry_table(table, delta)
        keepouts = tuple(carry_keepout(k, delta) for k in keepouts)
    table = _edit_table(table, spec)
    keepouts = _edit_keepouts(keepouts, spec)
    Similarity.from_matrix(matrix)  # still a similarity
    world = bundle.background if np.array_equal(matrix, bundle.world_from_splat) else \
        transform_splats(splat, matrix)
    record = dict(bundle.extra_json.get("registration") or {})
    edits = list(bundle.extra_json.get("edits") or [])
    params = {k: v for k, v in dataclasses.asdict(spec).items() if _given(v)}
    params["world_from_splat_file"] = None if spec.world_from_splat_file is None else str(
        spec.world_from_splat_file)
    edits.append({"tool": EDIT_TOOL, **{k: v for k, v in params.items() if v is not None}})
    extra_json = dict(bundle.extra_json)
    extra_json["edits"] = edits
    if refit is not None:
        record.update({"mode": refit.mode, "scale": refit.scale, "plane_rms": refit.fit.rms})
    if record:
        record["scale"] = Similarity.from_matrix(matrix).scale
        extra_json["registration"] = record
    files = {}
    if record.get("cameras") == "generated" and table is not None:
        files.update(camera_files(table))  # cameras follow the table
    edited = bundle.replace(world_from_splat=matrix, table=table, keepouts=keepouts,
                            extra_json=extra_json, files=files,
                            background=world, stored=(world, splat))
    edited.files.update(_previews(edited, previews=previews, backend=backend))
    counts = {"gaussians": len(splat), "keepouts": len(keepouts)}
    extra = {"table": None if table is None else table.to_json(),
             "world_from_splat": matrix.tolist()}
    if refit is not None:
        extra["registration"] = refit.details()
    return BundleResult(edited, EDIT_TOOL, params, spec.seed if refit else None, inputs, counts,
                        extra, registration=refit)


def _edit_table(table: TableSpec | None, spec: EditSpec) -> TableSpec | None:
    changes = {k: v for k, v in (("center", spec.table_center), ("size", spec.table_size),
                                 ("yaw_deg", spec.table_yaw_deg),
                                 ("height", spec.table_height)) if v is not None}
    if not changes:
        return table
    if table is None:
        if "center" not in changes or "size" not in changes:
            raise BenchError("the bundle has no table; pass at least --table-center X Y and "
                             "--table-size SX SY")
        table = TableSpec()
    return dataclasses.replace(table, **changes)


def _edit_keepouts(keepouts: tuple[KeepoutBox, ...], spec: EditSpec) -> tuple[KeepoutBox, ...]:
    if spec.clear_keepouts:
        keepouts = ()
    bad = [i for i in spec.remove_keepouts if not 0 <= i < len(keepouts)]
    if bad:
        raise BenchError(f"--remove-keepout {bad[0]}: the bundle has {len(keepouts)} keepouts "
                         f"(valid numbers 0..{len(keepouts) - 1})")
    keepouts = tuple(k for i, k in enumerate(keepouts) if i not in set(spec.remove_keepouts))
    return keepouts + _keepouts(spec.add_keepouts)


# --------------------------------------------------------------------------- crop
def crop_bundle(path: Path, *, boxes: Sequence[Sequence[float]] | None = None,
                use_keepouts: bool = False, margin: float = 0.0, previews: bool = True,
                backend: str = "cpu") -> BundleResult:
    """Remove background Gaussians whose centres lie in world boxes (grown by ``margin``).

    Gaussians outside every box are written back bit-exactly (splat frame subset).
    """
    if not (margin >= 0 and math.isfinite(margin)):
        raise BenchError(f"--margin must be >= 0 metres, got {margin}")
    bundle = load_scene(path)
    inputs = _bundle_inputs(path)
    if use_keepouts:
        chosen = tuple(bundle.keepouts)
        if not chosen:
            raise BenchError(f"{path} has no keepout boxes; pass --box CX CY CZ SX SY SZ or add "
                             "keepouts with `bench scene edit --keepout ...`")
    else:
        chosen = _keepouts(boxes or ())
    means = bundle.background.means
    inside = np.zeros(len(means), bool)
    per_box = []
    for box in chosen:
        grown = KeepoutBox(center=box.center, size=tuple(s + 2 * margin for s in box.size))
        hit = grown.distance(means) == 0.0
        per_box.append(int((hit & ~inside).sum()))
        inside |= hit
    keep = ~inside
    if not keep.any():  # issue 30: a bundle of 0 Gaussians is refused by every reader
        raise BenchError(f"the boxes remove all {len(means):,} Gaussians of {path} (nothing "
                         "would be left; `bench scene info` refuses an empty background); "
                         "use smaller boxes or a smaller --margin")
    splat = bundle.splat_background()
    world = bundle.background.subset(keep)
    cropped = bundle.replace(files={}).with_background(world, splat=splat.subset(keep))
    cropped.files.update(_previews(cropped, previews=previews, backend=backend))
    counts = {"input": len(means), "removed": int(inside.sum()), "kept": int(keep.sum()),
              "boxes": len(chosen)}
    params = {"boxes": [b.to_json() for b in chosen], "source": "keepouts" if use_keepouts
              else "box", "margin": margin, "previews": previews, "backend": backend}
    return BundleResult(cropped, CROP_TOOL, params, None, inputs, counts,
                        {"removed_per_box": per_box})
