"""Import of posed RGB-D sequences: capture manifest, held-out split, dense seed from depth.

Three source layouts (:func:`read_rgbd_source`):

- ``7scenes``: the 7-Scenes / tsdf-fusion frame files in one folder,
  ``frame-NNNNNN.color.(jpg|png)``, ``frame-NNNNNN.depth.png`` (uint16 millimetres),
  ``frame-NNNNNN.pose.txt`` (4 x 4 camera-to-world, metres), ``camera-intrinsics.txt`` (3 x 3)
  and, when present, ``gravity-direction.txt`` (3 numbers in the world frame).
- ``tum``: TUM RGB-D: an association list (``TIME rgb/X.png TIME depth/Y.png`` per line, the
  output of TUM's ``associate.py``), ``groundtruth.txt`` (``TIME tx ty tz qx qy qz qw``,
  matched to each colour time within 20 ms) and a 3 x 3 intrinsics file; depth in 1/5000 m.
- ``folder``: ``color/NAME.(png|jpg)``, ``depth/NAME.png``, ``pose/NAME.txt`` (4 x 4
  camera-to-world) and ``intrinsics.txt`` (3 x 3), matched by NAME; depth in millimetres.

Frame convention (written into the import's provenance): poses are ``world_from_camera``
(camera-to-world) in metres in the sequence's own world frame, camera axes OpenCV (+x right,
+y down, +z forward), as :class:`bench.scene.cameras.Camera`. Colour and depth share the
intrinsics (7-Scenes states it; the depth sensor is in fact a separate camera, see below).

The dense seed (the stand-in for MVS, from a real sensor) back-projects the depth of the
*training* frames only (held-out frames never shape the reconstruction):

1. invalid depth: 0, 65535 (7-Scenes' marker) and values outside ``[depth_min, depth_max]``;
2. depth-colour misregistration: the two Kinect sensors see edges a few pixels apart, so a
   depth pixel within ``edge_px`` of a depth discontinuity (relative jump > ``edge_jump``)
   would take the colour of the other side; such pixels are dropped;
3. sparse voxels: points are pooled into ``voxel``-metre cells; a cell seen by fewer than
   ``min_views`` training frames is a sensor outlier (flying pixels, one-off reflections) and
   dropped; the others give one point (mean position, mean colour);
4. statistical outliers: a cell whose mean distance to its ``outlier_k`` nearest cells exceeds
   the median by ``outlier_sigma`` robust standard deviations is dropped.

Every drop is counted in :class:`SeedCounts`. Random choices (the seed subsample when more
than ``max_seed_points`` cells survive) draw from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.scene.ply import write_point_ply

TOOL_ID = "import-rgbd/1"
LAYOUTS = ("7scenes", "tum", "folder")
FRAME_CONVENTION = ("world_from_camera (camera-to-world) 4x4, metres, the sequence's own world "
                    "frame; camera axes OpenCV (+x right, +y down, +z forward); pixel centres "
                    "at +0.5; colour and depth share the intrinsics")


@dataclass(frozen=True)
class RgbdImportConfig:
    """Settings of an RGB-D import (the single source of their defaults).

    Attributes:
        layout: Source layout, one of :data:`LAYOUTS`.
        test_every: Every k-th frame (index k-1, 2k-1, ... in time order) is a held-out Test view.
        width: Width in pixels of the written training / test images (height keeps the aspect).
        depth_scale: Depth units per metre (None: the layout's, 1000 or 5000 for TUM).
        depth_min: Nearest valid depth in metres.
        depth_max: Farthest valid depth in metres (Kinect v1 is unreliable beyond ~4 m).
        edge_jump: Relative depth jump between neighbours that marks a discontinuity.
        edge_px: Pixels (full resolution) around a discontinuity dropped as misregistered.
        stride: Back-project every ``stride``-th pixel in x and y.
        voxel: Seed cell size in metres.
        min_views: Training frames that must see a cell for it to count.
        outlier_k: Neighbours of the statistical outlier test.
        outlier_sigma: Robust standard deviations above the median that make an outlier.
        max_seed_points: Most seed points kept (a seeded random subset beyond it).
        max_frames: Refuse sources with more frames than this (memory guard).
        seed: Seed of the subsample.
    """

    layout: str = field(default="7scenes", metadata={
        "help": "source layout: 7scenes (frame-N.color/.depth/.pose files), tum (association "
        "list + groundtruth.txt), folder (color/ depth/ pose/ + intrinsics.txt)",
        "choices": LAYOUTS})
    test_every: int = field(default=5, metadata={
        "help": "hold out every k-th frame (in time order) as a real Test view", "unit": "frames"})
    width: int = field(default=160, metadata={
        "help": "width of the written training/test images (the aspect is kept)", "unit": "px"})
    depth_scale: float | None = field(default=None, metadata={
        "help": "depth units per metre", "default_help": "1000; 5000 for tum"})
    depth_min: float = field(default=0.3, metadata={"help": "nearest valid depth", "unit": "m"})
    depth_max: float = field(default=4.0, metadata={"help": "farthest valid depth", "unit": "m"})
    edge_jump: float = field(default=0.05, metadata={
        "help": "relative depth jump that marks a discontinuity (depth-colour misregistration)"})
    edge_px: int = field(default=3, metadata={
        "help": "pixels around a depth discontinuity dropped from the seed", "unit": "px"})
    stride: int = field(default=4, metadata={
        "help": "back-project every n-th depth pixel in x and y", "unit": "px"})
    voxel: float = field(default=0.01, metadata={"help": "seed cell size", "unit": "m"})
    min_views: int = field(default=2, metadata={
        "help": "training frames that must see a seed cell (fewer: a sensor outlier)"})
    outlier_k: int = field(default=8, metadata={"help": "neighbours of the outlier test"})
    outlier_sigma: float = field(default=3.0, metadata={
        "help": "robust standard deviations above the median neighbour distance that make an "
        "outlier"})
    max_seed_points: int = field(default=60_000, metadata={
        "help": "most seed points (a seeded random subset beyond it)", "unit": "count"})
    max_frames: int = field(default=20_000, metadata={
        "help": "refuse sources with more frames (memory guard)", "unit": "count"})
    seed: int = field(default=0, metadata={"help": "seed of the seed-point subsample"})

    def validate(self) -> None:
        """Raise a BenchError naming the first bad setting."""
        if self.layout not in LAYOUTS:
            raise BenchError(f"--layout {self.layout!r} is unknown; use one of "
                             f"{', '.join(LAYOUTS)}")
        if self.test_every < 2:
            raise BenchError(f"--test-every must be >= 2 (every k-th frame held out), "
                             f"got {self.test_every}")
        if not 16 <= self.width <= 4096:
            raise BenchError(f"--width must be 16-4096 px, got {self.width}")
        if not 0 <= self.depth_min < self.depth_max:
            raise BenchError("--depth-min must be >= 0 and below --depth-max")
        if self.voxel <= 0 or self.stride < 1 or self.min_views < 1 or self.outlier_k < 1:
            raise BenchError("--voxel must be > 0 and --stride, --min-views, --outlier-k >= 1")


@dataclass(frozen=True)
class RgbdFrame:
    """One posed RGB-D frame of a source sequence (absolute paths)."""

    id: str
    timestamp: float  # seconds
    color: Path
    depth: Path
    world_from_camera: np.ndarray  # [4, 4]


@dataclass(frozen=True)
class RgbdSource:
    """A parsed source: frames in time order, shared intrinsics, optional gravity."""

    layout: str
    root: Path
    frames: tuple[RgbdFrame, ...]
    K: np.ndarray  # [3, 3]  # noqa: N815 - the usual name of the intrinsic matrix
    depth_scale: float
    gravity: np.ndarray | None = None  # [3] unit, world frame, pointing down
    files: dict[str, Path] = field(default_factory=dict)  # shared files (intrinsics, ...)


@dataclass
class SeedCounts:
    """What the dense seed kept and dropped (summed over the training frames)."""

    pixels: int = 0
    invalid_depth: int = 0
    out_of_range: int = 0
    misregistered: int = 0
    back_projected: int = 0
    cells: int = 0
    sparse_cells: int = 0
    outlier_cells: int = 0
    subsampled_out: int = 0
    seed_points: int = 0


# --------------------------------------------------------------------------- parsing
def _matrix(path: Path, shape: tuple[int, int], what: str, fix: str) -> np.ndarray:
    if not path.is_file():
        raise BenchError(f"{what} {path} does not exist; {fix}")
    try:
        values = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise BenchError(f"{what} {path} is not a table of numbers ({str(exc).splitlines()[0]}); "
                         f"{fix}") from None
    if values.shape != shape:
        if values.size == shape[0] * shape[1] and len(shape) == 2 and shape[0] == 1:
            values = values.reshape(shape)
        else:
            raise BenchError(f"{what} {path} holds {values.shape[0]}x{values.shape[1]} numbers, "
                             f"not {shape[0]}x{shape[1]}; {fix}")
    if not np.isfinite(values).all():
        raise BenchError(f"{what} {path} contains NaN/Inf; {fix}")
    return values


def read_intrinsics(path: Path) -> np.ndarray:  # -> [3, 3]
    """A 3 x 3 pinhole matrix ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` from a text file."""
    fix = "give a text file of 3 rows of 3 numbers [[fx 0 cx] [0 fy cy] [0 0 1]]"
    K = _matrix(Path(path), (3, 3), "intrinsics file", fix)  # noqa: N806
    if K[0, 0] <= 0 or K[1, 1] <= 0 or abs(K[2, 2] - 1) > 1e-6 or np.abs(K[2, :2]).max() > 1e-9:
        raise BenchError(f"intrinsics file {path} is not a pinhole matrix (fx, fy > 0, last row "
                         f"0 0 1); {fix}")
    return K


def check_pose(pose: np.ndarray, what: str, *, tolerance: float = 0.01) -> np.ndarray:
    """A rigid camera-to-world 4 x 4: refused beyond ``tolerance``, else re-orthonormalised.

    Tracked poses carry round-off (7-Scenes: R^T R off I by ~1e-4, which the cameras refuse
    as non-rigid), so a rotation within ``tolerance`` is replaced by its nearest rotation (SVD);
    a scaled, sheared or mirrored matrix is refused with one line.
    """
    rot = pose[:3, :3]
    err = float(np.abs(rot.T @ rot - np.eye(3)).max())
    det = float(np.linalg.det(rot))
    if np.abs(pose[3] - [0, 0, 0, 1]).max() > 1e-6 or err > tolerance or det <= 0:
        raise BenchError(f"{what} is not a rigid transform (R^T R deviates from I by {err:.3g}, "
                         f"det R = {det:.4f}, last row {pose[3].tolist()}); poses must be "
                         "camera-to-world rotation + translation in metres (re-export them "
                         "without scale or shear)")
    u, _, vt = np.linalg.svd(rot)
    fixed = np.eye(4)
    fixed[:3, :3] = u @ vt
    fixed[:3, 3] = pose[:3, 3]
    return fixed


def read_pose(path: Path) -> np.ndarray:  # -> [4, 4]
    """A 4 x 4 camera-to-world pose file (checked to be rigid)."""
    pose = _matrix(Path(path), (4, 4), "pose file",
                   "give 4 rows of 4 numbers, the camera-to-world transform in metres")
    return check_pose(pose, f"pose file {path}")


def _gravity(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    g = _matrix(path, (1, 3), "gravity file", "give 3 numbers, the gravity direction").ravel()
    norm = float(np.linalg.norm(g))
    if norm < 1e-9:
        raise BenchError(f"gravity file {path} holds a zero vector; give the gravity direction")
    return g / norm


def _read_7scenes(root: Path, intrinsics: Path | None) -> RgbdSource:
    stems = sorted({m.group(1) for p in root.iterdir()
                    if (m := re.fullmatch(r"(frame-\d+)\.color\.(?:jpg|png)", p.name))})
    if not stems:
        raise BenchError(f"{root} holds no frame-NNNNNN.color.jpg/png files; pass the folder of "
                         "a 7-Scenes / tsdf-fusion sequence (or --layout tum / folder)")
    k_path = intrinsics or root / "camera-intrinsics.txt"
    K = read_intrinsics(k_path)  # noqa: N806
    frames = []
    for stem in stems:
        color = next(p for p in (root / f"{stem}.color.jpg", root / f"{stem}.color.png")
                     if p.is_file())
        depth, pose = root / f"{stem}.depth.png", root / f"{stem}.pose.txt"
        if not depth.is_file():
            raise BenchError(f"{stem}: depth image {depth} is missing; every frame needs "
                             "colour, depth and pose (restore it or delete the frame's files)")
        if not pose.is_file():
            raise BenchError(f"{stem}: pose file {pose} is missing; every frame needs colour, "
                             "depth and pose (restore it or delete the frame's files)")
        number = int(stem.split("-")[1])
        frames.append(RgbdFrame(id=stem, timestamp=number / 30.0, color=color, depth=depth,
                                world_from_camera=read_pose(pose)))
    return RgbdSource("7scenes", root, tuple(frames), K, 1000.0,
                      _gravity(root / "gravity-direction.txt"), {"intrinsics": k_path})


def _quat_pose(t: np.ndarray, q: np.ndarray, what: str) -> np.ndarray:  # xyz, xyzw -> [4, 4]
    from scipy.spatial.transform import Rotation

    norm = float(np.linalg.norm(q))
    if not 0.9 < norm < 1.1:
        raise BenchError(f"{what}: quaternion norm {norm:.3f} is not 1; poses must be rigid "
                         "(tx ty tz qx qy qz qw)")
    pose = np.eye(4)
    pose[:3, :3] = Rotation.from_quat(q / norm).as_matrix()
    pose[:3, 3] = t
    return pose


def _read_tum(root: Path, associations: Path | None, intrinsics: Path | None) -> RgbdSource:
    assoc = associations or root / "associations.txt"
    if not assoc.is_file():
        raise BenchError(f"association list {assoc} does not exist; make it with TUM's "
                         "associate.py (rgb.txt depth.txt) and pass it with --associations")
    if intrinsics is None:
        raise BenchError("--layout tum needs --intrinsics FILE (3 x 3; TUM lists fx fy cx cy per "
                         "sensor on its web page)")
    K = read_intrinsics(intrinsics)  # noqa: N806
    truth = root / "groundtruth.txt"
    if not truth.is_file():
        raise BenchError(f"{truth} does not exist; TUM poses come from groundtruth.txt "
                         "(TIME tx ty tz qx qy qz qw)")
    rows = [ln.split() for ln in truth.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    try:
        gt = np.array([[float(v) for v in r] for r in rows])
    except ValueError:
        raise BenchError(f"{truth}: lines must be 8 numbers TIME tx ty tz qx qy qz qw") from None
    if gt.ndim != 2 or gt.shape[1] != 8 or not len(gt):
        raise BenchError(f"{truth}: lines must be 8 numbers TIME tx ty tz qx qy qz qw")
    frames = []
    for n, line in enumerate(assoc.read_text().splitlines(), 1):
        parts = line.split()
        if not parts or line.startswith("#"):
            continue
        if len(parts) < 4:
            raise BenchError(f"{assoc}:{n}: expected 'TIME rgb/X.png TIME depth/Y.png'")
        try:
            stamp = float(parts[0])
        except ValueError:
            raise BenchError(f"{assoc}:{n}: the first field must be a time in seconds") from None
        near = int(np.argmin(np.abs(gt[:, 0] - stamp)))
        if abs(gt[near, 0] - stamp) > 0.02:
            raise BenchError(f"{assoc}:{n}: no ground-truth pose within 20 ms of {stamp:.4f} s; "
                             "trim the association list to the poses' time span")
        pose = _quat_pose(gt[near, 1:4], gt[near, 4:8], f"{truth} at {gt[near, 0]:.4f} s")
        color, depth = root / parts[1], root / parts[3]
        for path, what in ((color, "colour"), (depth, "depth")):
            if not path.is_file():
                raise BenchError(f"{assoc}:{n}: {what} image {path} does not exist")
        frames.append(RgbdFrame(id=f"t{stamp:.6f}", timestamp=stamp, color=color, depth=depth,
                                world_from_camera=pose))
    if not frames:
        raise BenchError(f"{assoc} lists no frames")
    return RgbdSource("tum", root, tuple(frames), K, 5000.0, None,
                      {"intrinsics": intrinsics, "associations": assoc, "groundtruth": truth})


def _read_folder(root: Path, intrinsics: Path | None) -> RgbdSource:
    for sub in ("color", "depth", "pose"):
        if not (root / sub).is_dir():
            raise BenchError(f"{root} has no {sub}/ folder; --layout folder needs color/, depth/, "
                             "pose/ and intrinsics.txt")
    k_path = intrinsics or root / "intrinsics.txt"
    K = read_intrinsics(k_path)  # noqa: N806
    colors = sorted(p for p in (root / "color").iterdir()
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if not colors:
        raise BenchError(f"{root / 'color'} holds no .png/.jpg images")
    frames = []
    for i, color in enumerate(colors):
        depth, pose = root / "depth" / f"{color.stem}.png", root / "pose" / f"{color.stem}.txt"
        if not depth.is_file():
            raise BenchError(f"{color.stem}: depth image {depth} is missing; every colour image "
                             "needs depth/NAME.png and pose/NAME.txt")
        if not pose.is_file():
            raise BenchError(f"{color.stem}: pose file {pose} is missing; every colour image "
                             "needs depth/NAME.png and pose/NAME.txt")
        frames.append(RgbdFrame(id=color.stem, timestamp=float(i), color=color, depth=depth,
                                world_from_camera=read_pose(pose)))
    return RgbdSource("folder", root, tuple(frames), K, 1000.0,
                      _gravity(root / "gravity-direction.txt"), {"intrinsics": k_path})


def read_rgbd_source(root: str | os.PathLike, *, config: RgbdImportConfig,
                     intrinsics: str | os.PathLike | None = None,
                     associations: str | os.PathLike | None = None) -> RgbdSource:
    """Parse a sequence folder of ``config.layout`` (every refusal is a one-line BenchError)."""
    config.validate()
    root = Path(root)
    if not root.is_dir():
        raise BenchError(f"RGB-D source {root} is not a folder; pass the sequence's folder")
    k = None if intrinsics is None else Path(intrinsics)
    if config.layout == "7scenes":
        source = _read_7scenes(root, k)
    elif config.layout == "tum":
        source = _read_tum(root, None if associations is None else Path(associations), k)
    else:
        source = _read_folder(root, k)
    if len(source.frames) > config.max_frames:
        raise BenchError(f"{len(source.frames):,} frames is above --max-frames "
                         f"{config.max_frames:,}; pass every n-th frame")
    if len(source.frames) < config.test_every:
        raise BenchError(f"{len(source.frames)} frames are too few for --test-every "
                         f"{config.test_every}: no frame would be held out; lower it")
    if config.depth_scale is not None:
        source = RgbdSource(source.layout, source.root, source.frames, source.K,
                            float(config.depth_scale), source.gravity, source.files)
    return source


# --------------------------------------------------------------------------- images
def read_rgb(path: Path) -> np.ndarray:  # -> [H, W, 3] uint8
    """An 8-bit RGB image (one-line error when unreadable)."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise BenchError(f"cannot read colour image {path}; re-export it as PNG or JPEG")
    return np.ascontiguousarray(image[..., ::-1])


def read_depth(path: Path, *, scale: float, shape: tuple[int, int]) -> np.ndarray:  # -> [H, W]
    """Depth in metres (NaN where invalid: 0 or 65535), checked to be ``shape`` (H, W)."""
    import cv2

    raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if raw is None:
        raise BenchError(f"cannot read depth image {path}; it must be a 16-bit PNG")
    if raw.ndim != 2 or raw.dtype != np.uint16:
        raise BenchError(f"depth image {path} is {raw.dtype} with shape {raw.shape}, not a "
                         "single-channel 16-bit PNG; re-export the depth as uint16")
    if raw.shape != shape:
        raise BenchError(f"depth image {path} is {raw.shape[1]}x{raw.shape[0]} px but its colour "
                         f"image is {shape[1]}x{shape[0]}; register/resize the depth to the "
                         "colour image first")
    depth = raw.astype(np.float32) / np.float32(scale)
    depth[(raw == 0) | (raw == 65535)] = np.nan
    return depth


def scaled_camera(K: np.ndarray, size: tuple[int, int], width: int,  # noqa: N803
                  pose: np.ndarray, name: str):
    """The frame's pinhole camera resized from ``size`` (W, H) to ``width`` px wide."""
    from bench.scene.cameras import Camera

    sx = width / size[0]
    height = int(round(size[1] * sx))
    sy = height / size[1]
    return Camera(model="pinhole", width=width, height=height, fx=float(K[0, 0] * sx),
                  fy=float(K[1, 1] * sy), cx=float(K[0, 2] * sx), cy=float(K[1, 2] * sy),
                  world_from_camera=pose, name=name)


def edge_mask(depth: np.ndarray, *, jump: float, radius: int) -> np.ndarray:  # [H, W] -> bool
    """Pixels within ``radius`` of a depth discontinuity (relative jump > ``jump``) or a hole."""
    import cv2

    d = np.nan_to_num(depth, nan=0.0)
    edge = np.zeros(depth.shape, dtype=bool)
    for dy, dx in ((0, 1), (1, 0)):
        a = d[: d.shape[0] - dy, : d.shape[1] - dx]
        b = d[dy:, dx:]
        hole = (a == 0) != (b == 0)
        rel = np.abs(a - b) > jump * np.maximum(np.minimum(a, b), 1e-6)
        cut = hole | (rel & (a > 0) & (b > 0))
        edge[: d.shape[0] - dy, : d.shape[1] - dx] |= cut
        edge[dy:, dx:] |= cut
    if radius > 0:
        kernel = np.ones((2 * radius + 1, 2 * radius + 1), np.uint8)
        edge = cv2.dilate(edge.astype(np.uint8), kernel) > 0
    return edge


def back_project(depth: np.ndarray, K: np.ndarray, pose: np.ndarray,  # noqa: N803
                 rows: np.ndarray, cols: np.ndarray) -> np.ndarray:  # -> [M, 3] world
    """World points of depth pixels (pixel centres at +0.5, matching the cameras)."""
    z = depth[rows, cols].astype(np.float64)
    local = np.stack([(cols + 0.5 - K[0, 2]) / K[0, 0] * z,
                      (rows + 0.5 - K[1, 2]) / K[1, 1] * z, z], axis=1)
    return local @ pose[:3, :3].T + pose[:3, 3]


def frame_points(frame: RgbdFrame, source: RgbdSource, config: RgbdImportConfig,
                 counts: SeedCounts | None = None, *, stride: int | None = None,
                 drop_edges: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(world points [M, 3], colours [M, 3] uint8) of one frame's valid depth pixels."""
    rgb = read_rgb(frame.color)
    depth = read_depth(frame.depth, scale=source.depth_scale, shape=rgb.shape[:2])
    step = config.stride if stride is None else stride
    sub = np.zeros(depth.shape, dtype=bool)
    sub[::step, ::step] = True
    invalid = np.isnan(depth)
    out_range = ~invalid & ((depth < config.depth_min) | (depth > config.depth_max))
    edges = edge_mask(depth, jump=config.edge_jump, radius=config.edge_px) if drop_edges else (
        np.zeros(depth.shape, dtype=bool))
    keep = sub & ~invalid & ~out_range & ~edges
    if counts is not None:
        counts.pixels += int(sub.sum())
        counts.invalid_depth += int((sub & invalid).sum())
        counts.out_of_range += int((sub & out_range).sum())
        counts.misregistered += int((sub & ~invalid & ~out_range & edges).sum())
        counts.back_projected += int(keep.sum())
    rows, cols = np.nonzero(keep)
    return back_project(depth, source.K, frame.world_from_camera, rows, cols), rgb[rows, cols]


def split_frames(frames: tuple[RgbdFrame, ...], test_every: int,
                 ) -> tuple[list[RgbdFrame], list[RgbdFrame]]:
    """(training, held-out): frame i is held out when (i + 1) % test_every == 0."""
    train = [f for i, f in enumerate(frames) if (i + 1) % test_every]
    test = [f for i, f in enumerate(frames) if not (i + 1) % test_every]
    return train, test


def dense_seed(source: RgbdSource, frames: list[RgbdFrame], config: RgbdImportConfig,
               *, show_progress: bool = False,
               ) -> tuple[np.ndarray, np.ndarray, SeedCounts]:  # points [N, 3], colours [N, 3]
    """The seed cloud of ``frames`` (module doc: invalid, misregistered, sparse, outliers)."""
    from scipy.spatial import cKDTree

    from bench.progress import progress

    counts = SeedCounts()
    keys, colours, positions, views = [], [], [], []
    for index, frame in enumerate(progress(frames, desc="seed from depth", unit="frame",
                                           disable=not show_progress)):
        pts, rgb = frame_points(frame, source, config, counts)
        keys.append(np.floor(pts / config.voxel).astype(np.int64))
        positions.append(pts)
        colours.append(rgb.astype(np.float64))
        views.append(np.full(len(pts), index, dtype=np.int64))
    key = np.concatenate(keys)
    pos, col, view = np.concatenate(positions), np.concatenate(colours), np.concatenate(views)
    cells, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    n = len(cells)
    counts.cells = n
    n_points = np.bincount(inverse, minlength=n).astype(np.float64)
    mean_pos = np.stack([np.bincount(inverse, pos[:, k], n) for k in range(3)], 1)
    mean_pos /= n_points[:, None]
    mean_col = np.stack([np.bincount(inverse, col[:, k], n) for k in range(3)], 1)
    mean_col /= n_points[:, None]
    pairs = np.unique(np.stack([inverse, view], axis=1), axis=0)  # (cell, frame) seen
    n_views = np.bincount(pairs[:, 0], minlength=n)
    dense = n_views >= config.min_views
    counts.sparse_cells = int((~dense).sum())
    mean_pos, mean_col = mean_pos[dense], mean_col[dense]
    if len(mean_pos) > config.outlier_k + 1:
        dist, _ = cKDTree(mean_pos).query(mean_pos, k=config.outlier_k + 1)
        mean_d = dist[:, 1:].mean(axis=1)
        med = float(np.median(mean_d))
        mad = float(np.median(np.abs(mean_d - med))) * 1.4826
        inlier = mean_d <= med + config.outlier_sigma * max(mad, 1e-12)
        counts.outlier_cells = int((~inlier).sum())
        mean_pos, mean_col = mean_pos[inlier], mean_col[inlier]
    if len(mean_pos) > config.max_seed_points:
        rng = np.random.default_rng(config.seed)
        keep = np.sort(rng.choice(len(mean_pos), config.max_seed_points, replace=False))
        counts.subsampled_out = len(mean_pos) - len(keep)
        mean_pos, mean_col = mean_pos[keep], mean_col[keep]
    counts.seed_points = len(mean_pos)
    if counts.seed_points < 100:
        raise BenchError(f"only {counts.seed_points} seed points survive the depth checks "
                         f"({counts.invalid_depth:,} invalid, {counts.out_of_range:,} outside "
                         f"{config.depth_min}-{config.depth_max} m); check --depth-scale "
                         "(depth units per metre) and --depth-min/--depth-max")
    rgb = np.clip(np.floor(mean_col + 0.5), 0, 255).astype(np.uint8)
    return mean_pos.astype(np.float32), rgb, counts


def _write_png(path: Path, rgb: np.ndarray) -> None:  # rgb [H, W, 3] uint8
    import cv2

    from bench.provenance import atomic_write_bytes

    ok, data = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:
        raise BenchError(f"cannot encode {path}")
    atomic_write_bytes(path, data.tobytes())


def import_rgbd(source: RgbdSource, out: Path, *, config: RgbdImportConfig,
                show_progress: bool = False) -> dict:
    """Write ``capture.json``, ``images/``, ``test/``, ``seed_points.ply`` into ``out``.

    ``out`` is a (staged) directory the caller owns. Returns the provenance fields
    (params, counts, frame convention, gravity) for the import's manifest.
    """
    import cv2

    from bench.progress import progress
    from bench.recon.capture import CaptureManifest, SourceFrame, View

    train, test = split_frames(source.frames, config.test_every)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "test").mkdir(parents=True, exist_ok=True)
    frames, views, tests = [], [], []
    held_out = {f.id for f in test}
    size0: tuple[int, int] | None = None
    for frame in progress(source.frames, desc="import frames", unit="frame",
                          disable=not show_progress):
        rgb = read_rgb(frame.color)
        size = (rgb.shape[1], rgb.shape[0])
        if size0 is None:
            size0 = size
        elif size != size0:
            raise BenchError(f"{frame.color} is {size[0]}x{size[1]} px, the first frame "
                             f"{size0[0]}x{size0[1]}; one sequence must have one image size")
        read_depth(frame.depth, scale=source.depth_scale, shape=rgb.shape[:2])  # size check
        cam = scaled_camera(source.K, size, config.width, frame.world_from_camera, frame.id)
        small = cv2.resize(rgb, (cam.width, cam.height), interpolation=cv2.INTER_AREA)
        folder = "test" if frame.id in held_out else "images"
        rel = f"{folder}/{frame.id}.png"
        _write_png(out / rel, small)
        cam = cam.replace(name=rel)
        if frame.id in held_out:
            tests.append(View(id=f"test/{frame.id}", image=rel, camera=cam))
        else:
            frames.append(SourceFrame(id=frame.id, timestamp=frame.timestamp,
                                      images={"rgb": rel}, cameras={"rgb": cam}))
            views.append(View(id=frame.id, image=rel, camera=cam, frame=frame.id, lens="rgb",
                              name="forward"))
    manifest = CaptureManifest(tuple(frames), tuple(views), tuple(tests), root=out)
    manifest.validate()
    points, colours, counts = dense_seed(source, train, config, show_progress=show_progress)
    write_point_ply(out / "seed_points.ply", points, colours)
    manifest.save(out / "capture.json")
    return {
        "counts": {"frames": len(source.frames), "train_frames": len(train),
                   "test_frames": len(test), **vars(counts)},
        "frame_convention": FRAME_CONVENTION,
        "source_size": list(size0 or (0, 0)),
        "intrinsics_source": source.K.tolist(),
        "gravity_down": None if source.gravity is None else source.gravity.tolist(),
        "test_frame_ids": [f.id for f in test],
        "depth_scale": source.depth_scale,
    }


def gravity_up(source: RgbdSource) -> np.ndarray | None:  # -> [3]
    """Unit up vector (minus the measured gravity direction), or None."""
    return None if source.gravity is None else -source.gravity


def import_rgbd_to(source: str | os.PathLike, out: str | os.PathLike, *,
                   config: RgbdImportConfig, intrinsics: str | os.PathLike | None = None,
                   associations: str | os.PathLike | None = None, overwrite: bool = False,
                   show_progress: bool = False) -> dict:
    """Parse ``source`` and write the capture into ``out`` (staged: all or nothing).

    Also writes ``out/manifest.json`` (tool ``import-rgbd/1``: params, seed, sha256 of the
    shared source files, of every source frame's colour, depth and pose (one digest) and of
    every output, counts, frame convention, measured gravity).
    Returns the provenance fields of :func:`import_rgbd`.
    """
    import dataclasses

    from bench.provenance import (
        atomic_write_json,
        make_manifest,
        sha256_bytes,
        sha256_file,
        staged_output_dir,
    )
    from bench.safety import preflight_output_dir

    out = Path(out)
    inputs = [("SEQUENCE", source), ("--intrinsics", intrinsics),
              ("--associations", associations)]
    preflight_output_dir(out, overwrite=overwrite, inputs=inputs)
    parsed = read_rgbd_source(source, config=config, intrinsics=intrinsics,
                              associations=associations)
    with staged_output_dir(out, overwrite=overwrite, inputs=inputs) as tmp:
        info = import_rgbd(parsed, tmp, config=config, show_progress=show_progress)
        frame_lines = "".join(
            f"{f.id}\t{sha256_file(f.color)}\t{sha256_file(f.depth)}\t"
            f"{sha256_bytes(np.ascontiguousarray(f.world_from_camera).tobytes())}\n"
            for f in parsed.frames)
        outputs = {"capture_manifest": tmp / "capture.json",
                   "seed_points": tmp / "seed_points.ply"}
        from bench.recon.capture import CaptureManifest

        manifest = CaptureManifest.load(tmp / "capture.json")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={**dataclasses.asdict(config), "source": str(source),
                                  "layout": parsed.layout, "depth_scale": parsed.depth_scale},
            seed=config.seed, inputs=dict(parsed.files), outputs=outputs,
            counts=info["counts"],
            extra={"frame_convention": info["frame_convention"],
                   "gravity_down": info["gravity_down"], "source_size": info["source_size"],
                   "intrinsics_source": info["intrinsics_source"],
                   "test_frame_ids": info["test_frame_ids"],
                   "source_frames_sha256": sha256_bytes(frame_lines.encode("utf-8")),
                   "images_sha256": {"views": manifest.image_digest(manifest.views),
                                     "test_views": manifest.image_digest(manifest.test_views)}}))
    return info
