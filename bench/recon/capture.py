"""Capture manifests and sharpest-frame selection.

A *capture manifest* (``capture.json``, format ``splatbench-capture/1``) lists

- ``frames``: the time-ordered **source frames** (id, timestamp in seconds, one
  image per lens, optionally each lens' calibrated camera with its pose);
- ``views``: the **training views** made from them (normally the nine pinhole
  reprojections of each source frame, :mod:`bench.recon.reproject`), each with its
  source frame id, lens, view name (``forward``, ``tilt_az000`` ...), image and exact
  pinhole camera;
- ``test_views``: **held-out test views** (image + camera) used only to score a
  reconstruction; they belong to no frame, so no coverage plan can keep them, and
  :meth:`CaptureManifest.training_views` refuses a manifest in which a test image
  is also a training image.

Image paths are relative to the manifest's directory. Cameras are
:class:`bench.scene.cameras.Camera` dicts (OpenCV axes, pixel centres at +0.5).

Frame selection (YUBI, ``PAPERS.md``): split the recording into T equal time
intervals and keep, per interval, the frame whose *least* sharp lens is sharpest,
sharpness being the variance of the Laplacian (``cv2.Laplacian(gray, CV_64F).var()``).
Ties go to the earliest frame, so the choice is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.provenance import read_json
from bench.scene.cameras import Camera

CAPTURE_FORMAT = "splatbench-capture/1"


# --------------------------------------------------------------------------- data model
@dataclass(frozen=True, eq=False)
class SourceFrame:
    """One time instant of the capture.

    Attributes:
        id: Unique frame id (e.g. ``"f0042"``).
        timestamp: Seconds since the start of the recording.
        images: Lens name -> image path (relative to the manifest directory).
        cameras: Lens name -> calibrated camera with its pose (may be empty before
            calibration; reprojection needs it).
    """

    id: str
    timestamp: float
    images: dict[str, str]
    cameras: dict[str, Camera] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The frame as JSON (capture.json entry)."""
        return {
            "id": self.id,
            "timestamp": self.timestamp,
            "images": dict(self.images),
            "cameras": {lens: cam.to_dict() for lens, cam in self.cameras.items()},
        }


