"""Fisheye source frames -> nine pinhole views (YUBI capture, ``PAPERS.md``).

Each source fisheye frame is resampled into nine square pinhole views with a
90 x 90 degree field of view (``f = size / 2``; the paper uses 2048 px and
f = 1024 px): one *forward* view looking along the fisheye's optical axis and
eight views tilted 55 degrees away from it at 45 degree azimuth steps.

Conventions:

- Camera axes are OpenCV's: +x right, +y down, +z forward.
- Azimuth 0 tilts towards +x (image right), azimuth 90 towards +y (image down).
  A tilted view is the forward view rotated by 55 degrees about the axis
  ``z x d`` (the smallest rotation taking +z to the view direction ``d``), so it
  has no extra roll about its own axis.
- Pixel coordinates follow ``bench.scene.cameras`` (gsplat/COLMAP): pixel
  (column i, row j) has its centre at ``(i + 0.5, j + 0.5)``, for the fisheye and the
  pinhole cameras alike, so ``cx = cy = size / 2`` is the exact image centre;
  ``cv2.remap`` indexes pixel centres at integers, hence the ``- 0.5`` in the maps.
- The fisheye model is OpenCV's (``cv2.fisheye``, Kannala-Brandt with k1..k4) as
  implemented by :class:`bench.scene.cameras.Camera`, with ``theta = atan2(r, z)``
  so rays more than 90 degrees off-axis (a 200 degree lens) project correctly,
  where ``cv2.fisheye.projectPoints`` (which divides by z) cannot.
- Images are resampled with ``cv2.remap`` using maps built from that projection.

Poses: ``world_from_view = world_from_source @ source_from_view`` where
``source_from_view`` is the pure rotation of :func:`view_rotations`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.recon.capture import CaptureManifest, View
from bench.scene.cameras import Camera

PIXEL_CENTER = 0.5  # pixel (i, j) is centred at (i + 0.5, j + 0.5) (bench.scene.cameras)
TILT_DEG = 55.0  # angle between the forward view and each tilted view
NUM_AZIMUTHS = 8  # tilted views, at 360 / 8 = 45 degree azimuth steps
FORWARD = "forward"


def view_names(*, num_azimuths: int = NUM_AZIMUTHS) -> tuple[str, ...]:
    """Names of the views in order: ``forward``, ``tilt_az000``, ``tilt_az045``, ..."""
    step = 360.0 / num_azimuths
    return (FORWARD,) + tuple(f"tilt_az{round(k * step):03d}" for k in range(num_azimuths))


def view_directions(
    *, tilt_deg: float = TILT_DEG, num_azimuths: int = NUM_AZIMUTHS
) -> dict[str, np.ndarray]:
    """Unit viewing direction of each view in the source camera frame, name -> [3]."""
    tilt = math.radians(tilt_deg)
    directions = {FORWARD: np.array([0.0, 0.0, 1.0])}
    for k, name in enumerate(view_names(num_azimuths=num_azimuths)[1:]):
        azimuth = 2.0 * math.pi * k / num_azimuths
        directions[name] = np.array(
            [math.sin(tilt) * math.cos(azimuth), math.sin(tilt) * math.sin(azimuth), math.cos(tilt)]
        )
    return directions


def _rotation_from_forward(direction: np.ndarray) -> np.ndarray:  # [3] -> [3, 3]
    """Smallest rotation taking +z to ``direction`` (Rodrigues about z x direction)."""
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, direction)
    sin_angle = float(np.linalg.norm(axis))
    cos_angle = float(np.dot(z, direction))
    if sin_angle < 1e-12:
        return np.eye(3)
    axis = axis / sin_angle
    skew = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + sin_angle * skew + (1.0 - cos_angle) * (skew @ skew)


def view_rotations(
    *, tilt_deg: float = TILT_DEG, num_azimuths: int = NUM_AZIMUTHS
) -> dict[str, np.ndarray]:
    """``source_from_view`` rotation of each view, name -> [3, 3] (float64).

    Column 2 of each matrix is the view's optical axis in source-camera coordinates.
    """
    directions = view_directions(tilt_deg=tilt_deg, num_azimuths=num_azimuths)
    return {name: _rotation_from_forward(d) for name, d in directions.items()}


def pinhole_views(
    source: Camera,
    *,
    size: int = 2048,
    fov_deg: float = 90.0,
    tilt_deg: float = TILT_DEG,
    num_azimuths: int = NUM_AZIMUTHS,
) -> dict[str, Camera]:
    """The nine pinhole cameras of one source camera, name -> ``Camera``.

    Args:
        source: The source (fisheye) camera with its pose.
        size: Width and height of each square view in pixels (paper: 2048).
        fov_deg: Full field of view of each view; 90 degrees gives ``f = size / 2``.
        tilt_deg: Angle of the tilted views from the forward axis (paper: 55).
        num_azimuths: Number of tilted views, evenly spaced in azimuth (paper: 8).

    Returns:
        Pinhole cameras centred (``cx = cy = size / 2``) and posed exactly at
        ``world_from_view = source.world_from_camera @ source_from_view``.
    """
    if int(size) != size or size < 2:
        raise ValueError(f"view size must be an integer >= 2 pixels, got {size!r}")
    rotations = view_rotations(tilt_deg=tilt_deg, num_azimuths=num_azimuths)
    views = {}
    for name, rotation in rotations.items():
        views[name] = Camera.pinhole_from_fov(
            int(size), int(size), fov_x_deg=fov_deg,
            world_from_camera=world_from_view(source.world_from_camera, rotation),
            name=name,
        )
    return views


def remap_maps(
    source: Camera, view: Camera
) -> tuple[np.ndarray, np.ndarray]:  # ([H, W], [H, W]) float32
    """``cv2.remap`` maps sampling the ``source`` image into ``view`` (both posed).

    Every output pixel's ray is rotated into the source frame and projected with
    the source camera's model (``Camera.project``, the OpenCV fisheye model for
    fisheyes). Rays outside the source's valid cone (its ``fov_deg`` or where the
    distortion polynomial stops increasing) map to -1, i.e. black with
    ``cv2.BORDER_CONSTANT``. Only the relative rotation matters: the two cameras
    are assumed to share a centre.

    Returns:
        ``map_x, map_y``: source pixel *indices* (OpenCV remap convention, pixel
        centres at integers) per output pixel.
    """
    rays, _ = view.pixel_rays()  # [H, W, 3] in the view frame
    source_from_view = (source.camera_from_world @ view.world_from_camera)[:3, :3]
    uv, valid = source.project(rays.reshape(-1, 3) @ source_from_view.T)
    map_xy = np.where(valid[:, None], uv - PIXEL_CENTER, -1.0).astype(np.float32)
    map_xy = map_xy.reshape(view.height, view.width, 2)
    return np.ascontiguousarray(map_xy[..., 0]), np.ascontiguousarray(map_xy[..., 1])


def reproject_image(
    image: np.ndarray,  # [h, w] or [h, w, C] source image
    source: Camera,
    view: Camera,
    *,
    interpolation: int | None = None,
    maps: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:  # [H, W] or [H, W, C], same dtype as the input
    """Resample a source (fisheye) image into one view with ``cv2.remap`` (bilinear default).

    ``maps`` may pass precomputed :func:`remap_maps` (they depend only on the source
    intrinsics and the view's rotation relative to the source, so one set serves every
    frame of a lens).
    """
    import cv2

    if image.shape[:2] != (source.height, source.width):
        raise ValueError(
            f"image is {image.shape[1]}x{image.shape[0]} px but camera {source.name!r} is "
            f"{source.width}x{source.height}; use the calibration made at this resolution "
            "(or Camera.resized)"
        )
    map_x, map_y = remap_maps(source, view) if maps is None else maps
    flags = cv2.INTER_LINEAR if interpolation is None else interpolation
    return cv2.remap(image, map_x, map_y, flags, borderMode=cv2.BORDER_CONSTANT, borderValue=0)


def world_from_view(
    world_from_source: np.ndarray,  # [4, 4]
    source_from_view: np.ndarray,  # [3, 3]
) -> np.ndarray:  # [4, 4]
    """Pose of a reprojected view: ``world_from_source @ [[R, 0], [0, 1]]``."""
    pose = np.eye(4)
    pose[:3, :3] = source_from_view
    return np.asarray(world_from_source, dtype=np.float64) @ pose


def reproject_capture(
    manifest: CaptureManifest,
    *,
    views_dir: str = "views",
    image_dir: str | os.PathLike | None = None,
    size: int = 2048,
    lenses: Sequence[str] | None = None,
    show_progress: bool = False,
) -> CaptureManifest:
    """Reproject every source frame of a manifest into nine pinhole views (PNG files).

    Args:
        manifest: Capture manifest whose frames carry images and calibrated, posed cameras.
        views_dir: Folder of the view images relative to ``manifest.root`` (as recorded).
        image_dir: Where the images are written (default ``manifest.root / views_dir``;
            a staging folder that is renamed to it afterwards, for atomic writes).
        size: Width and height of each view in pixels (paper: 2048, f = size / 2).
        lenses: Lenses to reproject (default: every lens of the first frame).
        show_progress: Report progress on stderr (``bench.progress``).

    Returns:
        The manifest with ``views`` replaced by the reprojected views (ids
        ``{frame}/{lens}/{view name}``) and their exact poses; test views are kept.
    """
    import cv2

    from bench.progress import progress as progress_bar

    if not manifest.frames:
        raise BenchError("the capture manifest lists no source frames; select frames first")
    lenses = list(lenses) if lenses is not None else list(manifest.frames[0].images)
    out = Path(image_dir) if image_dir is not None else manifest.root / views_dir
    out.mkdir(parents=True, exist_ok=True)
    views = []
    maps_cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for frame in progress_bar(manifest.frames, desc="reproject", disable=not show_progress):
        for lens in lenses:
            if lens not in frame.images or lens not in frame.cameras:
                raise BenchError(
                    f"frame {frame.id!r} has no image or no calibrated camera for lens {lens!r}; "
                    "add both to the manifest (cameras: bench.scene.cameras dicts)"
                )
            source = frame.cameras[lens]
            image = cv2.imread(str(manifest.root / frame.images[lens]), cv2.IMREAD_UNCHANGED)
            if image is None:
                raise FileNotFoundError(f"cannot read image {frame.images[lens]} of frame "
                                        f"{frame.id!r}; check the path")
            for name, camera in pinhole_views(source, size=size).items():
                relative = f"{views_dir}/{frame.id}_{lens}_{name}.png"
                key = (name, _intrinsics_key(source))
                if key not in maps_cache:  # identical for every frame of one calibrated lens
                    maps_cache[key] = remap_maps(source, camera)
                pixels = reproject_image(image, source, camera, maps=maps_cache[key])
                cv2.imwrite(str(out / f"{frame.id}_{lens}_{name}.png"), pixels)
                views.append(View(id=f"{frame.id}/{lens}/{name}", image=relative,
                                  camera=camera.replace(name=relative), frame=frame.id,
                                  lens=lens, name=name))
    return dataclasses.replace(manifest, views=tuple(views))


def _intrinsics_key(camera: Camera) -> tuple:
    return (camera.model, camera.width, camera.height, camera.fx, camera.fy, camera.cx,
            camera.cy, camera.distortion, camera.fov_deg)
