"""Ground-truth ("real") worlds of the demo: three procedural rooms built and rendered by MuJoCo.

Each world is a :class:`WorldConfig` in :data:`WORLDS` (``gt-duo``, ``gt-flat``,
``gt-g2``): room and table size, floor height, wall / floor / table texture
styles and colours, the seed of the layout (shelves along the walls with props
on them, floor props, a rug, a picture), ceiling light panels with spot lights
under them, and a window (bright panel + directional light) or a floor lamp.
Everything is drawn from ``numpy.random.default_rng(config.seed)``: the same
config gives the same MuJoCo model and byte-identical renders.

All scenery is visual only (``contype = conaffinity = 0``), so adding a room to a
task's :class:`~bench.sim.world.World` (through its ``decorate`` hook, see
:func:`room_decorator`) leaves the physics untouched. The table top is at
``z = 0`` centred on the world origin (like :mod:`bench.scene.sample`), so the
task grids of :mod:`bench.sim.tasks` apply unchanged.

Rendering (:class:`GroundTruthRenderer`): MuJoCo (shadows on unless asked otherwise),
pinhole views directly and fisheye views through
:func:`bench.render.fisheye.render_cubemap` (the remap the env's wrist cameras use), then
the seeded sensor model of :mod:`bench.worlds.sensor`. ``build_room_model(robot_lights=True)``
with ``shadows=False`` renders the room as the robot's "real" trials see it
(:data:`bench.worlds.real.REAL_DOMAIN`: the task world's light kept, shadows off), which
is what the demo's capture scans.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from bench.errors import BenchError
from bench.scene.cameras import Camera, look_at
from bench.worlds.sensor import SensorConfig, apply_sensor

TEXTURE_STYLES = ("plaster", "wood", "tiles", "carpet", "concrete", "laminate")
TEXTURE_PX = 128  # side of every procedural texture image
VISUAL_GROUP = 0  # drawn in every MuJoCo pass (the task table of bench.sim is group 3)
WALL_THICKNESS = 0.05
TABLE_TOP_THICKNESS = 0.04


@dataclass(frozen=True)
class WorldConfig:
    """One ground-truth room. Lengths in metres, colours linear RGB in [0, 1].

    Attributes:
        name: Registry id (``gt-*``).
        seed: Seed of the layout and the textures.
        room_size: Inner (x, y) extent of the room.
        room_offset: Room centre (x, y) relative to the table centre (the world origin).
        floor_z: Floor height (the table top is at z = 0).
        ceiling_z: Ceiling height.
        table_size: Table top (x, y); also the task's collision table.
        table_yaw_deg: Table yaw about +z.
        wall_style, floor_style, table_style: Texture styles (:data:`TEXTURE_STYLES`).
        wall_colour, floor_colour, table_colour, ceiling_colour: Base colours of the textures.
        shelves: Shelf units along the walls (each with props on its boards).
        floor_props: Extra props on the floor (plants, boxes, a chair).
        light_panels: (nx, ny) grid of emissive ceiling panels, one spot light per panel.
        window: A window on one wall (emissive panel + directional light through it).
        lamp: A floor lamp (pole, emissive shade, a point-like spot light).
        light_colour: Colour of the ceiling lights (white balance of the room).
        ambient: Headlight ambient level of the MuJoCo render.
        sensor: The camera sensor model applied to every render.
    """

    name: str
    seed: int
    room_size: tuple[float, float]
    room_offset: tuple[float, float]
    floor_z: float
    ceiling_z: float
    table_size: tuple[float, float]
    table_yaw_deg: float
    wall_style: str
    floor_style: str
    table_style: str
    wall_colour: tuple[float, float, float]
    floor_colour: tuple[float, float, float]
    table_colour: tuple[float, float, float]
    ceiling_colour: tuple[float, float, float] = (0.92, 0.92, 0.9)
    shelves: int = 2
    floor_props: int = 3
    light_panels: tuple[int, int] = (2, 1)
    window: bool = False
    lamp: bool = False
    light_colour: tuple[float, float, float] = (1.0, 0.97, 0.92)
    ambient: float = 0.25
    sensor: SensorConfig = field(default_factory=SensorConfig)

    def __post_init__(self) -> None:
        for attr in ("wall_style", "floor_style", "table_style"):
            if getattr(self, attr) not in TEXTURE_STYLES:
                raise ValueError(f"{attr}={getattr(self, attr)!r} is not one of {TEXTURE_STYLES}")
        half = np.asarray(self.room_size) / 2
        corner = 0.5 * math.hypot(*self.table_size) + 0.3  # table + walking space
        if np.any(np.abs(self.room_offset) + corner > half):
            raise ValueError(f"{self.name}: the table does not fit in the room {self.room_size} "
                             f"with offset {self.room_offset}")
        if not self.floor_z < -0.3 < 0 < 1.2 < self.ceiling_z:
            raise ValueError(f"{self.name}: need floor_z < -0.3 and ceiling_z > 1.2 m")

    def table_spec(self):
        """The :class:`~bench.scene.bundle.TableSpec` of this room's table."""
        from bench.scene.bundle import TableSpec

        return TableSpec(center=(0.0, 0.0), size=tuple(self.table_size),
                         yaw_deg=float(self.table_yaw_deg), height=0.0)

    def to_json(self) -> dict[str, Any]:
        """This config as a JSON-ready dict (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)


WORLDS: dict[str, WorldConfig] = {
    # a lab corner: cream plaster, oak floor, birch table, two panels, a window, bright sensor
    "gt-duo": WorldConfig(
        name="gt-duo", seed=101, room_size=(4.2, 3.4), room_offset=(0.3, 0.4), floor_z=-0.75,
        ceiling_z=1.9, table_size=(1.2, 0.8), table_yaw_deg=0.0, wall_style="plaster",
        floor_style="wood", table_style="wood", wall_colour=(0.86, 0.8, 0.66),
        floor_colour=(0.55, 0.36, 0.2), table_colour=(0.85, 0.7, 0.5), shelves=2,
        floor_props=3, light_panels=(2, 1), window=True,
        sensor=SensorConfig(noise_std=0.012, exposure=1.05, white_balance=(1.04, 1.0, 0.94),
                            vignetting=0.25, seed=1)),
    # a small flat: blue-grey walls, tiled floor, white laminate table, one panel and a lamp
    "gt-flat": WorldConfig(
        name="gt-flat", seed=202, room_size=(3.3, 3.0), room_offset=(-0.35, 0.25),
        floor_z=-0.72, ceiling_z=2.3, table_size=(1.0, 0.7), table_yaw_deg=12.0,
        wall_style="concrete", floor_style="tiles", table_style="laminate",
        wall_colour=(0.32, 0.4, 0.52), floor_colour=(0.7, 0.7, 0.68),
        table_colour=(0.93, 0.93, 0.92), shelves=3, floor_props=2, light_panels=(1, 1),
        lamp=True, light_colour=(1.0, 0.88, 0.72), ambient=0.32,
        sensor=SensorConfig(noise_std=0.02, exposure=0.9, white_balance=(0.95, 1.0, 1.1),
                            vignetting=0.4, seed=2)),
    # a workshop: green walls, dark carpet, walnut table, four panels, a window
    "gt-g2": WorldConfig(
        name="gt-g2", seed=303, room_size=(5.0, 4.0), room_offset=(-0.5, -0.6), floor_z=-0.78,
        ceiling_z=2.6, table_size=(1.4, 0.9), table_yaw_deg=-8.0, wall_style="plaster",
        floor_style="carpet", table_style="wood", wall_colour=(0.35, 0.55, 0.36),
        floor_colour=(0.2, 0.18, 0.22), table_colour=(0.36, 0.2, 0.11), shelves=4,
        floor_props=4, light_panels=(2, 2), window=True, light_colour=(0.9, 0.95, 1.0),
        ambient=0.3,
        sensor=SensorConfig(noise_std=0.008, exposure=1.15, white_balance=(1.0, 1.0, 1.0),
                            vignetting=0.15, seed=3)),
}


def world_ids() -> list[str]:
    """The ids of the registered ground-truth worlds."""
    return list(WORLDS)


def get_world(name: str | WorldConfig) -> WorldConfig:
    """The config of a registered world (or ``name`` itself if it is already a config)."""
    if isinstance(name, WorldConfig):
        return name
    if name not in WORLDS:
        raise BenchError(f"unknown ground-truth world {name!r}; choose one of {world_ids()}")
    return WORLDS[name]


# -- procedural textures ------------------------------------------------------------------
def _smooth_noise(rng: np.random.Generator, px: int, cells: int) -> np.ndarray:  # [px, px]
    """Tileable value noise: a random ``cells`` x ``cells`` grid, bilinearly upsampled."""
    grid = rng.standard_normal((cells, cells))
    coords = np.arange(px) * cells / px
    i0 = np.floor(coords).astype(int)
    t = coords - i0
    i1 = (i0 + 1) % cells
    rows = grid[i0] * (1 - t)[:, None] + grid[i1] * t[:, None]
    return rows[:, i0] * (1 - t)[None, :] + rows[:, i1] * t[None, :]


def make_texture(style: str, colour: tuple[float, float, float], rng: np.random.Generator,
                 px: int = TEXTURE_PX) -> np.ndarray:  # -> [px, px, 3] uint8
    """A tileable procedural texture image of ``style`` around ``colour``."""
    base = np.asarray(colour, np.float64)
    yy, xx = np.mgrid[0:px, 0:px] / px
    if style == "plaster":
        shade = 1 + 0.05 * _smooth_noise(rng, px, 8) + 0.02 * rng.standard_normal((px, px))
    elif style == "concrete":
        shade = (1 + 0.08 * _smooth_noise(rng, px, 16) + 0.05 * _smooth_noise(rng, px, 4)
                 + 0.03 * rng.standard_normal((px, px)))
    elif style == "carpet":
        shade = 1 + 0.12 * rng.standard_normal((px, px)) + 0.04 * _smooth_noise(rng, px, 8)
    elif style == "wood":  # planks along x with a grain and per-plank tone
        planks = 4
        plank = np.floor(yy * planks).astype(int)
        tone = 1 + 0.12 * rng.standard_normal(planks)
        grain = np.sin(2 * np.pi * (12 * xx + 3 * _smooth_noise(rng, px, 4) * 0.2 + plank * 0.37))
        shade = tone[plank] * (1 + 0.08 * grain) * (1 - 0.35 * (np.abs(
            (yy * planks) % 1 - 0.5) > 0.48))
    elif style == "tiles":  # 4 x 4 tiles, jittered tone, dark grout
        tiles = 4
        ti, tj = np.floor(yy * tiles).astype(int), np.floor(xx * tiles).astype(int)
        tone = 1 + 0.06 * rng.standard_normal((tiles, tiles))
        grout = (np.minimum((yy * tiles) % 1, (xx * tiles) % 1) < 0.05)
        shade = tone[ti, tj] * np.where(grout, 0.55, 1.0)
    elif style == "laminate":
        shade = 1 + 0.015 * _smooth_noise(rng, px, 32) + 0.01 * rng.standard_normal((px, px))
    else:
        raise ValueError(f"texture style {style!r} is not one of {TEXTURE_STYLES}")
    image = np.clip(shade[..., None] * base, 0.0, 1.0)
    return (image * 255 + 0.5).astype(np.uint8)


# -- building -----------------------------------------------------------------------------
class _Builder:
    """Adds one room's textures, materials, geoms and lights to an ``MjSpec``."""

    def __init__(self, spec: mujoco.MjSpec, config: WorldConfig, prefix: str) -> None:
        self.spec, self.config, self.prefix = spec, config, prefix
        self.rng = np.random.default_rng(config.seed)
        self.body = spec.worldbody
        self.count = 0

    def name(self, what: str) -> str:
        self.count += 1
        return f"{self.prefix}{what}_{self.count}"

    def material(self, style: str, colour, *, repeat: float = 1.0,
                 emission: float = 0.0) -> str:
        image = make_texture(style, colour, self.rng)
        texture = self.spec.add_texture(name=self.name("tex"), type=mujoco.mjtTexture.mjTEXTURE_2D,
                                        width=image.shape[1], height=image.shape[0], nchannel=3)
        texture.data = image[::-1].tobytes()  # OpenGL rows start at the bottom
        material = self.spec.add_material(name=self.name("mat"), texuniform=True,
                                          texrepeat=[repeat, repeat], emission=emission,
                                          specular=0.1, shininess=0.2)
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture.name
        return material.name

    def geom(self, kind: int, size, pos, *, material: str | None = None, rgba=None,
             quat=(1.0, 0.0, 0.0, 0.0), **extra: Any) -> None:
        kwargs: dict[str, Any] = {"material": material} if material else {}
        kwargs["rgba"] = list(rgba) if rgba is not None else [1, 1, 1, 1]
        self.body.add_geom(name=self.name("geom"), type=kind, size=list(map(float, size)),
                           pos=list(map(float, pos)), quat=list(map(float, quat)),
                           contype=0, conaffinity=0, group=VISUAL_GROUP, **kwargs, **extra)

    def box(self, centre, half, **kw: Any) -> None:
        self.geom(mujoco.mjtGeom.mjGEOM_BOX, half, centre, **kw)

    def colour(self, low: float = 0.15, high: float = 0.9) -> list[float]:
        return [*self.rng.uniform(low, high, 3).tolist(), 1.0]


