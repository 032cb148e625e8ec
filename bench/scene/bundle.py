"""Scene bundles: ``scene.json`` + ``background.ply`` (+ ``cameras/``, ``objects/``).

``scene.json`` (format ``splatbench-scene/1``)::

    {"format": "splatbench-scene/1", "name": "duo",
     "background": "background.ply",
     "world_from_splat": [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]],
     "table": {"center": [0.0, 0.0], "size": [1.2, 0.8], "yaw_deg": 0.0, "height": 0.0},
     "keepouts": [{"center": [0.1, 0.0, 0.05], "size": [0.1, 0.1, 0.1]}],
     "cameras": {"test": "cameras/test.json", "obs_probe": "cameras/probe.json"}}

World frame: metres, +z up. :func:`load_scene` maps the background from splat
to world coordinates with ``world_from_splat``; :func:`save_scene` maps it back,
so an edited bundle stays registered. Gaussians that an edit did not touch are
written back bit-exactly (the bundle remembers the splat-frame arrays it was
read from). Unknown ``scene.json`` keys are kept; ``cameras/`` and ``objects/``
are copied when a loaded bundle is saved elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.geometry import Similarity
from bench.provenance import atomic_write_bytes, atomic_write_json, read_json, staged_output_dir
from bench.safety import check_tree_closed, copy_tree_closed, is_within, resolve_inside
from bench.scene.gaussians import GaussianSplats
from bench.scene.ply import read_gaussians, stored_count, write_ply
from bench.scene.transforms import transform_splats, transform_splats_inplace

SCENE_FORMAT = "splatbench-scene/1"
SCENE_FILE = "scene.json"
BACKGROUND_FILE = "background.ply"
COPIED_FOLDERS = ("cameras", "objects")
#: Environment variable that lets scene.json name absolute paths (bundles are closed otherwise).
ALLOW_ABSOLUTE_ENV = "SPLATBENCH_ALLOW_ABSOLUTE_PATHS"
KNOWN_KEYS = {"format", "name", "background", "world_from_splat", "table", "keepouts", "cameras"}


class SceneWarning(UserWarning):
    """A suspicious but loadable scene (e.g. the table lies outside the background)."""


def _floats(value: Any, count: int, what: str) -> tuple[float, ...]:
    try:
        if isinstance(value, str | bytes | dict) or any(
                isinstance(v, bool | str | bytes) for v in value):
            raise TypeError  # "0.5" or true must not pass as numbers
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise BenchError(f"{what} must be a list of {count} numbers, got {value!r}") from None
    if len(out) != count or not all(math.isfinite(v) for v in out):
        raise BenchError(f"{what} must be {count} finite numbers, got {value!r}")
    return out


@dataclass(frozen=True)
class TableSpec:
    """The table top: a rectangle of the world xy plane at ``height``.

    Attributes:
        center: (x, y) of the footprint centre, metres.
        size: (sx, sy) full side lengths along the table's own x/y axes, metres (> 0).
        yaw_deg: Rotation of the table's x axis from world +x about +z, degrees.
        height: z of the table top, metres (YUBI: 0).
    """

    center: tuple[float, float] = (0.0, 0.0)
    size: tuple[float, float] = (1.2, 0.8)
    yaw_deg: float = 0.0
    height: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", _floats(self.center, 2, "table.center"))
        object.__setattr__(self, "size", _floats(self.size, 2, "table.size"))
        object.__setattr__(self, "yaw_deg", _floats([self.yaw_deg], 1, "table.yaw_deg")[0])
        object.__setattr__(self, "height", _floats([self.height], 1, "table.height")[0])
        if min(self.size) <= 0:
            raise BenchError(f"table footprint is empty (size {list(self.size)} m); "
                             "set table.size to two positive side lengths in metres")

    def to_local(self, xy: np.ndarray) -> np.ndarray:  # [N, 2] world -> [N, 2] table frame
        """World (x, y) into the table frame (origin at the centre, axes along the sides)."""
        yaw = math.radians(self.yaw_deg)
        c, s = math.cos(yaw), math.sin(yaw)
        d = np.asarray(xy, np.float64) - self.center
        return np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]], axis=1)

    def to_world(self, local_xy: np.ndarray) -> np.ndarray:  # [N, 2] table frame -> world
        """Table-frame xy points in the world (rotated by the yaw, shifted to the centre)."""
        yaw = math.radians(self.yaw_deg)
        c, s = math.cos(yaw), math.sin(yaw)
        u = np.asarray(local_xy, np.float64)
        rotated = np.stack([c * u[:, 0] - s * u[:, 1], s * u[:, 0] + c * u[:, 1]], axis=1)
        return rotated + self.center

    def contains_xy(self, xy: np.ndarray, *, margin: float = 0.0) -> np.ndarray:  # [N] bool
        """Whether world (x, y) points lie in the footprint expanded by ``margin`` metres."""
        local = self.to_local(xy)
        half = np.asarray(self.size) / 2.0 + margin
        return (np.abs(local[:, 0]) <= half[0]) & (np.abs(local[:, 1]) <= half[1])

    def corners(self, *, margin: float = 0.0) -> np.ndarray:  # [4, 2] world xy
        """World xy corners of the table top grown by ``margin`` metres."""
        hx, hy = self.size[0] / 2.0 + margin, self.size[1] / 2.0 + margin
        return self.to_world(np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy]]))

    def to_json(self) -> dict[str, Any]:
        """The table as its scene.json entry."""
        return {"center": list(self.center), "size": list(self.size), "yaw_deg": self.yaw_deg,
                "height": self.height}

    @staticmethod
    def from_json(data: Any) -> TableSpec:
        """Parse a scene.json ``table`` entry; BenchError names a bad or missing key."""
        if not isinstance(data, dict):
            raise BenchError(f"scene.json 'table' must be an object, got {data!r}")
        unknown = set(data) - {"center", "size", "yaw_deg", "height"}
        if unknown:
            raise BenchError(f"scene.json 'table' has unknown keys {sorted(unknown)}; "
                             "allowed: center, size, yaw_deg, height")
        return TableSpec(**data)


@dataclass(frozen=True)
class KeepoutBox:
    """An axis-aligned world box that floaters must keep clear of (task objects' area).

    Attributes:
        center: (x, y, z) box centre, metres.
        size: (sx, sy, sz) full side lengths, metres (> 0).
    """

    center: tuple[float, float, float]
    size: tuple[float, float, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", _floats(self.center, 3, "keepout.center"))
        object.__setattr__(self, "size", _floats(self.size, 3, "keepout.size"))
        if min(self.size) <= 0:
            raise BenchError(f"keepout box size {list(self.size)} m must be positive")

    def distance(self, points: np.ndarray) -> np.ndarray:  # [N, 3] -> [N], 0 inside
        """Euclidean distance from points to the box (0 inside)."""
        gap = np.abs(np.asarray(points, np.float64) - self.center) - np.asarray(self.size) / 2.0
        return np.linalg.norm(np.maximum(gap, 0.0), axis=1)

    def to_json(self) -> dict[str, Any]:
        """The box as its scene.json entry."""
        return {"center": list(self.center), "size": list(self.size)}

    @staticmethod
    def from_json(data: Any) -> KeepoutBox:
        """Parse a scene.json ``keepouts`` entry; BenchError names a bad key."""
        if not isinstance(data, dict) or set(data) != {"center", "size"}:
            raise BenchError(f"keepout entries need exactly 'center' and 'size', got {data!r}")
        return KeepoutBox(**data)


@dataclass(frozen=True, eq=False)
class SceneBundle:
    """A registered Gaussian scene.

    Attributes:
        name: Scene name.
        background: Background Gaussians in the WORLD frame (metres, +z up).
        world_from_splat: [4, 4] similarity from splat (file) to world coordinates.
        table: The table spec, or None for a scene without one.
        keepouts: Boxes floaters must avoid.
        cameras: Role -> camera file path relative to the bundle root.
        root: Directory the bundle was loaded from (None if built in code).
        extra_json: Unknown ``scene.json`` keys, written back unchanged.
        files: Relative path -> bytes of further files to write on save
            (e.g. camera files generated in code).
        dropped_nonfinite: Gaussians with NaN/Inf values dropped while loading
            (``load_scene(..., drop_nonfinite=True)``), recorded in edit manifests.
    """

    name: str
    background: GaussianSplats
    world_from_splat: np.ndarray = field(default_factory=lambda: np.eye(4))  # [4, 4]
    table: TableSpec | None = None
    keepouts: tuple[KeepoutBox, ...] = ()
    cameras: dict[str, str] = field(default_factory=dict)
    root: Path | None = None
    extra_json: dict[str, Any] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    # (world, splat) pair as read from disk: lets save_scene write untouched Gaussians bit-exactly.
    stored: tuple[GaussianSplats, GaussianSplats] | None = field(default=None, repr=False)
    dropped_nonfinite: int = 0

    def __post_init__(self) -> None:
        matrix = np.asarray(self.world_from_splat, dtype=np.float64)
        Similarity.from_matrix(matrix)  # validates: similarity with a proper rotation
        object.__setattr__(self, "world_from_splat", matrix)
        object.__setattr__(self, "keepouts", tuple(self.keepouts))

    @property
    def similarity(self) -> Similarity:
        """``world_from_splat`` as a similarity transform (rotation, translation, scale)."""
        return Similarity.from_matrix(self.world_from_splat)

    def replace(self, **changes: Any) -> SceneBundle:
        """A copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def with_background(self, world: GaussianSplats, *,
                        splat: GaussianSplats | None = None) -> SceneBundle:
        """A copy with a new world-frame background.

        Args:
            world: The new background, world frame.
            splat: The same Gaussians already in splat coordinates (written as-is
                on save; pass it only when it matches ``world``).
        """
        return self.replace(background=world, stored=(world, splat) if splat is not None else None)

    def splat_background(self) -> GaussianSplats:
        """The background in splat (file) coordinates, as :func:`save_scene` writes it."""
        if self.stored is not None and self.stored[0] is self.background:
            return self.stored[1]
        return transform_splats(self.background, self.similarity.inverse())

    def require_table(self) -> TableSpec:
        """The table spec; BenchError with the fix when the scene has none."""
        if self.table is None:
            raise BenchError(f"scene {self.name!r} has no table spec; add \"table\": "
                             '{"center": [x, y], "size": [sx, sy], "yaw_deg": 0, "height": 0} '
                             "to scene.json")
        return self.table

    def scene_json(self) -> dict[str, Any]:
        """The ``scene.json`` content of this bundle."""
        data = dict(self.extra_json)
        data.update({
            "format": SCENE_FORMAT,
            "name": self.name,
            "background": BACKGROUND_FILE,
            "world_from_splat": self.world_from_splat.tolist(),
            "keepouts": [k.to_json() for k in self.keepouts],
            "cameras": dict(self.cameras),
        })
        if self.table is not None:
            data["table"] = self.table.to_json()
        return data


def check_table_in_bounds(bundle: SceneBundle) -> None:
    """Warn (SceneWarning) when the table lies outside the background's bounding box."""
    if bundle.table is None or len(bundle.background) == 0:
        return
    means = bundle.background.means
    low, high = means.min(axis=0), means.max(axis=0)
    corners = bundle.table.corners()
    inside = ((corners >= low[:2]) & (corners <= high[:2])).all()
    inside &= low[2] <= bundle.table.height <= high[2]
    if not inside:
        warnings.warn(
            f"scene {bundle.name!r}: table (center {list(bundle.table.center)}, height "
            f"{bundle.table.height}) lies outside the background bounds "
            f"x [{low[0]:.2f}, {high[0]:.2f}] y [{low[1]:.2f}, {high[1]:.2f}] "
            f"z [{low[2]:.2f}, {high[2]:.2f}] m; check world_from_splat and the table spec",
            SceneWarning, stacklevel=2)


def _read_scene_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise BenchError(f"{path} not found; a scene bundle is a directory with scene.json and "
                         "background.ply (see `bench scene sample`)")
    data = read_json(path, what="scene file", fix="fix the file or regenerate the bundle")
    if not isinstance(data, dict):
        raise BenchError(f"{path}: must hold a JSON object")
    if data.get("format") != SCENE_FORMAT:
        raise BenchError(f"{path}: 'format' is {data.get('format')!r}, expected {SCENE_FORMAT!r}")
    return data


def read_scene_spec(path: str | os.PathLike, *,
                    allow_absolute: bool = False) -> tuple[SceneBundle, Path]:
    """Read and validate only ``scene.json`` (the background PLY is not touched).

    Args:
        path: Bundle directory (or its ``scene.json``).
        allow_absolute: Accept absolute ``background`` / camera paths (also
            enabled by the environment variable ``SPLATBENCH_ALLOW_ABSOLUTE_PATHS=1``).
            Relative paths must stay inside the bundle (symbolic links resolved) either way.

    Returns:
        A bundle with an empty background holding the name, registration, table,
        keepouts, camera roles, unknown keys and ``root``; and the background
        file path that ``scene.json`` names.

    Raises:
        BenchError: Missing/invalid scene.json, a non-similarity ``world_from_splat``,
            an empty table footprint, malformed keepouts or camera roles.
    """
    from bench.swap import recover

    path = Path(path)
    root = path.parent if path.name == SCENE_FILE else path
    recover(root, clean_staging=False)  # a bundle write killed mid-swap is rolled back first
    if not root.is_dir():
        raise BenchError(f"scene directory {root} not found; pass a bundle directory "
                         "(create one with `bench scene sample --out DIR`)")
    json_path = root / SCENE_FILE
    data = _read_scene_json(json_path)
    try:
        matrix = np.asarray(data.get("world_from_splat", np.eye(4).tolist()), dtype=np.float64)
    except (TypeError, ValueError):
        raise BenchError(f"{json_path}: world_from_splat must be a 4x4 list of numbers") from None
    Similarity.from_matrix(matrix, source=f"{json_path}: world_from_splat")  # validates
    table = TableSpec.from_json(data["table"]) if data.get("table") is not None else None
    keepouts = tuple(KeepoutBox.from_json(k) for k in data.get("keepouts") or [])
    cameras = data.get("cameras") or {}
    if not isinstance(cameras, dict) or not all(isinstance(v, str) for v in cameras.values()):
        raise BenchError(f"{json_path}: 'cameras' must map role names to relative file paths")
    allow_absolute = allow_absolute or os.environ.get(ALLOW_ABSOLUTE_ENV) == "1"
    fix = (f"use a path relative to the bundle that stays inside it (set {ALLOW_ABSOLUTE_ENV}=1 "
           "to allow absolute paths)")
    for role, rel in cameras.items():
        resolve_inside(root, rel, what=f'{json_path}: "cameras" role {role!r}',
                       allow_absolute=allow_absolute, fix=fix)
    background = resolve_inside(root, data.get("background", BACKGROUND_FILE),
                                what=f'{json_path}: "background"', allow_absolute=allow_absolute,
                                fix=fix)
    for folder in COPIED_FOLDERS:  # copied on save: refuse links leaving the bundle now
        if (root / folder).is_dir():
            check_tree_closed(root / folder)
    name = data.get("name", root.name)
    if not isinstance(name, str) or not name.strip():
        raise BenchError(f'{json_path}: "name" must be a non-empty string, got '
                         f"{type(name).__name__} {name!r:.40}; fix the scene name")
    spec = SceneBundle(
        name=name,
        background=GaussianSplats.empty(),
        world_from_splat=matrix,
        table=table,
        keepouts=keepouts,
        cameras=dict(cameras),
        root=root,
        extra_json={k: v for k, v in data.items() if k not in KNOWN_KEYS},
    )
    return spec, background


def load_scene(path: str | os.PathLike, *, drop_nonfinite: bool = False,
               allow_absolute: bool = False, keep_splat_frame: bool = True) -> SceneBundle:
    """Load a scene bundle; the background is returned in the world frame.

    Args:
        path: Bundle directory (or its ``scene.json``).
        drop_nonfinite: Drop NaN/Inf Gaussians instead of raising.
        allow_absolute: See :func:`read_scene_spec` (bundles are closed by default).
        keep_splat_frame: Keep the splat-frame arrays as read (so :func:`save_scene`
            writes untouched Gaussians bit-exactly). False maps the background into
            the world frame in place instead (same values; half the memory of a
            registered scene), for readers that never write the background back,
            such as ``bench render``.

    Raises:
        BenchError: Missing/invalid scene.json, a bad background file, a
            non-similarity ``world_from_splat``, an empty table footprint.
    """
    spec, background_path = read_scene_spec(path, allow_absolute=allow_absolute)
    splat, dropped = read_background(background_path, drop_nonfinite=drop_nonfinite)
    if keep_splat_frame:
        world = transform_splats(splat, spec.similarity)
        stored = (world, splat)
    else:
        world, stored = transform_splats_inplace(splat, spec.similarity), None
    del splat
    bundle = spec.replace(background=world, stored=stored, dropped_nonfinite=dropped)
    check_table_in_bounds(bundle)
    return bundle


def read_background(background_path: Path, *,
                    drop_nonfinite: bool = False) -> tuple[GaussianSplats, int]:
    """The background as stored (splat frame) and how many NaN/Inf Gaussians were dropped.

    Raises:
        BenchError: A bad or empty background file.
    """
    splat = read_gaussians(background_path, drop_nonfinite=drop_nonfinite)
    if len(splat) == 0:
        raise BenchError(f"{background_path}: the background holds 0 Gaussians; a scene needs "
                         "at least one (re-export the reconstruction)")
    dropped = stored_count(background_path) - len(splat) if drop_nonfinite else 0
    if dropped:
        warnings.warn(f"{background_path}: dropped {dropped} Gaussians with NaN/Inf "
                      f"values ({len(splat)} kept)", SceneWarning, stacklevel=3)
    return splat, dropped


def write_scene_files(bundle: SceneBundle, directory: str | os.PathLike) -> dict[str, Path]:
    """Write a bundle into an existing directory (no staging); returns the written paths.

    Used by :func:`save_scene` and by tools that add a manifest into the same
    staged directory.
    """
    directory = Path(directory)
    background = directory / BACKGROUND_FILE
    write_ply(background, bundle.splat_background())
    if bundle.root is not None and bundle.root.resolve() != directory.resolve():
        for folder in COPIED_FOLDERS:
            if (bundle.root / folder).is_dir():  # links leaving the folder are refused
                copy_tree_closed(bundle.root / folder, directory / folder)
        for rel in bundle.cameras.values():  # camera files kept outside cameras/
            source, target = bundle.root / rel, directory / rel
            inside = target.resolve().is_relative_to(directory.resolve())
            inside = inside and is_within(source, bundle.root)
            if inside and source.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    for rel, content in sorted(bundle.files.items()):
        atomic_write_bytes(directory / rel, content)
    scene = directory / SCENE_FILE
    atomic_write_json(scene, bundle.scene_json())
    return {"background": background, "scene": scene}


def bundle_owned_files(root: str | os.PathLike) -> set[str]:
    """Files of a bundle the bench owns: what an in-place write may replace or remove.

    ``scene.json``, ``background.ply``, the ownership marker, and every file a bench
    ``manifest.json`` in ``root`` lists (with the manifest itself). Anything else in the
    folder (notes, captures, a camera file the manifest does not list) is the user's and
    an in-place write leaves it untouched (:func:`bench.swap.install`).
    """
    from bench.safety import MARKER
    from bench.swap import bench_manifest_outputs

    return {SCENE_FILE, BACKGROUND_FILE, MARKER} | bench_manifest_outputs(root)


def save_scene(bundle: SceneBundle, path: str | os.PathLike, *, overwrite: bool = False,
               inputs: tuple = ()) -> Path:
    """Save a bundle to a new directory (staged: nothing is left behind on failure).

    Saving a loaded bundle back into its own root is an in-place write: only the
    bundle's own files (:func:`bundle_owned_files`) are replaced; the root must be a
    bench output (it carries the marker or a bench manifest).

    Args:
        bundle: The scene (background in the world frame).
        path: Output directory.
        overwrite: Replace an existing bench output directory.
        inputs: Further paths ``path`` may not overlap (the bundle's own root always counts).

    Returns:
        The output directory.
    """
    from bench.safety import real

    path = Path(path)
    if bundle.root is not None and real(path) == real(bundle.root):  # in place
        with staged_output_dir(path, overwrite=True, inputs=inputs,
                               owned_files=bundle_owned_files) as tmp:
            write_scene_files(bundle, tmp)
        return path
    with staged_output_dir(path, overwrite=overwrite, inputs=(bundle.root, *inputs)) as tmp:
        write_scene_files(bundle, tmp)
    return path
