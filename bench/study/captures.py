"""Held-out captures for the Test views of a study (spec key ``captures``).

Per scene the spec names either

* a **capture manifest** (``capture.json`` of ``bench capture``): its
  ``test_views`` (image + pinhole camera, never trained on) are the Test views;
* a **folder of images plus a camera file**: ``cameras.json`` (this bench's
  list), ``transforms.json`` (nerfstudio; ``k1..k4``/``p1``/``p2`` read) or a
  COLMAP model (``cameras``/``images`` ``.txt`` or ``.bin``, in the folder or
  ``sparse/0``; SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV and
  OPENCV_FISHEYE read). Images pair with cameras by file name or stem, also after an
  index prefix as ``bench render`` writes (``0000_test_00.png`` for camera ``test_00``).

Camera frames are data: a camera file states ``"frame": "world"`` or ``"splat"``
(:mod:`bench.scene.camera_files`); one without the key (COLMAP, nerfstudio, older
files) and a capture manifest are in the reconstruction's = splat frame. Each
condition is rendered in the frame the cameras are in: its world-frame background
for world cameras (as ``bench score`` does), its splat-frame background for splat
cameras. :func:`frame_fit` measures how well the clean scene explains the images;
the study's preflight refuses a wrong frame with it. Distorted images (radial-tangential
or fisheye) are undistorted to an ideal pinhole with OpenCV
(``cv2.getOptimalNewCameraMatrix(alpha=0)`` + ``cv2.undistort``, cropped to the
valid region; ``cv2.fisheye`` with ``balance=0``); each camera's crop and new
intrinsics are written into the capture's manifest
(``captures/<scene>/test/manifest.json``). Renders are compared as 8-bit
images (rounded like a saved PNG), so a render equal to the captured image
scores PSNR = inf.

The synthetic capture (clean render + seeded noise) remains only for generated
worlds without an entry and is labelled ``synthetic-capture`` in the quality
tables.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError

SYNTHETIC = "synthetic-capture"
CAMERA_FILES = ("cameras.json", "transforms.json")
TOOL_ID = "capture-test-views/1"
#: Frame of capture cameras that state none: what a reconstruction's COLMAP / nerfstudio
#: export and a capture manifest are in.
CAPTURE_DEFAULT_FRAME = "splat"
#: Cameras :func:`frame_fit` renders (spread evenly over the file) and their longest side, px:
#: enough to tell a wrong frame (~11 dB) from a right one (> 30 dB) at a few renders' cost.
FIT_VIEWS = 4
FIT_SIDE = 256


@dataclass(frozen=True)
class TestCapture:
    """Undistorted held-out images and their pinhole cameras.

    Attributes:
        cameras: Pinhole cameras, one per image (names = image file names).
        folder: Folder of the undistorted PNGs + ``manifest.json``.
        label: Source as named in the quality tables.
        frame: ``"world"`` or ``"splat"``: the frame of the cameras' poses.
    """

    cameras: list[Any]
    folder: Path
    label: str
    frame: str = CAPTURE_DEFAULT_FRAME


@dataclass(frozen=True)
class FrameFit:
    """How well the clean scene, rendered at a capture's cameras, matches its images.

    Attributes:
        source: The camera file (or COLMAP model, capture manifest) read.
        frame: Frame the cameras are read in: declared, else :data:`CAPTURE_DEFAULT_FRAME`.
        declared: True when the file states the frame.
        kind: ``"json"``, ``"transforms"``, ``"colmap"`` or ``"manifest"`` (for the fix).
        views: Cameras rendered (at most :data:`FIT_VIEWS`, longest side <= :data:`FIT_SIDE`).
        psnr: Mean clean PSNR over those views in ``frame``, dB (inf: identical).
        other_psnr: The same poses read in the other frame, dB; None when not measured.
    """

    source: Path
    frame: str
    declared: bool
    kind: str
    views: int
    psnr: float
    other_psnr: float | None = None

    @property
    def other(self) -> str:
        """The frame the cameras are not read in."""
        return "world" if self.frame == "splat" else "splat"


def _is_manifest(path: Path) -> bool:
    if not (path.is_file() and path.suffix == ".json"):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("format", "")).startswith("splatbench-capture")


def _camera_source(folder: Path) -> Path:
    for name in CAMERA_FILES:
        if (folder / name).is_file():
            return folder / name
    for candidate in (folder, folder / "sparse" / "0", folder / "sparse"):
        if any((candidate / f"cameras.{e}").is_file() for e in ("txt", "bin")):
            return candidate
    raise BenchError(f"captures folder {folder} holds no camera file (cameras.json, "
                     "transforms.json or a COLMAP model); add one next to the images")


def check_capture_sources(spec: Any) -> None:
    """Refuse missing capture paths and FR metrics on user scenes without captures."""
    from metrics.registry import scorer_info

    for scene, source in spec.captures.items():
        path = Path(source)
        if not path.exists():
            raise BenchError(f"captures of scene {scene!r}: {path} does not exist; give a "
                             "capture.json or a folder of images + camera file")
        if path.is_dir():
            _camera_source(path)
        elif not _is_manifest(path):
            raise BenchError(f"captures of scene {scene!r}: {path} is not a capture manifest "
                             "(format splatbench-capture/1) nor a folder")
    full_reference = [m for m in spec.metrics if scorer_info(m).mode == "FR"]
    bare = [s for s in spec.scenes if s not in spec.captures]
    if full_reference and bare:
        raise BenchError(f"scenes {bare} have no held-out captures, so {full_reference} have "
                         "nothing to compare with; add \"captures\": {scene: capture.json or "
                         "images folder}, or keep only no-reference metrics (nvs-sqa)")


def _raw_views(source: Path) -> tuple[list[Any], list[Path], Any]:
    """(cameras with distortion, image paths, their CameraFile) of a capture source."""
    from bench.recon.capture import CaptureManifest
    from bench.scene.camera_files import CameraFile, load_camera_file
    from metrics.images import image_for_camera, images_by_camera, list_images

    if source.is_file():
        manifest = CaptureManifest.load(source, require_views=False)
        if not manifest.test_views:
            raise BenchError(f"capture manifest {source} lists no test_views; hold out views "
                             "for scoring (they are never trained on)")
        cameras = [v.camera for v in manifest.test_views]
        # a manifest is what the reconstruction is trained from: its frame is the splat frame
        return (cameras, [manifest.root / v.image for v in manifest.test_views],
                CameraFile(tuple(cameras), CAPTURE_DEFAULT_FRAME, False, source))
    loaded = load_camera_file(_camera_source(source), default_frame=CAPTURE_DEFAULT_FRAME,
                              keep_distortion=True)
    cameras = list(loaded.cameras)
    files = list_images(source if not (source / "images").is_dir() else source / "images")
    by_name = images_by_camera(files)  # name, stem, or the stem after bench render's NNNN_
    images = []
    for cam in cameras:
        hit = image_for_camera(by_name, cam.name)
        if hit is None:
            shown = ", ".join(p.name for p in files[:4]) + (
                f" and {len(files) - 4} more" if len(files) > 4 else "")
            raise BenchError(f"captures folder {source}: no image for camera {cam.name!r} "
                             f"among the {len(files)} found ({shown}); name each image like its "
                             "camera (test_00.png), optionally after an index prefix as bench "
                             "render writes (0000_test_00.png)")
        images.append(hit)
    return cameras, images, loaded


def check_capture_images(spec: Any) -> None:
    """Refuse a captures folder whose images do not pair with its cameras (no rendering)."""
    for scene, source in sorted(spec.captures.items()):
        try:
            _raw_views(Path(source))
        except BenchError as exc:
            raise BenchError(f"captures of scene {scene!r}: {exc}") from None


def undistort(image: np.ndarray, camera: Any) -> tuple[np.ndarray, Any, dict[str, Any]]:
    """An ideal-pinhole version of a captured image.

    Args:
        image: ``[H, W, 3]`` uint8 as captured.
        camera: Its camera (pinhole with ``opencv_distortion``, fisheye, or ideal pinhole).

    Returns:
        (undistorted image ``[h, w, 3]`` uint8, its pinhole camera, crop record
        ``{"x", "y", "width", "height", "model"}`` in the undistorted full frame).
    """
    import cv2

    h, w = image.shape[:2]
    record = {"x": 0, "y": 0, "width": w, "height": h, "model": "pinhole"}
    if camera.model == "pinhole" and not camera.opencv_distortion:
        return image, camera, record
    # OpenCV puts pixel centres on integers; this bench (COLMAP) at +0.5
    K = np.array([[camera.fx, 0, camera.cx - 0.5], [0, camera.fy, camera.cy - 0.5], [0, 0, 1]])
    if camera.model == "fisheye":
        D = np.asarray(camera.distortion, np.float64).reshape(4, 1)
        new_k = cv2.fisheye.estimateNewCameraMatrixForUndistortRectify(
            K, D, (w, h), np.eye(3), balance=0.0)
        map1, map2 = cv2.fisheye.initUndistortRectifyMap(K, D, np.eye(3), new_k, (w, h),
                                                         cv2.CV_32FC1)
        x, y, cw, ch = 0, 0, w, h
        record["model"] = "fisheye"
    else:
        D = np.asarray(camera.opencv_distortion, np.float64)
        new_k, (x, y, cw, ch) = cv2.getOptimalNewCameraMatrix(K, D, (w, h), 0.0, (w, h))
        map1, map2 = cv2.initUndistortRectifyMap(K, D, None, new_k, (w, h), cv2.CV_32FC1)
        record["model"] = "opencv"
        if cw <= 0 or ch <= 0:
            raise BenchError(f"camera {camera.name!r}: undistortion leaves no valid pixels; "
                             "check its distortion coefficients")
    flat = cv2.remap(image, map1, map2, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    cropped = np.ascontiguousarray(flat[y:y + ch, x:x + cw])
    pinhole = camera.replace(model="pinhole", width=int(cw), height=int(ch),
                             fx=float(new_k[0, 0]), fy=float(new_k[1, 1]),
                             cx=float(new_k[0, 2]) + 0.5 - x, cy=float(new_k[1, 2]) + 0.5 - y,
                             distortion=(0.0, 0.0, 0.0, 0.0), fov_deg=None, opencv_distortion=())
    record.update(x=int(x), y=int(y), width=int(cw), height=int(ch),
                  new_fx=pinhole.fx, new_fy=pinhole.fy, new_cx=pinhole.cx, new_cy=pinhole.cy)
    return cropped, pinhole, record


def prepare_test_capture(spec: Any, out: Path, scene: str) -> TestCapture:
    """Undistort a scene's held-out captures into ``captures/<scene>/test/`` (once)."""
    import imageio.v3 as iio

    from bench.provenance import (
        atomic_write_bytes,
        atomic_write_json,
        make_manifest,
        sha256_file,
        staged_output_dir,
    )
    from bench.scene.camera_files import load_camera_file, save_cameras
    from bench.scene.cameras import Camera
    from metrics.images import read_image

    source = Path(spec.captures[scene])
    folder = out / "captures" / scene / "test"
    done = folder / "manifest.json"
    if done.is_file():
        data = json.loads(done.read_text())
        # written with its frame; an older study's file has none and was splat
        kept = load_camera_file(folder / "cameras.json", default_frame=CAPTURE_DEFAULT_FRAME)
        return TestCapture(list(kept.cameras), folder, data["label"], kept.frame)
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    cameras, images, loaded = _raw_views(source)
    crops, pinholes, outputs, inputs = [], [], {}, {}
    with staged_output_dir(folder, overwrite=False) as tmp:
        for i, (cam, path) in enumerate(zip(cameras, images, strict=True)):
            image = read_image(path)
            if image.shape[:2] != (cam.height, cam.width):
                raise BenchError(f"captured image {path} is {image.shape[1]}x{image.shape[0]} "
                                 f"px but its camera is {cam.width}x{cam.height}; fix one")
            flat, pinhole, crop = undistort(image, cam)
            name = f"{i:04d}_{Path(path).stem}.png"
            pinholes.append(Camera.from_dict({**pinhole.to_dict(), "name": name}))
            crops.append({"image": Path(path).name, **crop})
            atomic_write_bytes(tmp / name, iio.imwrite("<bytes>", flat, extension=".png"))
            outputs[name] = tmp / name
            inputs[f"image_{i:04d}"] = path
        save_cameras(tmp / "cameras.json", pinholes, frame=loaded.frame)
        digest = sha256_file(source) if source.is_file() else None
        label = f"captures:{source.name}" + (f" sha256:{digest[:12]}" if digest else "")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={"source": str(source)}, seed=None, inputs=inputs,
            outputs=outputs, counts={"images": len(outputs)},
            extra={"scene_name": scene, "label": label, "undistortion": crops,
                   "frame": loaded.frame, "frame_declared": loaded.declared}))
    return TestCapture(pinholes, folder, label, loaded.frame)


