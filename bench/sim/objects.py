"""Task objects: geometry dataclasses and the code that adds them to a ``mujoco.MjSpec``.

Every object is a free body whose collision geoms carry its mass and friction;
purely visual details (a cup handle, the dark core of a tape roll) are geoms
with ``contype = conaffinity = 0`` and zero density. All task geoms live in
:data:`OBJECT_GROUP` so the observation pass can show them while the table
(:data:`TABLE_GROUP`, present in the Gaussian background) stays hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

OBJECT_GROUP = 0  # rendered in the wrist observation
ROBOT_GROUP = 2  # rendered in the wrist observation
TABLE_GROUP = 3  # collision only in the observation pass; the splat background shows the table


@dataclass(frozen=True)
class Cylinder:
    """An upright cylinder (cup, plate, tape roll). Metres; origin at its centre."""

    radius: float
    height: float


@dataclass(frozen=True)
class OpenBox:
    """A box open at the top; ``inner`` is the free floor area, origin at the floor-plate centre.

    Attributes:
        inner: Inner floor size (x, y) in metres.
        wall_height: Height of the walls above the floor plate's top, metres.
        wall: Wall thickness, metres.
        floor: Floor plate thickness, metres.
    """

    inner: tuple[float, float]
    wall_height: float
    wall: float = 0.006
    floor: float = 0.008

    @property
    def rim_height(self) -> float:
        """Height of the rim above the box origin (floor-plate centre)."""
        return self.floor / 2 + self.wall_height

    @property
    def floor_top(self) -> float:
        """Height of the inner floor above the box origin."""
        return self.floor / 2

    @property
    def outer(self) -> tuple[float, float]:
        return (self.inner[0] + 2 * self.wall, self.inner[1] + 2 * self.wall)


@dataclass(frozen=True)
class Pen:
    """A capsule along the object's local x axis; ``length`` is tip to tip."""

    radius: float
    length: float

    @property
    def half_segment(self) -> float:
        return self.length / 2 - self.radius


Shape = Cylinder | OpenBox | Pen


@dataclass(frozen=True)
class ObjectSpec:
    """One task object: its name, shape, mass (kg), sliding friction and colour."""

    name: str
    shape: Shape
    mass: float
    friction: float = 1.0
    rgba: tuple[float, float, float, float] = (0.8, 0.8, 0.8, 1.0)

    def resting_height(self) -> float:
        """Height of the body origin above the table when it rests upright."""
        if isinstance(self.shape, Cylinder):
            return self.shape.height / 2
        if isinstance(self.shape, OpenBox):
            return self.shape.floor / 2
        return self.shape.radius

    def footprint_radius(self) -> float:
        """Radius of a disc that covers the object's footprint at any yaw (layout checks)."""
        if isinstance(self.shape, Cylinder):
            return self.shape.radius
        if isinstance(self.shape, OpenBox):
            return float(np.hypot(*self.shape.outer) / 2)
        return self.shape.length / 2


def _friction(obj: ObjectSpec) -> list[float]:
    return [obj.friction, 0.005, 0.002 if isinstance(obj.shape, Pen) else 0.0001]


def _collision_geom(body: mujoco.MjsBody, obj: ObjectSpec, **kwargs) -> mujoco.MjsGeom:
    geom = body.add_geom(group=OBJECT_GROUP, friction=_friction(obj), rgba=list(obj.rgba), **kwargs)
    # torsional friction keeps a pinched object from spinning; round things also get rolling
    # friction, otherwise a nudged pen rolls across the table forever
    geom.condim = 6 if isinstance(obj.shape, Pen) else 4
    return geom


def _visual_geom(body: mujoco.MjsBody, **kwargs) -> mujoco.MjsGeom:
    return body.add_geom(group=OBJECT_GROUP, contype=0, conaffinity=0, density=0, **kwargs)


