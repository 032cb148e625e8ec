"""A procedural sample scene: a furnished room with a table, as a registered scene bundle.

World frame (metres, +z up): the table top is the rectangle 1.2 m x 0.8 m
centred at the origin at z = 0 (as in YUBI-Real2Sim), standing on a floor at
z = -0.75 in a 4.0 m x 3.2 m room with a ceiling at z = 1.85 that carries two
bright light panels above the table. Props (boxes, a plant, a vase, a shelf,
a lamp) give the floaters editor varied neighbouring colours. Every surface is
a set of flat Gaussians (thin along the surface normal) with SH degree 3 (small
random higher-band coefficients) so view-dependent code paths are exercised.

The background is stored in a *splat* frame related to the world by a
non-trivial similarity (scale 2.5, a rotation, a translation), like a real
reconstruction registered into simulator coordinates. Camera files
(``cameras/test.json``: held-out pinhole views of the table;
``cameras/probe.json``: a short orbit trajectory) come from
:mod:`bench.scene.cameras`.

Everything is drawn from ``numpy.random.default_rng(seed)``: the same seed and
size give byte-identical files.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.geometry import mat_to_quat
from bench.scene.bundle import KeepoutBox, SceneBundle, TableSpec
from bench.scene.gaussians import SH_C0, GaussianSplats

TABLE = TableSpec(center=(0.0, 0.0), size=(1.2, 0.8), yaw_deg=0.0, height=0.0)
FLOOR_Z, CEILING_Z = -0.75, 1.85
ROOM_HALF = (2.0, 1.6)  # half extents of the room along x and y, metres
TABLE_THICKNESS = 0.04
KEEPOUT = KeepoutBox(center=(0.0, 0.0, 0.06), size=(0.3, 0.3, 0.12))  # task-object area
SH_REST_STD = 0.02  # std of the higher-band SH coefficients (rgb units / basis value)
TANGENT_SCALE = 1.0  # in-surface std of a Gaussian / mean spacing: surfaces close without gaps


def sample_world_from_splat() -> np.ndarray:  # [4, 4]
    """The sample's registration: scale 2.5, yaw 30 deg + tilt 10 deg, a translation."""
    yaw, tilt = math.radians(30.0), math.radians(10.0)
    rz = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0],
                   [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, math.cos(tilt), -math.sin(tilt)],
                   [0, math.sin(tilt), math.cos(tilt)]])
    matrix = np.eye(4)
    matrix[:3, :3] = 2.5 * (rz @ rx)
    matrix[:3, 3] = (0.3, -0.2, 0.5)
    return matrix


@dataclass(frozen=True)
class Patch:
    """An axis-aligned rectangle (or a curved primitive) to cover with Gaussians.

    Attributes:
        kind: ``"rect"``, ``"cylinder"`` or ``"sphere"``.
        origin: Rect corner / cylinder base centre / sphere centre, metres.
        extent: Rect: two edge vectors packed as 6 numbers; cylinder: (radius,
            height); sphere: (radius,).
        colour: Base RGB in [0, 1].
        texture: Name of the colour pattern (see :func:`_texture`).
        density: Relative Gaussians per square metre.
    """

    kind: str
    origin: tuple[float, ...]
    extent: tuple[float, ...]
    colour: tuple[float, float, float]
    texture: str = "plain"
    density: float = 1.0

    def area(self) -> float:
        """Surface area of the patch, square metres."""
        if self.kind == "rect":
            u, v = np.array(self.extent[:3]), np.array(self.extent[3:])
            return float(np.linalg.norm(np.cross(u, v)))
        if self.kind == "cylinder":
            return 2.0 * math.pi * self.extent[0] * self.extent[1]
        return 4.0 * math.pi * self.extent[0] ** 2


def _rect(origin, u, v, colour, texture="plain", density=1.0) -> Patch:
    return Patch("rect", tuple(origin), tuple(u) + tuple(v), colour, texture, density)


