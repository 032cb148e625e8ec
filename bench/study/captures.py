"""Held-out captures for the Test views of a study (spec key ``captures``).

Per scene the spec names either

* a **capture manifest** (``capture.json`` of ``bench capture``): its
  ``test_views`` (image + pinhole camera, never trained on) are the Test views;
* a **folder of images plus a camera file**: ``cameras.json`` (this bench's
  list), ``transforms.json`` (nerfstudio; ``k1..k4``/``p1``/``p2`` read) or a
  COLMAP model (``cameras``/``images`` ``.txt`` or ``.bin``, in the folder or
  ``sparse/0``; SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV and
  OPENCV_FISHEYE read). Images pair with cameras by file name (or stem).

Cameras are in the capture's (splat) frame, so every condition is rendered
from its background in splat coordinates. Distorted images (radial-tangential
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

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError

SYNTHETIC = "synthetic-capture"
CAMERA_FILES = ("cameras.json", "transforms.json")
TOOL_ID = "capture-test-views/1"


@dataclass(frozen=True)
class TestCapture:
    """Undistorted held-out images and their pinhole cameras (splat frame).

    Attributes:
        cameras: Pinhole cameras, one per image (names = image file names).
        folder: Folder of the undistorted PNGs + ``manifest.json``.
        label: Source as named in the quality tables.
    """

    cameras: list[Any]
    folder: Path
    label: str


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


def _raw_views(source: Path) -> tuple[list[Any], list[Path]]:
    """(cameras with distortion, image paths) of a capture source."""
    from bench.recon.capture import CaptureManifest
    from bench.scene.camera_files import load_cameras
    from metrics.images import list_images

    if source.is_file():
        manifest = CaptureManifest.load(source, require_views=False)
        if not manifest.test_views:
            raise BenchError(f"capture manifest {source} lists no test_views; hold out views "
                             "for scoring (they are never trained on)")
        return ([v.camera for v in manifest.test_views],
                [manifest.root / v.image for v in manifest.test_views])
    cameras = load_cameras(_camera_source(source), keep_distortion=True)
    files = list_images(source if not (source / "images").is_dir() else source / "images")
    by_name = {p.name: p for p in files} | {p.stem: p for p in files}
    images = []
    for cam in cameras:
        name = Path(cam.name).name
        hit = by_name.get(name) or by_name.get(Path(name).stem)
        if hit is None:
            raise BenchError(f"captures folder {source}: no image for camera {cam.name!r}; "
                             "name each image like its camera's image name")
        images.append(hit)
    return cameras, images


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
    from bench.scene.camera_files import load_cameras, save_cameras
    from bench.scene.cameras import Camera
    from metrics.images import read_image

    source = Path(spec.captures[scene])
    folder = out / "captures" / scene / "test"
    done = folder / "manifest.json"
    if done.is_file():
        data = json.loads(done.read_text())
        return TestCapture(load_cameras(folder / "cameras.json"), folder, data["label"])
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    cameras, images = _raw_views(source)
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
        save_cameras(tmp / "cameras.json", pinholes)
        digest = sha256_file(source) if source.is_file() else None
        label = f"captures:{source.name}" + (f" sha256:{digest[:12]}" if digest else "")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={"source": str(source)}, seed=None, inputs=inputs,
            outputs=outputs, counts={"images": len(outputs)},
            extra={"scene_name": scene, "label": label, "undistortion": crops}))
    return TestCapture(pinholes, folder, label)


def capture_views(bundle: Any, capture: TestCapture, *, scene: str, condition: str,
                  backend: str) -> list[Any]:
    """Test view sets of one condition: renders (splat frame, 8-bit) paired with captures.

    Cameras of different sizes (after undistortion crops) give one view set per size.
    """
    from metrics.views import ViewSet, match_references, render_frames

    splats = bundle.splat_background()
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
