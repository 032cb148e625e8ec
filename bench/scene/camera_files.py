"""Camera files: JSON lists, COLMAP sparse models and nerfstudio ``transforms.json``.

:func:`load_cameras` / :func:`save_cameras` read and write a JSON list of camera
dicts (:meth:`bench.scene.cameras.Camera.to_dict`), COLMAP sparse models
(``cameras`` + ``images``, text or binary) and nerfstudio ``transforms.json``
(OpenGL axes inside the file, OpenCV axes in every :class:`~bench.scene.cameras.Camera`).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.geometry import mat_to_quat, quat_to_mat
from bench.provenance import atomic_write_bytes, read_json
from bench.scene.cameras import Camera

__all__ = ["FORMATS", "convert_cameras", "load_cameras", "save_cameras"]

FORMATS = ("json", "colmap-text", "colmap-binary", "transforms")

# COLMAP camera models: name -> (model id, number of params).
_COLMAP_MODELS = {
    "SIMPLE_PINHOLE": (0, 3), "PINHOLE": (1, 4), "SIMPLE_RADIAL": (2, 4), "RADIAL": (3, 5),
    "OPENCV": (4, 8), "OPENCV_FISHEYE": (5, 8), "FULL_OPENCV": (6, 12), "FOV": (7, 5),
    "SIMPLE_RADIAL_FISHEYE": (8, 4), "RADIAL_FISHEYE": (9, 5), "THIN_PRISM_FISHEYE": (10, 12),
}
_COLMAP_BY_ID = {mid: (name, n) for name, (mid, n) in _COLMAP_MODELS.items()}
# nerfstudio (OpenGL: +y up, +z backward) <-> OpenCV camera axes.
_GL_FROM_CV = np.diag([1.0, -1.0, -1.0, 1.0])


def load_cameras(path: str | os.PathLike, *, keep_distortion: bool = False) -> list[Camera]:
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
        The cameras in file order (COLMAP: sorted by image name).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"camera file {path} does not exist; pass a .json file or a COLMAP model dir"
        )
    if path.is_dir():
        model_dir = _find_colmap_dir(path)
        try:
            return _load_colmap(model_dir, keep_distortion=keep_distortion)
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
        try:
            return _from_transforms(data, keep_distortion=keep_distortion)
        except BenchError:
            raise
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise BenchError(f"transforms file {path}: malformed frame ({type(exc).__name__}: "
                             f"{exc}); each frame needs transform_matrix (4x4 numbers) and "
                             "file_path, intrinsics numbers") from None
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
    cameras = []
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
                 format: str | None = None) -> None:
    """Write cameras atomically.

    Args:
        path: Output file (json / transforms) or directory (COLMAP).
        cameras: The cameras.
        format: One of ``FORMATS``. Default: ``transforms`` for a file named
            ``transforms.json``, ``json`` for other ``.json`` names,
            ``colmap-text`` for a name without suffix (``path`` is then a directory);
            other suffixes are refused.
    """
    path = Path(path)
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
    if format == "json":
        text = json.dumps([c.to_dict() for c in cameras], indent=2) + "\n"
        atomic_write_bytes(path, text.encode())
    elif format == "transforms":
        text = json.dumps(_to_transforms(cameras), indent=2) + "\n"
        atomic_write_bytes(path, text.encode())
    else:
        _save_colmap(path, cameras, binary=format == "colmap-binary")


def convert_cameras(src: str | os.PathLike, dst: str | os.PathLike, *,
                    format: str | None = None) -> list[Camera]:
    """Read any supported camera file and write it in another format; returns the cameras."""
    cameras = load_cameras(src)
    save_cameras(dst, cameras, format=format)
    return cameras


# ---------------------------------------------------------------- nerfstudio
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
        dist = [float(merged.get(k, 0.0)) for k in ("k1", "k2", "k3", "k4")]
        opencv: tuple[float, ...] = ()
        if model_name == "OPENCV_FISHEYE":
            model = "fisheye"
        elif model_name in ("OPENCV", "PINHOLE", "SIMPLE_PINHOLE"):
            model = "pinhole"
            radial = dist[:3] + [float(merged.get(k, 0.0)) for k in ("p1", "p2")]
            if any(radial) and keep_distortion:
                opencv = (radial[0], radial[1], radial[3], radial[4], radial[2])
            elif any(radial):
                raise BenchError(
                    f"transforms.json frame {i}: pinhole distortion {radial} is not supported; "
                    "undistort the images first (e.g. `colmap image_undistorter`)"
                )
            dist = [0.0] * 4
        else:
            raise BenchError(f"transforms.json camera_model {model_name!r} is not supported; "
                             "use OPENCV (undistorted), PINHOLE or OPENCV_FISHEYE")
        c2w = np.asarray(get("transform_matrix"), np.float64)
        if c2w.shape == (3, 4):
            c2w = np.vstack([c2w, [0, 0, 0, 1]])
        cams.append(Camera(
            model=model, width=int(get("w")), height=int(get("h")), fx=float(get("fl_x")),
            fy=float(merged.get("fl_y", get("fl_x"))), cx=float(get("cx")), cy=float(get("cy")),
            world_from_camera=c2w @ _GL_FROM_CV, distortion=tuple(dist),
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
        frame.update(dict(zip(("k1", "k2", "k3", "k4"), cam.distortion, strict=True)))
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
    if model_name == "SIMPLE_PINHOLE":
        f, cx, cy = params
        return {"model": "pinhole", "fx": f, "fy": f, "cx": cx, "cy": cy}
    if model_name == "PINHOLE":
        fx, fy, cx, cy = params
        return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy}
    if model_name == "OPENCV_FISHEYE":
        fx, fy, cx, cy, *k = params
        return {"model": "fisheye", "fx": fx, "fy": fy, "cx": cx, "cy": cy, "distortion": tuple(k)}
    if model_name in ("SIMPLE_RADIAL", "RADIAL", "OPENCV") and not any(
        params[3 if model_name != "OPENCV" else 4:]
    ):
        fx = params[0]
        if model_name == "OPENCV":
            fy, cx, cy = params[1], params[2], params[3]
        else:
            fy, cx, cy = fx, params[1], params[2]
        return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy}
    if keep_distortion and model_name in ("SIMPLE_RADIAL", "RADIAL", "OPENCV"):
        if model_name == "OPENCV":
            fx, fy, cx, cy, k1, k2, p1, p2 = params
        else:
            f, cx, cy, k1, *rest = params
            fx = fy = f
            k2, p1, p2 = (rest[0] if rest else 0.0), 0.0, 0.0
        return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy,
                "opencv_distortion": (k1, k2, p1, p2, 0.0)}
    raise BenchError(
        f"COLMAP camera {cam_id} uses model {model_name} with distortion, which is not supported; "
        "run `colmap image_undistorter` (-> PINHOLE) or calibrate as OPENCV_FISHEYE"
    )


def _colmap_camera(intr: dict, width: int, height: int, qvec, tvec, name: str) -> Camera:
    view = np.eye(4)
    view[:3, :3] = quat_to_mat(qvec)
    view[:3, 3] = tvec
    pose = np.eye(4)
    pose[:3, :3] = view[:3, :3].T
    pose[:3, 3] = -view[:3, :3].T @ view[:3, 3]
    return Camera(width=width, height=height, world_from_camera=pose, name=name, **intr)


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
    if cam.model == "fisheye":
        return "OPENCV_FISHEYE", [cam.fx, cam.fy, cam.cx, cam.cy, *cam.distortion]
    if cam.opencv_distortion:
        return "OPENCV", [cam.fx, cam.fy, cam.cx, cam.cy, *cam.opencv_distortion[:4]]
    return "PINHOLE", [cam.fx, cam.fy, cam.cx, cam.cy]


def _save_colmap(model_dir: Path, cameras: list[Camera], *, binary: bool) -> None:
    # One COLMAP camera per distinct intrinsics, shared by images (as COLMAP does).
    intr_ids: dict[tuple, int] = {}
    image_rows = []
    for i, cam in enumerate(cameras):
        model_name, params = _colmap_params(cam)
        key = (model_name, cam.width, cam.height, *params)
        cam_id = intr_ids.setdefault(key, len(intr_ids) + 1)
        view = cam.camera_from_world
        image_rows.append((i + 1, mat_to_quat(view[:3, :3]).tolist(), view[:3, 3].tolist(), cam_id,
                           cam.name or f"frame_{i:05d}.png"))
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