@dataclass(frozen=True, eq=False)
class View:
    """A posed pinhole image used for training or testing.

    Attributes:
        id: Unique view id (e.g. ``"f0042/left/tilt_az045"``).
        image: Image path relative to the manifest directory.
        camera: Its camera (intrinsics + ``world_from_camera``).
        frame: Source frame id; None for held-out test views.
        lens: Lens of the source frame it was made from.
        name: View name within the frame (``forward``, ``tilt_az000`` ...).
    """

    id: str
    image: str
    camera: Camera
    frame: str | None = None
    lens: str = ""
    name: str = "forward"

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON (capture.json entry)."""
        return {"id": self.id, "image": self.image, "camera": self.camera.to_dict(),
                "frame": self.frame, "lens": self.lens, "name": self.name}


@dataclass(frozen=True, eq=False)
class CaptureManifest:
    """Source frames, training views and held-out test views of one capture.

    Attributes:
        frames: Source frames in time order.
        views: Training views (each names its source frame).
        test_views: Held-out test views (never trained on).
        root: Directory that image paths are relative to.
        image_roots: The allow-list of further folders (relative to ``root``, or
            absolute) that image paths may resolve into besides ``root`` itself, e.g.
            the source folders of ``bench capture select --images``. Any other image
            path leaving ``root`` (``..``, an absolute path, a symbolic link) is refused.
    """

    frames: tuple[SourceFrame, ...]
    views: tuple[View, ...] = ()
    test_views: tuple[View, ...] = ()
    root: Path = Path(".")
    image_roots: tuple[str, ...] = ()

    @property
    def frame_ids(self) -> list[str]:
        """Frame ids in time order."""
        return [f.id for f in self.frames]

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON (the capture.json document)."""
        data = {
            "format": CAPTURE_FORMAT,
            "frames": [f.to_dict() for f in self.frames],
            "views": [v.to_dict() for v in self.views],
            "test_views": [v.to_dict() for v in self.test_views],
        }
        if self.image_roots:
            data["image_roots"] = list(self.image_roots)
        return data

    def check_closed(self, source: str = "capture manifest") -> None:
        """Refuse an image path that leaves ``root`` and every folder of ``image_roots``."""
        from bench.safety import resolve_inside

        allow = [self.root / r for r in self.image_roots]
        fix = ("keep images inside the capture directory or list their folder in "
               "\"image_roots\"")
        for frame in self.frames:
            for lens, image in frame.images.items():
                resolve_inside(self.root, image, what=f"{source}: frame {frame.id!r} lens "
                               f"{lens!r} image", allow=allow, allow_absolute=bool(allow),
                               fix=fix)
        for view in (*self.views, *self.test_views):
            resolve_inside(self.root, view.image, what=f"{source}: view {view.id!r} image",
                           allow=allow, allow_absolute=bool(allow), fix=fix)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``capture.json`` atomically (paths stay relative to its directory)."""
        from bench.provenance import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @staticmethod
    def load(path: str | os.PathLike, *, check_files: bool = True,
             require_views: bool = True) -> CaptureManifest:
        """Read and validate a capture manifest (see :meth:`validate`)."""
        path = Path(path)
        data = read_json(path, what="capture manifest",
                         fix="pass the capture.json written by `bench capture` (or regenerate it)")
        manifest = manifest_from_dict(data, root=path.parent, source=f"capture manifest {path}")
        manifest.validate(check_files=check_files, require_views=require_views,
                          source=f"capture manifest {path}")
        return manifest

    def validate(self, *, check_files: bool = True, require_views: bool = True,
                 source: str = "capture manifest") -> None:
        """Refuse manifests that cannot be trained on, with a message saying how to fix them.

        Checks: at least one frame and (``require_views``) one training view; unique ids; strictly
        increasing timestamps; every view names an existing frame; no test image is
        a training image; and, with ``check_files``, that every image exists, each
        view's image matches its camera's size and all training views share one size.
        """
        if not self.frames:
            raise BenchError(f"{source} is empty: it lists no source frames; "
                             "select frames first (`bench capture select`, or "
                             "select_from_videos / select_from_images)")
        self.check_closed(source)  # before anything else reads an image path
        ids = self.frame_ids
        if len(set(ids)) != len(ids):
            raise BenchError(f"{source}: frame ids are not unique; give every frame its own id")
        times = [f.timestamp for f in self.frames]
        if not all(math.isfinite(t) for t in times) or any(b <= a for a, b in zip(times, times[1:],
                                                                                  strict=False)):
            raise BenchError(f"{source}: frame timestamps must be finite and strictly increasing "
                             "(frames in time order)")
        if require_views and not self.views:
            raise BenchError(f"{source} lists no training views; reproject the frames first "
                             "(`bench capture reproject`, or reproject_capture)")
        view_ids = [v.id for v in (*self.views, *self.test_views)]
        if len(set(view_ids)) != len(view_ids):
            raise BenchError(f"{source}: view ids are not unique across views and test_views")
        known = set(ids)
        for view in self.views:
            if view.frame not in known:
                raise BenchError(f"{source}: view {view.id!r} names frame {view.frame!r}, which "
                                 "is not in the frame list; fix its 'frame' field")
        train_images = {_norm(v.image) for v in self.views}
        for view in self.test_views:
            if _norm(view.image) in train_images:
                raise BenchError(f"{source}: test view {view.id!r} uses training image "
                                 f"{view.image!r}; held-out views must be separate images")
        if check_files:
            self._check_files(source)

    def _check_files(self, source: str) -> None:
        for frame in self.frames:
            for lens, image in frame.images.items():
                _require_file(self.root / image, f"{source}: frame {frame.id!r} lens {lens!r}")
        sizes: dict[tuple[int, int], str] = {}
        for view in (*self.views, *self.test_views):
            path = self.root / view.image
            _require_file(path, f"{source}: view {view.id!r}")
            size = image_size(path)
            if size != (view.camera.width, view.camera.height):
                raise BenchError(
                    f"{source}: image {view.image} is {size[0]}x{size[1]} px but the camera of "
                    f"view {view.id!r} is {view.camera.width}x{view.camera.height}; "
                    "fix the camera or re-export the image"
                )
            if view.frame is not None:
                sizes.setdefault(size, view.image)
        if len(sizes) > 1:
            (a, first), (b, second) = list(sizes.items())[:2]
            raise BenchError(
                f"{source}: training images have mixed sizes ({first} is {a[0]}x{a[1]} px, "
                f"{second} is {b[0]}x{b[1]} px); reproject all frames at one --size"
            )

    def image_digest(self, views: Sequence[View]) -> str:
        """sha256 over the views' ids and image sha256s, in the given order.

        One digest for a whole training (or test) set, so a provenance manifest
        changes when any image does, without listing thousands of files.
        """
        from bench.provenance import sha256_bytes, sha256_file

        lines = [f"{v.id}\t{sha256_file(self.root / v.image)}\n" for v in views]
        return sha256_bytes("".join(lines).encode("utf-8"))

    def training_views(self, plan: Any | None = None) -> list[View]:
        """Training views kept by a coverage plan (all views when ``plan`` is None).

        Args:
            plan: A :class:`perturbations.coverage.CoveragePlan` made from this
                manifest's frames: ``views == "all"`` keeps every view of a kept
                frame, ``"forward"`` only the forward views (of every lens, when the
                frames were reprojected from several lenses).

        Returns:
            The kept views in manifest order; never a test view.
        """
        if plan is None:
            kept_frames, names = set(self.frame_ids), None
        else:
            plan.check_against(self.frame_ids)
            kept_frames = set(plan.kept)
            names = None if plan.views == "all" else {"forward"}
        chosen = [v for v in self.views
                  if v.frame in kept_frames and (names is None or v.name in names)]
        held_out = {v.id for v in self.test_views} | {_norm(v.image) for v in self.test_views}
        if any(v.id in held_out or _norm(v.image) in held_out for v in chosen):
            raise BenchError("a held-out test view is in the training set; separate test_views "
                             "from views in the capture manifest")
        if not chosen:
            raise BenchError("the coverage plan keeps no training views of this manifest; "
                             "check that its views are named 'forward' / 'tilt_az...'")
        return chosen


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"{what}: image {path} does not exist; fix the path "
                                "(relative to the manifest directory) or restore the file")


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) of an image file, read from its header only."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return int(image.width), int(image.height)
    except OSError as exc:
        raise BenchError(f"cannot read image {path} ({exc}); re-export it as PNG or JPEG") from None


def _camera(data: Any, what: str) -> Camera:
    if not isinstance(data, Mapping):
        raise BenchError(f"{what}: camera must be a camera dict (bench.scene.cameras format)")
    try:
        return Camera.from_dict(dict(data))
    except ValueError as exc:
        raise BenchError(f"{what}: {str(exc).splitlines()[0]}") from None


def _view(data: Any, what: str, *, test: bool) -> View:
    if not isinstance(data, Mapping) or "id" not in data or "image" not in data or (
        "camera" not in data
    ):
        raise BenchError(f"{what}: each view needs 'id', 'image' and 'camera'")
    return View(
        id=str(data["id"]), image=str(data["image"]),
        camera=_camera(data["camera"], f"{what} {data['id']!r}"),
        frame=None if test else (None if data.get("frame") is None else str(data["frame"])),
        lens=str(data.get("lens", "")), name=str(data.get("name", "forward")),
    )


def manifest_from_dict(data: Any, *, root: str | os.PathLike = ".",
                       source: str = "capture manifest") -> CaptureManifest:
    """Build a :class:`CaptureManifest` from JSON data (structure checks only)."""
    if not isinstance(data, Mapping) or data.get("format") != CAPTURE_FORMAT:
        raise BenchError(f"{source} is not a capture manifest (format {CAPTURE_FORMAT!r} "
                         "expected)")
    frames = []
    for i, item in enumerate(data.get("frames") or []):
        if not isinstance(item, Mapping) or "id" not in item or "timestamp" not in item:
            raise BenchError(f"{source}: frame {i} needs 'id' and 'timestamp' (seconds)")
        cams = {str(lens): _camera(c, f"{source}: frame {item['id']!r} lens {lens!r}")
                for lens, c in (item.get("cameras") or {}).items()}
        stamp = item["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise BenchError(f"{source}: frame {i} 'timestamp' must be a number of seconds, got "
                             f"{stamp!r:.40}")
        frames.append(SourceFrame(id=str(item["id"]), timestamp=float(stamp),
                                  images={str(k): str(v) for k, v in
                                          (item.get("images") or {}).items()},
                                  cameras=cams))
    views = tuple(_view(v, f"{source}: view", test=False) for v in data.get("views") or [])
    tests = tuple(_view(v, f"{source}: test view", test=True) for v in data.get("test_views") or [])
    roots = data.get("image_roots") or []
    if not isinstance(roots, list) or not all(isinstance(r, str) and r for r in roots):
        raise BenchError(f"{source}: 'image_roots' must be a list of folder paths")
    return CaptureManifest(tuple(frames), views, tests, Path(root), tuple(roots))


# --------------------------------------------------------------------------- frame selection
def laplacian_sharpness(image: np.ndarray) -> float:  # image [H, W] or [H, W, C]
    """Variance of the Laplacian of the grey image (higher = sharper).

    Colour images are converted with ``cv2.cvtColor`` (BGR order, as cv2 reads them).
    """
    import cv2

    gray = image
    if image.ndim == 3 and image.shape[2] == 3:
        gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    elif image.ndim == 3 and image.shape[2] == 1:
        gray = image[..., 0]
    return float(cv2.Laplacian(gray, cv2.CV_64F).var())


def interval_of(timestamps: np.ndarray, intervals: int) -> np.ndarray:  # [M] -> [M] int
    """Index (0..T-1) of the equal time interval each timestamp falls in.

    The span ``[t_first, t_last]`` is cut into ``intervals`` equal half-open
    intervals; the last one also holds ``t_last``.
    """
    t = np.asarray(timestamps, dtype=np.float64)
    span = t[-1] - t[0]
    if span <= 0:
        return np.zeros(len(t), dtype=np.int64)
    index = np.floor((t - t[0]) * intervals / span).astype(np.int64)
    return np.minimum(index, intervals - 1)


def select_frame_indices(
    timestamps: Sequence[float],  # [M] strictly increasing, seconds
    sharpness: np.ndarray,  # [M, L] Laplacian variance per frame and lens
    intervals: int,
) -> list[int]:
    """Per equal time interval, the frame maximising the minimum sharpness over lenses.

    Ties go to the earliest frame (``np.argmax`` returns the first maximum).

    Raises:
        BenchError: fewer frames than intervals, or an interval with no frame.
    """
    t = np.asarray(timestamps, dtype=np.float64)
    scores = np.asarray(sharpness, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if int(intervals) != intervals or intervals < 1:
        raise BenchError(f"number of intervals must be a positive integer, got {intervals!r}")
    if len(t) < intervals:
        raise BenchError(f"only {len(t)} frames for {intervals} intervals; "
                         "choose at most as many intervals as frames")
    if scores.shape[0] != len(t):
        raise ValueError(f"sharpness has {scores.shape[0]} rows for {len(t)} timestamps")
    if np.any(np.diff(t) <= 0):
        raise BenchError("frame timestamps must be strictly increasing")
    worst_lens = scores.min(axis=1)  # [M]
    which = interval_of(t, int(intervals))
    chosen = []
    for k in range(int(intervals)):
        members = np.flatnonzero(which == k)
        if len(members) == 0:
            raise BenchError(f"time interval {k} holds no frame (uneven timestamps); "
                             "choose fewer intervals")
        chosen.append(int(members[np.argmax(worst_lens[members])]))
    return chosen


def select_from_images(
    images: Mapping[str, Sequence[str | os.PathLike]],
    *,
    intervals: int,
    fps: float | None = None,
    timestamps: Sequence[float] | None = None,
    root: str | os.PathLike = ".",
    cameras: Mapping[str, Camera] | None = None,
    show_progress: bool = False,
) -> list[SourceFrame]:
    """Select source frames from frame-synchronised image sequences (one per lens).

    Args:
        images: Lens name -> image paths in time order (equal lengths).
        intervals: Number T of equal time intervals (= frames selected).
        fps: Frame rate to derive timestamps (``index / fps``) when ``timestamps`` is None.
        timestamps: Per-index timestamps in seconds (overrides ``fps``).
        root: Directory the returned image paths are made relative to.
        cameras: Optional lens -> calibrated camera attached to every frame.
        show_progress: Report progress on stderr (``bench.progress``).

    Returns:
        The selected frames, ids ``f{index:06d}`` (index in the sequence), time order.
    """
    import cv2

    lenses = list(images)
    if not lenses:
        raise BenchError("no image sequences given; pass at least one lens")
    count = len(images[lenses[0]])
    if count == 0 or any(len(images[lens]) != count for lens in lenses):
        raise BenchError("image sequences must be non-empty and of equal length per lens "
                         f"(got {[len(images[lens]) for lens in lenses]})")
    stamps = _timestamps(count, fps=fps, timestamps=timestamps)
    scores = np.zeros((count, len(lenses)))
    from bench.progress import progress as progress_bar

    for i in progress_bar(range(count), desc="sharpness", disable=not show_progress, file=None):
        for j, lens in enumerate(lenses):
            image = cv2.imread(str(images[lens][i]), cv2.IMREAD_GRAYSCALE)
            if image is None:
                raise FileNotFoundError(f"cannot read image {images[lens][i]}; check the path")
            scores[i, j] = laplacian_sharpness(image)
    chosen = select_frame_indices(stamps, scores, intervals)
    root = Path(root)
    return [
        SourceFrame(
            id=f"f{i:06d}", timestamp=float(stamps[i]),
            images={lens: os.path.relpath(Path(images[lens][i]), root) for lens in lenses},
            cameras=dict(cameras or {}),
        )
        for i in chosen
    ]


def _timestamps(count: int, *, fps: float | None, timestamps: Sequence[float] | None) -> np.ndarray:
    if timestamps is not None:
        stamps = np.asarray(timestamps, dtype=np.float64)
        if stamps.shape != (count,):
            raise BenchError(f"{len(stamps)} timestamps for {count} frames; give one per frame")
        return stamps
    if fps is None or not fps > 0:
        raise BenchError("give the frame rate (fps > 0) or explicit timestamps")
    return np.arange(count, dtype=np.float64) / float(fps)


def select_from_videos(
    videos: Mapping[str, str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    intervals: int,
    root: str | os.PathLike | None = None,
    cameras: Mapping[str, Camera] | None = None,
    show_progress: bool = False,
) -> list[SourceFrame]:
    """Select source frames from frame-synchronised videos (one per lens) and save them as PNG.

    Two passes over each video: the first scores every frame (only scores are kept
    in memory), the second writes the chosen frames to ``out_dir/{id}_{lens}.png``.
    Timestamps are ``frame_index / fps`` of the first lens' video.

    Args:
        videos: Lens name -> video path.
        out_dir: Directory for the extracted PNG frames (created).
        intervals: Number T of equal time intervals (= frames selected).
        root: Directory the returned image paths are made relative to (default ``out_dir``'s
            parent, where ``capture.json`` normally lives).
        cameras: Optional lens -> calibrated camera attached to every frame.
        show_progress: Report progress on stderr (``bench.progress``).

    Returns:
        The selected frames, ids ``f{index:06d}`` (video frame index), time order.
    """
    import cv2

    lenses = list(videos)
    if not lenses:
        raise BenchError("no videos given; pass at least one lens")
    scores_per_lens = []
    fps = None
    for lens in lenses:
        scores, lens_fps = _score_video(videos[lens], show_progress=show_progress)
        scores_per_lens.append(scores)
        fps = fps or lens_fps
    count = min(len(s) for s in scores_per_lens)
    scores = np.stack([s[:count] for s in scores_per_lens], axis=1)
    stamps = np.arange(count, dtype=np.float64) / fps
    chosen = select_frame_indices(stamps, scores, intervals)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    root = Path(root) if root is not None else out_dir.parent
    wanted = set(chosen)
    for lens in lenses:
        capture = cv2.VideoCapture(str(videos[lens]))
        index = 0
        while index <= max(chosen):
            ok, frame = capture.read()
            if not ok:
                break
            if index in wanted:
                cv2.imwrite(str(out_dir / f"f{index:06d}_{lens}.png"), frame)
            index += 1
        capture.release()
    return [
        SourceFrame(
            id=f"f{i:06d}", timestamp=float(stamps[i]),
            images={lens: os.path.relpath(out_dir / f"f{i:06d}_{lens}.png", root)
                    for lens in lenses},
            cameras=dict(cameras or {}),
        )
        for i in chosen
    ]


def _score_video(path: str | os.PathLike, *,
                 show_progress: bool) -> tuple[np.ndarray, float]:  # ([frames] sharpness, fps)
    import cv2

    from bench.progress import progress as progress_bar

    if not Path(path).is_file():
        raise FileNotFoundError(f"video {path} does not exist; check the path")
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise BenchError(f"OpenCV cannot open video {path}; convert it to MP4 (H.264) or "
                         "extract frames (bench capture select --images, or select_from_images)")
    fps = float(capture.get(cv2.CAP_PROP_FPS)) or 0.0
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    scores = []
    with progress_bar(total=total, desc=f"sharpness {Path(path).name}",
                      disable=not show_progress) as bar:
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            scores.append(laplacian_sharpness(frame))
            bar.update(1)
    capture.release()
    if not scores:
        raise BenchError(f"video {path} has no readable frames")
    if not fps > 0:
        raise BenchError(f"video {path} reports no frame rate; extract its frames and pass "
                         "them with --images and --fps (select_from_images in Python)")
    return np.asarray(scores), fps


def import_poses(manifest: CaptureManifest, cameras: Sequence[Camera]) -> CaptureManifest:
    """Replace view cameras by posed ones (e.g. COLMAP's), matched by image file name.

    Every training and test view must find a camera whose ``name`` equals its image path
    or that path's file name (COLMAP stores image names relative to its image folder).
    Each source frame's lens camera takes the pose of its ``forward`` view, since the
    forward view shares the source's orientation.

    Raises:
        BenchError: a view without a matching camera, or a name matched twice.
    """
    by_name: dict[str, Camera] = {}
    for cam in cameras:
        for key in {cam.name, os.path.basename(cam.name)}:
            if key in by_name and by_name[key] is not cam:
                raise BenchError(f"two cameras are named {key!r}; image names must be unique")
            by_name[key] = cam

    def match(view: View) -> View:
        cam = by_name.get(view.image) or by_name.get(os.path.basename(view.image))
        if cam is None:
            raise BenchError(f"no camera for view {view.id!r} (image {view.image}); run COLMAP "
                             "on all view images, or drop the view from the manifest")
        return dataclasses.replace(view, camera=cam.replace(name=view.image))

    views = tuple(match(v) for v in manifest.views)
    tests = tuple(match(v) for v in manifest.test_views)
    forward = {(v.frame, v.lens): v.camera for v in views if v.name == "forward"}
    frames = []
    for frame in manifest.frames:
        cams = {lens: cam.with_pose(forward[(frame.id, lens)].world_from_camera)
                if (frame.id, lens) in forward else cam for lens, cam in frame.cameras.items()}
        frames.append(dataclasses.replace(frame, cameras=cams))
    return dataclasses.replace(manifest, frames=tuple(frames), views=views, test_views=tests)