def _box(center, size, colour, texture="plain", density=2.0) -> list[Patch]:
    """The five visible faces (no bottom) of an axis-aligned box."""
    c, h = np.asarray(center, float), np.asarray(size, float) / 2.0
    x, y, z = np.eye(3)
    lo = c - h
    faces = [
        (lo + 2 * h[2] * z, 2 * h[0] * x, 2 * h[1] * y),  # top
        (lo, 2 * h[0] * x, 2 * h[2] * z), (lo + 2 * h[1] * y, 2 * h[0] * x, 2 * h[2] * z),
        (lo, 2 * h[1] * y, 2 * h[2] * z), (lo + 2 * h[0] * x, 2 * h[1] * y, 2 * h[2] * z),
    ]
    return [_rect(o, u, v, colour, texture, density) for o, u, v in faces]


def room_patches() -> list[Patch]:
    """Every surface of the sample room."""
    hx, hy = ROOM_HALF
    wall_h = CEILING_Z - FLOOR_Z
    x, y, z = np.eye(3)
    patches = [
        _rect((-hx, -hy, FLOOR_Z), 2 * hx * x, 2 * hy * y, (0.45, 0.42, 0.38), "tiles"),
        _rect((-hx, -hy, CEILING_Z), 2 * hx * x, 2 * hy * y, (0.60, 0.60, 0.58), "plain", 0.6),
        _rect((-hx, -hy, FLOOR_Z), 2 * hx * x, wall_h * z, (0.74, 0.70, 0.62), "gradient"),
        _rect((-hx, hy, FLOOR_Z), 2 * hx * x, wall_h * z, (0.62, 0.70, 0.74), "gradient"),
        _rect((-hx, -hy, FLOOR_Z), 2 * hy * y, wall_h * z, (0.70, 0.74, 0.64), "gradient"),
        _rect((hx, -hy, FLOOR_Z), 2 * hy * y, wall_h * z, (0.76, 0.66, 0.66), "gradient"),
        # bright light panels just below the ceiling, above the table
        _rect((-0.7, -0.35, CEILING_Z - 0.01), 0.5 * x, 0.7 * y, (1.0, 0.98, 0.92), "light", 3.0),
        _rect((0.2, -0.35, CEILING_Z - 0.01), 0.5 * x, 0.7 * y, (1.0, 0.98, 0.92), "light", 3.0),
        # textured table top (z = 0) and its edges
        _rect((-0.6, -0.4, 0.0), 1.2 * x, 0.8 * y, (0.58, 0.38, 0.22), "wood", 6.0),
        _rect((-0.6, -0.4, -TABLE_THICKNESS), 1.2 * x, TABLE_THICKNESS * z, (0.45, 0.29, 0.17)),
        _rect((-0.6, 0.4, -TABLE_THICKNESS), 1.2 * x, TABLE_THICKNESS * z, (0.45, 0.29, 0.17)),
        _rect((-0.6, -0.4, -TABLE_THICKNESS), 0.8 * y, TABLE_THICKNESS * z, (0.45, 0.29, 0.17)),
        _rect((0.6, -0.4, -TABLE_THICKNESS), 0.8 * y, TABLE_THICKNESS * z, (0.45, 0.29, 0.17)),
    ]
    leg_height = -TABLE_THICKNESS - FLOOR_Z
    for sx in (-0.54, 0.54):
        for sy in (-0.34, 0.34):
            patches.append(Patch("cylinder", (sx, sy, FLOOR_Z), (0.03, leg_height),
                                 (0.30, 0.20, 0.12), "plain", 3.0))
    # props: varied colours for the floaters' neighbour sampling
    patches += _box((1.45, 1.2, FLOOR_Z + 0.25), (0.5, 0.35, 0.5), (0.75, 0.15, 0.12))
    patches += _box((-1.5, 1.25, FLOOR_Z + 0.6), (0.8, 0.3, 1.2), (0.25, 0.35, 0.70), "stripes")
    patches += _box((1.6, -1.3, FLOOR_Z + 0.15), (0.6, 0.5, 0.3), (0.85, 0.75, 0.20))
    patches += _box((0.0, 1.52, 0.6), (1.0, 0.12, 0.04), (0.40, 0.28, 0.18))  # wall shelf
    patches.append(Patch("cylinder", (-1.55, -1.2, FLOOR_Z), (0.15, 0.4), (0.55, 0.35, 0.25),
                         "plain", 2.0))  # plant pot
    patches.append(Patch("sphere", (-1.55, -1.2, FLOOR_Z + 0.7), (0.3,), (0.20, 0.55, 0.22),
                         "leaves", 2.0))  # plant foliage
    patches.append(Patch("cylinder", (0.0, 1.52, 0.62), (0.05, 0.2), (0.15, 0.45, 0.65),
                         "plain", 4.0))  # vase on the shelf
    patches.append(Patch("sphere", (1.7, 0.2, 1.3), (0.12,), (1.0, 0.95, 0.75), "light", 4.0))
    return patches


