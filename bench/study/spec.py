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

Where each number comes from (``docs/studies.md``): ``real_results`` (a CSV of
the robot's outcomes) or ``real_domain: "simulated"`` (the clean simulator as
a labelled stand-in, generated worlds only by default); ``captures`` (held-out
images + cameras per scene) or, for generated worlds, the synthetic capture;
``coverage`` conditions retrained by the runner from the scene's capture
manifest.

Unknown keys are refused with the list of valid ones; presets, tasks, policies
and metrics are checked against their registries ("did you mean" errors).

A policy may also be an entry point ``"mypkg.pol:make_a"`` or an object
``{"factory": "mypkg.pol:make_b", "kwargs": {...}, "name": "b"}`` (see
:mod:`bench.policies.entry`); it is stored under its label and the resolved spec
keeps the label -> ref table in ``policy_refs``. ``"deployment"`` sets the
deployment-fidelity knobs (:mod:`bench.study.deployment`: asynchronous execution with
injected latency, controller gains, shadows, fisheye mode).

A spec file is read by :func:`bench.study.spec_file.load_spec`: this spec and the file's
``executor`` (where the rollouts run, not part of the study) resolved together. The
rollouts a spec asks for, and each trial's start, are :mod:`bench.study.plan`'s.
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
from bench.study.plan import CLEAN, CONTROL, domain_trials, init_index
from protocols.sequential import SequentialConfig


def default_conditions() -> tuple[str, ...]:
    """``clean`` then the registry's artifact presets in study order (perturbations.registry)."""
    from perturbations.registry import preset_names

    return (CLEAN, *preset_names())


DEFAULT_POLICIES = ("visual-servo", "visual-glance")
#: Per-task defaults where the visual policies cannot run (the deformable rope: issue 16).
TASK_DEFAULT_POLICIES = {"rope": ("rope-expert", "rope-expert-hasty")}
REAL_DOMAINS = ("results", "simulated", "world")
#: The YUBI time limits (PAPERS.md): 600 frames, 1,800 for Duo Tape/Pen and G2 Pen.
YUBI_MAX_FRAMES = {"duo": {"tape": 1800, "pen": 1800}, "g2": {"pen": 1800}}
#: Training settings of coverage retrainings a spec may set (``coverage_training``).
COVERAGE_TRAINING_KEYS = ("iters", "resolution", "backend", "sh_degree", "densify",
                          "max_gaussians", "random_init_points", "threads")