def _room_shell(b: _Builder) -> None:
    c = b.config
    ox, oy = c.room_offset
    hx, hy = c.room_size[0] / 2, c.room_size[1] / 2
    height = c.ceiling_z - c.floor_z
    mid_z = (c.ceiling_z + c.floor_z) / 2
    t = WALL_THICKNESS
    floor = b.material(c.floor_style, c.floor_colour, repeat=1.0)
    wall = b.material(c.wall_style, c.wall_colour, repeat=0.8)
    ceiling = b.material("plaster", c.ceiling_colour, repeat=0.8)
    b.box((ox, oy, c.floor_z - t / 2), (hx + t, hy + t, t / 2), material=floor)
    b.box((ox, oy, c.ceiling_z + t / 2), (hx + t, hy + t, t / 2), material=ceiling)
    for sx in (-1, 1):
        b.box((ox + sx * (hx + t / 2), oy, mid_z), (t / 2, hy + t, height / 2), material=wall)
    for sy in (-1, 1):
        b.box((ox, oy + sy * (hy + t / 2), mid_z), (hx + t, t / 2, height / 2), material=wall)
    # skirting board: a dark strip where walls meet the floor
    skirt = [0.15, 0.13, 0.12, 1.0]
    for sx in (-1, 1):
        b.box((ox + sx * (hx - 0.01), oy, c.floor_z + 0.05), (0.01, hy, 0.05), rgba=skirt)
    for sy in (-1, 1):
        b.box((ox, oy + sy * (hy - 0.01), c.floor_z + 0.05), (hx, 0.01, 0.05), rgba=skirt)


