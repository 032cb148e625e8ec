"""Simulated handheld capture of a ground-truth world, run through the bench's own pipeline.

What a lab does with a real room, here done in a MuJoCo room of :mod:`bench.worlds.rooms`:

1. **Video.** A person walks once around the table holding a **single-lens 200-degree
   fisheye** (equidistant, 256 px) pointed at the table: a seeded closed path
   (:func:`walk_path`) whose distance from the table edge and eye height vary smoothly
   (sums of low-frequency sinusoids with seeded phases), the aim wanders around the
   table centre, and every frame carries a small hand-shake rotation. Frames are
   rendered by :class:`~bench.worlds.rooms.GroundTruthRenderer` (:func:`capture_renderer`:
   the room lit as the robot's "real" trials see it, ``CaptureConfig.lighting``),
   blurred by a linear **motion-blur** kernel whose length is the hand's angular speed
   during the shutter time (drawn per frame from a gamma distribution, so some frames
   are sharp and some smeared) and passed through the world's **sensor model** (noise,
   exposure, white balance, vignetting). The video is stored as a lossless PNG frame
   sequence (deterministic bytes; an MP4 codec is not).
2. **Frame selection** with :func:`bench.recon.capture.select_from_images`: T equal time
   intervals, the sharpest frame (variance of the Laplacian) of each.
3. **Poses from the renderer** (the exact camera of each selected frame) stand in for
   COLMAP; they are in the world frame, so the reconstruction is registered to the world
   by construction (table top at z = 0 centred on the origin).
4. **Fisheye -> nine pinhole views** with :func:`bench.recon.reproject.reproject_capture`.
5. **Dense seed** (stand-in for OpenMVS): MuJoCo depth renders of every training view
   back-projected, coloured from the captured (reprojected) view images, thinned to one
   point per voxel, a seeded subset kept, and Gaussian positional noise added.
6. **Held-out Test views** (as YUBI holds them out): ``test_frames`` video frames that the
   selection did not keep, evenly spaced over the walk, each seen through the same
   nine-view rig as the training frames (forward + eight views tilted 55 degrees, so three
   of the nine look upward), rendered sharp at that frame's pose with the sensor model;
   written as the capture manifest's ``test_views``.

Everything is drawn from ``numpy.random.default_rng([config.seed, world seed, k])`` streams,
so the same config gives byte-identical files.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.scene.ply import write_point_ply

TOOL_ID = "demo-capture/1"
LENS = "fisheye"  # the single lens of the simulated capture rig
WALL_CLEARANCE = 0.45  # m: the walk keeps this far from the walls (shelves are <= 0.3 m deep)
RIG = "single-lens 200-degree equidistant fisheye, handheld"
#: ``CaptureConfig.lighting``: ``robot`` scans the room as the robot's "real" trials see it
#: (:data:`bench.worlds.real.REAL_DOMAIN`'s shadows, the task world's light kept); ``room``
#: is the bare room with shadows, what the captures before 2026-12-06 scanned (the
#: reconstruction then learned a differently lit room than the one the robot ran in:
#: docs/demo-build.md).
LIGHTINGS = ("robot", "room")


@dataclass(frozen=True)
class CaptureConfig:
    """Settings of one simulated capture (the single source of their defaults).

    Attributes:
        seed: Seed of the path, the blur, the seed points and the test poses.
        video_frames: Frames of the recorded video (rendered).
        fps: Frame rate of the stored video (frames per second).
        shutter_s: Exposure time of a frame (seconds; sets the motion-blur length).
        intervals: T, the number of selected frames (equal time intervals).
        fisheye_px: Side of the square fisheye image.
        fisheye_fov_deg: Field of view of the fisheye (YUBI: 200 degrees).
        face_px: Cube-face side of the fisheye render.
        view_px: Side of each reprojected pinhole training view.
        standoff: (min, max) distance of the walk from the table edge (m).
        eye_height: (min, max) eye height above the table top (m).
        aim_wander: Std-like amplitude of the aim point's wander around the table centre (m).
        shake_deg: Std of the per-frame hand-shake rotation (degrees, each axis).
        blur_rate: Mean hand angular speed during the shutter (rad/s; gamma, shape 2).
        test_frames: Held-out video frames (not selected for training) whose nine-view
            rig gives the Test views: ``9 * test_frames`` Test views.
        test_px: Side of the square Test views (90-degree field of view, as the training
            views).
        seed_points: Points kept in the dense seed.
        seed_voxel: Voxel side for thinning the back-projected points (m).
        seed_noise: Std of the seed's positional noise (m, each axis).
        table_seed_voxel: Voxel side on the registered table top (m): every back-projected
            point on the top is kept, one per voxel of this side, on top of the
            ``seed_points`` drawn from the rest of the room (a table-focused seed, as an
            MVS cloud of a textured top is dense); 0 treats the top like the room.
        lighting: How the scanned room is lit (:data:`LIGHTINGS`).
    """

    seed: int = 0
    video_frames: int = 72
    fps: float = 3.0
    shutter_s: float = 1.0 / 30.0
    intervals: int = 24
    fisheye_px: int = 256
    fisheye_fov_deg: float = 200.0
    face_px: int = 128
    view_px: int = 128
    standoff: tuple[float, float] = (0.35, 0.7)
    eye_height: tuple[float, float] = (0.3, 0.7)
    aim_wander: float = 0.12
    shake_deg: float = 0.4
    blur_rate: float = 1.2
    test_frames: int = 4
    test_px: int = 128
    seed_points: int = 18_000
    seed_voxel: float = 0.02
    seed_noise: float = 0.01
    table_seed_voxel: float = 0.0
    lighting: str = "robot"

    def validate(self) -> None:
        """Raise a BenchError naming the first bad setting."""
        if self.lighting not in LIGHTINGS:
            raise BenchError(f"capture lighting {self.lighting!r} is not one of "
                             f"{', '.join(LIGHTINGS)}")
        if self.video_frames < self.intervals or self.intervals < 2:
            raise BenchError(f"capture needs 2 <= intervals <= video_frames, got "
                             f"{self.intervals} intervals for {self.video_frames} frames")
        if min(self.fisheye_px, self.face_px, self.view_px, self.test_px) < 8:
            raise BenchError("capture image sizes must be >= 8 px")
        if self.seed < 0 or self.seed_points < 100:
            raise BenchError("capture needs seed >= 0 and seed_points >= 100")
        if not 0.0 <= self.table_seed_voxel < 0.5:
            raise BenchError(f"capture table_seed_voxel must be in [0, 0.5) m, got "
                             f"{self.table_seed_voxel}")
        if not 1 <= self.test_frames <= self.video_frames - self.intervals:
            raise BenchError(f"capture needs 1 <= test_frames <= video_frames - intervals "
                             f"(the frames not selected), got {self.test_frames}")

    def to_json(self) -> dict[str, Any]:
        """This config as a JSON-ready dict (``dataclasses.asdict``)."""
        out = dataclasses.asdict(self)
        if self.table_seed_voxel == 0:  # added after the shipped captures: their keys stay
            del out["table_seed_voxel"]
        return out


def capture_renderer(world: Any, config: CaptureConfig) -> Any:
    """The ground-truth renderer of ``world``'s capture (lit as ``config.lighting`` says).

    Its buffers fit every image the capture draws: cube faces (plus the remap's margin),
    training views and Test views.
    """
    from bench.worlds.rooms import GroundTruthRenderer, build_room_model

    size = max(config.face_px + 8, config.view_px, config.test_px)  # [px]
    if config.lighting == "room":
        return GroundTruthRenderer(world, max_size=(size, size))
    from bench.worlds.real import REAL_DOMAIN

    return GroundTruthRenderer(world, max_size=(size, size),
                               model=build_room_model(world, robot_lights=True),
                               shadows=REAL_DOMAIN.shadows)


def _rng(config: CaptureConfig, world: Any, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(config.seed), int(world.seed), int(stream)])


def _smooth(rng: np.random.Generator, phase: np.ndarray, terms: int = 3) -> np.ndarray:
    """A smooth closed curve in [-1, 1] over ``phase`` in [0, 2 pi): sum of sinusoids."""
    out = np.zeros_like(phase)
    weights = 1.0 / np.arange(1, terms + 1)
    for k, w in enumerate(weights, start=1):
        out += w * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    return out / weights.sum()


def _rotation(axis_angle: np.ndarray) -> np.ndarray:  # [3] -> [3, 3]
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(axis_angle).as_matrix()


def _room_box(world: Any) -> tuple[np.ndarray, np.ndarray]:  # ([2], [2]) xy bounds
    centre, half = np.asarray(world.room_offset), np.asarray(world.room_size) / 2
    return centre - half + WALL_CLEARANCE, centre + half - WALL_CLEARANCE


def walk_path(world: Any, config: CaptureConfig) -> dict[str, np.ndarray]:
    """The handheld path around the table: eyes [M, 3], aims [M, 3], poses [M, 4, 4].

    One loop around the table (start angle and direction seeded), following the table's
    rectangle at a smoothly varying stand-off, clamped :data:`WALL_CLEARANCE` inside the
    room walls (clear of the shelves).
    """
    from bench.scene.cameras import look_at

    rng = _rng(config, world, 1)
    m = config.video_frames
    phase = 2 * np.pi * np.arange(m) / m
    start = rng.uniform(0, 2 * np.pi)
    direction = 1.0 if rng.random() < 0.5 else -1.0
    # walking speed varies: the angle is a monotone warp of the phase
    angle = start + direction * (phase + 0.25 * _smooth(rng, phase, 2))
    lo, hi = config.standoff
    standoff = lo + (hi - lo) * 0.5 * (1 + _smooth(rng, phase))
    zlo, zhi = config.eye_height
    height = zlo + (zhi - zlo) * 0.5 * (1 + _smooth(rng, phase))
    half = np.asarray(world.table_size) / 2
    yaw = math.radians(world.table_yaw_deg)
    # an ellipse around the table: its half-sizes + the stand-off
    local = np.stack([(half[0] + standoff) * np.cos(angle),
                      (half[1] + standoff) * np.sin(angle)], axis=1)
    rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    xy = local @ rot.T
    xy = np.clip(xy, *_room_box(world))
    eyes = np.column_stack([xy, height])
    aims = np.column_stack([config.aim_wander * _smooth(rng, phase),
                            config.aim_wander * _smooth(rng, phase),
                            0.05 + 0.5 * config.aim_wander * _smooth(rng, phase)])
    shake = rng.normal(0.0, math.radians(config.shake_deg), size=(m, 3))
    poses = np.empty((m, 4, 4))
    for i in range(m):
        pose = look_at(eyes[i], aims[i])
        pose[:3, :3] = pose[:3, :3] @ _rotation(shake[i])  # shake in the camera frame
        poses[i] = pose
    return {"eyes": eyes, "aims": aims, "poses": poses, "angle": angle}


def blur_lengths(world: Any, config: CaptureConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: motion-blur length (px) and direction (rad in the image) [M], [M].

    The hand's angular speed during the shutter is gamma-distributed (shape 2, mean
    ``blur_rate``) in a uniformly drawn image direction; the walk's own rotation is added.
    Length = speed x shutter x (fisheye pixels per radian).
    """
    rng = _rng(config, world, 2)
    m = config.video_frames
    px_per_rad = (config.fisheye_px / 2) / math.radians(config.fisheye_fov_deg / 2)
    speed = rng.gamma(2.0, config.blur_rate / 2.0, size=m)  # rad/s
    walk = 2 * np.pi * config.fps / m  # the loop's yaw rate, rad/s
    direction = rng.uniform(0, np.pi, size=m)
    vx = speed * np.cos(direction) + walk
    vy = speed * np.sin(direction)
    length = np.hypot(vx, vy) * config.shutter_s * px_per_rad
    return length, np.arctan2(vy, vx)


def motion_blur(image: np.ndarray, length: float,
                angle: float) -> np.ndarray:  # [H, W, 3] float -> [H, W, 3] float
    """Convolve with a normalised line kernel of ``length`` px at ``angle`` (box shutter)."""
    import cv2

    if length < 0.5:
        return image
    size = 2 * int(math.ceil(length / 2)) + 1
    kernel = np.zeros((size, size), np.float64)
    c = size // 2
    samples = max(8, int(8 * length))
    for t in np.linspace(-length / 2, length / 2, samples):
        x, y = c + t * math.cos(angle), c + t * math.sin(angle)
        x0, y0 = int(math.floor(x)), int(math.floor(y))
        fx, fy = x - x0, y - y0
        for dx, dy, w in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)),
                          (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
            if 0 <= x0 + dx < size and 0 <= y0 + dy < size:
                kernel[y0 + dy, x0 + dx] += w
    kernel /= kernel.sum()
    return cv2.filter2D(image.astype(np.float32), -1, kernel.astype(np.float32),
                        borderType=cv2.BORDER_REPLICATE)


def fisheye_camera(config: CaptureConfig, pose: np.ndarray, name: str = LENS):
    """The equidistant fisheye camera of the capture (``fisheye_px`` square) at ``pose`` [4, 4]."""
    from bench.scene.cameras import Camera

    return Camera.equidistant_fisheye(config.fisheye_px, config.fisheye_px,
                                      fov_deg=config.fisheye_fov_deg, world_from_camera=pose,
                                      name=name)


def held_out_frames(config: CaptureConfig, selected: list[int]) -> list[int]:
    """``test_frames`` video frame indices the selection did not keep, evenly spaced."""
    kept = set(selected)
    held = [i for i in range(config.video_frames) if i not in kept]
    n = config.test_frames
    if n == 1:
        return held[:1]
    return [held[int(round(k * (len(held) - 1) / (n - 1)))] for k in range(n)]


def render_test_views(renderer: Any, world: Any, config: CaptureConfig, poses: np.ndarray,
                      selected: list[int], out: Path) -> list:
    """Render and write the Test views (the nine-view rig of :func:`held_out_frames`); Views.

    Each held-out frame is rendered as the capture's fisheye would record it, sharp (the
    selection keeps the sharpest frames for training, so sharp stills are the fair
    comparison), through the world's sensor model in the fisheye's own image (vignetting
    over the lens' image circle; noise stream 1, the frame's index), and reprojected into
    the nine-view rig exactly as the training frames are
    (:func:`bench.recon.reproject.reproject_image`): a Test view is the image a training
    view of that frame would have been. (Until 2026-12-06 each Test view was a pinhole
    render with the sensor's vignetting over its own 128 px square, down to 20 % at the
    corners in ``gt-flat``, which no capture image has.)
    """
    from bench.recon.capture import View
    from bench.recon.reproject import pinhole_views, reproject_image
    from bench.worlds.sensor import apply_sensor

    views = []
    for index in held_out_frames(config, selected):
        lens = fisheye_camera(config, poses[index])
        clean = renderer.render_clean(lens, face_px=config.face_px)
        image = apply_sensor(clean, world.sensor, frame=index, stream=1,
                             valid=lens.pixel_rays()[1])
        for name, cam in pinhole_views(lens, size=config.test_px).items():
            file = f"test/f{index:06d}_{name}.png"
            _write_png(out / file, reproject_image(image, lens, cam))
            views.append(View(id=Path(file).stem, image=file, camera=cam.replace(name=file),
                              name=name))
    return views


def _write_png(path: Path, rgb: np.ndarray) -> None:  # rgb [H, W, 3] uint8
    import cv2

    from bench.provenance import atomic_write_bytes

    ok, data = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:
        raise BenchError(f"cannot encode {path} as PNG")
    atomic_write_bytes(path, data.tobytes())


def record_video(renderer: Any, world: Any, config: CaptureConfig, folder: Path, *,
                 progress: bool = False) -> tuple[list[Path], np.ndarray]:
    """Render the handheld video as PNG frames; returns (paths, poses [M, 4, 4])."""
    from bench.progress import progress as progress_bar
    from bench.worlds.sensor import apply_sensor

    path = walk_path(world, config)
    length, angle = blur_lengths(world, config)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in progress_bar(range(config.video_frames), desc=f"{world.name} video",
                          disable=not progress):
        cam = fisheye_camera(config, path["poses"][i])
        clean = renderer.render_clean(cam, face_px=config.face_px)
        blurred = motion_blur(clean, float(length[i]), float(angle[i]))
        image = apply_sensor(blurred, world.sensor, frame=i, stream=0, valid=cam.pixel_rays()[1])
        files.append(folder / f"frame_{i:06d}.png")
        _write_png(files[-1], image)
    return files, path["poses"]


def dense_seed(renderer: Any, manifest: Any, world: Any, config: CaptureConfig,
               ) -> tuple[np.ndarray, np.ndarray]:  # -> points [N, 3], colours [N, 3] uint8
    """OpenMVS stand-in: MuJoCo depth of every training view back-projected (see module doc)."""
    import cv2

    from bench.recon.reproject import remap_maps

    frames = {f.id: f for f in manifest.frames}
    points, colours = [], []
    for view in manifest.views:
        cam = view.camera
        depth = renderer.pinhole.render_calibrated(renderer.data, cam).depth  # [H, W] camera z
        image = cv2.imread(str(manifest.root / view.image), cv2.IMREAD_COLOR)[..., ::-1]
        map_x, _ = remap_maps(frames[view.frame].cameras[LENS], cam)
        ok = np.isfinite(depth) & (map_x >= 0)
        rows, cols = np.nonzero(ok)
        z = depth[rows, cols].astype(np.float64)
        local = np.stack([(cols + 0.5 - cam.cx) / cam.fx * z, (rows + 0.5 - cam.cy) / cam.fy * z,
                          z], axis=1)
        pose = cam.world_from_camera
        points.append(local @ pose[:3, :3].T + pose[:3, 3])
        colours.append(image[rows, cols])
    pts, cols = np.concatenate(points), np.concatenate(colours)
    rng = _rng(config, world, 4)
    order = rng.permutation(len(pts))
    pts, cols = pts[order], cols[order]
    top = (on_table_top(pts, world) if config.table_seed_voxel > 0
           else np.zeros(len(pts), bool))
    first = _first_per_voxel(pts, np.flatnonzero(~top), config.seed_voxel)
    keep = first[np.sort(rng.choice(len(first), size=min(config.seed_points, len(first)),
                                    replace=False))]
    if top.any():  # the top keeps one point per (finer) voxel, none drawn away
        keep = np.concatenate([keep, _first_per_voxel(pts, np.flatnonzero(top),
                                                      config.table_seed_voxel)])
    noisy = pts[keep] + rng.normal(0.0, config.seed_noise, size=(len(keep), 3))
    return noisy.astype(np.float32), np.ascontiguousarray(cols[keep], dtype=np.uint8)


def _first_per_voxel(points: np.ndarray, index: np.ndarray,  # [N, 3], [M] rows of points
                    voxel: float) -> np.ndarray:  # -> [K] rows, ascending
    """Of ``points[index]``, the first row (in ``index`` order) in each voxel of side ``voxel``."""
    _, first = np.unique(np.floor(points[index] / voxel).astype(np.int64), axis=0,
                         return_index=True)
    return index[np.sort(first)]


def table_frame_uv(points: np.ndarray, world: Any) -> tuple[np.ndarray, np.ndarray]:
    """World points [N, >=2] along the table's axes, [N] and [N] (centre at the origin)."""
    yaw = math.radians(world.table_yaw_deg)
    c, s = math.cos(yaw), math.sin(yaw)
    return c * points[:, 0] + s * points[:, 1], -s * points[:, 0] + c * points[:, 1]


def on_table_top(points: np.ndarray, world: Any, *, tol: float = 1e-3) -> np.ndarray:
    """Points [N, 3] (world frame) on the table's top surface (within ``tol`` m): [N] bool."""
    u, v = table_frame_uv(points, world)  # the top surface is at z = 0
    half_x, half_y = world.table_size[0] / 2, world.table_size[1] / 2
    return (np.abs(u) <= half_x + tol) & (np.abs(v) <= half_y + tol) & (np.abs(points[:, 2]) < tol)


def simulate_capture(world: Any, out: str | os.PathLike, *,
                     config: CaptureConfig = CaptureConfig(), progress: bool = False) -> Path:
    """Record, select, reproject, seed and hold out one world's capture into ``out``.

    Writes ``out/video/`` (all fisheye frames), ``out/views/`` (training views),
    ``out/test/`` (Test views), ``out/seed_points.ply``, ``out/capture.json`` (the
    capture manifest) and ``out/manifest.json`` (provenance).

    Returns:
        The path of ``capture.json``.
    """
    from bench.provenance import atomic_write_json, make_manifest
    from bench.recon.capture import CaptureManifest, select_from_images
    from bench.recon.reproject import reproject_capture
    from bench.worlds.rooms import get_world

    world = get_world(world)
    config.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    renderer = capture_renderer(world, config)
    try:
        files, poses = record_video(renderer, world, config, out / "video", progress=progress)
        frames = select_from_images({LENS: files}, intervals=config.intervals, fps=config.fps,
                                    root=out)
        frames = [dataclasses.replace(f, cameras={LENS: fisheye_camera(
            config, poses[int(f.id[1:])])}) for f in frames]
        manifest = CaptureManifest(tuple(frames), root=out)
        manifest = reproject_capture(manifest, size=config.view_px)
        tests = render_test_views(renderer, world, config, poses,
                                  [int(f.id[1:]) for f in frames], out)
        manifest = dataclasses.replace(manifest, test_views=tuple(tests))
        manifest.save(out / "capture.json")
        points, colours = dense_seed(renderer, manifest, world, config)
    finally:
        renderer.close()
    write_point_ply(out / "seed_points.ply", points, colours)
    loaded = CaptureManifest.load(out / "capture.json")
    atomic_write_json(out / "manifest.json", make_manifest(
        tool=TOOL_ID, params={"world": world.name, "capture": config.to_json(), "rig": RIG,
                              "poses": "exact renderer poses (stand-in for COLMAP)",
                              "seed_points": "MuJoCo depth back-projected, captured colours, "
                              "voxel-thinned, positional noise (stand-in for OpenMVS)",
                              "video": "lossless PNG frame sequence"},
        seed=config.seed,
        outputs={"capture": out / "capture.json", "seed_points": out / "seed_points.ply"},
        counts={"video_frames": config.video_frames, "frames": len(loaded.frames),
                "views": len(loaded.views), "test_views": len(loaded.test_views),
                "seed_points": len(points)},
        extra={"images_sha256": {"train": loaded.image_digest(loaded.views),
                                 "test": loaded.image_digest(loaded.test_views)}}))
    return out / "capture.json"
