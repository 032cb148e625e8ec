"""Bridge from simulator state to :mod:`bench.sim.progress` (RobotArena-inf stage-wise progress).

Each task names its archetype (``place_in``, ``pick_up`` or ``push_to``) in its
task file; the archetype's geometry comes from the task's objects unless the
file's ``success.params`` set it. For a flat receptacle (the Cup task's plate)
the "rim" is a virtual one 1 cm above its top: the actor counts as placed when
its underside is within that centimetre over the plate.
"""

from __future__ import annotations

import inspect

import numpy as np

from bench.sim.progress import ProgressScorer, ProgressTask, StepState, pick_up, place_in, push_to
from bench.sim.state import TaskState
from bench.sim.task_spec import TaskSpec
from bench.sim.task_success import PLATE_VIRTUAL_RIM, place_in_geometry

__all__ = ["PLATE_VIRTUAL_RIM", "make_progress_scorer", "progress_spec", "step_state"]


def _keywords(factory, params: dict) -> dict:
    accepted = inspect.signature(factory).parameters
    return {k: v for k, v in params.items() if k in accepted}


def progress_spec(task: TaskSpec, *, world_from_table: np.ndarray | None = None) -> ProgressTask:
    """The :class:`~bench.sim.progress.ProgressTask` of a simulator task.

    Args:
        task: The simulator task.
        world_from_table: [4, 4] table placement (push_to targets are given in the table
            frame; default: the identity).
    """
    actor, receptacle = task.actor, task.receptacle
    params = dict(task.rule_params)
    if task.rule == "pick_up":
        return pick_up(actor.name, **_keywords(pick_up, params))
    if task.rule == "push_to":
        target = np.asarray(params.pop("target_xy", task.receptacle_xy), np.float64)
        table = np.eye(4) if world_from_table is None else world_from_table
        world = table @ np.array([target[0], target[1], 0.0, 1.0])
        return push_to(actor.name, world[:2], **_keywords(push_to, params))
    geometry = place_in_geometry(actor, receptacle)
    geometry["actor_half_height"] = actor.resting_height()
    geometry.update(_keywords(place_in, params))
    return place_in(actor.name, receptacle.name, **geometry)


def make_progress_scorer(task: TaskSpec, *, dt: float, world_from_table: np.ndarray | None = None):
    """An online :class:`~bench.sim.progress.ProgressScorer` for ``task``."""
    return ProgressScorer(progress_spec(task, world_from_table=world_from_table), dt=dt)


def step_state(state: TaskState, *, max_opening: float) -> StepState:
    """One :class:`~bench.sim.progress.StepState` (poses x y z qw qx qy qz, opening in [0, 1])."""
    objects = {name: np.concatenate([o.pos, o.quat]) for name, o in state.objects.items()}
    return StepState(
        objects=objects,
        ee_pose=np.concatenate([state.tcp_pos, state.tcp_quat]),
        gripper=float(np.clip(state.opening / max_opening, 0.0, 1.0)),
    )