def _table(b: _Builder) -> None:
    c = b.config
    yaw = math.radians(c.table_yaw_deg)
    quat = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
    top = b.material(c.table_style, c.table_colour, repeat=1.0)
    sx, sy = c.table_size[0] / 2, c.table_size[1] / 2
    b.box((0.0, 0.0, -TABLE_TOP_THICKNESS / 2), (sx, sy, TABLE_TOP_THICKNESS / 2),
          material=top, quat=quat)
    leg_h = (-TABLE_TOP_THICKNESS - c.floor_z) / 2
    rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    leg_rgba = [0.2, 0.2, 0.22, 1.0]
    for lx in (-1, 1):
        for ly in (-1, 1):
            x, y = rot @ np.array([lx * (sx - 0.05), ly * (sy - 0.05)])
            b.box((x, y, c.floor_z + leg_h), (0.025, 0.025, leg_h), rgba=leg_rgba, quat=quat)


def _wall_frame(c: WorldConfig, wall: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Origin on the wall's inner face at floor height, unit along-wall axis, half length."""
    ox, oy = c.room_offset
    hx, hy = c.room_size[0] / 2, c.room_size[1] / 2
    if wall in (0, 1):  # walls at -y, +y
        sign = -1 if wall == 0 else 1
        return np.array([ox, oy + sign * hy, c.floor_z]), np.array([1.0, 0, 0]), hx
    sign = -1 if wall == 2 else 1
    return np.array([ox + sign * hx, oy, c.floor_z]), np.array([0, 1.0, 0]), hy


def _shelf(b: _Builder, wall: int, along: float) -> None:
    """A shelf unit against ``wall`` with boards and random props (books, boxes, jars)."""
    c = b.config
    origin, axis, _ = _wall_frame(c, wall)
    inward = -np.sign(origin[:2] - np.asarray(c.room_offset))
    normal = np.array([inward[0] if wall >= 2 else 0.0, inward[1] if wall < 2 else 0.0, 0.0])
    width, depth = b.rng.uniform(0.6, 1.1), 0.3
    height = min(b.rng.uniform(1.2, 1.9), c.ceiling_z - c.floor_z - 0.2)
    centre = origin + axis * along + normal * depth / 2
    wood = b.material("wood", tuple(b.rng.uniform(0.25, 0.75, 3)), repeat=2.0)
    half_along = axis * width / 2
    board_half = np.abs(half_along) + np.abs(normal) * depth / 2
    for side in (-1, 1):  # side panels
        pos = centre + side * half_along + [0, 0, height / 2]
        b.box(pos, np.abs(normal) * depth / 2 + np.abs(axis) * 0.015 + [0, 0, height / 2],
              material=wood)
    boards = int(b.rng.integers(3, 6))
    for k in range(boards):
        z = c.floor_z + 0.05 + k * (height - 0.1) / (boards - 1)
        b.box(centre + [0, 0, z - c.floor_z], board_half + [0, 0, 0.012], material=wood)
        if k == boards - 1:
            continue
        x = -width / 2 + 0.05
        while x < width / 2 - 0.08:  # props along the board
            kind = b.rng.integers(0, 3)
            if kind == 0:  # a book
                w = b.rng.uniform(0.02, 0.05)
                h = b.rng.uniform(0.15, 0.25)
                pos = centre + axis * (x + w / 2) + [0, 0, z - c.floor_z + 0.012 + h / 2]
                b.box(pos, np.abs(axis) * w / 2 + np.abs(normal) * 0.1 + [0, 0, h / 2],
                      rgba=b.colour())
                x += w + 0.003
            elif kind == 1:  # a box
                w = b.rng.uniform(0.08, 0.18)
                h = b.rng.uniform(0.06, 0.15)
                pos = centre + axis * (x + w / 2) + [0, 0, z - c.floor_z + 0.012 + h / 2]
                b.box(pos, np.abs(axis) * w / 2 + np.abs(normal) * 0.11 + [0, 0, h / 2],
                      rgba=b.colour())
                x += w + 0.02
            else:  # a jar / vase (textured mesh)
                r = b.rng.uniform(0.03, 0.06)
                h = b.rng.uniform(0.08, 0.2)
                pos = centre + axis * (x + r) + [0, 0, z - c.floor_z + 0.012]
                _vase(b, pos, r, h)
                x += 2 * r + 0.03


def _lathe_mesh(radius: float, height: float, profile: np.ndarray,
                segments: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A closed surface of revolution: vertices [V, 3], faces [F, 3], texcoords [V, 2]."""
    rings = len(profile)
    angles = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    z = np.linspace(0, height, rings)
    verts = [[radius * profile[i] * math.cos(a), radius * profile[i] * math.sin(a), z[i]]
             for i in range(rings) for a in angles]
    tex = [[j / segments, i / (rings - 1)] for i in range(rings) for j in range(segments)]
    faces = []
    for i in range(rings - 1):
        for j in range(segments):
            a, b = i * segments + j, i * segments + (j + 1) % segments
            faces += [[a, b, b + segments], [a, b + segments, a + segments]]
    bottom, top = len(verts), len(verts) + 1
    verts += [[0, 0, 0], [0, 0, height]]
    tex += [[0.5, 0.0], [0.5, 1.0]]
    for j in range(segments):
        faces += [[bottom, (j + 1) % segments, j],
                  [top, (rings - 1) * segments + j, (rings - 1) * segments + (j + 1) % segments]]
    return np.asarray(verts), np.asarray(faces), np.asarray(tex)


def _vase(b: _Builder, base_pos, radius: float, height: float) -> None:
    profile = 0.6 + 0.4 * np.sin(np.linspace(0.3, 2.8, 6)) * b.rng.uniform(0.6, 1.0)
    verts, faces, tex = _lathe_mesh(radius, height, profile)
    mesh = b.name("mesh")
    b.spec.add_mesh(name=mesh, uservert=verts.ravel().tolist(),
                    userface=faces.ravel().tolist(), usertexcoord=tex.ravel().tolist())
    style = ("tiles", "concrete", "plaster")[int(b.rng.integers(0, 3))]
    material = b.material(style, tuple(b.rng.uniform(0.2, 0.9, 3)))
    b.body.add_geom(name=b.name("geom"), type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh,
                    pos=list(map(float, base_pos)), material=material, contype=0,
                    conaffinity=0, group=VISUAL_GROUP)


def _floor_prop(b: _Builder, xy: np.ndarray) -> None:
    c = b.config
    kind = int(b.rng.integers(0, 3))
    if kind == 0:  # a plant: pot + foliage
        pot = b.rng.uniform(0.12, 0.2)
        b.geom(mujoco.mjtGeom.mjGEOM_CYLINDER, (pot, pot * 1.2), (*xy, c.floor_z + pot * 1.2),
               rgba=b.colour(0.3, 0.7))
        b.geom(mujoco.mjtGeom.mjGEOM_ELLIPSOID, (pot * 2, pot * 2, pot * 3),
               (*xy, c.floor_z + pot * 2.4 + pot * 2.6),
               material=b.material("carpet", (0.15, 0.45, 0.15), repeat=4.0))
    elif kind == 1:  # stacked boxes
        z = c.floor_z
        for _ in range(int(b.rng.integers(1, 4))):
            h = b.rng.uniform(0.1, 0.3)
            half = b.rng.uniform(0.12, 0.3, 2)
            b.box((*xy, z + h / 2), (*half, h / 2),
                  material=b.material("laminate", tuple(b.rng.uniform(0.3, 0.8, 3))))
            z += h
    else:  # a chair: seat, back, legs
        seat_z = c.floor_z + 0.45
        wood = b.material("wood", tuple(b.rng.uniform(0.2, 0.6, 3)), repeat=3.0)
        b.box((*xy, seat_z), (0.22, 0.22, 0.02), material=wood)
        b.box((xy[0], xy[1] + 0.2, seat_z + 0.25), (0.22, 0.02, 0.25), material=wood)
        for lx in (-1, 1):
            for ly in (-1, 1):
                b.box((xy[0] + lx * 0.19, xy[1] + ly * 0.19, c.floor_z + 0.22),
                      (0.02, 0.02, 0.22), material=wood)


def _free_floor_spot(b: _Builder, taken: list[np.ndarray]) -> np.ndarray:
    """A floor (x, y) away from the table and earlier props, inside the room (60 tries)."""
    c = b.config
    half = np.asarray(c.room_size) / 2 - 0.35
    clear = 0.5 * math.hypot(*c.table_size) + 0.35
    xy = np.asarray(c.room_offset) + b.rng.uniform(-half, half)
    for _ in range(60):
        xy = np.asarray(c.room_offset) + b.rng.uniform(-half, half)
        if np.linalg.norm(xy) > clear and all(np.linalg.norm(xy - t) > 0.6 for t in taken):
            break
    taken.append(xy)
    return xy


def _lights(b: _Builder) -> None:
    c = b.config
    nx, ny = c.light_panels
    ox, oy = c.room_offset
    panel = b.spec.add_material(name=b.name("mat"), emission=1.0,
                                rgba=[*c.light_colour, 1.0])
    for i in range(nx):
        for j in range(ny):
            x = (i - (nx - 1) / 2) * min(1.2, c.room_size[0] / (nx + 1)) + 0.3 * ox
            y = (j - (ny - 1) / 2) * min(1.0, c.room_size[1] / (ny + 1)) + 0.3 * oy
            b.box((x, y, c.ceiling_z - 0.015), (0.3, 0.15, 0.015), material=panel.name)
            strength = 0.55 / math.sqrt(nx * ny)
            b.body.add_light(name=b.name("panel_light"), pos=[x, y, c.ceiling_z - 0.05],
                             dir=[0, 0, -1], castshadow=True, cutoff=70.0, exponent=2.0,
                             diffuse=[strength * v for v in c.light_colour],
                             specular=[0.05, 0.05, 0.05], attenuation=[1.0, 0.0, 0.0])
    if c.window:
        wall = int(b.rng.integers(0, 4))
        origin, axis, half = _wall_frame(c, wall)
        along = b.rng.uniform(-0.5, 0.5) * (half - 0.8)
        inward = np.asarray(c.room_offset) - origin[:2]
        normal = np.array([*(inward / np.linalg.norm(inward)), 0.0])
        normal = np.round(normal) if abs(normal[0]) != abs(normal[1]) else normal
        centre = origin + axis * along + [0, 0, 1.0 + 0.4 * (c.ceiling_z - c.floor_z) / 2]
        glass = b.spec.add_material(name=b.name("mat"), emission=1.0,
                                    rgba=[0.85, 0.92, 1.0, 1.0])
        size = np.abs(axis) * 0.6 + [0, 0, 0.5] + np.abs(normal) * 0.005
        b.box(centre + normal * 0.005, size, material=glass.name)
        frame = [0.9, 0.9, 0.88, 1.0]
        b.box(centre + normal * 0.012, np.abs(axis) * 0.62 + [0, 0, 0.02] + np.abs(normal) * 0.01,
              rgba=frame)
        b.box(centre + normal * 0.012, np.abs(axis) * 0.02 + [0, 0, 0.52] + np.abs(normal) * 0.01,
              rgba=frame)
        direction = normal * 0.8 + [0, 0, -0.6]
        b.body.add_light(name=b.name("window_light"),
                         pos=list(map(float, centre + normal * 0.1)),
                         dir=list(map(float, direction)),
                         type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=True,
                         diffuse=[0.35, 0.37, 0.4], specular=[0.05, 0.05, 0.05])
    if c.lamp:
        taken: list[np.ndarray] = []
        xy = _free_floor_spot(b, taken)
        top = c.floor_z + 1.6
        b.geom(mujoco.mjtGeom.mjGEOM_CYLINDER, (0.015, 0.8), (*xy, c.floor_z + 0.8),
               rgba=[0.1, 0.1, 0.1, 1])
        b.geom(mujoco.mjtGeom.mjGEOM_CYLINDER, (0.15, 0.01), (*xy, c.floor_z + 0.01),
               rgba=[0.1, 0.1, 0.1, 1])
        shade = b.spec.add_material(name=b.name("mat"), emission=0.9, rgba=[1.0, 0.85, 0.6, 1])
        b.geom(mujoco.mjtGeom.mjGEOM_CYLINDER, (0.18, 0.12), (*xy, top), material=shade.name)
        b.body.add_light(name=b.name("lamp_light"), pos=[*xy, top - 0.15],
                         dir=list(map(float, -np.append(xy, 0.6))), castshadow=True, cutoff=80.0,
                         exponent=1.0, diffuse=[0.45, 0.38, 0.28],
                         specular=[0.05, 0.05, 0.05])


def _decor(b: _Builder) -> None:
    c = b.config
    # a rug under the table (thin textured box just above the floor)
    rug = b.material("carpet", tuple(b.rng.uniform(0.2, 0.8, 3)), repeat=2.0)
    half = np.asarray(c.table_size) / 2 + b.rng.uniform(0.3, 0.6)
    b.box((0.0, 0.0, c.floor_z + 0.004), (*half, 0.004), material=rug)
    # a picture on a random wall
    wall = int(b.rng.integers(0, 4))
    origin, axis, half_len = _wall_frame(c, wall)
    inward = np.asarray(c.room_offset) - origin[:2]
    normal = np.zeros(3)
    normal[0 if wall >= 2 else 1] = np.sign(inward[0 if wall >= 2 else 1])
    pos = origin + axis * b.rng.uniform(-0.5, 0.5) * half_len + [0, 0, 1.5] + normal * 0.01
    art = b.material(("tiles", "concrete", "carpet")[int(b.rng.integers(0, 3))],
                     tuple(b.rng.uniform(0.1, 0.9, 3)), repeat=3.0)
    b.box(pos, np.abs(axis) * b.rng.uniform(0.25, 0.5) + [0, 0, 0.3] + np.abs(normal) * 0.01,
          material=art)


def add_room(spec: mujoco.MjSpec, config: WorldConfig | str, *, table: bool = True,
             prefix: str = "gt_") -> None:
    """Add a ground-truth room (visual geoms, textures, lights) to ``spec``.

    Args:
        spec: The model being built.
        config: A :class:`WorldConfig` or a registered id.
        table: Also add the (visual) table; the task world's collision table is hidden in
            wrist views (geom group 3), this one is what the cameras see.
        prefix: Name prefix of every added element.
    """
    config = get_world(config)
    b = _Builder(spec, config, prefix)
    spec.visual.headlight.ambient = [config.ambient] * 3
    spec.visual.headlight.diffuse = [0.15, 0.15, 0.15]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]
    spec.visual.quality.shadowsize = 1024
    _room_shell(b)
    if table:
        _table(b)
    walls = b.rng.permutation(4)
    for k in range(config.shelves):
        wall = int(walls[k % 4])
        _, _, half = _wall_frame(config, wall)
        _shelf(b, wall, b.rng.uniform(-0.6, 0.6) * (half - 0.6))
    taken: list[np.ndarray] = []
    for _ in range(config.floor_props):
        _floor_prop(b, _free_floor_spot(b, taken))
    _decor(b)
    _lights(b)


def room_decorator(config: WorldConfig | str):
    """A ``World(decorate=...)`` hook that adds the room (used by ``make_real_env``)."""
    config = get_world(config)

    def decorate(spec: mujoco.MjSpec) -> None:
        add_room(spec, config)
        table = spec.geom("table")  # the task's collision table: the room's table is drawn
        if table is not None:
            table.group = 4  # hidden in every MuJoCo pass (bench.sim draws groups 0-3)

    return decorate


def build_room_model(config: WorldConfig | str, *, robot_lights: bool = False) -> mujoco.MjModel:
    """The room alone (with its table and a free ``render_cam`` camera), compiled.

    Args:
        config: A :class:`WorldConfig` or a registered id.
        robot_lights: Also the light a task world adds (:func:`bench.sim.world.add_scene_lights`,
            first, as in the robot's world), so the room is lit as the robot's "real" trials
            see it (the room decorates the task world, whose light stays on).
    """
    config = get_world(config)
    spec = mujoco.MjSpec()
    spec.modelname = config.name.replace("-", "_")
    spec.visual.global_.offwidth = 1024
    spec.visual.global_.offheight = 1024
    spec.visual.map.znear = 0.002
    if robot_lights:
        from bench.sim.world import add_scene_lights

        add_scene_lights(spec, config.table_spec())
    add_room(spec, config)
    spec.worldbody.add_camera(name="render_cam", fovy=90.0)
    return spec.compile()


# -- rendering ----------------------------------------------------------------------------
class GroundTruthRenderer:
    """MuJoCo renders of a ground-truth room through the sensor model.

    Args:
        config: A :class:`WorldConfig` or a registered id.
        max_size: Largest (height, width) of a pinhole view or cube face.
        model: Optional compiled model to draw instead of the bare room (e.g. a task world
            decorated with the room, or ``build_room_model(config, robot_lights=True)``);
            ``data`` must then be passed to :meth:`render` if it moves.
        shadows: MuJoCo shadow maps (the robot's "real" trials render without them,
            :data:`bench.worlds.real.REAL_DOMAIN`; MuJoCo lights a scene differently with
            and without them, so a capture of the robot's world turns them off too).
    """

    def __init__(self, config: WorldConfig | str, *, max_size: tuple[int, int] = (256, 256),
                 model: mujoco.MjModel | None = None, shadows: bool = True) -> None:
        from bench.sim.observation import MujocoPinhole

        self.config = get_world(config)
        self.model = model if model is not None else build_room_model(self.config)
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)
        self.pinhole = MujocoPinhole(self.model, max_size)
        self.pinhole.options.geomgroup[3] = 0  # a task world's collision table stays hidden
        self.pinhole._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(shadows)

    def render_clean(self, camera: Camera, *, data: mujoco.MjData | None = None,
                     face_px: int | None = None) -> np.ndarray:  # -> [H, W, 3] float32 in [0, 1]
        """The noiseless MuJoCo image of ``camera`` (pinhole or fisheye via the cube map)."""
        from bench.render.fisheye import render_cubemap

        data = data if data is not None else self.data
        if camera.model == "fisheye":
            out = render_cubemap(self.pinhole.render_backend(data), None, camera, face_px=face_px)
        else:
            out = self.pinhole.render_calibrated(data, camera)
        return np.clip(out.rgb, 0.0, 1.0).astype(np.float32)

    def render(self, camera: Camera, *, frame: int = 0, stream: int = 0,
               data: mujoco.MjData | None = None,
               face_px: int | None = None) -> np.ndarray:  # -> [H, W, 3] uint8
        """A sensor image: the clean render through the sensor model.

        The noise is seeded by ``(sensor.seed, stream, frame)``.
        """
        clean = self.render_clean(camera, data=data, face_px=face_px)
        valid = camera.pixel_rays()[1] if camera.model == "fisheye" else None
        return apply_sensor(clean, self.config.sensor, frame=frame, stream=stream, valid=valid)

    def close(self) -> None:
        """Release the MuJoCo pinhole renderer."""
        self.pinhole.close()


def table_views(size: tuple[int, int] = (64, 64), *, count: int = 4) -> list[Camera]:
    """Held-out style pinhole views of the table (same world poses in every room).

    Eyes on a 1.3 m circle at 0.7 m above the table top, looking at the table centre.
    """
    h, w = size
    cams = []
    for k in range(count):
        angle = 2 * math.pi * (k + 0.125) / count
        eye = (1.3 * math.cos(angle), 1.3 * math.sin(angle), 0.7)
        cams.append(Camera.pinhole_from_fov(w, h, fov_x_deg=70.0,
                                            world_from_camera=look_at(eye, (0, 0, 0.05)),
                                            name=f"test{k}"))
    return cams
