"""Task files (``splatbench-task/1``, JSON or TOML): objects, receptacle, grid, success rule.

A task file is the whole definition of a manipulation task as data (schema in
``docs/tasks-and-robots.md``)::

    {"format": "splatbench-task/1", "name": "mug",
     "instruction": "put the mug on the coaster",
     "objects": {
        "mug": {"mesh": "meshes/mug.obj", "scale": 0.001, "mass": 0.3, "friction": 1.0,
                "collision": ["meshes/mug_part0.obj", "meshes/mug_part1.obj"]},
        "coaster": {"shape": {"type": "cylinder", "radius": 0.06, "height": 0.008},
                    "mass": 0.05, "rgba": [0.3, 0.3, 0.3, 1]}},
     "actor": "mug", "receptacle": "coaster",
     "receptacle_pose": {"x": 0.0, "y": 0.14, "yaw_deg": 0.0},
     "grid": {"x": {"range": [-0.16, 0.16], "count": 5}, "y": [-0.22, -0.12],
              "yaw_deg": {"range": [0, 135], "count": 4}, "seed": 0},
     "success": {"rule": "place_in", "params": {"rest_speed": 0.02}},
     "grasp_height": 0.05, "time_limit_frames": 600,
     "chunking": {"chunk_size": 32, "execute": 16}}

Every problem is a :class:`~bench.errors.BenchError` of one line that names the
file, the field and the fix. Paths are relative to the task file (or, for
``{"bundle_object": NAME}``, to the scene bundle's ``objects/`` folder) and may
not leave it (:func:`bench.sim.meshes.resolve_relative`).

Bundle objects: ``<bundle>/objects/objects.json`` (or ``.toml``) holds
``{"objects": {NAME: object entry}}`` with paths relative to ``objects/``; a
task file in the bundle (``<bundle>/tasks/*.json`` or next to ``scene.json``)
names them with ``{"bundle_object": NAME}`` and may override ``mass``,
``friction``, ``rgba``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.safety import MAX_TASK_GRID, check_episode_frames
from bench.sim.meshes import resolve_relative
from bench.sim.objects import Box, Cylinder, ObjectSpec, OpenBox, Pen
from bench.sim.task_spec import InitGrid, TaskSpec
from bench.sim.task_success import make_success, place_in_geometry

TASK_FORMAT = "splatbench-task/1"
TASK_SUFFIXES = (".json", ".toml")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RULES = ("place_in", "pick_up", "push_to")
TOP_KEYS = {
    "format", "name", "instruction", "objects", "actor", "receptacle", "receptacle_pose",
    "grid", "success", "grasp_height", "time_limit_frames", "chunking", "home",
}
OBJECT_KEYS = {
    "shape", "mesh", "bundle_object", "scale", "origin", "collision", "texture", "mass",
    "friction", "rolling_friction", "rgba", "decor",
}
OVERRIDE_KEYS = {"bundle_object", "mass", "friction", "rolling_friction", "rgba"}
SHAPE_KEYS = {
    "cylinder": {"radius", "height"},
    "box": {"size"},
    "open_box": {"inner", "wall_height", "wall", "floor"},
    "pen": {"radius", "length"},
}
# strict-predicate parameters accepted next to each archetype's own keywords
STRICT_KEYS = {
    "place_in": {"max_speed", "max_tilt_deg"},
    "pick_up": {"max_speed"},
    "push_to": {"max_speed"},
}
BUNDLE_OBJECTS = ("objects/objects.json", "objects/objects.toml")


class _Where:
    """Builds one-line errors that start with the file and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, field: str, problem: str, fix: str) -> BenchError:
        return BenchError(f"{self.source}: {field}: {problem}; {fix}")


def read_task_data(path: str | Path) -> dict[str, Any]:
    """Parse a task file (JSON or TOML) into a dict; one-line errors for unreadable files."""
    path = Path(path)
    if path.suffix.lower() not in TASK_SUFFIXES:
        raise BenchError(f"{path}: a task file must end in .json or .toml")
    if path.exists() and not path.is_file():  # a FIFO, device or directory: never read it
        raise BenchError(f"task file {path} is not a regular file; pass a .json or .toml file")
    if not path.is_file():
        raise BenchError(f"task file {path} not found; check the path (see `bench task validate`)")
    text = path.read_bytes()
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text.decode("utf-8"))
        else:
            data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        message = str(exc).splitlines()[0]
        raise BenchError(f"{path}: not valid {path.suffix[1:].upper()} ({message}); "
                         "fix the syntax") from None
    if not isinstance(data, dict):
        raise BenchError(f"{path}: must hold an object/table at the top level")
    return data


