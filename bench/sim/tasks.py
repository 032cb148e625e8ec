"""Task definitions (Cup, Tape, Pen) and the fixed grid of initial conditions.

A task names an *actor* (the object the robot moves) and a *receptacle*, places
the receptacle at a fixed pose in the table frame, and draws the actor's
initial (x, y, yaw) from :class:`InitGrid`. The grid is the same for every study
condition, so condition ``i`` of a clean scene and condition ``i`` of a damaged
scene start from the same physical state (paired rollouts).

Table frame: origin at the table-top centre, x along the table's first size
axis (rotated by ``yaw_deg`` in the world), z up. Units: metres, degrees in the
spec, radians internally.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.registry import Registry
from bench.sim import success
from bench.sim.objects import Cylinder, ObjectSpec, OpenBox, Pen
from bench.sim.state import TaskState


@dataclass(frozen=True)
class InitGrid:
    """A fixed grid of actor (x, y, yaw) in the table frame.

    Condition ``i < size`` is a grid point. Positions vary fastest and each block
    of ``len(xs) * len(ys)`` conditions shifts the yaw index by one (a Latin
    arrangement), so the first block already covers every position and every yaw.
    Conditions ``i >= size`` are drawn uniformly from the grid's bounding box
    with ``numpy.random.default_rng(i)`` (still a pure function of ``i``).

    Attributes:
        xs: Actor x positions, metres (table frame).
        ys: Actor y positions, metres (table frame).
        yaws_deg: Actor yaws, degrees.
    """

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    yaws_deg: tuple[float, ...]

    @property
    def size(self) -> int:
        return len(self.xs) * len(self.ys) * len(self.yaws_deg)

    def condition(self, index: int) -> tuple[float, float, float]:
        """(x, y, yaw_rad) of condition ``index`` (any integer >= 0)."""
        if index < 0:
            raise ValueError(f"initial condition index must be >= 0, got {index}")
        if index >= self.size:
            rng = np.random.default_rng(index)
            x = rng.uniform(min(self.xs), max(self.xs))
            y = rng.uniform(min(self.ys), max(self.ys))
            yaw = rng.uniform(min(self.yaws_deg), max(self.yaws_deg))
            return float(x), float(y), float(np.deg2rad(yaw))
        n_pos = len(self.xs) * len(self.ys)
        pos, block = index % n_pos, index // n_pos
        x = self.xs[pos % len(self.xs)]
        y = self.ys[pos // len(self.xs)]
        yaw = self.yaws_deg[(block + pos) % len(self.yaws_deg)]
        return float(x), float(y), float(np.deg2rad(yaw))


@dataclass(frozen=True)
class TaskSpec:
    """One manipulation task.

    Attributes:
        name: Registry key ("cup", "tape", "pen").
        actor: The object to move.
        receptacle: Where it must end up.
        receptacle_xy: Receptacle centre in the table frame, metres.
        receptacle_yaw_deg: Receptacle yaw in the table frame, degrees.
        grid: Initial actor poses.
        success: Predicate on a :class:`TaskState`.
        grasp_height: Tool-centre-point height above the table for a top-down grasp, metres.
        chunk_size: Actions a policy returns per query (YUBI: 32).
        execute: Actions executed per query (YUBI: 16 for Cup, 8 for Tape and Pen).
        max_frames: Time limit in 10 Hz control frames (YUBI: 600 = 1 min).
        description: One line for ``--help`` and manifests.
    """

    name: str
    actor: ObjectSpec
    receptacle: ObjectSpec
    receptacle_xy: tuple[float, float]
    receptacle_yaw_deg: float
    grid: InitGrid
    success: Callable[[TaskState], bool]
    grasp_height: float
    chunk_size: int = 32
    execute: int = 16
    max_frames: int = 600
    description: str = ""

    @property
    def objects(self) -> tuple[ObjectSpec, ObjectSpec]:
        return (self.actor, self.receptacle)

    def required_half_extent(self) -> tuple[float, float]:
        """Half-size (x, y) of the table area the layout needs (objects at every grid pose)."""
        r_actor = self.actor.footprint_radius()
        r_rec = self.receptacle.footprint_radius()
        hx = max(max(abs(x) for x in self.grid.xs) + r_actor, abs(self.receptacle_xy[0]) + r_rec)
        hy = max(max(abs(y) for y in self.grid.ys) + r_actor, abs(self.receptacle_xy[1]) + r_rec)
        return float(hx), float(hy)


TASKS: Registry[TaskSpec] = Registry("task")

# Actor positions: a 5 x 4 grid in front of the receptacle, 4 yaws -> 80 conditions
# (YUBI runs 80 simulated rollouts per policy cell).
_GRID = InitGrid(
    xs=(-0.16, -0.08, 0.0, 0.08, 0.16),
    ys=(-0.22, -0.17, -0.12, -0.07),
    yaws_deg=(0.0, 45.0, 90.0, 135.0),
)

_CUP = ObjectSpec(
    "cup", Cylinder(radius=0.035, height=0.09), mass=0.15, friction=1.0, rgba=(0.2, 0.45, 0.8, 1.0)
)
_PLATE = ObjectSpec(
    "plate",
    Cylinder(radius=0.09, height=0.012),
    mass=0.3,
    friction=0.8,
    rgba=(0.93, 0.93, 0.9, 1.0),
)
_TAPE = ObjectSpec(
    "tape", Cylinder(radius=0.04, height=0.03), mass=0.1, friction=1.0, rgba=(0.85, 0.75, 0.45, 1.0)
)
_BOX = ObjectSpec(
    "box",
    OpenBox(inner=(0.19, 0.15), wall_height=0.05),
    mass=0.4,
    friction=0.9,
    rgba=(0.7, 0.55, 0.38, 1.0),
)
_PEN = ObjectSpec(
    "pen", Pen(radius=0.0065, length=0.14), mass=0.02, friction=1.0, rgba=(0.15, 0.3, 0.85, 1.0)
)
_PEN_BOX = ObjectSpec(
    "pen_box",
    OpenBox(inner=(0.20, 0.08), wall_height=0.035),
    mass=0.3,
    friction=0.9,
    rgba=(0.35, 0.55, 0.35, 1.0),
)

TASKS.register(
    "cup",
    TaskSpec(
        name="cup",
        actor=_CUP,
        receptacle=_PLATE,
        receptacle_xy=(0.0, 0.14),
        receptacle_yaw_deg=0.0,
        grid=_GRID,
        grasp_height=0.05,
        execute=16,
        max_frames=600,
        success=functools.partial(success.cup_on_plate, cup=_CUP.shape, plate=_PLATE.shape),
        description="pick up the cup and place it upright on the plate",
    ),
)
TASKS.register(
    "tape",
    TaskSpec(
        name="tape",
        actor=_TAPE,
        receptacle=_BOX,
        receptacle_xy=(0.0, 0.15),
        receptacle_yaw_deg=0.0,
        grid=_GRID,
        grasp_height=0.02,
        execute=8,
        max_frames=600,
        success=functools.partial(success.tape_in_box, tape=_TAPE.shape, box=_BOX.shape),
        description="pick up the tape roll and drop it into the open box",
    ),
)
TASKS.register(
    "pen",
    TaskSpec(
        name="pen",
        actor=_PEN,
        receptacle=_PEN_BOX,
        receptacle_xy=(0.0, 0.15),
        receptacle_yaw_deg=0.0,
        grid=_GRID,
        grasp_height=0.012,
        execute=8,
        max_frames=600,
        success=functools.partial(success.pen_in_box, pen=_PEN.shape, box=_PEN_BOX.shape),
        description="pick up the pen and put it into the pen box",
    ),
)


def get_task(name: str) -> TaskSpec:
    """Look up a task by name (case-insensitive), with a "did you mean" error."""
    return TASKS.get(name.lower())
