"""Task objects: geometry dataclasses and the code that adds them to a ``mujoco.MjSpec``.

Every object is a free body whose collision geoms carry its mass and friction;
purely visual details (a cup handle, the dark core of a tape roll) are geoms
with ``contype = conaffinity = 0`` and zero density. All task geoms live in
:data:`OBJECT_GROUP` so the observation pass can show them while the table
(:data:`TABLE_GROUP`, present in the Gaussian background) stays hidden.

Shapes: the primitives :class:`Cylinder`, :class:`OpenBox`, :class:`Pen`,
:class:`Box`, and :class:`Mesh` (a triangle mesh read by :mod:`bench.sim.meshes`
from OBJ / STL / GLB / PLY): its visual mesh is drawn, its convex parts (the
hull, or a convex decomposition the user supplies) collide, in
:data:`COLLISION_GROUP`, which no camera draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from bench.geometry import yaw_quat

OBJECT_GROUP = 0  # rendered in the wrist observation
ROBOT_GROUP = 2  # rendered in the wrist observation
TABLE_GROUP = 3  # collision only in the observation pass; the splat background shows the table
COLLISION_GROUP = 4  # convex collision parts of mesh objects: never rendered


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
        """Outer (width, depth) of the receptacle, metres: inner size plus two walls."""
        return (self.inner[0] + 2 * self.wall, self.inner[1] + 2 * self.wall)


@dataclass(frozen=True)
class Pen:
    """A capsule along the object's local x axis; ``length`` is tip to tip."""

    radius: float
    length: float

    @property
    def half_segment(self) -> float:
        """Half-length of the capsule's straight segment (without the end caps), metres."""
        return self.length / 2 - self.radius


@dataclass(frozen=True)
class Box:
    """A solid box; ``size`` is the full (x, y, z) side lengths in metres, origin at its centre."""

    size: tuple[float, float, float]

    def corners(self) -> np.ndarray:  # [8, 3] object frame
        """The eight box corners in the object frame, metres."""
        half = np.asarray(self.size, np.float64) / 2
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        return signs * half


@dataclass(frozen=True, eq=False)
class Mesh:
    """A triangle mesh object (scanned or generated), origin at the centre of its bounding box.

    Attributes:
        source: Where the visual mesh came from (relative path, for manifests and errors).
        vertices: Visual mesh vertices [V, 3], metres, object frame.
        faces: Visual mesh triangles [F, 3] (vertex indices).
        parts: Convex collision parts, each a vertex array [Vk, 3] (object frame).
        texcoords: Per-vertex texture coordinates [V, 2] or None.
        texture: Texture image uint8 [H, W, 3] (with ``texcoords``), or None.
        sha256: Digest of the visual mesh file (provenance).
    """

    source: str
    vertices: np.ndarray
    faces: np.ndarray
    parts: tuple[np.ndarray, ...]
    texcoords: np.ndarray | None = None
    texture: np.ndarray | None = None
    sha256: str = ""

    @property
    def points(self) -> np.ndarray:  # [P, 3]: every collision vertex (success predicates)
        """Every collision vertex [P, 3] in the object frame (what success predicates test)."""
        return np.concatenate(self.parts, axis=0)

    @property
    def extent(self) -> np.ndarray:  # [3] full bounding-box size of the collision parts
        """Full bounding-box size [3] of the collision parts, metres."""
        pts = self.points
        return pts.max(axis=0) - pts.min(axis=0)


Shape = Cylinder | OpenBox | Pen | Box | Mesh


@dataclass(frozen=True)
class ObjectSpec:
    """One task object: its name, shape, mass (kg), sliding friction and colour.

    Attributes:
        name: Body name (matches ``[A-Za-z0-9][A-Za-z0-9._-]*``).
        shape: Geometry.
        mass: Kilograms.
        friction: Sliding friction coefficient.
        rgba: Colour (ignored where a texture is given).
        rolling_friction: Rolling friction; None = by shape (pens 0.002, others 1e-4).
        decor: Visual-only details: "cup" (handle + dark opening), "tape" (cardboard core) or
            "" (none); None = by name (objects named cup / tape get theirs).
    """

    name: str
    shape: Shape
    mass: float
    friction: float = 1.0
    rgba: tuple[float, float, float, float] = (0.8, 0.8, 0.8, 1.0)
    rolling_friction: float | None = None
    decor: str | None = None

    def resting_height(self) -> float:
        """Height of the body origin above the table when it rests upright."""
        if isinstance(self.shape, Cylinder):
            return self.shape.height / 2
        if isinstance(self.shape, OpenBox):
            return self.shape.floor / 2
        if isinstance(self.shape, Box):
            return self.shape.size[2] / 2
        if isinstance(self.shape, Mesh):
            return float(-self.shape.points[:, 2].min())
        return self.shape.radius

    def top_height(self) -> float:
        """Height of the object's top above its origin (upright)."""
        if isinstance(self.shape, Cylinder):
            return self.shape.height / 2
        if isinstance(self.shape, OpenBox):
            return self.shape.rim_height
        if isinstance(self.shape, Box):
            return self.shape.size[2] / 2
        if isinstance(self.shape, Mesh):
            return float(self.shape.points[:, 2].max())
        return self.shape.radius

    def footprint_radius(self) -> float:
        """Radius of a disc that covers the object's footprint at any yaw (layout checks)."""
        if isinstance(self.shape, Cylinder):
            return self.shape.radius
        if isinstance(self.shape, OpenBox):
            return float(np.hypot(*self.shape.outer) / 2)
        if isinstance(self.shape, Box):
            return float(np.hypot(*self.shape.size[:2]) / 2)
        if isinstance(self.shape, Mesh):
            return float(np.hypot(*self.shape.points[:, :2].T).max())
        return self.shape.length / 2

    def grasp_width(self) -> float:
        """Width across the jaw for a top-down grasp, metres (the expert's release width)."""
        if isinstance(self.shape, Box):
            return float(min(self.shape.size[:2]))
        if isinstance(self.shape, Mesh):
            return float(min(self.shape.extent[:2]))
        if isinstance(self.shape, OpenBox):
            return float(min(self.shape.outer))
        return 2 * self.shape.radius


