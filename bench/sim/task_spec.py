"""What a rigid manipulation task is: :class:`TaskSpec` and its grid of starts, :class:`InitGrid`.

One job: the task record, as data. :mod:`bench.sim.taskfile` reads task files into these,
:mod:`bench.sim.tasks` registers the shipped ones, and the rope's metadata
(:mod:`bench.sim.softbody.task`) reuses :class:`InitGrid`; all of them import this module and
it imports none of them. A task's strict success predicate is built by
:mod:`bench.sim.task_success` (``TaskSpec.success_for``).

Table frame: origin at the table-top centre, x along the table's first size axis (rotated
by ``yaw_deg`` in the world), z up. Units: metres, degrees in the spec, radians internally.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.sim.objects import ObjectSpec
from bench.sim.state import TaskState
from bench.sim.task_success import make_success


@dataclass(frozen=True)
class InitGrid:
    """A fixed grid of actor (x, y, yaw) in the table frame.

    Condition ``i < size`` is a grid point. Positions vary fastest and each block
    of ``len(xs) * len(ys)`` conditions shifts the yaw index by one (a Latin
    arrangement), so the first block already covers every position and every yaw.
    Conditions ``i >= size`` are drawn uniformly from the grid's bounding box
    with ``numpy.random.default_rng(i)`` (``seed`` 0) or ``default_rng([seed, i])``
    (still a pure function of ``i``).

    Attributes:
        xs: Actor x positions, metres (table frame).
        ys: Actor y positions, metres (table frame).
        yaws_deg: Actor yaws, degrees.
        count: Fixed grid conditions (<= the product of the axis lengths; None = all).
        seed: Seed of the draws beyond the grid.
    """

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    yaws_deg: tuple[float, ...]
    count: int | None = None
    seed: int = 0

    @property
    def size(self) -> int:
        """Number of initial conditions in the grid (``count`` caps the full product)."""
        full = len(self.xs) * len(self.ys) * len(self.yaws_deg)
        return full if self.count is None else min(int(self.count), full)

    def conditions(self, count: int | None = None) -> np.ndarray:  # -> [count, 3] x, y, yaw_rad
        """The first ``count`` conditions (default: the whole grid) as rows."""
        return np.array([self.condition(i) for i in range(self.size if count is None else count)])

    def condition(self, index: int) -> tuple[float, float, float]:
        """(x, y, yaw_rad) of condition ``index`` (any integer >= 0)."""
        if index < 0:
            raise ValueError(f"initial condition index must be >= 0, got {index}")
        if index >= self.size:
            rng = np.random.default_rng(index if self.seed == 0 else [self.seed, index])
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
        home_yaw_deg: Yaw of the tool at reset, degrees from the table's x axis (0: fingers
            along x, the wrist cameras' forward tilt towards the table's +y; 180 turns them
            towards -y, where Pen's pen lies).
        description: The language instruction (one line; also for ``--help`` and manifests).
        rule: Success rule / progress archetype: "place_in", "pick_up" or "push_to".
        rule_params: The rule's parameters from the task file (progress archetype keywords,
            ``target_xy`` in the table frame for push_to, strict-predicate options).
        source: Task file it was read from ("" when built in code).
        sha256: Digest of that file.
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
    home_yaw_deg: float = 0.0
    description: str = ""
    rule: str = "place_in"
    rule_params: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    sha256: str = ""

    @property
    def objects(self) -> tuple[ObjectSpec, ObjectSpec]:
        """(actor, receptacle)."""
        return (self.actor, self.receptacle)

    @property
    def instruction(self) -> str:
        """The language instruction a policy receives."""
        return self.description

    def success_for(self, world_from_table: np.ndarray) -> Callable[[TaskState], bool]:
        """The success predicate in a given table placement (push_to targets are table-frame)."""
        if self.rule != "push_to":
            return self.success
        target = np.asarray(self.rule_params.get("target_xy", self.receptacle_xy), np.float64)
        world = world_from_table @ np.array([target[0], target[1], 0.0, 1.0])
        return make_success(self.rule, self.rule_params, self.actor, self.receptacle,
                            target_world_xy=world[:2])

    def required_half_extent(self) -> tuple[float, float]:
        """Half-size (x, y) of the table area the layout needs (objects at every grid pose)."""
        r_actor = self.actor.footprint_radius()
        r_rec = self.receptacle.footprint_radius()
        hx = max(max(abs(x) for x in self.grid.xs) + r_actor, abs(self.receptacle_xy[0]) + r_rec)
        hy = max(max(abs(y) for y in self.grid.ys) + r_actor, abs(self.receptacle_xy[1]) + r_rec)
        return float(hx), float(hy)
