"""A task's strict success predicate, chosen by its rule and its objects' shapes.

One job: turn a success rule (``place_in`` / ``pick_up`` / ``push_to``) and the actor and
receptacle into the ``TaskState -> bool`` predicate of :mod:`bench.sim.success` that ends
an episode (:func:`make_success`), and give the ``place_in`` geometry a receptacle offers
(:func:`place_in_geometry`, also read by progress scoring). :mod:`bench.sim.taskfile` calls
it while reading a task file, :class:`bench.sim.task_spec.TaskSpec` when it binds a
``push_to`` target to a table placement, and :mod:`bench.sim.task_progress` for the
progress geometry.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.sim import success as predicates
from bench.sim.objects import Box, Cylinder, Mesh, ObjectSpec, OpenBox, Pen


def make_success(rule: str, params: Mapping[str, Any], actor: ObjectSpec,
                 receptacle: ObjectSpec, *, target_world_xy: np.ndarray | None = None):
    """The strict success predicate ``TaskState -> bool`` of a rule on these objects.

    ``place_in`` picks the predicate by geometry: a flat receptacle (cylinder plate, box)
    -> :func:`~bench.sim.success.placed_on`; an open box -> the tape / pen / key-point
    rules; a mesh receptacle -> :func:`~bench.sim.success.in_receptacle`.
    """
    names = {"actor": actor.name, "receptacle": receptacle.name}
    speed = {"max_speed": params["max_speed"]} if "max_speed" in params else {}
    if rule == "pick_up":
        return functools.partial(predicates.lifted, actor=actor.name,
                                 rest_z=actor.resting_height(),
                                 lift_dz=params.get("lift_dz", 0.06))
    if rule == "push_to":
        if target_world_xy is None:
            raise ValueError("push_to needs the target in world coordinates (bind the table)")
        return functools.partial(predicates.pushed_to, actor=actor.name,
                                 target_xy=np.asarray(target_world_xy, np.float64),
                                 tolerance=params.get("tolerance", 0.03), **speed)
    a, r = actor.shape, receptacle.shape
    if isinstance(r, OpenBox):
        if isinstance(a, Cylinder):
            return functools.partial(predicates.tape_in_box, tape=a, box=r, **names, **speed)
        if isinstance(a, Pen):
            return functools.partial(predicates.pen_in_box, pen=a, box=r, **names, **speed)
        points = a.corners() if isinstance(a, Box) else a.points
        return functools.partial(predicates.points_in_box, points=points, box=r, **names, **speed)
    if isinstance(r, Cylinder) and isinstance(a, Cylinder):
        tilt = {"max_tilt_deg": params["max_tilt_deg"]} if "max_tilt_deg" in params else {}
        return functools.partial(predicates.cup_on_plate, cup=a, plate=r, **names, **speed,
                                 **tilt)
    if isinstance(r, Cylinder | Box):
        radius = r.radius if isinstance(r, Cylinder) else min(r.size[:2]) / 2
        tilt = {"max_tilt_deg": params["max_tilt_deg"]} if "max_tilt_deg" in params else {}
        return functools.partial(predicates.placed_on, support_radius=float(radius),
                                 actor_radius=actor.footprint_radius(), **names, **speed, **tilt)
    geometry = place_in_geometry(actor, receptacle)
    return functools.partial(
        predicates.in_receptacle,
        mouth_radius=params.get("mouth_radius", geometry["mouth_radius"]),
        rim_height=params.get("rim_height", geometry["rim_height"]),
        actor_bottom=actor.resting_height(),
        below_rim=params.get("below_rim", geometry["below_rim"]), **names, **speed)


PLATE_VIRTUAL_RIM = 0.01  # m above a flat receptacle's top: its "rim" for progress scoring


def place_in_geometry(actor: ObjectSpec, receptacle: ObjectSpec) -> dict[str, float]:
    """Default ``place_in`` progress geometry (mouth radius, rim height, depth below rim).

    Open box: its rim and half the shorter inner side. Flat receptacle (plate, box): a
    virtual rim 1 cm above its top, mouth = radius minus half the actor footprint. Mesh
    receptacle: its top and 40 % of its shorter horizontal extent.
    """
    shape = receptacle.shape
    if isinstance(shape, OpenBox):
        return {"mouth_radius": min(shape.inner) / 2, "rim_height": shape.rim_height,
                "below_rim": 0.01}
    if isinstance(shape, Cylinder):
        return {"mouth_radius": shape.radius - 0.5 * actor.footprint_radius(),
                "rim_height": shape.height / 2 + PLATE_VIRTUAL_RIM, "below_rim": 0.005}
    if isinstance(shape, Box):
        return {"mouth_radius": min(shape.size[:2]) / 2 - 0.5 * actor.footprint_radius(),
                "rim_height": shape.size[2] / 2 + PLATE_VIRTUAL_RIM, "below_rim": 0.005}
    if isinstance(shape, Mesh):
        return {"mouth_radius": 0.4 * float(min(shape.extent[:2])),
                "rim_height": receptacle.top_height(), "below_rim": 0.01}
    raise BenchError(f"receptacle {receptacle.name!r}: a {type(shape).__name__} cannot receive "
                     "objects; use a cylinder, box, open_box or mesh")
