"""Deterministic success predicates: pure functions of a :class:`TaskState`.

Each predicate answers "is the task solved in this frame" from object poses,
velocities, contacts and the grasp flag only (no images, no randomness). The
environment ends an episode as a success once the predicate holds for
``success_hold_frames`` consecutive control frames.

Shared conditions, as in RobotArena-inf's strict success channel: the actor is
released (not welded, not pinched by both pads) and at rest (linear speed below
``max_speed``), so a cup held above the plate is not a success; and the receptacle
rests on the table (a box lifted by the fingers with the pen inside is not a success).
"""

from __future__ import annotations

import numpy as np

from bench.sim.objects import Cylinder, OpenBox, Pen
from bench.sim.state import ObjectState, TaskState

MAX_SPEED = 0.05  # m/s: "at rest" (a dropped object settles well below this within 0.3 s)
MAX_TILT_DEG = 20.0  # an upright cup may lean this much on the plate


def _released_and_still(state: TaskState, name: str, max_speed: float) -> bool:
    obj = state.objects[name]
    return not state.held(name) and float(np.linalg.norm(obj.linvel)) <= max_speed


def cylinder_top_z(obj: ObjectState, shape: Cylinder) -> float:
    """World z of the highest point of a (possibly tilted) cylinder."""
    cos_tilt = abs(float(obj.rotation[2, 2]))
    sin_tilt = float(np.sqrt(max(0.0, 1.0 - cos_tilt**2)))
    return float(obj.pos[2] + shape.height / 2 * cos_tilt + shape.radius * sin_tilt)


def inside_box_footprint(box: ObjectState, shape: OpenBox, points: np.ndarray) -> bool:
    """Whether every point [M, 3] lies within the box's inner floor area (box frame x, y)."""
    local = box.to_local(points)
    half = np.asarray(shape.inner) / 2
    return bool(np.all(np.abs(local[:, :2]) <= half))


def placed_on(
    state: TaskState,
    *,
    actor: str,
    receptacle: str,
    support_radius: float,
    actor_radius: float,
    max_speed: float = MAX_SPEED,
    max_tilt_deg: float = MAX_TILT_DEG,
) -> bool:
    """Actor upright, released, at rest, on a flat receptacle (not the table), centred on it.

    Centred: the actor centre within ``support_radius - actor_radius / 2`` of the receptacle
    axis. The receptacle must rest on the table.
    """
    actor_state, support = state.objects[actor], state.objects[receptacle]
    if not _released_and_still(state, actor, max_speed):
        return False
    upright = float(actor_state.rotation[2, 2]) >= np.cos(np.deg2rad(max_tilt_deg))
    local = support.to_local(actor_state.pos)[0]
    centred = float(np.hypot(local[0], local[1])) <= support_radius - 0.5 * actor_radius
    return bool(
        upright
        and centred
        and state.touching(actor, receptacle)
        and not state.touching(actor, "table")
        and state.touching(receptacle, "table")
    )


def cup_on_plate(
    state: TaskState,
    *,
    cup: Cylinder,
    plate: Cylinder,
    actor: str = "cup",
    receptacle: str = "plate",
    max_speed: float = MAX_SPEED,
    max_tilt_deg: float = MAX_TILT_DEG,
) -> bool:
    """Cup upright, released, at rest, on the plate (not the table), centre over the plate."""
    return placed_on(state, actor=actor, receptacle=receptacle, support_radius=plate.radius,
                     actor_radius=cup.radius, max_speed=max_speed, max_tilt_deg=max_tilt_deg)


def _rim_z(box_state: ObjectState, box: OpenBox) -> float:
    return float(box_state.to_world(np.array([0.0, 0.0, box.rim_height]))[0, 2])


def _below_rim_in_box(state: TaskState, box_state: ObjectState, box: OpenBox, receptacle: str,
                      footprint: np.ndarray, top_z: float) -> bool:
    """The open-box rule: inside the inner floor area, below the rim, box on the table.

    ``footprint`` [M, 3] or [3] world points must lie in the inner floor area and ``top_z``
    (world) at most at the rim. Shared by :func:`points_in_box` (and so :func:`pen_in_box`)
    and :func:`tape_in_box`.
    """
    return bool(
        inside_box_footprint(box_state, box, footprint)
        and top_z <= _rim_z(box_state, box)
        and state.touching(receptacle, "table")
    )


