"""Camera files: JSON lists, COLMAP sparse models and nerfstudio ``transforms.json``.

:func:`load_cameras` / :func:`save_cameras` read and write a JSON list of camera
dicts (:meth:`bench.scene.cameras.Camera.to_dict`), COLMAP sparse models
(``cameras`` + ``images``, text or binary) and nerfstudio ``transforms.json``
(OpenGL axes inside the file, OpenCV axes in every :class:`~bench.scene.cameras.Camera`).

Camera frames: a pose is in the scene's WORLD frame (metres, +z up; what a bundle's
``background`` is in) or in its SPLAT frame (the reconstruction's coordinates, what the
background file, COLMAP and nerfstudio exports are in; ``world = world_from_splat @ splat``).
A file states it: the JSON list gives every camera entry ``"frame": "world"`` or
``"splat"`` (a list keeps the old shape; an object ``{"frame": ..., "cameras": [...]}`` is
read too), ``transforms.json`` a top-level ``"frame"`` key (nerfstudio ignores it). COLMAP
models have no place for it. A file without the key (older versions, other tools, COLMAP)
is read in the default of the place that reads it: :func:`load_camera_file` takes it as
``default_frame`` (study captures: ``splat``; scene-bundle camera roles, ``bench render``,
``bench score``, ``bench align``: ``world``). :meth:`CameraFile.in_frame` moves cameras
between the frames with the bundle's ``world_from_splat``.
"""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.geometry import mat_to_quat
from bench.provenance import atomic_write_bytes, read_json
from bench.scene.cameras import Camera

__all__ = ["FORMATS", "FRAMES", "CameraFile", "CameraFrameWarning", "CameraList",
           "check_frame", "convert_cameras", "load_camera_file", "load_cameras", "move_cameras",
           "save_cameras"]

FORMATS = ("json", "colmap-text", "colmap-binary", "transforms")
WORLD, SPLAT = "world", "splat"
FRAMES = (WORLD, SPLAT)

# COLMAP camera models: name -> (model id, number of params).
_COLMAP_MODELS = {
    "SIMPLE_PINHOLE": (0, 3), "PINHOLE": (1, 4), "SIMPLE_RADIAL": (2, 4), "RADIAL": (3, 5),
    "OPENCV": (4, 8), "OPENCV_FISHEYE": (5, 8), "FULL_OPENCV": (6, 12), "FOV": (7, 5),
    "SIMPLE_RADIAL_FISHEYE": (8, 4), "RADIAL_FISHEYE": (9, 5), "THIN_PRISM_FISHEYE": (10, 12),
}
_COLMAP_BY_ID = {mid: (name, n) for name, (mid, n) in _COLMAP_MODELS.items()}
# nerfstudio (OpenGL: +y up, +z backward) <-> OpenCV camera axes.
_GL_FROM_CV = np.diag([1.0, -1.0, -1.0, 1.0])


# ---------------------------------------------------------------------- frames
class CameraFrameWarning(UserWarning):
    """A declared camera frame that a format cannot keep (COLMAP)."""


class CameraList(list):
    """The cameras of a file (a plain ``list``) plus the frame it declares.

    Attributes:
        frame: ``"world"`` / ``"splat"`` as the file states it; None when it states
            none (the reader applies its default, see :func:`load_camera_file`).
            :func:`save_cameras` writes it back, so a conversion keeps it.
    """

    frame: str | None = None


def check_frame(value: object, *, where: str) -> str:
    """``value`` if it names a frame; BenchError naming ``where`` and the choices otherwise."""
    if not (isinstance(value, str) and value in FRAMES):
        raise BenchError(f'{where}: "frame" is {value!r:.40}; use "world" (the scene\'s metres, '
                         '+z up) or "splat" (the reconstruction\'s coordinates)')
    return value