def _add_cylinder(body: mujoco.MjsBody, obj: ObjectSpec) -> None:
    shape = obj.shape
    _collision_geom(
        body,
        obj,
        name=f"{obj.name}_geom",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=[shape.radius, shape.height / 2, 0],
        mass=obj.mass,
    )
    if obj.name == "cup":  # handle and dark opening: visual cues, no physics
        _visual_geom(
            body,
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.012, 0.004, 0.025],
            pos=[shape.radius + 0.01, 0, 0.005],
            rgba=list(obj.rgba),
        )
        _visual_geom(
            body,
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[shape.radius * 0.85, 0.001, 0],
            pos=[0, 0, shape.height / 2 + 0.0005],
            rgba=[0.15, 0.1, 0.08, 1],
        )
    elif obj.name == "tape":  # cardboard core visible on both faces
        for sign in (-1, 1):
            _visual_geom(
                body,
                type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                size=[shape.radius * 0.55, 0.001, 0],
                pos=[0, 0, sign * (shape.height / 2 + 0.0005)],
                rgba=[0.55, 0.42, 0.28, 1],
            )


def _add_open_box(body: mujoco.MjsBody, obj: ObjectSpec) -> None:
    box: OpenBox = obj.shape
    (ix, iy), (ox, oy) = box.inner, box.outer
    wall_z = box.floor / 2 + box.wall_height / 2
    parts = [  # (half sizes, centre)
        ((ox / 2, oy / 2, box.floor / 2), (0, 0, 0)),
        ((box.wall / 2, oy / 2, box.wall_height / 2), (+(ix + box.wall) / 2, 0, wall_z)),
        ((box.wall / 2, oy / 2, box.wall_height / 2), (-(ix + box.wall) / 2, 0, wall_z)),
        ((ix / 2, box.wall / 2, box.wall_height / 2), (0, +(iy + box.wall) / 2, wall_z)),
        ((ix / 2, box.wall / 2, box.wall_height / 2), (0, -(iy + box.wall) / 2, wall_z)),
    ]
    volume = sum(8 * np.prod(half) for half, _ in parts)
    for index, (half, centre) in enumerate(parts):
        _collision_geom(
            body,
            obj,
            name=f"{obj.name}_part{index}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(half),
            pos=list(centre),
            density=obj.mass / volume,
        )


def _add_pen(body: mujoco.MjsBody, obj: ObjectSpec) -> None:
    pen: Pen = obj.shape
    _collision_geom(
        body,
        obj,
        name=f"{obj.name}_geom",
        type=mujoco.mjtGeom.mjGEOM_CAPSULE,
        size=[pen.radius, pen.half_segment, 0],
        quat=[np.sqrt(0.5), 0, np.sqrt(0.5), 0],
        mass=obj.mass,
    )
    _visual_geom(
        body,
        type=mujoco.mjtGeom.mjGEOM_CAPSULE,
        size=[pen.radius * 1.05, pen.length * 0.12, 0],
        pos=[pen.half_segment * 0.75, 0, 0],
        quat=[np.sqrt(0.5), 0, np.sqrt(0.5), 0],
        rgba=[0.1, 0.1, 0.12, 1],
    )


def add_object(parent: mujoco.MjsBody, obj: ObjectSpec, *, pos: np.ndarray, yaw: float) -> None:
    """Add ``obj`` as a free body named ``obj.name`` at ``pos`` [3] with ``yaw`` radians."""
    body = parent.add_body(
        name=obj.name, pos=list(map(float, pos)), quat=[np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    )
    body.add_freejoint(name=f"{obj.name}_free")
    if isinstance(obj.shape, Cylinder):
        _add_cylinder(body, obj)
    elif isinstance(obj.shape, OpenBox):
        _add_open_box(body, obj)
    elif isinstance(obj.shape, Pen):
        _add_pen(body, obj)
    else:  # pragma: no cover - guarded by the Shape union
        raise TypeError(f"unknown object shape {type(obj.shape).__name__}")