def _allocate(patches: list[Patch], total: int) -> np.ndarray:  # [P] ints summing to total
    weights = np.array([p.area() * p.density for p in patches])
    raw = total * weights / weights.sum()
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")  # largest remainders first
    counts[order[: total - counts.sum()]] += 1
    return counts


def _texture(name: str, points: np.ndarray, base: np.ndarray,
             rng: np.random.Generator) -> np.ndarray:  # [n, 3] -> [n, 3]
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    one = np.ones_like(x)
    if name == "tiles":  # 0.5 m checker
        check = (np.floor(x / 0.5) + np.floor(y / 0.5)) % 2
        factor = 0.8 + 0.35 * check
    elif name == "wood":  # grain along x with knots of darker colour
        grain = np.sin(38.0 * y + 3.0 * np.sin(4.0 * x)) * 0.5 + 0.5
        factor = 0.75 + 0.35 * grain
    elif name == "stripes":
        factor = 0.7 + 0.4 * (np.floor(z / 0.15) % 2)
    elif name == "gradient":
        factor = 0.85 + 0.15 * (z - FLOOR_Z) / (CEILING_Z - FLOOR_Z)
    elif name == "leaves":
        factor = 0.6 + 0.8 * rng.uniform(size=len(x))
    else:  # plain, light
        factor = one
    rgb = base[None, :] * factor[:, None]
    jitter = 0.01 if name == "light" else 0.03
    return np.clip(rgb + rng.normal(0.0, jitter, rgb.shape), 0.0, 1.0)


