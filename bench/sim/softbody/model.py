"""Spring-mass model data: nodes, springs, colliders (plain numpy; no Warp import).

A deformable (or rigid-limit) object is a set of mass nodes joined by springs
between neighbours within ``radius`` (at most ``max_neighbors`` per node, as
PhysTwin's topology: the paper's rigid T-block uses radius 0.5 m, <= 50
neighbours and a large uniform stiffness). Forces per spring ``(i, j)`` with
rest length ``L0``, stiffness ``k`` (N/m) and dashpot ``c`` (N s/m)::

    d = x_j - x_i,  n = d / |d|
    f_i = (k (|d| - L0) + c (v_j - v_i) . n) n,   f_j = -f_i

plus gravity ``m g``, linear drag ``-drag m v`` and self-collision penalty
``k_self (2 r - |x_j - x_i|)`` between nodes closer than ``2 r`` that were
farther than ``self_exclude`` apart at rest. Semi-implicit Euler per substep:
``v += dt f / m``, then velocity-level collisions (ground, kinematic colliders),
then ``x += dt v``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

COLLIDER_SPHERE, COLLIDER_CAPSULE, COLLIDER_BOX = 0, 1, 2
COLLIDER_TYPES = {"sphere": COLLIDER_SPHERE, "capsule": COLLIDER_CAPSULE, "box": COLLIDER_BOX}


@dataclass(frozen=True)
class SpringMassConfig:
    """Integration and contact settings of one spring-mass simulation.

    Attributes:
        dt: Substep length, seconds.
        substeps: Substeps per frame (frame = ``dt * substeps`` seconds).
        gravity: Gravity vector, m/s^2.
        drag: Linear drag per unit mass, 1/s (force ``-drag m v``).
        ground_height: z of the ground/table plane, metres (None: no ground).
        ground_friction: Coulomb friction coefficient against the ground.
        collider_friction: Coulomb friction coefficient against kinematic colliders.
        particle_radius: Collision radius of every node, metres.
        self_collision: Penalty collisions between non-neighbouring nodes.
        self_stiffness: Self-collision penalty stiffness, N/m.
        self_exclude: Pairs closer than this at rest never self-collide, metres
            (0: ``4 * particle_radius``).
    """

    dt: float = 1e-4
    substeps: int = 1000
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    drag: float = 0.0
    ground_height: float | None = None
    ground_friction: float = 0.5
    collider_friction: float = 1.0
    particle_radius: float = 0.005
    self_collision: bool = False
    self_stiffness: float = 200.0
    self_exclude: float = 0.0

    def __post_init__(self) -> None:
        if self.dt <= 0 or self.substeps < 1:
            raise ValueError(f"dt must be > 0 and substeps >= 1, got {self.dt}, {self.substeps}")
        if self.particle_radius <= 0 or self.drag < 0:
            raise ValueError("particle_radius must be > 0 m and drag >= 0 1/s")

    @property
    def frame_dt(self) -> float:
        """Simulated time per rendered frame (dt x substeps), seconds."""
        return self.dt * self.substeps

    @property
    def exclude_distance(self) -> float:
        """Rest distance below which nodes ignore each other in self-collision, metres."""
        return self.self_exclude or 4.0 * self.particle_radius


@dataclass(eq=False)
class SpringMassModel:
    """Topology and parameters of one object (float64 numpy; the Warp state is float32).

    Attributes:
        positions: [N, 3] rest (initial) node positions, metres.
        masses: [N] node masses, kg (0 = fixed node: never moves).
        springs: [S, 2] node index pairs (i < j).
        rest_lengths: [S] metres.
        stiffness: [S] N/m.
        damping: [S] dashpot coefficients, N s/m.
    """

    positions: np.ndarray
    masses: np.ndarray
    springs: np.ndarray
    rest_lengths: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    velocities: np.ndarray = field(default=None)  # [N, 3] m/s

    def __post_init__(self) -> None:
        n = len(self.positions)
        self.positions = np.asarray(self.positions, np.float64).reshape(n, 3)
        self.masses = np.broadcast_to(np.asarray(self.masses, np.float64), (n,)).copy()
        self.springs = np.asarray(self.springs, np.int64).reshape(-1, 2)
        s = len(self.springs)
        for name in ("rest_lengths", "stiffness", "damping"):
            value = np.broadcast_to(np.asarray(getattr(self, name), np.float64), (s,)).copy()
            setattr(self, name, value)
        if self.velocities is None:
            self.velocities = np.zeros((n, 3))
        if s and (self.springs.min() < 0 or self.springs.max() >= n):
            raise ValueError(f"spring indices must lie in [0, {n})")
        if np.any(self.masses < 0) or np.any(self.stiffness < 0) or np.any(self.damping < 0):
            raise ValueError("masses, stiffness and damping must be >= 0")

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return len(self.positions)

    @property
    def num_springs(self) -> int:
        """Number of springs."""
        return len(self.springs)


def neighbour_springs(  # points [N, 3] -> springs [S, 2], rest lengths [S]
    points: np.ndarray, *, radius: float, max_neighbors: int
) -> tuple[np.ndarray, np.ndarray]:
    """Springs from each node to its nearest neighbours within ``radius`` (<= ``max_neighbors``).

    A pair is kept when either node chose the other (union), so the topology does not
    depend on the node order. Uses ``scipy.spatial.cKDTree``.
    """
    from scipy.spatial import cKDTree

    points = np.asarray(points, np.float64)
    if radius <= 0 or max_neighbors < 1:
        raise ValueError("radius must be > 0 m and max_neighbors >= 1")
    k = min(max_neighbors + 1, len(points))
    dist, idx = cKDTree(points).query(points, k=k, distance_upper_bound=radius)
    dist, idx = np.atleast_2d(dist), np.atleast_2d(idx)
    rows = np.repeat(np.arange(len(points)), k).reshape(len(points), k)
    keep = np.isfinite(dist) & (idx != rows)
    a, b = rows[keep], idx[keep]
    pairs = np.unique(np.sort(np.stack([a, b], 1), axis=1), axis=0)
    lengths = np.linalg.norm(points[pairs[:, 1]] - points[pairs[:, 0]], axis=1)
    return pairs.astype(np.int64), lengths


def from_points(  # points [N, 3]
    points: np.ndarray,
    *,
    radius: float,
    max_neighbors: int,
    total_mass: float,
    stiffness: float | np.ndarray,
    damping: float | np.ndarray = 0.0,
) -> SpringMassModel:
    """A spring-mass model from a point cloud: equal node masses, neighbour springs."""
    points = np.asarray(points, np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 2:
        raise ValueError(f"points must be [N >= 2, 3], got {points.shape}")
    springs, lengths = neighbour_springs(points, radius=radius, max_neighbors=max_neighbors)
    return SpringMassModel(
        positions=points,
        masses=np.full(len(points), total_mass / len(points)),
        springs=springs,
        rest_lengths=lengths,
        stiffness=stiffness,
        damping=damping,
    )


def from_mesh(
    mesh,
    *,
    count: int,
    seed: int,
    radius: float,
    max_neighbors: int,
    total_mass: float,
    stiffness: float,
    damping: float = 0.0,
) -> SpringMassModel:
    """Nodes inside a watertight ``trimesh.Trimesh``, or on its surface when it is not.

    Interior: a random point in each of ``count`` random interior voxels (voxels the surface
    does not touch, so the whole cube is inside), from ``trimesh``'s voxelisation.
    """
    import trimesh

    rng = np.random.default_rng(seed)
    if mesh.is_watertight and mesh.volume > 0:
        pitch = (mesh.volume / (2.0 * count)) ** (1.0 / 3.0)  # ~2 voxels per node
        for _ in range(5):
            surface = mesh.voxelized(pitch)
            filled = mesh.voxelized(pitch).fill()
            inner = np.argwhere(filled.matrix & ~surface.matrix)
            if len(inner) >= count:
                break
            pitch /= 1.5
        else:
            raise ValueError(f"mesh too thin for {count} interior nodes; lower count")
        pick = inner[rng.permutation(len(inner))[:count]]
        points = filled.indices_to_points(pick) + rng.uniform(-pitch / 2, pitch / 2, (count, 3))
    else:
        points, _ = trimesh.sample.sample_surface(mesh, count, seed=seed)
    return from_points(
        points,
        radius=radius,
        max_neighbors=max_neighbors,
        total_mass=total_mass,
        stiffness=stiffness,
        damping=damping,
    )


@dataclass(frozen=True)
class Collider:
    """A kinematic collider (a MuJoCo geom or a static shape).

    Attributes:
        kind: "sphere", "capsule" (axis = local z) or "box".
        size: sphere (r, 0, 0); capsule (r, half_length, 0); box half extents, metres.
        body: Index of the rigid body that receives the reaction (-1: none, e.g. static).
        friction: Coulomb coefficient (None: the config's ``collider_friction``).
    """

    kind: str
    size: tuple[float, float, float]
    body: int = -1
    friction: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in COLLIDER_TYPES:
            raise ValueError(f"collider kind {self.kind!r} is not one of {list(COLLIDER_TYPES)}")


def chain(  # -> model of n nodes along -z from `top`
    n: int, *, spacing: float, mass: float, stiffness: float, damping: float = 0.0,
    top: tuple[float, float, float] = (0.0, 0.0, 1.0), fix_top: bool = True,
) -> SpringMassModel:
    """A vertical chain of ``n`` nodes (node masses ``mass``), the top node fixed."""
    positions = np.array(top, np.float64) - np.outer(np.arange(n), [0.0, 0.0, spacing])
    masses = np.full(n, mass)
    if fix_top:
        masses[0] = 0.0
    springs = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    return SpringMassModel(positions, masses, springs, spacing, stiffness, damping)
