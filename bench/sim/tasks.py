"""The task registry: Cup, Tape and Pen ship as task files, the rope as deformable metadata.

Tasks are data: :mod:`bench.sim.taskfile` reads ``splatbench-task/1`` files
(JSON or TOML) into :class:`~bench.sim.task_spec.TaskSpec`; the registry :data:`TASKS`
holds the shipped files in ``bench/sim/task_files/`` (``cup.json``, ``tape.json``,
``pen.json``) and the deformable rope (``rope``: a
:class:`bench.sim.softbody.task.RopeTask`, entry metadata ``kind="deformable"``,
``env_id="splatbench/Rope-v0"``). :func:`get_task` also takes a task-file path.

A task names an *actor* (the object the robot moves) and a *receptacle*, places
the receptacle at a fixed pose in the table frame, and draws the actor's
initial (x, y, yaw) from :class:`~bench.sim.task_spec.InitGrid`. The grid is the same for
every study condition, so condition ``i`` of a clean scene and condition ``i`` of a damaged
scene start from the same physical state (paired rollouts). The records themselves (and the
table frame and units) are in :mod:`bench.sim.task_spec`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.registry import Registry
from bench.sim.task_spec import TaskSpec

TASK_FILES = Path(__file__).with_name("task_files")

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
