"""The typed study specification (:class:`StudySpec`), loaded from JSON and written back resolved.

A study is the YUBI-Real2Sim protocol on your scenes: every scene under every
condition (clean + artifact presets + optional prepared bundles such as
coverage retrainings), every task with two candidate policies, ``trials``
paired rollouts per cell, quality scores on the Test and OBS-Probe views.

Example ``spec.json``::

    {"name": "mystudy",
     "sample_scenes": {"duo": 0, "flat": 1, "g2": 2},
     "scenes": {"lab": "scenes/lab"},
     "conditions": ["clean", "hole-54", "floaters-mid", "warp"],
     "extra_conditions": {"random-30": {"lab": "retrained/lab-random30"}},
     "tasks": ["cup", "tape"],
     "policies": {"cup": ["visual-servo", "visual-glance"]},
     "trials": 10, "real_trials": 10, "metrics": ["psnr", "ssim", "lpips"]}

Unknown keys are refused with the list of valid ones; presets, tasks, policies
and metrics are checked against their registries ("did you mean" errors).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.provenance import read_json
from protocols.sequential import SequentialConfig

CLEAN = "clean"
DEFAULT_CONDITIONS = (CLEAN, "hole-54", "hole-90", "floaters-low", "floaters-mid",
                      "floaters-high", "warp")
DEFAULT_POLICIES = ("visual-servo", "visual-glance")


@dataclass(frozen=True)
class StudySpec:
    """Everything that defines a study run.

    Attributes:
        name: Study name (the ``study`` column of every stored row).
        scenes: Scene name -> scene bundle directory (relative to the spec file).
        sample_scenes: Scene name -> seed of a generated sample room (synthetic world).
        sample_gaussians: Background Gaussians of each generated sample room (count).
        conditions: ``"clean"`` plus perturbation presets (``perturbations`` registry names).
        extra_conditions: Condition name -> scene name -> prepared bundle directory (e.g.
            a coverage retraining from ``bench coverage`` + ``bench train``).
        seed: Seed of every editor (artifact conditions) and of the capture noise.
        tasks: Task names (``cup``, ``tape``, ``pen``).
        policies: Task -> ``[pi_1, pi_2]`` policy registry names; tasks not listed use
            :data:`DEFAULT_POLICIES`.
        trials: Simulated rollouts per (scene, condition, task, policy) cell.
        real_trials: Rollouts per (scene, task, policy) in the "real" domain.
        sim_condition_offset: First initial-condition index of simulated trials (trial t
            uses ``offset + t`` in every condition: paired rollouts). The default 100 is past
            the tasks' 80-point grid, so simulated starts are seeded uniform draws over the
            grid's box, the same distribution as the "real" block (offset 0 would put the first
            few trials on the grid's first row only).
        real_condition_offset: First initial-condition index of the "real" domain's trials
            (a separate block of the task grid's seeded draws).
        image_size: Wrist image (height, width), pixels.
        max_frames: Time limit per rollout in 10 Hz frames (None: the task's default, 600).
        metrics: Quality scorers (``metrics`` registry names); FR ones score Test views only.
        capture_noise: Std of the sensor noise added to the clean Test renders that stand
            in for captured images, in [0, 1] intensity units.
        render_backend: ``bench.render`` backend for scoring and observations.
        alpha: Significance level of the Fisher test.
        sequential: Sequential stopping (:class:`protocols.sequential.SequentialConfig`, given
            as a JSON object: method, max_trials, min_trials, batch_size, alpha, effect); None
            runs the fixed design. Its ``max_trials`` is ``trials``.
    """

    name: str = "study"
    scenes: dict[str, str] = field(default_factory=dict)
    sample_scenes: dict[str, int] = field(default_factory=dict)
    sample_gaussians: int = 40000
    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    extra_conditions: dict[str, dict[str, str]] = field(default_factory=dict)
    seed: int = 0
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    policies: dict[str, tuple[str, str]] = field(default_factory=dict)
    trials: int = 10
    real_trials: int = 10
    sim_condition_offset: int = 100
    real_condition_offset: int = 1000
    image_size: tuple[int, int] = (128, 128)
    max_frames: int | None = None
    metrics: tuple[str, ...] = ("psnr", "ssim", "lpips", "nvs-sqa")
    capture_noise: float = 0.01
    render_backend: str = "auto"
    alpha: float = 0.05
    sequential: SequentialConfig | None = None

    def __post_init__(self) -> None:
        check_field_types({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        self._resolve_sequential()  # issue 17: the sequential key
        object.__setattr__(self, "conditions", tuple(self.conditions))
        object.__setattr__(self, "tasks", tuple(t.lower() for t in self.tasks))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        pols = {t: tuple(self.policies.get(t, DEFAULT_POLICIES)) for t in self.tasks}
        extra = sorted(set(self.policies) - set(self.tasks))
        if extra:
            raise BenchError(f"policies given for tasks {extra} that are not in tasks "
                             f"{list(self.tasks)}; add them to tasks or remove them")
        object.__setattr__(self, "policies", pols)
        self._check_basic()

    def _resolve_sequential(self) -> None:
        config = self.sequential
        if config is None:
            return
        try:
            if isinstance(config, Mapping):
                config = SequentialConfig.from_dict(config)
        except (TypeError, ValueError) as exc:
            raise BenchError(f"spec key 'sequential': {exc}") from None
        if config.max_trials not in (None, self.trials):
            raise BenchError(f"sequential max_trials ({config.max_trials}) must equal trials "
                             f"({self.trials}): the fixed design's trials are the sequential "
                             "cap; set one number")
        if config.min_trials > self.trials:
            raise BenchError(f"sequential min_trials ({config.min_trials}) exceeds trials "
                             f"({self.trials}); lower min_trials or raise trials")
        object.__setattr__(self, "sequential", config)

    def _check_basic(self) -> None:
        if not self.name or any(c in self.name for c in "/\\"):
            raise BenchError(f"study name {self.name!r} must be non-empty without slashes")
        names = list(self.scenes) + list(self.sample_scenes)
        if not names:
            raise BenchError("the spec names no scenes; add \"scenes\" (name -> bundle dir) "
                             "or \"sample_scenes\" (name -> seed)")
        if len(set(names)) != len(names):
            raise BenchError(f"scene names must be unique across scenes and sample_scenes: {names}")
        if CLEAN not in self.conditions:
            raise BenchError("conditions must include \"clean\" (transitions are relative to it)")
        if len(set(self.conditions) | set(self.extra_conditions)) != (
                len(self.conditions) + len(self.extra_conditions)):
            raise BenchError("condition names must be unique (conditions + extra_conditions)")
        for cond, per_scene in self.extra_conditions.items():
            missing = sorted(set(names) - set(per_scene))
            if missing:
                raise BenchError(f"extra condition {cond!r} lacks a bundle for scenes {missing}; "
                                 "give one directory per scene")
        if not self.tasks:
            raise BenchError("tasks is empty; name at least one of cup, tape, pen")
        for task, pair in self.policies.items():
            if len(pair) != 2 or pair[0] == pair[1]:
                raise BenchError(f"task {task!r} needs two different policies [pi_1, pi_2], "
                                 f"got {list(pair)}")
        for name in ("trials", "real_trials"):
            if getattr(self, name) < 1:
                raise BenchError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sample_gaussians < 100:
            raise BenchError(f"sample_gaussians must be >= 100, got {self.sample_gaussians}")
        if self.max_frames is not None and self.max_frames < 1:
            raise BenchError(f"max_frames must be >= 1 or null, got {self.max_frames}")
        if not 0 <= self.capture_noise < 0.5:
            raise BenchError(f"capture_noise must be in [0, 0.5), got {self.capture_noise}")
        if not 0 < self.alpha < 1:
            raise BenchError(f"alpha must be in (0, 1), got {self.alpha}; the paper uses 0.05")
        if min(self.image_size) < 8:
            raise BenchError(f"image_size must be two pixel counts >= 8, got "
                             f"{list(self.image_size)}")
        for name in ("seed", "sim_condition_offset", "real_condition_offset"):
            if getattr(self, name) < 0:
                raise BenchError(f"{name} must be >= 0, got {getattr(self, name)}")
        real = range(self.real_condition_offset, self.real_condition_offset + self.real_trials)
        sim = range(self.sim_condition_offset, self.sim_condition_offset + self.trials)
        if set(real) & set(sim):
            raise BenchError("real_condition_offset must give initial conditions disjoint from "
                             "the simulated ones; raise it above sim_condition_offset + trials")

    def validate_registries(self) -> None:
        """Check every preset, task, policy and metric name against its registry."""
        import bench.policies.visual  # noqa: F401 - registers the visual policies
        from bench.policies import POLICIES
        from bench.sim.tasks import get_task
        from metrics.registry import scorer_info
        from perturbations.registry import PERTURBATIONS

        for cond in self.conditions:
            if cond != CLEAN:
                try:
                    PERTURBATIONS.get(cond)
                except ValueError as exc:
                    raise BenchError(f"condition: {exc}") from None
        for task in self.tasks:
            get_task(task)
            for name in self.policies[task]:
                POLICIES.get(name)
        for metric in self.metrics:
            scorer_info(metric)
        if self.render_backend != "auto":
            from bench.render import resolve_backend

            resolve_backend(self.render_backend)

    def validate_inputs(self) -> None:
        """Check that every given scene and extra-condition bundle directory holds a scene."""
        from bench.scene.bundle import SCENE_FILE

        given = [("scene", name, path) for name, path in self.scenes.items()]
        given += [(f"extra condition {cond!r}, scene", name, path)
                  for cond, per_scene in self.extra_conditions.items()
                  for name, path in per_scene.items()]
        for what, name, path in given:
            if not (Path(path) / SCENE_FILE).is_file():
                raise BenchError(f"{what} {name!r}: {path} is not a scene bundle (no {SCENE_FILE});"
                                 " fix the path in the spec (relative paths are relative to it)")

    @property
    def scene_names(self) -> list[str]:
        return list(self.sample_scenes) + list(self.scenes)

    @property
    def all_conditions(self) -> list[str]:
        return list(self.conditions) + list(self.extra_conditions)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["policies"] = {t: list(p) for t, p in self.policies.items()}
        return data

    def replace(self, **changes: Any) -> StudySpec:
        return dataclasses.replace(self, **changes)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_str_seq(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _is_map(value: Any, check: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and check(v) for k, v in value.items())


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


#: Spec key -> (check of its value, what the JSON must hold). Checked before anything else so
#: a malformed spec fails with the key's name, not with a TypeError deep in the runner.
FIELD_TYPES: dict[str, tuple[Any, str]] = {
    "name": (lambda v: isinstance(v, str), "a string"),
    "scenes": (lambda v: _is_map(v, _is_path), "an object: scene name -> bundle directory"),
    "sample_scenes": (lambda v: _is_map(v, _is_int), "an object: scene name -> integer seed"),
    "sample_gaussians": (_is_int, "an integer"),
    "conditions": (_is_str_seq, "a list of condition names"),
    "extra_conditions": (lambda v: _is_map(v, lambda m: _is_map(m, _is_path)),
                         "an object: condition -> {scene name: bundle directory}"),
    "seed": (_is_int, "an integer"),
    "tasks": (_is_str_seq, "a list of task names"),
    "policies": (lambda v: _is_map(v, _is_str_seq), "an object: task -> [pi_1, pi_2]"),
    "trials": (_is_int, "an integer"),
    "real_trials": (_is_int, "an integer"),
    "sim_condition_offset": (_is_int, "an integer"),
    "real_condition_offset": (_is_int, "an integer"),
    "image_size": (lambda v: isinstance(v, (list, tuple)) and len(v) == 2
                   and all(_is_int(x) for x in v), "[height, width] in pixels"),
    "max_frames": (lambda v: v is None or _is_int(v), "an integer or null"),
    "metrics": (_is_str_seq, "a list of metric names"),
    "capture_noise": (_is_real, "a number"),
    "render_backend": (lambda v: isinstance(v, str), "a string"),
    "alpha": (_is_real, "a number"),
    "sequential": (lambda v: v is None or isinstance(v, (Mapping, SequentialConfig)),
                   "an object {method, min_trials, batch_size, alpha, ...} or null"),
}


def check_field_types(values: Mapping[str, Any]) -> None:
    """Refuse a value of the wrong JSON type, naming the key and what it must hold."""
    for key, value in values.items():
        check, expected = FIELD_TYPES[key]
        if not check(value):
            raise BenchError(f"spec key {key!r} must be {expected}, got {value!r}")


def spec_from_dict(data: dict[str, Any], *, base: str | os.PathLike | None = None) -> StudySpec:
    """Build a spec from parsed JSON; relative bundle paths resolve against ``base``."""
    if not isinstance(data, dict):
        raise BenchError("a study spec must be a JSON object")
    known = {f.name for f in dataclasses.fields(StudySpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BenchError(f"unknown spec keys {unknown}; valid keys: {sorted(known)}")
    check_field_types(data)
    data = dict(data)
    root = Path(base) if base is not None else Path.cwd()

    def resolve(p: str) -> str:
        return str(p) if Path(p).is_absolute() else str((root / p).resolve())

    if "scenes" in data:
        data["scenes"] = {k: resolve(v) for k, v in data["scenes"].items()}
    if "extra_conditions" in data:
        data["extra_conditions"] = {c: {s: resolve(p) for s, p in m.items()}
                                    for c, m in data["extra_conditions"].items()}
    if "policies" in data:
        data["policies"] = {t: tuple(p) for t, p in data["policies"].items()}
    try:
        return StudySpec(**data)
    except TypeError as exc:
        raise BenchError(f"bad study spec: {exc}") from None


def load_spec(path: str | os.PathLike) -> StudySpec:
    """Read a spec JSON file (relative paths are relative to the file)."""
    path = Path(path)
    data = read_json(path, what="spec file", fix="write a JSON StudySpec (see bench.study.spec)")
    return spec_from_dict(data, base=path.parent)