@dataclass(frozen=True)
class StudySpec:
    """Everything that defines a study run.

    Attributes:
        name: Study name (the ``study`` column of every stored row).
        scenes: Scene name -> scene bundle directory (relative to the spec file).
        sample_scenes: Scene name -> seed of a generated sample room (synthetic world).
        sample_gaussians: Background Gaussians of each generated sample room (count).
        conditions: ``"clean"`` plus perturbation presets (``perturbations`` registry names),
            and optionally the control ``"clean-repeat"`` (:data:`CONTROL`): the clean bundle
            again on a disjoint block of starts (``control_condition_offset``), whose
            transitions against clean measure what chance alone produces.
        extra_conditions: Condition name -> scene name -> prepared bundle directory (e.g.
            a coverage retraining from ``bench coverage`` + ``bench train``).
        seed: Seed of every editor (artifact conditions) and of the capture noise.
        tasks: Task names (``cup``, ``tape``, ``pen``, ``rope``: the deformable rope).
        policies: Task -> ``[pi_1, pi_2]`` policy labels (registry names, or labels of
            ``policy_refs``); tasks not listed use :data:`TASK_DEFAULT_POLICIES` (rope:
            ``rope-expert``, ``rope-expert-hasty``) or :data:`DEFAULT_POLICIES`.
        policy_refs: Label -> entry point or ``{"factory", "kwargs", "name"}`` ref of every
            policy that is not a plain registry name (filled from ``policies`` refs).
        deployment: Deployment-fidelity settings (:class:`bench.study.deployment.Deployment`
            fields; empty = blocking execution, stock gains, no shadows).
        trials: Simulated rollouts per (scene, condition, task, policy) cell.
        real_trials: Rollouts per (scene, task, policy) in the "real" domain.
        sim_condition_offset: First initial-condition index of simulated trials (trial t
            uses ``offset + t`` in every condition: paired rollouts). The default 100 is past
            the tasks' 80-point grid, so simulated starts are seeded uniform draws over the
            grid's box, the same distribution as the "real" block (offset 0 would put the first
            few trials on the grid's first row only).
        real_condition_offset: First initial-condition index of the "real" domain's trials
            (a separate block of the task grid's seeded draws).
        control_condition_offset: First initial-condition index of the control condition's
            trials (``clean-repeat``; a block disjoint from the simulated and "real" ones).
        image_size: Wrist image (height, width), pixels.
        max_frames: Time limit per rollout in 10 Hz frames: one number, or
            ``{scene: {task: frames}}`` (pairs not listed, and None, use the task's default,
            600; YUBI: :data:`YUBI_MAX_FRAMES`).
        metrics: Quality scorers (``metrics`` registry names); FR ones score Test views only.
        capture_noise: Std of the sensor noise added to the clean Test renders that stand
            in for captured images, in [0, 1] intensity units.
        render_backend: ``bench.render`` backend for scoring and observations.
        alpha: Significance level of the Fisher test.
        real_results: CSV of the real robot's outcomes (per trial, per cell) or a YUBI
            ``results/data`` directory; when given no "real" rollouts are simulated.
        real_domain: ``"results"`` (needs ``real_results``) or ``"simulated"`` (the clean
            simulator on other starts, labelled ``simulated-real``). None: ``results`` with
            ``real_results``, ``simulated`` for a spec of generated worlds only; a spec with
            user scenes must say which. ``"world"``: the "real" trials run in MuJoCo
            ground-truth worlds (``real_world``; :mod:`bench.study.world_domain`), labelled
            ``ground-truth-world``.
        real_world: With ``real_domain: "world"``: ``worlds`` (scene -> world id) and the
            world settings (:class:`bench.study.world_domain.WorldDomain`: cameras, tilt,
            shadows, sensor, physics offset).
        captures: Scene -> held-out captures for the Test views: a capture manifest
            (``bench capture``; its ``test_views``) or a folder of images + a camera file
            (JSON, COLMAP text/binary model, ``transforms.json``). Generated worlds without an
            entry use the synthetic capture (clean render + noise).
        coverage: Condition name -> plan options (``mode``, ``fraction``, ``seed``; the mode
            defaults from the name: ``central-pinhole``, ``contiguous-*``, ``random-*``,
            ``full``); retrained by the runner from each scene's capture manifest.
        coverage_training: Settings of those retrainings (``iters``, ``resolution`` = longest
            image side in pixels or null, ``backend``, ``sh_degree``, ...).
        initial_points: Scene -> seed PLY of the retrainings (dense MVS points; None: random
            init drawn from ``seed``).
        obs_policy_every: Keep every k-th policy query's wrist frame of each simulated rollout
            for the OBS-Policy scores (0 turns OBS-Policy off).
        reliability_variants: Conditions whose labels the reliability classifier uses (None:
            every condition but clean, as YUBI).
        include_clean: Also label and classify the clean condition.
        sequential: Sequential stopping (:class:`protocols.sequential.SequentialConfig`, given
            as a JSON object: method, max_trials, min_trials, batch_size, alpha, effect); None
            runs the fixed design. Its ``max_trials`` is ``trials``.
    """

    name: str = "study"
    scenes: dict[str, str] = field(default_factory=dict)
    sample_scenes: dict[str, int] = field(default_factory=dict)
    sample_gaussians: int = 40000
    conditions: tuple[str, ...] = field(default_factory=default_conditions)
    extra_conditions: dict[str, dict[str, str]] = field(default_factory=dict)
    seed: int = 0
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    policies: dict[str, tuple[str, str]] = field(default_factory=dict)
    policy_refs: dict[str, Any] = field(default_factory=dict)
    deployment: dict[str, Any] = field(default_factory=dict)
    trials: int = 10
    real_trials: int = 10
    sim_condition_offset: int = 100
    real_condition_offset: int = 1000
    control_condition_offset: int = 2000
    image_size: tuple[int, int] = (128, 128)
    max_frames: int | dict[str, dict[str, int]] | None = None
    metrics: tuple[str, ...] = ("psnr", "ssim", "lpips", "nvs-sqa")
    capture_noise: float = 0.01
    render_backend: str = "auto"
    alpha: float = 0.05
    real_results: str | None = None
    real_domain: str | None = None
    real_world: dict[str, Any] = field(default_factory=dict)
    captures: dict[str, str] = field(default_factory=dict)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    coverage_training: dict[str, Any] = field(default_factory=dict)
    initial_points: dict[str, str] = field(default_factory=dict)
    obs_policy_every: int = 1
    reliability_variants: tuple[str, ...] | None = None
    include_clean: bool = False
    sequential: SequentialConfig | None = None

    def __post_init__(self) -> None:
        check_field_types({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        self._resolve_sequential()  # issue 17: the sequential key
        object.__setattr__(self, "conditions", tuple(self.conditions))
        object.__setattr__(self, "tasks", tuple(t.lower() for t in self.tasks))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        pols = {t: tuple(self.policies.get(t, TASK_DEFAULT_POLICIES.get(t, DEFAULT_POLICIES)))
                for t in self.tasks}
        extra = sorted(set(self.policies) - set(self.tasks))
        if extra:
            raise BenchError(f"policies given for tasks {extra} that are not in tasks "
                             f"{list(self.tasks)}; add them to tasks or remove them")
        object.__setattr__(self, "policies", pols)
        if self.reliability_variants is not None:
            object.__setattr__(self, "reliability_variants", tuple(self.reliability_variants))
        if self.real_domain is None:
            resolved = "results" if self.real_results is not None else (
                "simulated" if not self.scenes else None)
            if resolved is None:
                raise BenchError("the spec names your own scenes but no real outcomes; add "
                                 "\"real_results\": \"real.csv\" (your robot's trials) or "
                                 "\"real_domain\": \"simulated\" (a labelled stand-in)")
            object.__setattr__(self, "real_domain", resolved)
        self._check_basic()
        from bench.study.deployment import Deployment

        Deployment.from_dict(self.deployment)  # refuse bad knobs before anything runs
        self._check_real_studies()

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
        if CONTROL in set(self.extra_conditions) | set(self.coverage):
            raise BenchError(f"{CONTROL!r} is the control condition (the clean bundle on other "
                             "starts); list it in conditions, not in extra_conditions or "
                             "coverage")
        if self.reliability_variants is not None and CONTROL in self.reliability_variants:
            raise BenchError(f"reliability_variants names the control {CONTROL!r}, which has no "
                             "quality scores of its own (it is the clean bundle); drop it")
        if len(set(self.conditions) | set(self.extra_conditions)) != (
                len(self.conditions) + len(self.extra_conditions)):
            raise BenchError("condition names must be unique (conditions + extra_conditions)")
        for cond, per_scene in self.extra_conditions.items():
            missing = sorted(set(names) - set(per_scene))
            if missing:
                raise BenchError(f"extra condition {cond!r} lacks a bundle for scenes {missing}; "
                                 "give one directory per scene")
        if not self.tasks:
            raise BenchError("tasks is empty; name at least one of cup, tape, pen, rope")
        for task, pair in self.policies.items():
            if len(pair) != 2 or pair[0] == pair[1]:
                raise BenchError(f"task {task!r} needs two different policies [pi_1, pi_2], "
                                 f"got {list(pair)}")
        for name in ("trials", "real_trials"):
            if getattr(self, name) < 1:
                raise BenchError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sample_gaussians < 100:
            raise BenchError(f"sample_gaussians must be >= 100, got {self.sample_gaussians}")
        self._check_max_frames(names)
        if not 0 <= self.capture_noise < 0.5:
            raise BenchError(f"capture_noise must be in [0, 0.5), got {self.capture_noise}")
        if not 0 < self.alpha < 1:
            raise BenchError(f"alpha must be in (0, 1), got {self.alpha}; the paper uses 0.05")
        if min(self.image_size) < 8:
            raise BenchError(f"image_size must be two pixel counts >= 8, got "
                             f"{list(self.image_size)}")
        for name in ("seed", "sim_condition_offset", "real_condition_offset",
                     "control_condition_offset"):
            if getattr(self, name) < 0:
                raise BenchError(f"{name} must be >= 0, got {getattr(self, name)}")
        self._check_start_blocks()

    def _check_start_blocks(self) -> None:
        """The start blocks of "real", simulated and control trials must not overlap."""
        blocks = {name: range(init_index(self, d, 0, c),
                              init_index(self, d, domain_trials(self, d), c))
                  for name, d, c in (("real_condition_offset", "real", None),
                                     ("sim_condition_offset", "sim", None),
                                     ("control_condition_offset", "sim", CONTROL))
                  if c is None or c in self.conditions}  # the starts the plan's trials take
        names = list(blocks)
        for i, first in enumerate(names):
            for second in names[i + 1:]:
                a, b = blocks[first], blocks[second]
                if len(a) and len(b) and max(a.start, b.start) < min(a.stop, b.stop):
                    raise BenchError(
                        f"{first} ({a.start}..{a.stop - 1}) and {second} ({b.start}.."
                        f"{b.stop - 1}) overlap; the blocks of initial conditions must be "
                        "disjoint: move one past the other's end (offset + trials)")

    def _check_max_frames(self, names: list[str]) -> None:
        from bench.safety import check_episode_frames as check_cap  # issue 30: bounded

        if self.max_frames is None or isinstance(self.max_frames, int):
            if self.max_frames is not None and self.max_frames < 1:
                raise BenchError(f"max_frames must be >= 1 or null, got {self.max_frames}")
            if self.max_frames is not None:
                check_cap(self.max_frames, what="max_frames")
            return
        for scene, per_task in self.max_frames.items():
            if scene not in names:
                raise BenchError(f"max_frames names scene {scene!r}, which is not in the spec "
                                 f"(scenes: {names}); fix the name")
            for task, frames in per_task.items():
                if task not in self.tasks:
                    raise BenchError(f"max_frames[{scene!r}] names task {task!r}, which is not in "
                                     f"tasks {list(self.tasks)}; fix the name")
                if frames < 1:
                    raise BenchError(f"max_frames[{scene!r}][{task!r}] must be >= 1, got {frames}")
                check_cap(frames, what=f"max_frames[{scene!r}][{task!r}]")

    def _check_real_studies(self) -> None:
        names = self.scene_names
        if self.real_domain not in REAL_DOMAINS:
            raise BenchError(f"real_domain must be one of {list(REAL_DOMAINS)}, got "
                             f"{self.real_domain!r}")
        if self.real_domain == "results" and self.real_results is None:
            raise BenchError("real_domain \"results\" needs \"real_results\": a CSV of your "
                             "robot's outcomes")
        if self.real_domain in ("simulated", "world") and self.real_results is not None:
            raise BenchError(f"give either real_results or real_domain \"{self.real_domain}\", "
                             "not both")
        self._check_real_world(names)
        for key in ("captures", "initial_points"):
            unknown = sorted(set(getattr(self, key)) - set(names))
            if unknown:
                raise BenchError(f"{key} names scenes {unknown} that are not in the spec "
                                 f"(scenes: {names}); fix the names")
        clash = sorted(set(self.coverage) & (set(self.conditions) | set(self.extra_conditions)))
        if clash:
            raise BenchError(f"coverage conditions {clash} are also in conditions / "
                             "extra_conditions; name each condition once")
        if self.coverage:
            from bench.study.coverage import plan_options

            for cond, options in self.coverage.items():
                plan_options(cond, options)  # validates mode, fraction, seed
            missing = [s for s in names if s not in self.captures]
            if missing:
                raise BenchError(f"coverage conditions need each scene's capture manifest; add "
                                 f"captures for scenes {missing} (the capture.json of `bench "
                                 "capture`)")
        unknown = sorted(set(self.coverage_training) - set(COVERAGE_TRAINING_KEYS))
        if unknown:
            raise BenchError(f"unknown coverage_training keys {unknown}; valid keys: "
                             f"{list(COVERAGE_TRAINING_KEYS)}")
        if self.obs_policy_every < 0:
            raise BenchError(f"obs_policy_every must be >= 0 (0: no OBS-Policy), got "
                             f"{self.obs_policy_every}")
        if self.reliability_variants is not None:
            unknown = sorted(set(self.reliability_variants) - set(self.all_conditions))
            if unknown:
                raise BenchError(f"reliability_variants {unknown} are not conditions of the "
                                 f"study ({self.all_conditions}); fix the names")

    def _check_real_world(self, names: list[str]) -> None:
        if self.real_domain != "world":
            if self.real_world:
                raise BenchError("real_world is for real_domain \"world\"; set real_domain to "
                                 "\"world\" or drop real_world")
            return
        from bench.study.world_domain import WorldDomain

        domain = WorldDomain.from_dict(self.real_world)
        domain.check_scenes(names)
        object.__setattr__(self, "real_world", domain.to_json())  # resolved: every default

    def frames_limit(self, scene: str, task: str) -> int | None:
        """Time limit of one (scene, task) in 10 Hz frames (None: the task's default)."""
        if isinstance(self.max_frames, dict):
            return self.max_frames.get(scene, {}).get(task)
        return self.max_frames

    @property
    def reliability_conditions(self) -> list[str]:
        """Conditions the reliability classifier labels (YUBI: the counterfactual ones)."""
        chosen = (list(self.reliability_variants) if self.reliability_variants is not None
                  else [c for c in self.all_conditions if c not in (CLEAN, CONTROL)])
        if self.include_clean and CLEAN not in chosen:
            chosen = [CLEAN, *chosen]
        if not self.include_clean:
            chosen = [c for c in chosen if c != CLEAN]
        return chosen

    def validate_registries(self) -> None:
        """Check every preset, task, policy and metric name against its registry."""
        import bench.policies.visual  # noqa: F401 - registers the visual policies
        from bench.policies import POLICIES
        from bench.policies.base import check_policy_task
        from bench.sim.tasks import get_task
        from metrics.registry import scorer_info
        from perturbations.registry import PERTURBATIONS

        for cond in self.conditions:
            if cond not in (CLEAN, CONTROL):  # the control is the clean bundle
                try:
                    PERTURBATIONS.get(cond)
                except ValueError as exc:
                    raise BenchError(f"condition: {exc}") from None
        for task in self.tasks:
            spec = get_task(task)
            for name in self.policies[task]:
                if name in self.policy_refs:
                    from bench.policies.entry import validate_ref

                    validate_ref(self.policy_refs[name])
                else:
                    POLICIES.get(name)
                    check_policy_task(name, spec)  # rope experts <-> the rope task
        for metric in self.metrics:
            scorer_info(metric)
        if self.real_domain == "world":
            from bench.study.world_domain import WorldDomain

            WorldDomain.from_dict(self.real_world).check_registry()
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
        from bench.study.coverage import refuse_planless_coverage

        refuse_planless_coverage(self)
        for scene, path in self.initial_points.items():
            if not Path(path).is_file():
                raise BenchError(f"initial_points of scene {scene!r}: {path} is not a file; "
                                 "give the seed PLY (dense MVS points) or drop the entry")
        if self.real_results is not None:
            from bench.study.real_results import read_real_results

            read_real_results(self)  # every refusal of the CSV before --out is touched
        from bench.study.captures import check_capture_sources

        check_capture_sources(self)

    @property
    def scene_names(self) -> list[str]:
        """Every scene name: the sample scenes, then the prepared scenes."""
        return list(self.sample_scenes) + list(self.scenes)

    @property
    def all_conditions(self) -> list[str]:
        """Every condition name: the conditions, the extra conditions, then the coverage ones."""
        return list(self.conditions) + list(self.extra_conditions) + list(self.coverage)

    @property
    def quality_conditions(self) -> list[str]:
        """Conditions scored for quality: all but the control (its bundle is clean's)."""
        return [c for c in self.all_conditions if c != CONTROL]

    @property
    def control(self) -> bool:
        """True when the study runs the control condition ``clean-repeat``."""
        return CONTROL in self.conditions

    @property
    def simulated_real(self) -> bool:
        """True when the "real" domain is the simulator's stand-in (``simulated-real``)."""
        return self.real_domain == "simulated"

    @property
    def rolls_out_real(self) -> bool:
        """True when the "real" trials are rollouts (``simulated`` or ``world``), not data."""
        return self.real_domain in ("simulated", "world")

    def to_json(self) -> dict[str, Any]:
        """This spec as a JSON-ready dict (tuples as lists)."""
        data = dataclasses.asdict(self)
        data["policies"] = {t: list(p) for t, p in self.policies.items()}
        if CONTROL not in self.conditions and self.control_condition_offset == \
                StudySpec.control_condition_offset:
            # added with the control condition: a study without one keeps its stored spec
            # text, so a run begun before it still resumes
            del data["control_condition_offset"]
        if self.reliability_variants is not None:
            data["reliability_variants"] = list(self.reliability_variants)
        return data

    def replace(self, **changes: Any) -> StudySpec:
        """A copy of this spec with ``changes`` applied (``dataclasses.replace``)."""
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
    "policies": (lambda v: _is_map(v, lambda p: isinstance(p, (list, tuple))),
                 "an object: task -> [pi_1, pi_2] (names, entry points or {factory, kwargs})"),
    "policy_refs": (lambda v: isinstance(v, Mapping), "an object: label -> policy ref"),
    "deployment": (lambda v: isinstance(v, Mapping), "an object of deployment settings"),
    "trials": (_is_int, "an integer"),
    "real_trials": (_is_int, "an integer"),
    "sim_condition_offset": (_is_int, "an integer"),
    "real_condition_offset": (_is_int, "an integer"),
    "control_condition_offset": (_is_int, "an integer"),
    "image_size": (lambda v: isinstance(v, (list, tuple)) and len(v) == 2
                   and all(_is_int(x) for x in v), "[height, width] in pixels"),
    "max_frames": (lambda v: v is None or _is_int(v) or _is_map(v, lambda m: _is_map(m, _is_int)),
                   "an integer, null or an object {scene: {task: frames}}"),
    "metrics": (_is_str_seq, "a list of metric names"),
    "capture_noise": (_is_real, "a number"),
    "render_backend": (lambda v: isinstance(v, str), "a string"),
    "alpha": (_is_real, "a number"),
    "real_results": (lambda v: v is None or _is_path(v), "a CSV path (or a YUBI data directory)"),
    "real_domain": (lambda v: v is None or isinstance(v, str),
                    "\"results\", \"simulated\" or \"world\""),
    "real_world": (lambda v: isinstance(v, Mapping),
                   "an object {worlds: {scene: world id}, cameras, tilt_deg, shadows, ...}"),
    "captures": (lambda v: _is_map(v, _is_path),
                 "an object: scene name -> capture manifest or images folder"),
    "coverage": (lambda v: _is_map(v, lambda m: isinstance(m, Mapping)),
                 "an object: condition -> {mode, fraction, seed}"),
    "coverage_training": (lambda v: isinstance(v, Mapping), "an object of training settings"),
    "initial_points": (lambda v: _is_map(v, _is_path), "an object: scene name -> seed PLY"),
    "obs_policy_every": (_is_int, "an integer (0: no OBS-Policy)"),
    "reliability_variants": (lambda v: v is None or _is_str_seq(v),
                             "a list of condition names or null"),
    "include_clean": (lambda v: isinstance(v, bool), "true or false"),
    "sequential": (lambda v: v is None or isinstance(v, (Mapping, SequentialConfig)),
                   "an object {method, min_trials, batch_size, alpha, ...} or null"),
}


def check_field_types(values: Mapping[str, Any]) -> None:
    """Refuse a value of the wrong JSON type, naming the key and what it must hold."""
    for key, value in values.items():
        check, expected = FIELD_TYPES[key]
        if not check(value):
            raise BenchError(f"spec key {key!r} must be {expected}, got {value!r}")


#: Keys of a spec file that are not part of the study: where its rollouts run. Kept out of
#: the spec (and its hash, so a study may be resumed with another executor); read with the
#: spec by :func:`bench.study.spec_file.load_spec`.
RUN_KEYS = ("executor",)


def split_spec_keys(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(study keys, :data:`RUN_KEYS`) of a parsed spec file; refuses a non-object, unknown keys."""
    if not isinstance(data, dict):
        raise BenchError("a study spec must be a JSON object")
    known = {f.name for f in dataclasses.fields(StudySpec)} | set(RUN_KEYS)
    unknown = sorted(set(data) - known)
    if unknown:
        raise BenchError(f"unknown spec keys {unknown}; valid keys: {sorted(known)}")
    return ({k: v for k, v in data.items() if k not in RUN_KEYS},
            {k: v for k, v in data.items() if k in RUN_KEYS})


def spec_from_dict(data: dict[str, Any], *, base: str | os.PathLike | None = None) -> StudySpec:
    """Build a spec from parsed JSON; relative bundle paths resolve against ``base``.

    :data:`RUN_KEYS` (``executor``) are set aside unread: they are not the study
    (:func:`bench.study.spec_file.spec_file_from_dict` resolves them with the spec).
    """
    data, _ = split_spec_keys(data)
    check_field_types(data)
    root = Path(base) if base is not None else Path.cwd()

    def resolve(p: str) -> str:
        return str(p) if Path(p).is_absolute() else str((root / p).resolve())

    if "scenes" in data:
        data["scenes"] = {k: resolve(v) for k, v in data["scenes"].items()}
    for key in ("captures", "initial_points"):
        if key in data:
            data[key] = {k: resolve(v) for k, v in data[key].items()}
    if data.get("real_results") is not None:
        data["real_results"] = resolve(data["real_results"])
    if "extra_conditions" in data:
        data["extra_conditions"] = {c: {s: resolve(p) for s, p in m.items()}
                                    for c, m in data["extra_conditions"].items()}
    if "policies" in data:
        data["policies"], data["policy_refs"] = _split_policy_refs(
            data["policies"], dict(data.get("policy_refs", {})))
    if "deployment" in data:
        data["deployment"] = dict(data["deployment"])
    try:
        return StudySpec(**data)
    except TypeError as exc:
        raise BenchError(f"bad study spec: {exc}") from None


def _split_policy_refs(policies: Mapping[str, Any], refs: dict[str, Any]
                       ) -> tuple[dict[str, tuple[str, ...]], dict[str, Any]]:
    """Task -> labels, and label -> ref for every entry point / object ref."""
    from bench.policies.entry import check_ref, is_entry_point, ref_label

    labels: dict[str, tuple[str, ...]] = {}
    for task, pair in policies.items():
        names = []
        for ref in pair:
            check_ref(ref)
            label = ref_label(ref)
            if not isinstance(ref, str) or is_entry_point(ref):
                if refs.get(label, ref) != ref:
                    raise BenchError(f"policy label {label!r} names two different refs; give "
                                     "each a distinct \"name\"")
                refs[label] = ref
            names.append(label)
        labels[task] = tuple(names)
    return labels, refs