def _patch_gaussians(patch: Patch, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Points, colours, log-scales and rotations of ``n`` Gaussians on one patch."""
    spacing = math.sqrt(patch.area() / max(n, 1))
    thin = math.log(0.0015)
    if patch.kind == "rect":
        u, v = np.array(patch.extent[:3]), np.array(patch.extent[3:])
        a, b = rng.uniform(size=(2, n))
        points = np.asarray(patch.origin) + a[:, None] * u + b[:, None] * v
        normal = np.cross(u, v)
        axis = int(np.argmax(np.abs(normal)))  # axis-aligned: thin along the normal axis
        log_scales = np.full((n, 3), math.log(TANGENT_SCALE * spacing))
        log_scales[:, axis] = thin
        quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    else:
        if patch.kind == "cylinder":
            radius, height = patch.extent
            angle, h = rng.uniform(0, 2 * math.pi, n), rng.uniform(0, height, n)
            normals = np.stack([np.cos(angle), np.sin(angle), np.zeros(n)], axis=1)
            points = np.asarray(patch.origin) + radius * normals + h[:, None] * np.eye(3)[2]
        else:
            normals = rng.normal(size=(n, 3))
            normals /= np.linalg.norm(normals, axis=1, keepdims=True)
            points = np.asarray(patch.origin) + patch.extent[0] * normals
        wide = math.log(TANGENT_SCALE * spacing)
        log_scales = np.tile([wide, wide, thin], (n, 1))
        quats = np.stack([mat_to_quat(_frame_with_z(nrm)) for nrm in normals])
    log_scales = log_scales + rng.normal(0.0, 0.1, (n, 3))
    quats = quats + rng.normal(0.0, 0.02, (n, 4))  # slightly unnormalised, like trained files
    rgb = _texture(patch.texture, points, np.asarray(patch.colour), rng)
    return {"means": points, "rgb": rgb, "log_scales": log_scales, "quats": quats}


def _frame_with_z(normal: np.ndarray) -> np.ndarray:  # [3] -> [3, 3] rotation, column z = normal
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, normal)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(normal, x), normal], axis=1)


def sample_background(*, seed: int = 0, n_gaussians: int = 40000) -> GaussianSplats:
    """The room's Gaussians in the WORLD frame (SH degree 3)."""
    if n_gaussians < 100:
        raise ValueError(f"n_gaussians must be >= 100 for a recognisable room, got {n_gaussians}")
    rng = np.random.default_rng(seed)
    patches = room_patches()
    parts = [_patch_gaussians(p, int(n), rng) for p, n in zip(patches, _allocate(patches,
                                                                                n_gaussians),
                                                              strict=True) if n > 0]
    cat = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    n = len(cat["means"])
    return GaussianSplats(
        means=cat["means"].astype(np.float32),
        quats=cat["quats"].astype(np.float32),
        log_scales=cat["log_scales"].astype(np.float32),
        opacity_logits=rng.normal(3.0, 0.5, n).astype(np.float32),
        sh_dc=((cat["rgb"] - 0.5) / SH_C0).astype(np.float32),
        sh_rest=rng.normal(0.0, SH_REST_STD, (n, 15, 3)).astype(np.float32),
    )


def sample_cameras() -> dict[str, bytes]:
    """Camera files of the sample (relative path -> bytes), via bench.scene.cameras."""
    from bench.scene.camera_files import save_cameras
    from bench.scene.cameras import Camera, look_at, orbit

    target = (0.0, 0.0, 0.0)
    test = []
    for i, azimuth in enumerate(np.radians(np.arange(0.0, 360.0, 45.0) + 20.0)):
        eye = (1.4 * math.cos(azimuth), 1.1 * math.sin(azimuth), 0.55 + 0.1 * (i % 2))
        test.append(Camera("pinhole", 320, 240, 260.0, 260.0, 160.0, 120.0,
                           look_at(eye, target), name=f"test_{i:02d}"))
    probe = [Camera("pinhole", 128, 128, 90.0, 90.0, 64.0, 64.0, pose, name=f"probe_{i:02d}")
             for i, pose in enumerate(orbit(target, radius=0.9, height=0.45, num_views=12,
                                            start_deg=-120.0, sweep_deg=60.0))]
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rel, cams in (("cameras/test.json", test), ("cameras/probe.json", probe)):
            path = Path(tmp) / Path(rel).name
            save_cameras(path, cams, frame="world")  # poses around the world-frame table
            files[rel] = path.read_bytes()
    return files


def make_sample_scene(*, seed: int = 0, n_gaussians: int = 40000) -> SceneBundle:
    """Build the procedural sample room as a registered scene bundle.

    Args:
        seed: Seed of every random draw (positions, colours, SH coefficients).
        n_gaussians: Number of background Gaussians (>= 100).

    Returns:
        A bundle (``root`` None) with the background in the world frame,
        ``world_from_splat`` = :func:`sample_world_from_splat`, the table spec,
        one keepout box over the task-object area and camera files for the
        ``test`` and ``obs_probe`` roles. Save it with
        :func:`bench.scene.bundle.save_scene`.
    """
    files = sample_cameras()
    return SceneBundle(
        name=f"sample-room-seed{seed}",
        background=sample_background(seed=seed, n_gaussians=n_gaussians),
        world_from_splat=sample_world_from_splat(),
        table=TABLE,
        keepouts=(KEEPOUT,),
        cameras={"test": "cameras/test.json", "obs_probe": "cameras/probe.json"},
        files=files,
        extra_json={"generator": {"tool": "sample-room/1", "seed": seed,
                                  "n_gaussians": n_gaussians}},
    )


def describe() -> str:
    """One-line JSON description of the room layout (for docs)."""
    return json.dumps({"table": TABLE.to_json(), "floor_z": FLOOR_Z, "ceiling_z": CEILING_Z,
                       "room_half_extents": ROOM_HALF})