def _friction(obj: ObjectSpec) -> list[float]:
    rolling = obj.rolling_friction
    if rolling is None:
        rolling = 0.002 if isinstance(obj.shape, Pen) else 0.0001
    return [obj.friction, 0.005, rolling]


def _collision_geom(body: mujoco.MjsBody, obj: ObjectSpec, **kwargs) -> mujoco.MjsGeom:
    geom = body.add_geom(group=OBJECT_GROUP, friction=_friction(obj), rgba=list(obj.rgba), **kwargs)
    # torsional friction keeps a pinched object from spinning; round things also get rolling
    # friction, otherwise a nudged pen rolls across the table forever
    geom.condim = 6 if isinstance(obj.shape, Pen) or obj.rolling_friction is not None else 4
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
    decor = obj.decor if obj.decor is not None else obj.name
    if decor == "cup":  # handle and dark opening: visual cues, no physics
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
    elif decor == "tape":  # cardboard core visible on both faces
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


def _add_box(body: mujoco.MjsBody, obj: ObjectSpec) -> None:
    _collision_geom(
        body,
        obj,
        name=f"{obj.name}_geom",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[float(v) / 2 for v in obj.shape.size],
        mass=obj.mass,
    )


def _hull_volume(points: np.ndarray) -> float:
    from scipy.spatial import ConvexHull

    return float(ConvexHull(points).volume)


def _add_mesh(spec: mujoco.MjSpec, body: mujoco.MjsBody, obj: ObjectSpec) -> None:
    mesh: Mesh = obj.shape
    volumes = [_hull_volume(part) for part in mesh.parts]
    total = sum(volumes)
    for index, (part, volume) in enumerate(zip(mesh.parts, volumes, strict=True)):
        name = f"{obj.name}_part{index}"
        spec.add_mesh(name=name, uservert=np.asarray(part, np.float64).ravel().tolist())
        geom = _collision_geom(
            body, obj, name=name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=name,
            mass=obj.mass * volume / total,
        )
        geom.group = COLLISION_GROUP
    visual = f"{obj.name}_visual"
    kwargs = {}
    if mesh.texcoords is not None:
        kwargs["usertexcoord"] = np.asarray(mesh.texcoords, np.float64).ravel().tolist()
    spec.add_mesh(
        name=visual,
        uservert=np.asarray(mesh.vertices, np.float64).ravel().tolist(),
        userface=np.asarray(mesh.faces, np.int64).ravel().tolist(),
        inertia=mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL,
        **kwargs,
    )
    geom_kwargs = {"rgba": list(obj.rgba)}
    if mesh.texture is not None and mesh.texcoords is not None:
        image = np.ascontiguousarray(mesh.texture, dtype=np.uint8)
        texture = spec.add_texture(
            name=f"{obj.name}_texture", type=mujoco.mjtTexture.mjTEXTURE_2D,
            width=int(image.shape[1]), height=int(image.shape[0]), nchannel=3,
        )
        texture.data = image[::-1].tobytes()  # OpenGL rows start at the bottom (v up)
        material = spec.add_material(name=f"{obj.name}_material")
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture.name
        geom_kwargs = {"material": material.name, "rgba": [1, 1, 1, 1]}
    _visual_geom(body, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=visual, **geom_kwargs)


def add_object(parent: mujoco.MjsBody, obj: ObjectSpec, *, pos: np.ndarray, yaw: float,
               spec: mujoco.MjSpec | None = None) -> None:
    """Add ``obj`` as a free body named ``obj.name`` at ``pos`` [3] with ``yaw`` radians.

    ``spec`` (the model being built) is needed for mesh objects, which add mesh assets.
    """
    body = parent.add_body(
        name=obj.name, pos=list(map(float, pos)), quat=yaw_quat(yaw)
    )
    body.add_freejoint(name=f"{obj.name}_free")
    if isinstance(obj.shape, Cylinder):
        _add_cylinder(body, obj)
    elif isinstance(obj.shape, OpenBox):
        _add_open_box(body, obj)
    elif isinstance(obj.shape, Pen):
        _add_pen(body, obj)
    elif isinstance(obj.shape, Box):
        _add_box(body, obj)
    elif isinstance(obj.shape, Mesh):
        if spec is None:
            raise ValueError("add_object needs spec= (the MjSpec) for a mesh object")
        _add_mesh(spec, body, obj)
    else:  # pragma: no cover - guarded by the Shape union
        raise TypeError(f"unknown object shape {type(obj.shape).__name__}")