def tape_in_box(
    state: TaskState,
    *,
    tape: Cylinder,
    box: OpenBox,
    actor: str = "tape",
    receptacle: str = "box",
    max_speed: float = MAX_SPEED,
) -> bool:
    """Tape centre inside the box's inner footprint, its top below the rim, released, at rest."""
    tape_state, box_state = state.objects[actor], state.objects[receptacle]
    if not _released_and_still(state, actor, max_speed):
        return False
    return _below_rim_in_box(state, box_state, box, receptacle, tape_state.pos,
                             cylinder_top_z(tape_state, tape))


def _pen_tips(pen: Pen) -> np.ndarray:  # -> [2, 3] object frame
    half = pen.length / 2
    return np.array([[-half, 0.0, 0.0], [half, 0.0, 0.0]])


def pen_endpoints(obj: ObjectState, pen: Pen) -> np.ndarray:  # -> [2, 3]
    """World positions of the two pen tips (capsule ends along local x)."""
    return obj.to_world(_pen_tips(pen))


def points_in_box(
    state: TaskState,
    *,
    points: np.ndarray,  # [P, 3] actor frame
    box: OpenBox,
    actor: str,
    receptacle: str,
    max_speed: float = MAX_SPEED,
) -> bool:
    """Every actor key point inside the box's inner footprint and below its rim; released, still.

    Key points: pen tips; box corners; a mesh's collision vertices.
    """
    actor_state, box_state = state.objects[actor], state.objects[receptacle]
    if not _released_and_still(state, actor, max_speed):
        return False
    world = actor_state.to_world(points)
    return _below_rim_in_box(state, box_state, box, receptacle, world, float(world[:, 2].max()))


def pen_in_box(
    state: TaskState,
    *,
    pen: Pen,
    box: OpenBox,
    actor: str = "pen",
    receptacle: str = "pen_box",
    max_speed: float = MAX_SPEED,
) -> bool:
    """Both pen tips inside the box's inner footprint and below the rim, released, at rest."""
    return points_in_box(state, points=_pen_tips(pen), box=box, actor=actor,
                         receptacle=receptacle, max_speed=max_speed)


def in_receptacle(
    state: TaskState,
    *,
    actor: str,
    receptacle: str,
    mouth_radius: float,
    rim_height: float,
    actor_bottom: float,
    below_rim: float = 0.005,
    max_speed: float = MAX_SPEED,
) -> bool:
    """Actor inside a receptacle of any shape (a mesh bowl).

    Centre within ``mouth_radius`` of its axis, underside at least ``below_rim`` below
    the rim, released, at rest, and the receptacle on the table.
    """
    actor_state, rec = state.objects[actor], state.objects[receptacle]
    if not _released_and_still(state, actor, max_speed):
        return False
    local = rec.to_local(actor_state.pos)[0]
    underside = float(actor_state.pos[2]) - actor_bottom
    rim_z = float(rec.to_world(np.array([0.0, 0.0, rim_height]))[0, 2])
    return bool(
        float(np.hypot(local[0], local[1])) <= mouth_radius
        and underside <= rim_z - below_rim
        and state.touching(receptacle, "table")
    )


def lifted(
    state: TaskState, *, actor: str, rest_z: float, lift_dz: float
) -> bool:
    """Actor held (welded or pinched) with its origin ``lift_dz`` above its resting height.

    ``rest_z`` is the origin's height above the table when it rests (``resting_height``).
    """
    z = float(state.objects[actor].pos[2]) - state.table_height
    return bool(state.held(actor) and z >= rest_z + lift_dz)


def pushed_to(
    state: TaskState,
    *,
    actor: str,
    target_xy: np.ndarray,  # [2] world frame
    tolerance: float,
    max_speed: float = MAX_SPEED,
) -> bool:
    """Actor centre within ``tolerance`` of a world (x, y) target, released, at rest."""
    if not _released_and_still(state, actor, max_speed):
        return False
    offset = state.objects[actor].pos[:2] - np.asarray(target_xy, np.float64)
    return bool(float(np.hypot(offset[0], offset[1])) <= tolerance)