def move_cameras(cameras: Sequence[Camera], *, source: str, target: str,
                 world_from_splat: np.ndarray) -> list[Camera]:
    """Cameras moved from frame ``source`` to ``target`` (a no-op when they are equal).

    Args:
        cameras: Poses in ``source``.
        source: Frame of the given poses, ``"world"`` or ``"splat"``.
        target: Frame wanted, ``"world"`` or ``"splat"``.
        world_from_splat: [4, 4] similarity of the scene (``SceneBundle.world_from_splat``).
            Intrinsics are kept: a similarity moves the scene and the camera together, so
            the image is the same (depth scales by its factor).
    """
    from bench.geometry import Similarity

    check_frame(source, where="source frame")
    check_frame(target, where="target frame")
    if source == target:
        return list(cameras)
    sim = Similarity.from_matrix(world_from_splat)
    sim = sim if target == WORLD else sim.inverse()
    moved = []
    for cam in cameras:
        pose = np.eye(4)  # [4, 4] rigid: rotation turned, centre mapped
        pose[:3, :3] = sim.rotation @ cam.world_from_camera[:3, :3]
        pose[:3, 3] = sim.apply_points(cam.world_from_camera[None, :3, 3])[0]
        moved.append(cam.replace(world_from_camera=pose))
    return moved


@dataclass(frozen=True)
class CameraFile:
    """A camera file as read, with the frame its poses are in.

    Attributes:
        cameras: The cameras in file order (COLMAP: by image name).
        frame: ``"world"`` or ``"splat"``: declared by the file, else the reader's default.
        declared: True when the file states the frame (False: the default was applied).
        path: The file (or COLMAP model directory) read.
    """

    cameras: tuple[Camera, ...]
    frame: str
    declared: bool
    path: Path

    def in_frame(self, target: str, world_from_splat: np.ndarray) -> list[Camera]:
        """The cameras in ``target`` frame, moved with the scene's ``world_from_splat``."""
        return move_cameras(self.cameras, source=self.frame, target=target,
                            world_from_splat=world_from_splat)


def load_camera_file(path: str | os.PathLike, *, default_frame: str,
                     keep_distortion: bool = False) -> CameraFile:
    """Read a camera file (any format of :func:`load_cameras`) and its frame.

    Args:
        path: See :func:`load_cameras`.
        default_frame: Frame of a file that states none (no ``"frame"`` key, or a COLMAP
            model): the documented default of the caller (study captures ``"splat"``,
            scene-bundle roles and ``bench render`` ``"world"``).
        keep_distortion: See :func:`load_cameras`.
    """
    check_frame(default_frame, where="default_frame")
    cameras = load_cameras(path, keep_distortion=keep_distortion)
    declared = cameras.frame is not None
    return CameraFile(tuple(cameras), cameras.frame if declared else default_frame, declared,
                      Path(path))


def _declared_frame(path: Path, top: object, entries: list[dict]) -> str | None:
    """The one frame a JSON camera file states (top-level and/or per entry), or None."""
    where = f"camera file {path}"
    frame = None if top is None else check_frame(top, where=where)
    keyed = [i for i, entry in enumerate(entries) if "frame" in entry]
    for i in keyed:
        value = check_frame(entries[i]["frame"], where=f"{where}, entry {i}")
        if frame is not None and value != frame:
            raise BenchError(f'{where} mixes frames ("{frame}" and "{value}" in entry {i}); '
                             "a file holds cameras of one frame: split it or move the poses")
        frame = value
    if keyed and top is None and len(keyed) < len(entries):
        bare = next(i for i in range(len(entries)) if "frame" not in entries[i])
        raise BenchError(f'{where}: entry {bare} has no "frame" while entry {keyed[0]} says '
                         f'"{frame}"; give every entry the same "frame"')
    return frame


