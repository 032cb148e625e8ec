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


def cup_on_plate(
    state: TaskState,
    *,
    cup: Cylinder,
    plate: Cylinder,
    max_speed: float = MAX_SPEED,
    max_tilt_deg: float = MAX_TILT_DEG,
) -> bool:
    """Cup upright, released, at rest, on the plate (not the table), centre over the plate."""
    cup_state, plate_state = state.objects["cup"], state.objects["plate"]
    if not _released_and_still(state, "cup", max_speed):
        return False
    upright = float(cup_state.rotation[2, 2]) >= np.cos(np.deg2rad(max_tilt_deg))
    local = plate_state.to_local(cup_state.pos)[0]
    centred = float(np.hypot(local[0], local[1])) <= plate.radius - 0.5 * cup.radius
    return bool(
        upright
        and centred
        and state.touching("cup", "plate")
        and not state.touching("cup", "table")
        and state.touching("plate", "table")
    )


def tape_in_box(
    state: TaskState, *, tape: Cylinder, box: OpenBox, max_speed: float = MAX_SPEED
) -> bool:
    """Tape centre inside the box's inner footprint, its top below the rim, released, at rest."""
    tape_state, box_state = state.objects["tape"], state.objects["box"]
    if not _released_and_still(state, "tape", max_speed):
        return False
    rim_z = float(box_state.to_world(np.array([0.0, 0.0, box.rim_height]))[0, 2])
    return bool(
        inside_box_footprint(box_state, box, tape_state.pos)
        and cylinder_top_z(tape_state, tape) <= rim_z
        and state.touching("box", "table")
    )


def pen_endpoints(obj: ObjectState, pen: Pen) -> np.ndarray:  # -> [2, 3]
    """World positions of the two pen tips (capsule ends along local x)."""
    half = pen.length / 2
    return obj.to_world(np.array([[-half, 0.0, 0.0], [half, 0.0, 0.0]]))


def pen_in_box(state: TaskState, *, pen: Pen, box: OpenBox, max_speed: float = MAX_SPEED) -> bool:
    """Both pen tips inside the box's inner footprint and below the rim, released, at rest."""
    pen_state, box_state = state.objects["pen"], state.objects["pen_box"]
    if not _released_and_still(state, "pen", max_speed):
        return False
    tips = pen_endpoints(pen_state, pen)
    rim_z = float(box_state.to_world(np.array([0.0, 0.0, box.rim_height]))[0, 2])
    return bool(
        inside_box_footprint(box_state, box, tips)
        and float(tips[:, 2].max()) <= rim_z
        and state.touching("pen_box", "table")
    )
