"""Task definitions and the fixed grid of initial conditions; Cup, Tape and Pen ship as task files.

Tasks are data: :mod:`bench.sim.taskfile` reads ``splatbench-task/1`` files
(JSON or TOML) into :class:`TaskSpec`; the registry :data:`TASKS` holds the
shipped files in ``bench/sim/task_files/`` (``cup.json``, ``tape.json``,
``pen.json``) and the deformable rope (``rope``: a
:class:`bench.sim.softbody.task.RopeTask`, entry metadata ``kind="deformable"``,
``env_id="splatbench/Rope-v0"``). :func:`get_task` also takes a task-file path.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.registry import Registry
from bench.sim.objects import ObjectSpec
from bench.sim.state import TaskState

TASK_FILES = Path(__file__).with_name("task_files")


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
        from bench.sim.taskfile import make_success

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


TASKS: Registry[TaskSpec] = Registry("task")


def _register_shipped() -> None:
    """Register the task files shipped in ``bench/sim/task_files`` (cup, tape, pen)."""
    from bench.sim.taskfile import load_task_file

    for path in sorted(TASK_FILES.glob("*.json")):
        task = load_task_file(path, bundle_root=None)
        TASKS.register(task.name, task, file=path.name, description=task.description)
    # the deformable rope (issue 16): not a task file, its own env id (bench.sim.make_env)
    from bench.sim.softbody.task import ROPE_TASK

    TASKS.register(ROPE_TASK.name, ROPE_TASK, kind=ROPE_TASK.kind, env_id=ROPE_TASK.env_id,
                   description=ROPE_TASK.description, policies=ROPE_TASK.policies)


_register_shipped()


def is_deformable(task: Any) -> bool:
    """Whether ``task`` (a name or a task object) is a deformable task with its own env id."""
    if isinstance(task, str):
        key = task.lower()
        return key in TASKS and TASKS.entry(key).meta.get("kind") == "deformable"
    return getattr(task, "kind", "rigid") == "deformable"


def is_task_file(name: str | Path) -> bool:
    """Whether ``name`` names a task file (ends in .json / .toml) rather than a registry key."""
    return str(name).lower().endswith((".json", ".toml"))


def get_task(name: str | Path | TaskSpec, *, scene_root: str | Path | None = None) -> TaskSpec:
    """A task by registry name (case-insensitive), task-file path, or bundle task name.

    Args:
        name: "cup" / "tape" / "pen", a ``.json`` / ``.toml`` task file, a TaskSpec, or the
            name of a task file in the scene bundle (``tasks/NAME.json``).
        scene_root: The scene bundle the env runs in; its task files are searched after the
            registry, and its ``objects/`` serve ``bundle_object`` references.

    Raises:
        ValueError: Unknown name ("did you mean"), or a BenchError from the task file.
    """
    if isinstance(name, TaskSpec):
        return name
    from bench.sim.taskfile import bundle_task_files, load_task_file

    if is_task_file(name):
        return load_task_file(name, bundle_root=scene_root)
    key = str(name).lower()
    if key not in TASKS and scene_root is not None:
        for path in bundle_task_files(Path(scene_root)):
            if path.stem == str(name):
                return load_task_file(path, bundle_root=scene_root)
    return TASKS.get(key)
