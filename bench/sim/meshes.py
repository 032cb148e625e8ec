"""Mesh objects from files (OBJ / STL / GLB / PLY, read by trimesh) and the bundle path helper.

A mesh object is scaled, re-centred so its origin is the centre of its
bounding box (``origin="bbox"``, default) or kept in the file's frame
(``origin="file"``), and given convex collision parts: the convex hull of the
visual mesh (``collision="hull"``), or a convex decomposition the user made
(V-HACD, CoACD, ...) given as a list of part files, each replaced by its own
convex hull. MuJoCo collides only convex geometry, so a concave object (a bowl,
a mug) needs the decomposition to be hollow.

Paths in task files and bundle ``objects/`` JSON are relative to the file that
names them and must stay inside its root: :func:`resolve_relative` refuses
absolute paths and ``..`` escapes with a one-line error.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

import numpy as np

from bench.errors import BenchError
from bench.sim.objects import Mesh

MESH_SUFFIXES = (".obj", ".stl", ".glb", ".gltf", ".ply")
ORIGINS = ("bbox", "file")


def resolve_relative(root: str | os.PathLike, relative: str, *, what: str) -> Path:
    """``root / relative`` for a relative path that stays inside ``root``.

    Args:
        root: Directory the path is relative to (a task file's folder, a bundle root).
        relative: The path as written in the file (POSIX separators).
        what: What the path is, for the error message (e.g. "object 'mug' mesh").

    Raises:
        BenchError: An absolute path, a '..' escape or a non-string.
    """
    if not isinstance(relative, str) or not relative:
        raise BenchError(f"{what}: path must be a non-empty string relative to {root}")
    pure = PurePosixPath(relative.replace("\\", "/"))
    if pure.is_absolute() or Path(relative).is_absolute() or (relative[1:3] == ":/"):
        raise BenchError(f"{what}: absolute path {relative!r} refused; write it relative to "
                         f"{root} and keep the file inside that folder")
    root_path = Path(root).resolve()
    target = (root_path / Path(*pure.parts)).resolve()
    if ".." in pure.parts or not target.is_relative_to(root_path):
        raise BenchError(f"{what}: path {relative!r} leaves {root} ('..' or a link out); "
                         "copy the file into that folder and name it relative to it")
    return target


def _load_trimesh(path: Path, *, what: str):
    import trimesh

    if path.suffix.lower() not in MESH_SUFFIXES:
        raise BenchError(f"{what}: {path.name} is not a mesh file; use one of "
                         f"{', '.join(MESH_SUFFIXES)}")
    if not path.is_file():
        raise BenchError(f"{what}: mesh file {path} not found; fix the path in the task file")
    try:
        mesh = trimesh.load(path, force="mesh", process=False)
    except Exception as exc:  # trimesh raises many types on a broken file
        raise BenchError(f"{what}: cannot read {path.name} ({type(exc).__name__}: {exc}); "
                         "export it again as OBJ / STL / GLB / PLY") from None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise BenchError(f"{what}: {path.name} holds no triangles; export a triangle mesh")
    if not np.all(np.isfinite(mesh.vertices)):
        raise BenchError(f"{what}: {path.name} has NaN/inf vertices; repair the mesh")
    return mesh


def _hull(points: np.ndarray, *, what: str) -> np.ndarray:  # [N, 3] -> [H, 3]
    from scipy.spatial import ConvexHull, QhullError

    try:
        hull = ConvexHull(points)
    except (QhullError, ValueError):
        raise BenchError(f"{what}: the collision part is flat or degenerate (no volume); "
                         "give a closed part with thickness") from None
    return points[hull.vertices]


def _file_texture(mesh) -> tuple[np.ndarray | None, object | None]:
    """Per-vertex UVs and the PIL image of a textured trimesh (GLB/OBJ+MTL), else (None, None)."""
    visual = getattr(mesh, "visual", None)
    uv = getattr(visual, "uv", None)
    material = getattr(visual, "material", None)
    image = getattr(material, "image", None) or getattr(material, "baseColorTexture", None)
    if uv is None or image is None or len(uv) != len(mesh.vertices):
        return None, None
    return np.asarray(uv, np.float64), image


def load_mesh(
    path: Path,
    *,
    scale: float | tuple[float, float, float] = 1.0,
    origin: str = "bbox",
    collision: str | list[Path] = "hull",
    texture: Path | None = None,
    source: str = "",
    what: str = "mesh object",
) -> Mesh:
    """Read a mesh file into a :class:`~bench.sim.objects.Mesh`.

    Args:
        path: Visual mesh file.
        scale: Uniform factor or per-axis (sx, sy, sz) (e.g. 0.001 for millimetre files).
        origin: "bbox" (origin at the bounding-box centre) or "file" (keep the file's frame).
        collision: "hull" or a list of convex part files (same scale and frame as ``path``).
        texture: PNG applied with the mesh's own UVs (default: the file's embedded texture).
        source: Relative path recorded in the shape (manifests).
        what: Name for error messages.
    """
    if origin not in ORIGINS:
        raise BenchError(f"{what}: origin {origin!r} is not one of {ORIGINS}")
    factor = np.broadcast_to(np.asarray(scale, np.float64), (3,))
    if not np.all(np.isfinite(factor)) or np.any(factor <= 0):
        raise BenchError(f"{what}: scale must be positive (one number or three), got {scale!r}")
    mesh = _load_trimesh(path, what=what)
    vertices = np.asarray(mesh.vertices, np.float64) * factor
    if collision == "hull":
        parts_raw = [vertices]
    else:
        parts_raw = [np.asarray(_load_trimesh(p, what=what).vertices, np.float64) * factor
                     for p in collision]
    all_points = np.concatenate([vertices, *parts_raw])
    offset = (all_points.min(axis=0) + all_points.max(axis=0)) / 2 if origin == "bbox" else 0.0
    vertices = vertices - offset
    parts = tuple(_hull(p - offset, what=what) for p in parts_raw)
    extent = np.ptp(np.concatenate(parts), axis=0)
    if float(extent.min()) < 1e-4:
        raise BenchError(f"{what}: collision geometry is thinner than 0.1 mm ({extent} m); "
                         "check the scale (metres)")
    uv, image = _file_texture(mesh)
    texture_rgb = None
    if texture is not None:
        if not texture.is_file() or texture.suffix.lower() != ".png":
            raise BenchError(f"{what}: texture {texture} must be an existing .png file")
        if uv is None:
            uv = getattr(getattr(mesh, "visual", None), "uv", None)
            uv = None if uv is None or len(uv) != len(mesh.vertices) else np.asarray(uv)
        if uv is None:
            raise BenchError(f"{what}: texture given but {path.name} has no per-vertex UVs; "
                             "export the mesh with texture coordinates or use rgba")
        from PIL import Image

        with Image.open(texture) as opened:
            texture_rgb = np.asarray(opened.convert("RGB"), dtype=np.uint8)
    elif image is not None:
        texture_rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Mesh(
        source=source or path.name,
        vertices=vertices,
        faces=np.asarray(mesh.faces, np.int64),
        parts=parts,
        texcoords=uv if texture_rgb is not None else None,
        texture=texture_rgb,
        sha256=digest,
    )

