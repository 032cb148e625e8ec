"""View protocols: which frames a scene is scored on, and how scores are paired.

* **Test** (``"test"``): held-out cameras of the scene (camera role ``test``)
  rendered from the scene's background, aligned with captured images of the
  same views (``--gt``): full-reference *and* no-reference scores.
* **OBS-Probe** (``"obs-probe"``): one fixed camera trajectory (role
  ``obs_probe``) rendered in every scene variant: no-reference scores only.
* **OBS-Policy** (``"obs-policy"``): frames recorded during policy rollouts,
  read from a folder in natural file order, or from episode videos (``bench
  rollout --video`` writes ``videos/episode_XXXX.gif``; each episode is one
  sequence): no-reference scores only.
* **Images** (``"images"``): two plain image folders (``bench score --pred --gt``).

Per-frame values are kept (long format: scene, variant, view_protocol,
metric, frame, value); summaries average over frames. Per-sequence scorers
(NVS-SQA) give one row with frame ``SEQUENCE_FRAME``. The paired change
``dQ = Q_variant - Q_clean`` is taken over the same views, and every summary
also carries the *oriented* value (negated when lower is better) that the
reliability classifier thresholds.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer
from metrics.images import (
    as_image_batch,
    image_for_camera,
    images_by_camera,
    list_images,
    read_folder,
    read_image,
)

PROTOCOLS = ("test", "obs-probe", "obs-policy", "images")
CAMERA_ROLES = {"test": "test", "obs-probe": "obs_probe"}
SEQUENCE_FRAME = "(sequence)"
VIDEO_SUFFIXES = (".gif", ".mp4")
LONG_COLUMNS = ("scene", "variant", "view_protocol", "metric", "frame", "value")


@dataclass(frozen=True)
class ViewSet:
    """Frames of one scene variant under one view protocol.

    Attributes:
        protocol: One of :data:`PROTOCOLS`.
        scene: Scene name.
        variant: Variant label (``clean``, ``hole-54`` ...).
        frame_names: One name per frame (camera name or file name), in sequence order.
        frames: ``[N, H, W, 3]`` rendered / recorded frames (uint8 or float in [0, 1]).
        references: ``[N, H, W, 3]`` aligned captured images, or None (no-reference only).
        sequence: Label of this ordered sequence when a protocol has several (one per
            rollout episode); prefixes the per-sequence row's frame name.
    """

    protocol: str
    scene: str
    variant: str
    frame_names: tuple[str, ...]
    frames: np.ndarray
    references: np.ndarray | None = None
    sequence: str = ""

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise BenchError(f"unknown view protocol {self.protocol!r}; use one of {PROTOCOLS}")
        if len(self.frame_names) != len(self.frames):
            raise BenchError(
                f"{len(self.frame_names)} frame names for {len(self.frames)} frames"
            )
        if len(set(self.frame_names)) != len(self.frame_names):
            raise BenchError("frame names must be unique (they pair views across variants)")
        if self.references is not None and np.shape(self.references) != np.shape(self.frames):
            raise BenchError(
                f"reference images {np.shape(self.references)} do not match the frames "
                f"{np.shape(self.frames)}; captured images must have the cameras' size"
            )


@dataclass(frozen=True)
class ScoreRow:
    """One long-format value."""

    scene: str
    variant: str
    view_protocol: str
    metric: str
    frame: str
    value: float


@dataclass(frozen=True)
class SummaryRow:
    """Frame-averaged score of one metric on one view set.

    ``oriented`` is ``mean`` made higher-is-better. ``delta`` (``Q_variant -
    Q_clean`` on the same views) and ``oriented_delta`` are NaN when no clean
    scores were paired.
    """

    scene: str
    variant: str
    view_protocol: str
    metric: str
    mode: str
    lower_better: bool
    unit: str
    n_frames: int
    mean: float
    std: float
    oriented: float
    clean_mean: float = math.nan
    delta: float = math.nan
    oriented_delta: float = math.nan


# --------------------------------------------------------------------------- building views


def _load_bundle(scene: Any):
    from bench.scene.bundle import SceneBundle, load_scene

    return scene if isinstance(scene, SceneBundle) else load_scene(scene)


def scene_cameras(bundle: Any, role: str) -> list:
    """Cameras of ``role`` from a scene bundle's camera file, in the world frame.

    The background is rendered in the world frame; a role file declaring ``"frame":
    "splat"`` is moved there with the bundle's ``world_from_splat`` (no key: world).
    """
    from bench.scene.camera_files import WORLD, load_camera_file

    if role not in bundle.cameras:
        raise BenchError(
            f"scene {bundle.name!r} has no {role!r} cameras "
            f"(has: {sorted(bundle.cameras) or 'none'});"
            f' add "cameras": {{"{role}": "cameras/{role}.json"}} to scene.json'
        )
    if bundle.root is None:
        raise BenchError(f"scene {bundle.name!r} was built in code; save it before scoring")
    cams = load_camera_file(Path(bundle.root) / bundle.cameras[role],
                            default_frame=WORLD).in_frame(WORLD, bundle.world_from_splat)
    if not cams:
        raise BenchError(f"camera file for role {role!r} of scene {bundle.name!r} is empty")
    return cams


def render_frames(
    splats: Any,
    cameras: Sequence[Any],
    *,
    backend: str = "auto",
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    render_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> np.ndarray:  # -> [N, H, W, 3] float32
    """Render every camera with ``bench.render.render`` (or ``render_fn``, same signature)."""
    from bench.progress import progress as progress_bar

    if render_fn is None:
        from bench.render import render as render_fn
    sizes = {(c.height, c.width) for c in cameras}
    if len(sizes) > 1:
        raise BenchError(
            f"cameras have different image sizes {sorted(sizes)}; score each size separately"
        )
    frames = []
    for cam in progress_bar(cameras, desc="render", unit="view", file=sys.stderr,
                            disable=not progress):
        out = render_fn(splats, cam, backend=backend, background=background)
        frames.append(np.clip(np.asarray(out.rgb, dtype=np.float32), 0.0, 1.0))
    return np.stack(frames)


def _camera_names(cameras: Sequence[Any]) -> list[str]:
    names = [getattr(c, "name", "") or f"view_{i:04d}" for i, c in enumerate(cameras)]
    return names if len(set(names)) == len(names) else [f"view_{i:04d}" for i in range(len(names))]


def match_references(  # -> [N, H, W, 3] uint8
    gt_dir: str | os.PathLike, frame_names: Sequence[str]
) -> np.ndarray:
    """Captured images aligned with cameras: by camera name (file name or stem), else by order.

    Raises:
        BenchError: when the folder is empty, names do not resolve and the counts differ.
    """
    files = list_images(gt_dir)
    by_name = images_by_camera(files)  # name, stem, or the stem after bench render's NNNN_
    if all(image_for_camera(by_name, n) is not None for n in frame_names):
        chosen = [image_for_camera(by_name, n) for n in frame_names]
    elif len(files) == len(frame_names):
        chosen = files  # natural file order == camera-file order
    else:
        raise BenchError(
            f"{gt_dir} has {len(files)} images for {len(frame_names)} test cameras and their "
            "names do not match the camera names; provide one captured image per test camera"
        )
    images = [read_image(p) for p in chosen]
    if len({im.shape for im in images}) > 1:
        raise BenchError(f"captured images in {gt_dir} have different sizes; resize them first")
    return np.stack(images)


def test_views(
    scene: Any,
    gt_dir: str | os.PathLike,
    *,
    variant: str | None = None,
    cameras: Sequence[Any] | None = None,
    backend: str = "auto",
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    render_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> ViewSet:
    """Test protocol: render the held-out cameras and pair them with captured images."""
    bundle = _load_bundle(scene)
    cams = list(cameras) if cameras is not None else scene_cameras(bundle, CAMERA_ROLES["test"])
    names = _camera_names(cams)
    refs = match_references(gt_dir, names)
    frames = render_frames(
        bundle.background, cams, backend=backend, background=background,
        render_fn=render_fn, progress=progress,
    )
    if refs.shape != frames.shape:
        raise BenchError(
            f"captured images are {refs.shape[2]}x{refs.shape[1]} but the test cameras render "
            f"{frames.shape[2]}x{frames.shape[1]}; fix the camera intrinsics or resize the images"
        )
    return ViewSet("test", bundle.name, variant or bundle.name, tuple(names), frames, refs)


def obs_probe_views(
    scene: Any,
    *,
    variant: str | None = None,
    cameras: Sequence[Any] | None = None,
    backend: str = "auto",
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    render_fn: Callable[..., Any] | None = None,
    progress: bool = True,
) -> ViewSet:
    """OBS-Probe protocol: the fixed probe trajectory rendered in this variant (NR only).

    Pass ``cameras`` (e.g. the clean scene's probe trajectory) to render exactly
    the same views in every variant.
    """
    bundle = _load_bundle(scene)
    cams = list(cameras) if cameras is not None else scene_cameras(bundle, "obs_probe")
    frames = render_frames(
        bundle.background, cams, backend=backend, background=background,
        render_fn=render_fn, progress=progress,
    )
    return ViewSet("obs-probe", bundle.name, variant or bundle.name, tuple(_camera_names(cams)),
                   frames)


def folder_views(
    frames_dir: str | os.PathLike,
    *,
    protocol: str = "obs-policy",
    gt_dir: str | os.PathLike | None = None,
    scene: str = "",
    variant: str = "",
) -> ViewSet:
    """OBS-Policy frames (or ``--pred``/``--gt`` image folders) read from disk.

    Frames are ordered by natural file-name order; references, when given, are
    paired by identical file name.
    """
    names, frames = read_folder(frames_dir)
    refs = None
    if gt_dir is not None:
        gt_names, refs = read_folder(gt_dir)
        if gt_names != names:
            missing = sorted(set(names) ^ set(gt_names))[:3]
            raise BenchError(
                f"{frames_dir} and {gt_dir} must hold the same file names (pairs by name); "
                f"unmatched: {', '.join(missing)}"
            )
        if refs.shape != frames.shape:
            raise BenchError(
                f"images in {frames_dir} are {frames.shape[2]}x{frames.shape[1]} but in {gt_dir} "
                f"{refs.shape[2]}x{refs.shape[1]}; full-reference pairs need equal sizes"
            )
    label = scene or Path(frames_dir).name
    return ViewSet(protocol, label, variant or label, tuple(names), frames, refs)


def read_video(path: str | os.PathLike) -> np.ndarray:  # -> [T, H, W, 3] uint8
    """All frames of a GIF/MP4 (e.g. ``bench rollout --video`` output) as uint8 RGB."""
    import imageio.v3 as iio

    try:
        frames = np.asarray(iio.imread(path, index=None))
    except Exception as exc:  # imageio raises plugin-specific types
        message = f"cannot read video {path}: {exc}; for mp4 install imageio-ffmpeg"
        raise BenchError(message) from exc
    if frames.ndim == 3:  # a single-frame file
        frames = frames[None]
    if frames.ndim != 4 or frames.shape[-1] not in (3, 4) or frames.dtype != np.uint8:
        raise BenchError(
            f"{path}: expected 8-bit RGB video frames, got {frames.shape} {frames.dtype}"
        )
    if len(frames) == 0:
        raise BenchError(f"video {path} has no frames")
    return np.ascontiguousarray(frames[..., :3])


def _video_files(folder: Path) -> list[Path]:
    from metrics.images import natural_key

    files = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES]
    return sorted(files, key=lambda p: natural_key(p.name))


def policy_views(source: str | os.PathLike, *, scene: str = "", variant: str = "") -> list[ViewSet]:
    """OBS-Policy view sets: one per recorded episode.

    Args:
        source: A folder of frames (one episode, natural file order), one GIF/MP4, or a
            folder of episode videos, e.g. a ``bench rollout --video`` output directory
            (its ``videos/episode_XXXX.gif``).
        scene: Scene label for the rows (default: the source's name).
        variant: Variant label (default: the scene label).

    Returns:
        One :class:`ViewSet` per episode; frame names are ``<episode>/<index>``.
    """
    path = Path(source)
    label = scene or path.name
    if path.is_file() and path.suffix.lower() in VIDEO_SUFFIXES:
        videos = [path]
    elif path.is_dir():
        videos = _video_files(path) or (
            _video_files(path / "videos") if (path / "videos").is_dir() else []
        )
    else:
        raise BenchError(f"{path} is neither a frames folder nor a GIF/MP4 video")
    if not videos:
        return [folder_views(path, protocol="obs-policy", scene=label, variant=variant)]
    sets = []
    for video in videos:
        frames = read_video(video)
        names = tuple(f"{video.stem}/{i:05d}" for i in range(len(frames)))
        sets.append(ViewSet("obs-policy", label, variant or label, names, frames,
                            sequence=video.stem))
    return sets


# --------------------------------------------------------------------------- scoring


def score_views(
    views: ViewSet, scorers: Sequence[Scorer], *, batch_frames: int = 16, progress: bool = True
) -> list[ScoreRow]:
    """Per-frame (or per-sequence) scores of every scorer on a view set.

    Raises:
        BenchError: a full-reference scorer on a view set without references.
    """
    from bench.progress import progress as progress_bar

    for scorer in scorers:
        if scorer.info.mode == "FR" and views.references is None:
            raise BenchError(
                f"{scorer.info.name} is full-reference but the {views.protocol} views have no "
                "reference images; use no-reference metrics (nvs-sqa, pyiqa:<NR metric>) or --gt"
            )
    rows: list[ScoreRow] = []
    n = len(views.frames)
    total = sum(1 if s.info.unit == "sequence" else math.ceil(n / batch_frames) for s in scorers)
    bar = progress_bar(total=total, desc="score", unit="batch", file=sys.stderr,
                       disable=not progress)
    for scorer in scorers:
        info = scorer.info
        bar.set_postfix_str(info.name)
        if info.unit == "sequence":
            value = float(scorer(views.frames)[0])
            frame = f"{views.sequence}/{SEQUENCE_FRAME}" if views.sequence else SEQUENCE_FRAME
            rows.append(ScoreRow(views.scene, views.variant, views.protocol, info.name,
                                 frame, value))
            bar.update(1)
            continue
        for start in range(0, n, batch_frames):
            chunk = slice(start, start + batch_frames)
            ref = None if info.mode == "NR" else views.references[chunk]
            values = scorer(views.frames[chunk], ref)
            for name, value in zip(views.frame_names[chunk], values, strict=True):
                rows.append(ScoreRow(views.scene, views.variant, views.protocol, info.name,
                                     name, float(value)))
            bar.update(1)
    bar.close()
    return rows


def _group(rows: Sequence[ScoreRow]) -> dict[tuple[str, str, str, str], list[ScoreRow]]:
    groups: dict[tuple[str, str, str, str], list[ScoreRow]] = {}
    for row in rows:
        groups.setdefault((row.scene, row.variant, row.view_protocol, row.metric), []).append(row)
    return groups


def summarize(rows: Sequence[ScoreRow], *, n_frames: int | None = None) -> list[SummaryRow]:
    """Average per-frame values over frames, per (scene, variant, protocol, metric)."""
    from metrics.registry import scorer_info

    out = []
    for (scene, variant, protocol, metric), group in _group(rows).items():
        info = scorer_info(metric)
        values = np.array([r.value for r in group], dtype=np.float64)
        mean = float(values.mean())
        frames = len(values) if info.unit == "image" or n_frames is None else n_frames
        out.append(SummaryRow(
            scene=scene, variant=variant, view_protocol=protocol, metric=metric, mode=info.mode,
            lower_better=info.lower_better, unit=info.unit, n_frames=frames, mean=mean,
            std=float(values.std()), oriented=-mean if info.lower_better else mean,
        ))
    return out


def paired_delta(
    variant_rows: Sequence[ScoreRow], clean_rows: Sequence[ScoreRow]
) -> dict[str, tuple[float, float, float]]:
    """``dQ = Q_variant - Q_clean`` per metric over the same views.

    Returns:
        metric -> (clean mean, dQ, oriented dQ); dQ is the mean of per-frame differences
        (equal to the difference of means, since the frame sets must be identical).

    Raises:
        BenchError: when the two runs did not score the same frames.
    """
    from metrics.registry import scorer_info

    clean_by_metric: dict[str, dict[str, float]] = {}
    for row in clean_rows:
        clean_by_metric.setdefault(row.metric, {})[row.frame] = row.value
    variant_by_metric: dict[str, dict[str, float]] = {}
    for row in variant_rows:
        variant_by_metric.setdefault(row.metric, {})[row.frame] = row.value
    out = {}
    for metric, values in variant_by_metric.items():
        clean = clean_by_metric.get(metric)
        if clean is None or set(clean) != set(values):
            raise BenchError(
                f"paired dQ for {metric} needs the clean and variant scores on the same views; "
                "render both with the same cameras"
            )
        frames = sorted(values)
        diffs = np.array([values[f] - clean[f] for f in frames], dtype=np.float64)
        delta = float(diffs.mean())
        clean_mean = float(np.mean([clean[f] for f in frames]))
        lower_better = scorer_info(metric).lower_better
        out[metric] = (clean_mean, delta, -delta if lower_better else delta)
    return out


def attach_delta(summary: Sequence[SummaryRow], deltas: dict[str, tuple[float, float, float]]
                 ) -> list[SummaryRow]:
    """Summary rows with ``clean_mean``, ``delta`` and ``oriented_delta`` filled in."""
    import dataclasses

    return [
        dataclasses.replace(row, clean_mean=deltas[row.metric][0], delta=deltas[row.metric][1],
                            oriented_delta=deltas[row.metric][2])
        if row.metric in deltas else row
        for row in summary
    ]


def validate_views_for_scoring(views: ViewSet) -> None:
    """Range/shape checks up front, so a bad frame fails before minutes of scoring."""
    # convert=False: check only, no float64 copy of every frame
    as_image_batch(views.frames, name=f"{views.protocol} frames", convert=False)
    if views.references is not None:
        as_image_batch(views.references, name=f"{views.protocol} reference images",
                       convert=False)