def _number(where: _Where, field: str, value: Any, *, positive: bool = False,
            minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.error(field, f"must be a finite number, got {value!r}", "write a number")
    value = float(value)
    if positive and value <= 0:
        raise where.error(field, f"must be > 0, got {value:g}", "give a positive value")
    if minimum is not None and value < minimum:
        raise where.error(field, f"must be >= {minimum:g}, got {value:g}", "raise it")
    return value


def _integer(where: _Where, field: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(field, f"must be a whole number, got {value!r}", "write an integer")
    if value < minimum:
        raise where.error(field, f"must be >= {minimum}, got {value}", f"use {minimum} or more")
    return int(value)


def _frames(where: _Where, value: Any) -> int:
    """``time_limit_frames``: a whole number in [1, MAX_EPISODE_FRAMES] (issue 30)."""
    frames = _integer(where, "time_limit_frames", value)
    try:
        return check_episode_frames(frames, what="the time limit")
    except BenchError as exc:
        raise where.error("time_limit_frames", str(exc).split("; ")[0],
                          "lower it (YUBI uses 600)") from None


def _vector(where: _Where, field: str, value: Any, count: int, *, positive: bool = False
            ) -> tuple[float, ...]:
    if not isinstance(value, list | tuple) or len(value) != count:
        raise where.error(field, f"must be a list of {count} numbers, got {value!r}",
                          f"write [{', '.join(['v'] * count)}]")
    return tuple(_number(where, f"{field}[{i}]", v, positive=positive) for i, v in enumerate(value))


def _mapping(where: _Where, field: str, value: Any, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise where.error(field, f"must be an object, got {value!r}", "write a {...} mapping")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise where.error(field, f"unknown keys {unknown}", f"allowed: {sorted(allowed)}")
    return value


def _name(where: _Where, field: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise where.error(field, f"{value!r} is not a valid name",
                          "use letters, digits, '.', '_' or '-' (starting with a letter/digit)")
    return value


# --- objects ---------------------------------------------------------------------------------


def _shape(where: _Where, field: str, value: Any):
    if not isinstance(value, dict) or "type" not in value:
        raise where.error(field, "needs a 'type'", f"one of {sorted(SHAPE_KEYS)}")
    kind = value["type"]
    if kind not in SHAPE_KEYS:
        raise where.error(f"{field}.type", f"{kind!r} is unknown",
                          f"use one of {sorted(SHAPE_KEYS)}")
    params = {k: v for k, v in value.items() if k != "type"}
    _mapping(where, field, params, SHAPE_KEYS[kind])
    required = {"cylinder": {"radius", "height"}, "box": {"size"},
                "open_box": {"inner", "wall_height"}, "pen": {"radius", "length"}}[kind]
    missing = sorted(required - set(params))
    if missing:
        raise where.error(field, f"{kind} lacks {missing}", f"give {sorted(required)} in metres")
    f = functools.partial(_number, where, positive=True)
    if kind == "cylinder":
        return Cylinder(radius=f(f"{field}.radius", params["radius"]),
                        height=f(f"{field}.height", params["height"]))
    if kind == "box":
        return Box(size=_vector(where, f"{field}.size", params["size"], 3, positive=True))
    if kind == "pen":
        pen = Pen(radius=f(f"{field}.radius", params["radius"]),
                  length=f(f"{field}.length", params["length"]))
        if pen.length <= 2 * pen.radius:
            raise where.error(field, "pen length must exceed its diameter", "fix length/radius")
        return pen
    extra = {k: f(f"{field}.{k}", params[k]) for k in ("wall", "floor") if k in params}
    return OpenBox(inner=_vector(where, f"{field}.inner", params["inner"], 2, positive=True),
                   wall_height=f(f"{field}.wall_height", params["wall_height"]), **extra)


def _mesh(where: _Where, field: str, entry: Mapping[str, Any], root: Path):
    from bench.sim.meshes import load_mesh

    mesh_path = resolve_relative(root, entry["mesh"], what=f"{where.source}: {field}.mesh")
    scale = entry.get("scale", 1.0)
    if isinstance(scale, list):
        scale = _vector(where, f"{field}.scale", scale, 3, positive=True)
    else:
        scale = _number(where, f"{field}.scale", scale, positive=True)
    collision = entry.get("collision", "hull")
    if collision != "hull":
        if not isinstance(collision, list) or not collision:
            raise where.error(f"{field}.collision", f"{collision!r} is neither 'hull' nor a list",
                              "write \"hull\" or a list of convex part files")
        collision = [resolve_relative(root, p, what=f"{where.source}: {field}.collision")
                     for p in collision]
    texture = entry.get("texture")
    if texture is not None:
        texture = resolve_relative(root, texture, what=f"{where.source}: {field}.texture")
    origin = entry.get("origin", "bbox")
    return load_mesh(mesh_path, scale=scale, origin=origin, collision=collision, texture=texture,
                     source=str(entry["mesh"]), what=f"{where.source}: {field}")


def parse_object(where: _Where, name: str, entry: Any, root: Path,
                 bundle_objects: Mapping[str, Any] | None = None,
                 bundle_root: Path | None = None) -> ObjectSpec:
    """One ``objects`` entry -> :class:`ObjectSpec` (shape, mesh or bundle object)."""
    field = f"objects.{name}"
    _name(where, field, name)
    entry = _mapping(where, field, entry, OBJECT_KEYS)
    if "bundle_object" in entry:
        unknown = sorted(set(entry) - OVERRIDE_KEYS)
        if unknown:
            raise where.error(field, f"a bundle object takes no {unknown}",
                              f"override only {sorted(OVERRIDE_KEYS - {'bundle_object'})}")
        ref = entry["bundle_object"]
        if bundle_objects is None or bundle_root is None:
            raise where.error(f"{field}.bundle_object", f"{ref!r} needs a scene bundle",
                              "put the task file in the bundle (tasks/ or next to scene.json) "
                              "with objects/objects.json, or describe the object here")
        if ref not in bundle_objects:
            raise where.error(f"{field}.bundle_object", f"{ref!r} is not in the bundle",
                              f"bundle objects: {sorted(bundle_objects)}")
        base = dict(bundle_objects[ref])
        base.update({k: v for k, v in entry.items() if k != "bundle_object"})
        return parse_object(_Where(f"{bundle_root}/objects"), name, base, bundle_root / "objects")
    kinds = [k for k in ("shape", "mesh") if k in entry]
    if len(kinds) != 1:
        raise where.error(field, "needs exactly one of 'shape', 'mesh', 'bundle_object'",
                          "describe the geometry once")
    if "mesh" not in entry:
        stray = sorted({"scale", "origin", "collision", "texture"} & set(entry))
        if stray:
            raise where.error(field, f"{stray} apply to mesh objects only", "remove them")
    if "mass" not in entry:
        raise where.error(f"{field}.mass", "missing", "give the mass in kilograms")
    shape = (_shape(where, f"{field}.shape", entry["shape"]) if "shape" in entry
             else _mesh(where, field, entry, root))
    rgba = _vector(where, f"{field}.rgba", entry.get("rgba", [0.8, 0.8, 0.8, 1.0]), 4)
    if not all(0.0 <= c <= 1.0 for c in rgba):
        raise where.error(f"{field}.rgba", f"{list(rgba)} leaves [0, 1]", "use values in [0, 1]")
    decor = entry.get("decor")
    if decor not in (None, "", "cup", "tape"):
        raise where.error(f"{field}.decor", f"{decor!r} is unknown", "use 'cup', 'tape' or ''")
    rolling = entry.get("rolling_friction")
    return ObjectSpec(
        name=name,
        shape=shape,
        mass=_number(where, f"{field}.mass", entry["mass"], positive=True),
        friction=_number(where, f"{field}.friction", entry.get("friction", 1.0), positive=True),
        rgba=rgba,
        rolling_friction=None if rolling is None else _number(
            where, f"{field}.rolling_friction", rolling, minimum=0.0),
        decor=decor,
    )


# --- grid ----------------------------------------------------------------------------------


def _axis(where: _Where, field: str, value: Any) -> tuple[float, ...]:
    if isinstance(value, dict):
        _mapping(where, field, value, {"range", "count"})
        if set(value) != {"range", "count"}:
            raise where.error(field, "needs 'range' and 'count'", 'write {"range": [lo, hi], '
                              '"count": n} or a list of values')
        low, high = _vector(where, f"{field}.range", value["range"], 2)
        count = _integer(where, f"{field}.count", value["count"])
        if count > MAX_TASK_GRID:  # before linspace allocates it (issue 30)
            raise where.error(f"{field}.count", f"{count:,} values exceed the cap of "
                              f"{MAX_TASK_GRID:,} starts of a whole grid", "use fewer values")
        if high < low:
            raise where.error(f"{field}.range", f"[{low:g}, {high:g}] is reversed",
                              "write [lo, hi]")
        return tuple(float(v) for v in np.linspace(low, high, count))
    if not isinstance(value, list) or not value:
        raise where.error(field, f"must be a non-empty list or a range, got {value!r}",
                          'write [v, ...] or {"range": [lo, hi], "count": n}')
    values = tuple(_number(where, f"{field}[{i}]", v) for i, v in enumerate(value))
    if len(set(values)) != len(values):
        raise where.error(field, "repeats a value", "list each value once")
    return values


def parse_grid(where: _Where, value: Any) -> InitGrid:
    """The ``grid`` block -> :class:`~bench.sim.task_spec.InitGrid`."""
    value = _mapping(where, "grid", value, {"x", "y", "yaw_deg", "count", "seed"})
    missing = sorted({"x", "y", "yaw_deg"} - set(value))
    if missing:
        raise where.error("grid", f"lacks {missing}", "give x, y (metres, table frame) and yaw_deg")
    xs, ys = _axis(where, "grid.x", value["x"]), _axis(where, "grid.y", value["y"])
    yaws = _axis(where, "grid.yaw_deg", value["yaw_deg"])
    full = len(xs) * len(ys) * len(yaws)
    if full > MAX_TASK_GRID:  # issue 30: every start is enumerated (task show, grid.csv)
        raise where.error("grid", f"a grid of {full:,} starts ({len(xs):,} x {len(ys):,} x "
                          f"{len(yaws):,}) exceeds the cap of {MAX_TASK_GRID:,}",
                          "use fewer x, y or yaw_deg values")
    count = value.get("count")
    if count is not None:
        count = _integer(where, "grid.count", count)
        if count > full:
            raise where.error("grid.count", f"{count} exceeds the {full} grid points",
                              f"use at most {full} or add grid values")
    seed = _integer(where, "grid.seed", value.get("seed", 0), minimum=0)
    return InitGrid(xs=xs, ys=ys, yaws_deg=yaws, count=count, seed=seed)


# --- success rule -----------------------------------------------------------------------------


def _archetype_keys(rule: str) -> set[str]:
    from bench.sim.progress import ARCHETYPES

    params = inspect.signature(ARCHETYPES.get(rule)).parameters
    return {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def parse_success(where: _Where, value: Any) -> tuple[str, dict[str, Any]]:
    """Parse a task file's ``success`` table into (rule, params); TaskFileError names the key."""
    value = _mapping(where, "success", value, {"rule", "params"})
    rule = value.get("rule")
    if rule not in RULES:
        raise where.error("success.rule", f"{rule!r} is not a progress archetype",
                          f"use one of {list(RULES)}")
    params = value.get("params", {})
    allowed = _archetype_keys(rule) | STRICT_KEYS[rule]
    if rule == "push_to":
        allowed.add("target_xy")
    params = dict(_mapping(where, "success.params", params, allowed))
    for key, item in params.items():
        if key == "target_xy":
            params[key] = _vector(where, "success.params.target_xy", item, 2)
        elif key == "hold_steps":
            params[key] = _integer(where, "success.params.hold_steps", item)
        else:
            params[key] = _number(where, f"success.params.{key}", item, positive=True)
    return rule, params


# --- the whole file -----------------------------------------------------------------------------


def find_bundle_root(task_path: Path) -> Path | None:
    """The scene bundle a task file belongs to: its folder or the folder above (tasks/)."""
    folder = task_path.resolve().parent
    for candidate in (folder, folder.parent):
        if (candidate / "scene.json").is_file():
            return candidate
    return None


def load_bundle_objects(bundle_root: Path) -> dict[str, Any]:
    """The raw entries of ``objects/objects.json|toml`` (empty when the bundle has none)."""
    for rel in BUNDLE_OBJECTS:
        path = bundle_root / rel
        if path.is_file():
            data = read_task_data(path)
            objects = data.get("objects")
            if set(data) - {"objects", "format"} or not isinstance(objects, dict):
                raise BenchError(f"{path}: must hold {{\"objects\": {{NAME: entry}}}}; "
                                 "see docs/tasks-and-robots.md")
            return objects
    return {}


def bundle_task_files(bundle_root: Path) -> list[Path]:
    """Task files shipped with a bundle: ``tasks/*.json|toml`` and ``*.task.json|toml``."""
    files = []
    if (bundle_root / "tasks").is_dir():
        files += [p for p in sorted((bundle_root / "tasks").iterdir())
                  if p.suffix in TASK_SUFFIXES]
    files += [p for p in sorted(bundle_root.iterdir()) if p.name.endswith((".task.json",
                                                                           ".task.toml"))]
    return files


def load_task_file(path: str | Path, *, bundle_root: str | Path | None = None) -> TaskSpec:
    """Read and validate a task file into a :class:`~bench.sim.task_spec.TaskSpec`.

    Args:
        path: The ``.json`` / ``.toml`` file.
        bundle_root: Scene bundle whose ``objects/`` the file may name (default: found
            next to the file, see :func:`find_bundle_root`).

    Raises:
        BenchError: One line naming the file, the field and the fix.
    """
    path = Path(path)
    data = read_task_data(path)
    where = _Where(str(path))
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise where.error("top level", f"unknown keys {unknown}", f"allowed: {sorted(TOP_KEYS)}")
    if data.get("format") != TASK_FORMAT:
        raise where.error("format", f"is {data.get('format')!r}", f"write \"{TASK_FORMAT}\"")
    missing = sorted({"name", "objects", "actor", "receptacle", "grid", "success",
                      "grasp_height"} - set(data))
    if missing:
        raise where.error("top level", f"missing {missing}", "see docs/tasks-and-robots.md")
    name = _name(where, "name", data["name"])
    instruction = data.get("instruction", "")
    if not isinstance(instruction, str):
        raise where.error("instruction", "must be a string", "write the language instruction")
    root = Path(bundle_root) if bundle_root is not None else find_bundle_root(path)
    bundle_objects = load_bundle_objects(root) if root is not None else None
    objects = data["objects"]
    if not isinstance(objects, dict) or not objects:
        raise where.error("objects", "must map names to object entries", "add the objects")
    actor_name = _name(where, "actor", data["actor"])
    receptacle_name = _name(where, "receptacle", data["receptacle"])
    for field, ref in (("actor", actor_name), ("receptacle", receptacle_name)):
        if ref not in objects:
            raise where.error(field, f"{ref!r} is not in objects", f"objects: {sorted(objects)}")
    if actor_name == receptacle_name:
        raise where.error("receptacle", "is the actor", "name two different objects")
    extra = sorted(set(objects) - {actor_name, receptacle_name})
    if extra:
        raise where.error("objects", f"{extra} are neither actor nor receptacle",
                          "a task has one actor and one receptacle; remove the others")
    base = path.resolve().parent
    actor = parse_object(where, actor_name, objects[actor_name], base, bundle_objects, root)
    receptacle = parse_object(where, receptacle_name, objects[receptacle_name], base,
                              bundle_objects, root)
    pose = _mapping(where, "receptacle_pose", data.get("receptacle_pose", {}),
                    {"x", "y", "yaw_deg"})
    rule, params = parse_success(where, data["success"])
    if rule == "place_in":
        place_in_geometry(actor, receptacle)  # refuses a receptacle that cannot receive
    chunking = _mapping(where, "chunking", data.get("chunking", {}), {"chunk_size", "execute"})
    chunk_size = _integer(where, "chunking.chunk_size", chunking.get("chunk_size", 32))
    execute = _integer(where, "chunking.execute", chunking.get("execute", 16))
    if execute > chunk_size:
        raise where.error("chunking.execute", f"{execute} exceeds chunk_size {chunk_size}",
                          "execute at most chunk_size rows")
    home = _mapping(where, "home", data.get("home", {}), {"yaw_deg"})
    rec_xy = (_number(where, "receptacle_pose.x", pose.get("x", 0.0)),
              _number(where, "receptacle_pose.y", pose.get("y", 0.0)))
    task = TaskSpec(
        name=name,
        actor=actor,
        receptacle=receptacle,
        receptacle_xy=rec_xy,
        receptacle_yaw_deg=_number(where, "receptacle_pose.yaw_deg", pose.get("yaw_deg", 0.0)),
        grid=parse_grid(where, data["grid"]),
        success=make_success(rule, params, actor, receptacle,
                             target_world_xy=params.get("target_xy", rec_xy)),
        grasp_height=_number(where, "grasp_height", data["grasp_height"], minimum=0.0),
        chunk_size=chunk_size,
        execute=execute,
        max_frames=_frames(where, data.get("time_limit_frames", 600)),
        home_yaw_deg=_number(where, "home.yaw_deg", home.get("yaw_deg", 0.0)),
        description=instruction,
        rule=rule,
        rule_params=params,
        source=str(path),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
    )
    return task