def capture_views(bundle: Any, capture: TestCapture, *, scene: str, condition: str,
                  backend: str) -> list[Any]:
    """Test view sets of one condition: renders (8-bit) paired with captures.

    Rendered in the cameras' frame: world cameras from the world-frame background (as
    ``bench score`` renders them), splat cameras from the splat-frame background.
    Cameras of different sizes (after undistortion crops) give one view set per size.
    """
    from metrics.views import ViewSet, match_references, render_frames

    splats = _background(bundle, capture.frame)
    groups: dict[tuple[int, int], list[Any]] = {}
    for cam in capture.cameras:
        groups.setdefault((cam.height, cam.width), []).append(cam)
    sets = []
    for cams in groups.values():
        names = [c.name for c in cams]
        refs = match_references(capture.folder, names)
        frames = render_frames(splats, cams, backend=backend, progress=False)
        frames8 = (np.clip(frames, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)  # as a saved PNG
        sets.append(ViewSet("test", scene, condition, tuple(names), frames8, refs))
    return sets


def _background(bundle: Any, frame: str) -> Any:
    """The bundle's Gaussians in ``frame`` (cameras in that frame render them as-is)."""
    return bundle.background if frame == "world" else bundle.splat_background()


def _kind(source: Path) -> str:
    if source.is_file() and _is_manifest(source):
        return "manifest"
    if source.is_dir():
        return "colmap"
    return "transforms" if source.name == "transforms.json" else "json"


def frame_fit(bundle: Any, source: str | Path, *, backend: str = "auto",
              views: int = FIT_VIEWS, side: int = FIT_SIDE,
              other_below: float | None = None) -> FrameFit:
    """Mean clean PSNR of a capture's images against the clean scene at their cameras.

    Cheap on purpose (the study's preflight): ``views`` cameras spread evenly over the
    file, undistorted like :func:`prepare_test_capture`, image and camera shrunk to a
    longest side of ``side`` px (``cv2.INTER_AREA``), rendered once, compared as 8-bit.

    Args:
        bundle: The clean scene (world-frame background; ``splat_background()``).
        source: The spec's ``captures`` entry (folder or capture manifest).
        backend: ``bench.render`` backend.
        views: Most cameras rendered.
        side: Longest image side of the renders, px.
        other_below: Also render the poses read in the other frame when the mean PSNR
            is below this many dB (and ``world_from_splat`` is not the identity).
    """
    import cv2

    from bench.geometry import Similarity
    from bench.render import render
    from metrics.images import read_image
    from metrics.psnr import psnr

    source = Path(source)
    cameras, images, loaded = _raw_views(source)
    picks = sorted({int(i) for i in np.linspace(0, len(cameras) - 1, min(views, len(cameras)))
                    .round()})
    small, refs = [], []
    for i in picks:
        image = read_image(images[i])
        cam = cameras[i]
        if image.shape[:2] != (cam.height, cam.width):
            raise BenchError(f"captured image {images[i]} is {image.shape[1]}x{image.shape[0]} "
                             f"px but its camera is {cam.width}x{cam.height}; fix one")
        flat, pinhole, _ = undistort(image, cam)
        scale = min(1.0, side / max(pinhole.width, pinhole.height))
        size = (max(1, round(pinhole.width * scale)), max(1, round(pinhole.height * scale)))
        if size != (pinhole.width, pinhole.height):
            flat = cv2.resize(flat, size, interpolation=cv2.INTER_AREA)
            pinhole = pinhole.resized(*size)
        small.append(pinhole)
        refs.append(flat)

    def mean_psnr(frame: str) -> float:
        splats = _background(bundle, frame)
        values = []
        for cam, ref in zip(small, refs, strict=True):
            rgb = np.clip(np.asarray(render(splats, cam, backend=backend).rgb), 0.0, 1.0)
            rgb8 = (rgb * 255.0 + 0.5).astype(np.uint8)  # [h, w, 3], as capture_views scores
            values.append(float(psnr(rgb8[None], ref[None])[0]))
        return float(np.mean(values))

    fit = FrameFit(loaded.path, loaded.frame, loaded.declared, _kind(loaded.path), len(small),
                   mean_psnr(loaded.frame))
    if other_below is not None and fit.psnr < other_below \
            and not Similarity.from_matrix(bundle.world_from_splat).is_identity():
        fit = dataclasses.replace(fit, other_psnr=mean_psnr(fit.other))
    return fit