def load_cameras(path: str | os.PathLike, *, keep_distortion: bool = False) -> CameraList:
    """Load cameras from a JSON list, a COLMAP sparse model dir, or a transforms.json.

    Args:
        path: ``*.json`` (this module's list, or nerfstudio ``transforms.json``
            recognised by its ``frames`` key) or a COLMAP model directory holding
            ``cameras.{txt,bin}`` + ``images.{txt,bin}`` (``sparse/0`` inside
            the given directory is also searched).
        keep_distortion: Read radially distorted pinhole models (COLMAP SIMPLE_RADIAL,
            RADIAL, OPENCV; transforms.json k1..k3/p1/p2) with the distortion carried in
            ``Camera.opencv_distortion`` (for captured images that are undistorted before
            scoring). False (default): such cameras are refused, since a renderer would
            draw them as ideal pinholes.

    Returns:
        The cameras in file order (COLMAP: sorted by image name), with ``.frame`` the
        frame the file declares (None when it declares none; a bad or mixed ``"frame"``
        is a BenchError). Readers that render apply their default through
        :func:`load_camera_file`.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"camera file {path} does not exist; pass a .json file or a COLMAP model dir"
        )
    if path.is_dir():
        model_dir = _find_colmap_dir(path)
        try:
            return CameraList(_load_colmap(model_dir, keep_distortion=keep_distortion))
        except BenchError:
            raise
        except (struct.error, EOFError, UnicodeDecodeError) as exc:
            raise BenchError(f"COLMAP model {model_dir}: a .bin file is truncated or corrupt "
                             f"({type(exc).__name__}: {exc}); re-export the model from "
                             "COLMAP") from None
        except (ValueError, IndexError, TypeError, OverflowError) as exc:
            raise BenchError(f"COLMAP model {model_dir}: malformed entry ({exc}); fix the "
                             "cameras/images file or re-export the model from COLMAP") from None
    data = read_json(path, what="camera file", fix="fix the file")
    if isinstance(data, dict) and "frames" in data:
        frames = data["frames"]
        if not isinstance(frames, list) or not all(isinstance(f, dict) for f in frames):
            raise BenchError(f"transforms file {path}: 'frames' must be a list of objects "
                             f"(one per image), got {type(frames).__name__}; fix the file")
        if not frames:
            raise BenchError(f"transforms file {path}: 'frames' is empty; add the images")
        if any("frame" in f for f in frames):  # nerfstudio would not see a per-image one
            raise BenchError(f'transforms file {path}: "frame" is set inside an image entry; '
                             'set it once at the top level ("frame": "world" or "splat")')
        frame = None if "frame" not in data else check_frame(
            data["frame"], where=f"transforms file {path}")
        try:
            cams = CameraList(_from_transforms(data, keep_distortion=keep_distortion))
            cams.frame = frame
            return cams
        except BenchError:
            raise
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise BenchError(f"transforms file {path}: malformed frame ({type(exc).__name__}: "
                             f"{exc}); each frame needs transform_matrix (4x4 numbers) and "
                             "file_path, intrinsics numbers") from None
    top = data.get("frame") if isinstance(data, dict) else None  # {"frame", "cameras"} form
    if isinstance(data, dict) and "cameras" in data:
        data = data["cameras"]
    if not isinstance(data, list):
        raise BenchError(
            f"camera file {path}: expected a JSON list of cameras or a transforms.json"
        )
    if not data:
        raise BenchError(f"camera file {path} is an empty list; add at least one camera object")
    bad = [i for i, entry in enumerate(data) if not isinstance(entry, dict)]
    if bad:
        raise BenchError(f"camera file {path}: entry {bad[0]} is {type(data[bad[0]]).__name__} "
                         f"{data[bad[0]]!r:.40}; the file must be a JSON list of camera objects "
                         "(model, width, height, fx, fy, cx, cy, world_from_camera)")
    cameras = CameraList()
    cameras.frame = _declared_frame(path, top, data)
    for i, entry in enumerate(data):
        try:
            cameras.append(Camera.from_dict(entry))
        except BenchError:
            raise
        except (TypeError, ValueError) as exc:
            raise BenchError(f"camera file {path}, entry {i}: {exc}") from None
    if not keep_distortion and any(c.opencv_distortion for c in cameras):
        raise BenchError(f"camera file {path} holds radially distorted pinhole cameras; "
                         "undistort the images first (or read them as captures)")
    return cameras


def save_cameras(path: str | os.PathLike, cameras: Sequence[Camera], *,
                 format: str | None = None, frame: str | None = None) -> None:
    """Write cameras atomically.

    Args:
        path: Output file (json / transforms) or directory (COLMAP).
        cameras: The cameras.
        format: One of ``FORMATS``. Default: ``transforms`` for a file named
            ``transforms.json``, ``json`` for other ``.json`` names,
            ``colmap-text`` for a name without suffix (``path`` is then a directory);
            other suffixes are refused.
        frame: ``"world"`` or ``"splat"``, written as every entry's ``"frame"`` (json) or
            the top-level ``"frame"`` (transforms). Default: ``cameras.frame`` of a
            :class:`CameraList` (a conversion keeps the frame), else no key (readers then
            apply their default). COLMAP has no place for it: a declared frame is dropped
            with a :class:`CameraFrameWarning`.
    """
    path = Path(path)
    if frame is None:
        frame = getattr(cameras, "frame", None)
    if frame is not None:
        check_frame(frame, where=f"save_cameras({path.name})")
    if format is None:
        if path.name == "transforms.json":
            format = "transforms"
        elif path.suffix == ".json":
            format = "json"
        elif path.suffix == "":
            format = "colmap-text"
        else:  # e.g. "out.txt" would silently become a COLMAP directory
            raise ValueError(
                f"cannot tell the camera file format from the name {path.name!r}; name a .json "
                "file, a transforms.json, or a COLMAP model directory (no suffix), or pass the "
                f"format explicitly (one of {FORMATS})"
            )
    if format not in FORMATS:
        raise ValueError(f"unknown camera file format {format!r}; use one of {FORMATS}")
    cameras = list(cameras)
    tag = {} if frame is None else {"frame": frame}  # first key: seen at a glance
    if format == "json":
        text = json.dumps([{**tag, **c.to_dict()} for c in cameras], indent=2) + "\n"
        atomic_write_bytes(path, text.encode())
    elif format == "transforms":
        text = json.dumps({**tag, **_to_transforms(cameras)}, indent=2) + "\n"
        atomic_write_bytes(path, text.encode())
    else:
        if frame is not None:
            warnings.warn(f"{path}: a COLMAP model has no place for the camera frame "
                          f"({frame!r}); readers apply their default (splat for study "
                          "captures, world elsewhere); keep a .json or transforms.json copy "
                          "to preserve it", CameraFrameWarning, stacklevel=2)
        _save_colmap(path, cameras, binary=format == "colmap-binary")


def convert_cameras(src: str | os.PathLike, dst: str | os.PathLike, *,
                    format: str | None = None, keep_distortion: bool = True) -> list[Camera]:
    """Read any supported camera file and write it in another format; returns the cameras.

    Lens distortion is kept (``keep_distortion``, see :func:`load_cameras`) and written in
    every format that holds it; a target that cannot (transforms.json for FULL_OPENCV's
    rational k4..k6) raises a BenchError before anything is written.
    """
    cameras = load_cameras(src, keep_distortion=keep_distortion)
    save_cameras(dst, cameras, format=format)
    return cameras


# ---------------------------------------------------------------- nerfstudio
# Lens keys of nerfstudio: OPENCV is 1 + k1 r^2 + k2 r^4 + k3 r^6 + k4 r^8 with tangential
# p1, p2; OPENCV_FISHEYE is Kannala-Brandt k1..k4.
_NERFSTUDIO_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")


def _from_transforms(data: dict, *, keep_distortion: bool = False) -> list[Camera]:
    cams = []
    for i, frame in enumerate(data["frames"]):
        merged = {**data, **frame}

        def get(key, merged=merged, i=i):
            if key not in merged:
                raise BenchError(
                    f"transforms.json frame {i} lacks {key!r} (set it per frame or globally)"
                )
            return merged[key]

        model_name = merged.get("camera_model", "OPENCV")
        coef = {k: float(merged.get(k, 0.0)) for k in _NERFSTUDIO_KEYS}
        dist = (0.0, 0.0, 0.0, 0.0)
        opencv: tuple[float, ...] = ()
        if model_name == "OPENCV_FISHEYE":
            model = "fisheye"
            dist = (coef["k1"], coef["k2"], coef["k3"], coef["k4"])
            if coef["p1"] or coef["p2"]:  # nerfstudio ignores them: never drop them silently
                raise BenchError(
                    f"transforms.json frame {i}: OPENCV_FISHEYE has no tangential terms, but "
                    f"p1={coef['p1']}, p2={coef['p2']}; remove them, or set camera_model "
                    "OPENCV if the lens is radial-tangential")
        elif model_name in ("OPENCV", "PINHOLE", "SIMPLE_PINHOLE"):
            model = "pinhole"
            if coef["k4"]:
                raise BenchError(
                    f"transforms.json frame {i}: k4={coef['k4']} is nerfstudio's r^8 radial "
                    "term, which OpenCV and COLMAP lens models (and this bench's undistortion) "
                    "lack; undistort the images first, or calibrate with k1..k3, p1, p2 only")
            radial = tuple(coef[k] for k in ("k1", "k2", "p1", "p2", "k3"))  # OpenCV's order
            if any(radial) and not keep_distortion:
                raise BenchError(
                    f"transforms.json frame {i}: pinhole distortion {radial} (k1, k2, p1, p2, "
                    "k3) is drawn as an ideal pinhole; undistort the images first (e.g. "
                    "`colmap image_undistorter`)"
                )
            opencv = radial
        else:
            raise BenchError(f"transforms.json camera_model {model_name!r} is not supported; "
                             "use OPENCV (k1, k2, k3, p1, p2), PINHOLE or OPENCV_FISHEYE "
                             "(k1..k4)")
        c2w = np.asarray(get("transform_matrix"), np.float64)
        if c2w.shape == (3, 4):
            c2w = np.vstack([c2w, [0, 0, 0, 1]])
        cams.append(Camera(
            model=model, width=int(get("w")), height=int(get("h")), fx=float(get("fl_x")),
            fy=float(merged.get("fl_y", get("fl_x"))), cx=float(get("cx")), cy=float(get("cy")),
            world_from_camera=c2w @ _GL_FROM_CV, distortion=dist,
            fov_deg=merged.get("fov_deg"), name=str(frame.get("file_path", f"frame_{i:05d}")),
            opencv_distortion=opencv,
        ))
    return cams


def _to_transforms(cameras: list[Camera]) -> dict:
    frames = []
    for i, cam in enumerate(cameras):
        frame = {
            "file_path": cam.name or f"images/frame_{i:05d}.png",
            "transform_matrix": (cam.world_from_camera @ _GL_FROM_CV).tolist(),
            "camera_model": "OPENCV_FISHEYE" if cam.model == "fisheye" else "OPENCV",
            "w": cam.width, "h": cam.height, "fl_x": cam.fx, "fl_y": cam.fy,
            "cx": cam.cx, "cy": cam.cy,
        }
        if cam.model == "fisheye":
            frame.update(zip(("k1", "k2", "k3", "k4"), cam.distortion, strict=True))
        else:
            k1, k2, p1, p2, k3, *rational = cam.opencv_distortion or (0.0,) * 5
            if any(rational):
                raise BenchError(
                    f"camera {cam.name!r} has FULL_OPENCV rational distortion k4..k6 = "
                    f"{tuple(rational)}, which transforms.json cannot hold (nerfstudio's OPENCV "
                    "has k1..k4 radial, p1, p2); write a COLMAP model (--format colmap-text or "
                    "colmap-binary) or a .json list instead")
            # k4 here is nerfstudio's r^8 term, which OpenCV models lack: 0 is exact
            frame.update(k1=k1, k2=k2, k3=k3, k4=0.0)
            if cam.opencv_distortion:
                frame.update(p1=p1, p2=p2)
        if cam.fov_deg is not None:
            frame["fov_deg"] = cam.fov_deg
        frames.append(frame)
    return {"frames": frames}


# ---------------------------------------------------------------------- COLMAP
def _find_colmap_dir(path: Path) -> Path:
    for candidate in (path, path / "sparse" / "0", path / "sparse"):
        for ext in ("txt", "bin"):
            if (candidate / f"cameras.{ext}").exists() and (candidate / f"images.{ext}").exists():
                return candidate
    raise FileNotFoundError(
        f"{path} holds no COLMAP model (cameras.txt/images.txt or cameras.bin/images.bin, "
        "also searched sparse/0); pass the model directory or a .json camera file"
    )


def _colmap_intrinsics(model_name: str, params: list[float], cam_id: int, *,
                       keep_distortion: bool = False) -> dict:
    p = [float(v) for v in params]
    if model_name == "SIMPLE_PINHOLE":
        f, cx, cy = p
        return {"model": "pinhole", "fx": f, "fy": f, "cx": cx, "cy": cy}
    if model_name == "PINHOLE":
        fx, fy, cx, cy = p
        return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy}
    if model_name in ("OPENCV_FISHEYE", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE"):
        # COLMAP's smaller fisheyes are Kannala-Brandt with the higher terms zero
        if model_name == "OPENCV_FISHEYE":
            fx, fy, cx, cy, *k = p
        else:  # f, cx, cy, k1 [k2]
            fx = fy = p[0]
            cx, cy, k = p[1], p[2], p[3:]
        return {"model": "fisheye", "fx": fx, "fy": fy, "cx": cx, "cy": cy,
                "distortion": tuple(k) + (0.0,) * (4 - len(k))}
    if model_name in ("SIMPLE_RADIAL", "RADIAL"):  # f, cx, cy, k1 [k2]
        fx = fy = p[0]
        cx, cy, k = p[1], p[2], p[3:]
        coeffs = (k[0], k[1] if len(k) > 1 else 0.0, 0.0, 0.0, 0.0)
    elif model_name in ("OPENCV", "FULL_OPENCV"):
        fx, fy, cx, cy, *k = p
        coeffs = (*k, 0.0) if len(k) == 4 else tuple(k)  # OpenCV's k1 k2 p1 p2 k3 [k4 k5 k6]
    else:
        raise BenchError(
            f"COLMAP camera {cam_id} uses model {model_name}, which this bench has no lens model "
            "for; run `colmap image_undistorter` (-> PINHOLE) or calibrate as OPENCV, "
            "FULL_OPENCV or OPENCV_FISHEYE"
        )
    intr = {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy}
    if any(coeffs):
        if not keep_distortion:
            raise BenchError(
                f"COLMAP camera {cam_id} uses model {model_name} with distortion, which a "
                "renderer would draw as an ideal pinhole; run `colmap image_undistorter` "
                "(-> PINHOLE) first (`bench cameras convert` keeps the distortion)"
            )
        intr["opencv_distortion"] = coeffs
    return intr


def _colmap_world_from_camera(qt: Sequence[float]) -> np.ndarray:  # [7] -> [4, 4]
    """world_from_camera of COLMAP's camera_from_world ``(qw, qx, qy, qz, tx, ty, tz)``.

    Plain Python floats in a fixed order (no BLAS), so a file gives the same bits on every
    machine: :func:`_colmap_pose` compares them to tell whether the values read still hold.
    """
    w, x, y, z, tx, ty, tz = (float(v) for v in qt)
    norm = math.hypot(w, x, y, z)
    if norm == math.inf and all(math.isfinite(v) for v in (w, x, y, z)):  # |q| overflows
        big = max(abs(w), abs(x), abs(y), abs(z))
        w, x, y, z = w / big, x / big, y / big, z / big
        norm = math.hypot(w, x, y, z)
    if not (math.isfinite(norm) and norm > 0.0):
        raise ValueError(f"quaternion {(w, x, y, z)} is zero or not finite")
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    rot = ((1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
           (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
           (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))
    pose = np.eye(4)
    for i in range(3):
        pose[i, :3] = (rot[0][i], rot[1][i], rot[2][i])  # R^T
        pose[i, 3] = -(rot[0][i] * tx + rot[1][i] * ty + rot[2][i] * tz)  # -R^T t
    return pose


def _colmap_pose(cam: Camera) -> tuple[float, ...]:
    """The ``(qw, qx, qy, qz, tx, ty, tz)`` COLMAP stores for a camera.

    The values read (``Camera.colmap_pose``) while they still give the camera's pose bit for
    bit, else converted from the matrix (then exact on every later re-export, since reading
    stores them). The sign is canonical: the first nonzero of qw, qx, qy, qz is positive
    (q and -q are one rotation; negating q changes no bit of the matrix). -0.0 becomes 0.0.
    """
    if cam.colmap_pose and np.array_equal(_colmap_world_from_camera(cam.colmap_pose),
                                          cam.world_from_camera):
        q, t = cam.colmap_pose[:4], cam.colmap_pose[4:]
    else:
        view = cam.camera_from_world
        q, t = mat_to_quat(view[:3, :3]).tolist(), view[:3, 3].tolist()
    sign = -1.0 if next((v for v in q if v != 0.0), 1.0) < 0 else 1.0
    return tuple(sign * v + 0.0 for v in q) + tuple(v + 0.0 for v in t)


def _colmap_camera(intr: dict, width: int, height: int, qvec, tvec, name: str) -> Camera:
    qt = (*qvec, *tvec)
    return Camera(width=width, height=height, world_from_camera=_colmap_world_from_camera(qt),
                  name=name, colmap_pose=qt, **intr)


def _load_colmap(model_dir: Path, *, keep_distortion: bool = False) -> list[Camera]:
    binary = not (model_dir / "cameras.txt").exists()
    if binary:
        intrinsics, images = _read_colmap_binary(model_dir, keep_distortion=keep_distortion)
    else:
        intrinsics, images = _read_colmap_text(model_dir, keep_distortion=keep_distortion)
    cams = []
    for _image_id, qvec, tvec, cam_id, name in sorted(images, key=lambda im: im[4]):
        if cam_id not in intrinsics:
            raise BenchError(
                f"COLMAP image {name!r} refers to missing camera {cam_id} in {model_dir}"
            )
        intr, width, height = intrinsics[cam_id]
        cams.append(_colmap_camera(intr, width, height, qvec, tvec, name))
    return cams


def _read_colmap_text(model_dir: Path, *, keep_distortion: bool = False):
    intrinsics = {}
    for line in (model_dir / "cameras.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        cam_id, model_name, width, height = int(parts[0]), parts[1], int(parts[2]), int(parts[3])
        params = [float(p) for p in parts[4:]]
        if model_name not in _COLMAP_MODELS or len(params) != _COLMAP_MODELS[model_name][1]:
            raise BenchError(
                f"cameras.txt camera {cam_id}: unknown model or parameter count ({line!r})"
            )
        intrinsics[cam_id] = (_colmap_intrinsics(model_name, params, cam_id,
                                                 keep_distortion=keep_distortion), width, height)
    images = []
    text = (model_dir / "images.txt").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    # Each image takes two lines: the pose line, then its (possibly empty) 2D points line.
    for pose_line in lines[0::2]:
        parts = pose_line.split()
        if not parts:
            continue
        if len(parts) < 10:
            raise BenchError(f"images.txt: malformed pose line {pose_line!r}")
        qvec = [float(p) for p in parts[1:5]]
        tvec = [float(p) for p in parts[5:8]]
        images.append((int(parts[0]), qvec, tvec, int(parts[8]), " ".join(parts[9:])))
    return intrinsics, images


def _read_colmap_binary(model_dir: Path, *, keep_distortion: bool = False):
    data = (model_dir / "cameras.bin").read_bytes()
    (count,), offset = struct.unpack_from("<Q", data, 0), 8
    intrinsics = {}
    for _ in range(count):
        cam_id, model_id, width, height = struct.unpack_from("<iiQQ", data, offset)
        offset += 24
        if model_id not in _COLMAP_BY_ID:
            raise BenchError(f"cameras.bin camera {cam_id}: unknown COLMAP model id {model_id}")
        model_name, n = _COLMAP_BY_ID[model_id]
        params = list(struct.unpack_from(f"<{n}d", data, offset))
        offset += 8 * n
        intrinsics[cam_id] = (_colmap_intrinsics(model_name, params, cam_id,
                                                 keep_distortion=keep_distortion), width, height)
    data = (model_dir / "images.bin").read_bytes()
    (count,), offset = struct.unpack_from("<Q", data, 0), 8
    images = []
    for _ in range(count):
        image_id, qw, qx, qy, qz, tx, ty, tz, cam_id = struct.unpack_from("<i7di", data, offset)
        offset += 64
        end = data.index(b"\x00", offset)
        name = data[offset:end].decode("utf-8")
        offset = end + 1
        (num_points,) = struct.unpack_from("<Q", data, offset)
        offset += 8 + 24 * num_points  # skip (x, y, point3D_id) observations
        images.append((image_id, [qw, qx, qy, qz], [tx, ty, tz], cam_id, name))
    return intrinsics, images


def _colmap_params(cam: Camera) -> tuple[str, list[float]]:
    """COLMAP (model, params) holding the camera exactly.

    A fisheye is OPENCV_FISHEYE; a pinhole the smallest of PINHOLE, SIMPLE_RADIAL (fx = fy,
    k1), RADIAL (fx = fy, k1, k2), OPENCV (k1, k2, p1, p2) and FULL_OPENCV (k3, rational
    k4..k6) that holds its nonzero coefficients: no coefficient is ever dropped.
    """
    intr = [cam.fx, cam.fy, cam.cx, cam.cy]
    if cam.model == "fisheye":
        return "OPENCV_FISHEYE", [*intr, *cam.distortion]
    if not cam.opencv_distortion:
        return "PINHOLE", intr
    k1, k2, p1, p2, k3, *rational = cam.opencv_distortion
    if k3 or any(rational):
        return "FULL_OPENCV", [*intr, k1, k2, p1, p2, k3, *(rational or (0.0, 0.0, 0.0))]
    if cam.fx == cam.fy and not (p1 or p2):
        if k2:
            return "RADIAL", [cam.fx, cam.cx, cam.cy, k1, k2]
        return "SIMPLE_RADIAL", [cam.fx, cam.cx, cam.cy, k1]
    return "OPENCV", [*intr, k1, k2, p1, p2]


def _save_colmap(model_dir: Path, cameras: list[Camera], *, binary: bool) -> None:
    # One COLMAP camera per distinct intrinsics, shared by images (as COLMAP does).
    # Floats are written exactly (binary: float64 bytes; text: repr, the shortest string that
    # reads back to the same float), so a re-export reproduces the file byte for byte.
    intr_ids: dict[tuple, int] = {}
    image_rows = []
    for i, cam in enumerate(cameras):
        model_name, params = _colmap_params(cam)
        key = (model_name, cam.width, cam.height, *params)
        cam_id = intr_ids.setdefault(key, len(intr_ids) + 1)
        qt = _colmap_pose(cam)
        image_rows.append((i + 1, qt[:4], qt[4:], cam_id, cam.name or f"frame_{i:05d}.png"))
    if binary:
        cams_bin = struct.pack("<Q", len(intr_ids))
        for key, cam_id in intr_ids.items():
            model_name, width, height, *params = key
            cams_bin += struct.pack(f"<iiQQ{len(params)}d", cam_id, _COLMAP_MODELS[model_name][0],
                                    width, height, *params)
        imgs_bin = struct.pack("<Q", len(image_rows))
        for image_id, q, t, cam_id, name in image_rows:
            imgs_bin += struct.pack("<i7di", image_id, *q, *t, cam_id) + name.encode() + b"\x00"
            imgs_bin += struct.pack("<Q", 0)
        atomic_write_bytes(model_dir / "cameras.bin", cams_bin)
        atomic_write_bytes(model_dir / "images.bin", imgs_bin)
        atomic_write_bytes(model_dir / "points3D.bin", struct.pack("<Q", 0))
        return
    lines = ["# Camera list with one line of data per camera:",
             "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]"]
    for key, cam_id in intr_ids.items():
        model_name, width, height, *params = key
        lines.append(" ".join([str(cam_id), model_name, str(width), str(height),
                               *(repr(float(p)) for p in params)]))
    atomic_write_bytes(model_dir / "cameras.txt", ("\n".join(lines) + "\n").encode())
    lines = ["# Image list with two lines of data per image:",
             "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME",
             "#   POINTS2D[] as (X, Y, POINT3D_ID)"]
    for image_id, q, t, cam_id, name in image_rows:
        values = (repr(float(v)) for v in (*q, *t))
        lines.append(" ".join([str(image_id), *values, str(cam_id), name]))
        lines.append("")
    atomic_write_bytes(model_dir / "images.txt", ("\n".join(lines) + "\n").encode())
    atomic_write_bytes(model_dir / "points3D.txt", b"# 3D point list (empty: cameras only)\n")
