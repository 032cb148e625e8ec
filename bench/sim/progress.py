"""Bridge from simulator state to ``protocols.progress`` (RobotArena-inf stage-wise progress).

Each task maps to the ``place_in`` archetype with geometry taken from the task's
objects. For Cup the receptacle is a flat plate, so its "rim" is a virtual one
1 cm above the plate top: the cup counts as placed when its underside is within
that centimetre over the plate.
"""

from __future__ import annotations

import numpy as np

from bench.sim.objects import Cylinder, OpenBox, Pen
from bench.sim.state import TaskState
from bench.sim.tasks import TaskSpec

PLATE_VIRTUAL_RIM = 0.01  # m above the plate top


def progress_spec(task: TaskSpec):
    """The ``protocols.progress.TaskSpec`` of a simulator task."""
    from protocols.progress import place_in

    actor, receptacle = task.actor, task.receptacle
    if isinstance(actor.shape, Cylinder):
        half_height = actor.shape.height / 2
    elif isinstance(actor.shape, Pen):
        half_height = actor.shape.radius
    else:  # pragma: no cover - no task moves a box
        raise ValueError(f"no progress geometry for actor shape {type(actor.shape).__name__}")
    if isinstance(receptacle.shape, OpenBox):
        rim = receptacle.shape.rim_height
        mouth = min(receptacle.shape.inner) / 2
        below = 0.01
    else:
        rim = receptacle.shape.height / 2 + PLATE_VIRTUAL_RIM
        mouth = receptacle.shape.radius - 0.5 * actor.footprint_radius()
        below = 0.005
    return place_in(
        actor.name,
        receptacle.name,
        mouth_radius=mouth,
        rim_height=rim,
        actor_half_height=half_height,
        below_rim=below,
        rest_speed=0.02,
    )


def make_progress_scorer(task: TaskSpec, *, dt: float):
    """An online ``protocols.progress.ProgressScorer`` for ``task``, or None if unavailable."""
    try:
        from protocols.progress import ProgressScorer
    except ImportError:  # protocols not installed in this checkout: reward stays 0
        return None
    return ProgressScorer(progress_spec(task), dt=dt)


def step_state(state: TaskState, *, max_opening: float):
    """One ``protocols.progress.StepState`` (poses as x y z qw qx qy qz, opening in [0, 1])."""
    from protocols.progress import StepState

    objects = {name: np.concatenate([o.pos, o.quat]) for name, o in state.objects.items()}
    return StepState(
        objects=objects,
        ee_pose=np.concatenate([state.tcp_pos, state.tcp_quat]),
        gripper=float(np.clip(state.opening / max_opening, 0.0, 1.0)),
    )
