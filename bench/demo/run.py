"""The main job (``bench demo``): the whole study end to end on the bundled worlds.

A clear sequence of stage functions; each takes the run context and returns
nothing, recording what it made in ``context.records`` / ``context.outputs``.
The whole run is written into a staged directory that is renamed into place
only when every stage succeeded.

A run is one **profile** (:data:`PROFILES`: ``quick``, ``default``, ``paper``), a
:class:`DemoProfile` that :func:`profile_spec` turns into a
:class:`~bench.study.spec.StudySpec` preset on the demo's assets
(:func:`demo_assets`): the three scenes (the reconstructed backgrounds of the
ground-truth worlds ``gt-duo``, ``gt-flat``, ``gt-g2``), the shipped coverage
retrainings as extra conditions, the held-out captures for the Test views, and
per task two policies. The "real" domain is ``real_domain: "world"``
(:mod:`bench.study.world_domain`): the "real" trials run in the MuJoCo
ground-truth worlds, the simulated ones on the reconstructions. Rollouts run on
the process executor (2 workers). Costs and the profiles' budgets: ``docs/demo.md``.

Stages:

1. ``study`` - :func:`bench.study.runner.run_study`: condition bundles +
   manifests (``scenes/``), quality scores, paired rollouts, verdict tables
   (``tables/``) and figures (``figures/``), all rows in ``results.sqlite``
2. ``yubi`` - the YUBI-Real2Sim tables regenerated from the shipped public data
   (``yubi/``)
3. ``summary`` - ``summary.csv`` / ``summary.md`` (conditions, ranking agreement,
   reliability) and the same on stdout

Same seed and profile -> the same tables (rollouts, scores and manifests are
deterministic whichever executor runs them; figures are byte-stable on one
matplotlib build).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest, staged_output_dir
from perturbations.registry import preset_names

VERSION = 3
#: Demo scene name -> its ground-truth world (the "real" domain of every profile).
WORLDS = {"duo": "gt-duo", "flat": "gt-flat", "g2": "gt-g2"}
#: The retrained coverage conditions shipped with the demo (prepared bundles per world).
COVERAGE = ("central-pinhole", "contiguous-30", "random-30")
TASKS = ("cup", "tape", "pen")


@dataclass(frozen=True)
class DemoProfile:
    """One named demo preset: the study settings of ``bench demo --profile NAME``.

    Attributes:
        name: Profile name (``quick``, ``default``, ``paper``).
        description: One line for ``--help`` and the docs.
        tasks: Tasks evaluated.
        trials: Simulated rollouts per (scene, condition, task, policy) cell.
        real_trials: Ground-truth-world rollouts per (scene, task, policy).
        presets: Artifact presets besides clean.
        coverage: Shipped coverage retrainings used as extra conditions.
        image_size: Wrist image (height, width), pixels, in both domains.
        max_frames: Time limit in 10 Hz frames: a number, ``{task: frames}`` (every scene),
            or None: YUBI's limits (:func:`_yubi_max_frames`: 600, 1,800 for Duo Tape/Pen
            and G2 Pen).
        metrics: Quality scorers of the Test / OBS-Probe views.
        obs_policy_every: Keep every k-th policy query's frame for OBS-Policy (0: off; it
            scores NR metrics only, so it is on where NVS-SQA is).
        workers: Process-executor workers (1: the serial executor).
        fisheye_mode: How the simulated domain draws the Gaussian background into the
            fisheyes (``deployment.fisheye_mode``): ``direct`` (each Gaussian projected with
            the fisheye model, 3.2x cheaper per rollout on CPU, docs/demo.md) or ``cubemap``
            (pinhole faces remapped, YUBI's path; its background depth runs 15-27 % short on
            the demo's large near Gaussians, docs/demo.md). The real domain has no Gaussians.
        control: Also run the control condition ``clean-repeat`` (the clean reconstruction
            on a disjoint block of starts: the transitions chance alone produces).
        background_color: ``shipped``: align the simulated backgrounds' colours to the
            robot's camera with the shipped per-room fit (``real_world.background_color``,
            :func:`bench.demo.appearance_assets.load_background_color`); ``none``: unaligned.
    """

    name: str
    description: str
    tasks: tuple[str, ...]
    trials: int
    real_trials: int
    presets: tuple[str, ...] = field(default_factory=lambda: tuple(preset_names()))
    coverage: tuple[str, ...] = COVERAGE
    image_size: tuple[int, int] = (64, 64)
    max_frames: int | dict[str, dict[str, int]] | None = 200
    metrics: tuple[str, ...] = ("psnr", "ssim")
    obs_policy_every: int = 0
    workers: int = 2
    fisheye_mode: str = "direct"
    control: bool = False
    background_color: str = "none"

    @property
    def conditions(self) -> tuple[str, ...]:
        """Every condition: clean, the presets, the control (if any), the coverage retrainings."""
        from bench.study.plan import CONTROL

        return ("clean", *self.presets, *((CONTROL,) if self.control else ()), *self.coverage)


def _yubi_max_frames() -> dict[str, dict[str, int]]:
    from bench.study.spec import YUBI_MAX_FRAMES

    return {scene: {task: 600 for task in TASKS} | YUBI_MAX_FRAMES.get(scene, {})
            for scene in WORLDS}


#: The paper profile's time limits per task (10 Hz frames), measured by
#: ``python -m bench.demo.time_limits`` (:mod:`bench.demo.time_limits`: expert and both learned
#: policies from held-out starts in the ground-truth worlds and on the clean reconstructions,
#: 600-frame measurement limit; rule ceil(1.5 x latest success / 50) x 50; docs/demo.md).
PAPER_MAX_FRAMES = {"cup": 150, "tape": 400, "pen": 700}
#: ``--time-limits`` choices: the profile's own limits, or YUBI's (:func:`_yubi_max_frames`).
TIME_LIMITS = ("profile", "yubi")
#: ``--background-color`` choices (:attr:`DemoProfile.background_color`).
BACKGROUND_COLORS = ("none", "shipped")

PROFILES: dict[str, DemoProfile] = {p.name: p for p in (
    DemoProfile("quick", "smoke run (~3 min): Cup, 1 simulated / 2 real trials per cell, "
                "clean + hole-90 + contiguous-30, 64 px, 120 frames, PSNR",
                tasks=("cup",), trials=1, real_trials=2, presets=("hole-90",),
                coverage=("contiguous-30",), max_frames=120, metrics=("psnr",)),
    DemoProfile("default", "the main run, the paper run's fast preview (<= 15 min on 2 cores): "
                "Cup, Tape and Pen, 10 simulated / 20 real trials per cell, clean + hole-90, "
                "the paper profile's measured time limits, 64 px, PSNR + SSIM + LPIPS",
                tasks=TASKS, trials=10, real_trials=20, presets=("hole-90",), coverage=(),
                max_frames=dict(PAPER_MAX_FRAMES), metrics=("psnr", "ssim", "lpips")),
    DemoProfile("cup", "Cup on all ten conditions (~4 min): 10 simulated / 20 real trials per "
                "cell, 64 px, 200 frames, PSNR + SSIM + LPIPS; the default before issue 33's "
                "item 7, and the settings of the policy screens (bench demo reaction, probe, "
                "lights, swap, visibility)",
                tasks=("cup",), trials=10, real_trials=20,
                metrics=("psnr", "ssim", "lpips")),
    DemoProfile("paper", "YUBI's design (hours; estimate in docs/demo.md): Cup, Tape and Pen, "
                "80 simulated / 20 real trials, the ten conditions + the control clean-repeat, "
                "measured time limits (--time-limits yubi: YUBI's), "
                "PSNR + SSIM + LPIPS + NVS-SQA (Test and OBS-Probe views)",
                tasks=TASKS, trials=80, real_trials=20, max_frames=dict(PAPER_MAX_FRAMES),
                metrics=("psnr", "ssim", "lpips", "nvs-sqa"),
                # no OBS-Policy: the policies' 64 px frames are below NVS-SQA's 69 px minimum;
                # the default direct fisheye, not the cube map (see fisheye_mode)
                obs_policy_every=0, control=True),
)}


def get_profile(name: str) -> DemoProfile:
    """The profile called ``name`` (one-line error naming the choices)."""
    from bench.errors import BenchError

    if name not in PROFILES:
        raise BenchError(f"unknown demo profile {name!r}; choose one of {list(PROFILES)} "
                         "(--profile)")
    return PROFILES[name]


def shipped_scenes() -> dict[str, Any]:
    """The demo's scenes as StudySpec fields: the reconstructions of the ground-truth worlds.

    ``bench.demo.build``: the clean background of each world and its three coverage
    retrainings (bundles registered to the world), and the capture manifest whose
    ``test_views`` are the held-out Test references (ground-truth captures never trained on).
    """
    from bench.demo.build import DEMO_CONDITIONS, shipped_bundle, shipped_capture

    def where(path: Path) -> str:
        # relative to the working directory when inside it (``make demo`` runs from the repo
        # root), so the tables and manifests of two checkouts are byte-identical
        try:
            return str(path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(path)

    coverage = [c for c in DEMO_CONDITIONS if c != "clean"]
    return {"scenes": {s: where(shipped_bundle(w, "clean")) for s, w in WORLDS.items()},
            "extra_conditions": {c: {s: where(shipped_bundle(w, c)) for s, w in WORLDS.items()}
                                 for c in coverage},
            "captures": {s: where(shipped_capture(w)) for s, w in WORLDS.items()}}


def learned_policies() -> dict[str, Any]:
    """The two learned policies per task and the real domain's settings (StudySpec fields).

    ``bench.policies.learned.DEMO_POLICIES`` on the ``yubi-dual`` rig with the settings
    of ``bench.worlds.real.REAL_DOMAIN`` (the ones the policies were trained with).
    """
    from bench.policies.learned import DEMO_POLICIES
    from bench.worlds.real import REAL_DOMAIN

    return {"policies": {t: tuple(DEMO_POLICIES[t]) for t in TASKS},
            "real_world": {"cameras": "yubi-dual", "tilt_deg": REAL_DOMAIN.tilt_deg,
                           "shadows": REAL_DOMAIN.shadows, "sensor": REAL_DOMAIN.sensor}}


def scripted_policies() -> dict[str, Any]:
    """The scripted visual policies on the single wrist camera (StudySpec fields)."""
    return {"policies": {t: ("visual-servo", "visual-glance") for t in TASKS},
            "real_world": {"cameras": "wrist", "shadows": False}}


def demo_assets() -> dict[str, Any]:
    """Scenes, coverage bundles, captures, policies and rig every profile runs on."""
    return {**shipped_scenes(), **learned_policies()}


@dataclass(frozen=True)
class DemoConfig:
    """Resolved configuration of a demo run (written to ``config.json``).

    Attributes:
        out: Output directory.
        profile: Profile name (:data:`PROFILES`).
        seed: Seed of every editor and of the capture noise.
        tasks: Tasks (None: the profile's).
        trials: Simulated rollouts per cell (None: the profile's).
        real_trials: Ground-truth-world rollouts per (scene, task, policy) (None: the profile's).
        workers: Process-executor workers (None: the profile's; 1 runs serially).
        overwrite: Replace an existing output directory.
        time_limits: ``profile`` (the profile's limits) or ``yubi`` (YUBI's: 600 frames,
            1,800 for Duo Tape/Pen and G2 Pen).
        resume: Run in ``out`` itself and continue a killed run there (the study store keeps
            every finished rollout); False stages the run and moves it into place at the end.
        reuse_from: An earlier demo output whose rollouts this run still plans are copied,
            checked, instead of run again (:mod:`bench.study.reuse`); None runs them all.
        pairs: ``((task, (pi_1, pi_2)), ...)``: another registered learned pair for each task
            given (``--pair TASK=POLICY_A,POLICY_B``; a ``{task: pair}`` mapping is accepted
            and stored in this form); the other tasks keep
            :data:`bench.policies.learned.DEMO_POLICIES`. None: the shipped pairs. Checked by
            :meth:`policy_pairs`; a pair other than the shipped one gives results the
            committed tables do not hold.
        frame_limits: ``((task, frames), ...)``: the rollout time limit of each task given, in
            10 Hz frames, in every scene, instead of the profile's (``--max-frames
            TASK=FRAMES``, e.g. the limit measured for a ``--pair``; a ``{task: frames}``
            mapping is accepted and stored in this form); the other tasks keep the profile's.
            None: the profile's limits. Checked by :meth:`frame_limit_overrides`; a limit
            other than the profile's gives results the committed tables do not hold.
        background_color: ``shipped`` or ``none`` (``--background-color``) instead of the
            profile's :attr:`DemoProfile.background_color`; None: the profile's. One other
            than the profile's gives results the committed tables do not hold.
    """

    out: Path
    profile: str = "default"
    seed: int = 0
    tasks: tuple[str, ...] | None = None
    trials: int | None = None
    real_trials: int | None = None
    workers: int | None = None
    overwrite: bool = False
    time_limits: str = "profile"
    resume: bool = False
    reuse_from: Path | None = field(default=None, kw_only=True)
    pairs: tuple[tuple[str, tuple[str, ...]], ...] | None = field(default=None, kw_only=True)
    frame_limits: tuple[tuple[str, int], ...] | None = field(default=None, kw_only=True)
    background_color: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.pairs is not None:  # lists (config.json) or a mapping -> hashable tuples
            object.__setattr__(self, "pairs", _pairs_tuple(self.pairs))
        if self.frame_limits is not None:  # likewise
            object.__setattr__(self, "frame_limits", _frame_limits_tuple(self.frame_limits))

    def resolved_profile(self) -> DemoProfile:
        """The profile with this config's overrides applied."""
        import dataclasses

        from bench.errors import BenchError

        if self.time_limits not in TIME_LIMITS:
            raise BenchError(f"unknown --time-limits {self.time_limits!r}; choose one of "
                             f"{list(TIME_LIMITS)}")
        if self.resume and self.overwrite:
            raise BenchError("--resume continues --out and --overwrite deletes it; give one")
        if self.background_color not in (None, *BACKGROUND_COLORS):
            raise BenchError(f"unknown --background-color {self.background_color!r}; choose "
                             f"one of {list(BACKGROUND_COLORS)}")
        base = get_profile(self.profile)
        given = {k: getattr(self, k) for k in ("tasks", "trials", "real_trials", "workers",
                                                "background_color")
                 if getattr(self, k) is not None}
        if self.time_limits == "yubi":
            given["max_frames"] = None
        limits = self.frame_limit_overrides(given.get("tasks", base.tasks))
        if limits:  # {task: frames} (every scene, profile_spec) with the given tasks' limits
            frames = base.max_frames
            per_task = dict(frames) if isinstance(frames, dict) else \
                {t: frames for t in given.get("tasks", base.tasks)}
            given["max_frames"] = per_task | limits
        return dataclasses.replace(base, **given)

    def frame_limit_overrides(self, tasks: tuple[str, ...]) -> dict[str, int]:
        """``frame_limits`` as ``{task: frames}``, each refused in one line naming ``--max-frames``.

        Refused: with ``time_limits="yubi"`` (one or the other), a task given twice or not
        among ``tasks`` (the run's), and a limit that is not a whole number in
        [1, :data:`bench.safety.MAX_EPISODE_FRAMES`].
        """
        from bench.errors import BenchError
        from bench.safety import check_episode_frames

        if self.frame_limits and self.time_limits == "yubi":
            raise BenchError("--max-frames and --time-limits yubi contradict (--max-frames "
                             "replaces some of the profile's limits); give one or the other")
        chosen: dict[str, int] = {}
        for task, frames in self.frame_limits or ():
            flag = f"--max-frames {task}={frames}"
            if task in chosen:
                raise BenchError(f"--max-frames gives task {task!r} twice; give one limit per "
                                 "task")
            if task not in tasks:
                raise BenchError(f"{flag}: task {task!r} is not among this run's tasks "
                                 f"{list(tasks)} (--profile {self.profile}, --tasks)")
            chosen[task] = check_episode_frames(frames, what=flag)
        return chosen

    def study_spec(self):
        """The :class:`~bench.study.spec.StudySpec` this demo runs (the profile as a preset)."""
        profile = self.resolved_profile()
        return profile_spec(profile, seed=self.seed, pairs=self.policy_pairs(profile.tasks))

    def policy_pairs(self, tasks: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        """``pairs`` as ``{task: (pi_1, pi_2)}``, each refused in one line naming ``--pair``.

        Refused: not exactly two policies, the same policy twice, a task given twice or not
        among ``tasks`` (the run's), a name the policy registry does not hold, and a policy
        without shipped weights for its task (not a learned policy, or one whose registry
        ``tasks`` or weight folder lacks the task).
        """
        from bench.errors import BenchError

        chosen: dict[str, tuple[str, str]] = {}
        for task, pair in self.pairs or ():
            flag = f"--pair {task}={','.join(pair)}"
            if len(pair) != 2:
                raise BenchError(f"{flag}: give exactly two policies (TASK=POLICY_A,POLICY_B), "
                                 f"got {len(pair)}")
            if pair[0] == pair[1]:
                raise BenchError(f"{flag}: the pair names {pair[0]!r} twice; give two "
                                 "different policies")
            if task in chosen:
                raise BenchError(f"--pair gives task {task!r} twice; give one pair per task")
            if task not in tasks:
                raise BenchError(f"{flag}: task {task!r} is not among this run's tasks "
                                 f"{list(tasks)} (--profile {self.profile}, --tasks)")
            for name in pair:
                _check_pair_policy(flag, name, task)
            chosen[task] = (pair[0], pair[1])
        return chosen

    def unshipped_pairs(self) -> dict[str, tuple[tuple[str, str], tuple[str, str]]]:
        """``{task: (given pair, shipped pair)}`` for each ``--pair`` other than the shipped."""
        from bench.policies.learned import DEMO_POLICIES

        given = self.policy_pairs(self.resolved_profile().tasks)
        return {t: (pair, tuple(DEMO_POLICIES[t])) for t, pair in given.items()
                if pair != tuple(DEMO_POLICIES[t])}

    def changed_frame_limits(self) -> dict[str, tuple[int, int | None]]:
        """``{task: (given limit, profile's limit)}`` for each ``--max-frames`` that differs."""
        profile = get_profile(self.profile)
        limits = self.frame_limit_overrides(self.resolved_profile().tasks)
        base = profile.max_frames
        theirs = {t: base.get(t) if isinstance(base, dict) else base for t in limits}
        return {t: (f, theirs[t]) for t, f in limits.items() if f != theirs[t]}

    def unshipped_note(self) -> str:
        """One line naming what the committed tables do not hold ('' if none).

        The ``--pair`` pairs other than the shipped ones and the ``--max-frames`` limits other
        than the profile's.
        """
        parts = []
        changed = self.unshipped_pairs()
        if changed:
            parts.append("policy pairs other than the shipped ones (--pair): " + "; ".join(
                f"{t} {a} vs {b} (shipped: {c} vs {d})"
                for t, ((a, b), (c, d)) in changed.items()))
        limits = self.changed_frame_limits()
        if limits:
            parts.append("time limits other than the profile's (--max-frames): " + ", ".join(
                f"{t} {f} frames (profile's: {p})" for t, (f, p) in limits.items()))
        theirs = get_profile(self.profile).background_color
        if self.resolved_profile().background_color != theirs:
            parts.append(f"background colours {self.background_color} (--background-color; "
                         f"profile's: {theirs})")
        if not parts:
            return ""
        return "; ".join(parts) + "; the committed tables do not hold these results"

    def executor(self):
        """The :class:`~bench.study.executors.ExecutorConfig` of the rollouts."""
        from bench.study.executors import ExecutorConfig

        workers = self.resolved_profile().workers
        return ExecutorConfig(kind="process", workers=workers) if workers > 1 else \
            ExecutorConfig()


def _pairs_tuple(pairs: Any) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """``DemoConfig.pairs`` in its stored form: ``((task, (policy, ...)), ...)``; () -> None."""
    from bench.errors import BenchError

    bad = BenchError(f"pairs must be (task, (policy_a, policy_b)) items (--pair "
                     f"TASK=POLICY_A,POLICY_B), got {pairs!r}")
    result = []
    try:
        for task, pair in (pairs.items() if isinstance(pairs, dict) else pairs):
            if not isinstance(task, str) or isinstance(pair, str) or \
                    not all(isinstance(name, str) for name in pair):
                raise bad
            result.append((task, tuple(pair)))
    except (TypeError, ValueError):
        raise bad from None
    return tuple(result) or None


def _frame_limits_tuple(limits: Any) -> tuple[tuple[str, int], ...] | None:
    """``DemoConfig.frame_limits`` in its stored form: ``((task, frames), ...)``; () -> None.

    Only the form is checked here; the limits themselves by
    :meth:`DemoConfig.frame_limit_overrides`.
    """
    from bench.errors import BenchError

    bad = BenchError(f"frame_limits must be (task, frames) items (--max-frames "
                     f"TASK=FRAMES), got {limits!r:.80}")
    result = []
    try:
        for task, frames in (limits.items() if isinstance(limits, dict) else limits):
            if not isinstance(task, str) or not isinstance(frames, (int, float, str)):
                raise bad  # a number that is not a whole one: frame_limit_overrides
            result.append((task, frames))
    except (TypeError, ValueError):
        raise bad from None
    return tuple(result) or None


def _has_weights(name: str, task: str) -> bool:
    """Whether registered policy ``name`` is learned, registered for ``task`` and ships weights."""
    from bench.policies import POLICIES
    from bench.policies.learned import LEARNED_VARIANTS, policy_dir

    meta = POLICIES.entry(name).meta
    weights = LEARNED_VARIANTS.get(name, (name,))[0]  # a deployment variant: its recipe's
    return bool(meta.get("learned")) and task in meta.get("tasks", ()) and \
        (policy_dir(weights, task) / "model.safetensors").is_file()


def _check_pair_policy(flag: str, name: str, task: str) -> None:
    """Refuse ``name`` on ``task`` unless it is a registered learned policy with weights there."""
    from bench.errors import BenchError
    from bench.policies import POLICIES

    try:
        entry = POLICIES.entry(name)  # the registry StudySpec.validate_registries reads
    except ValueError as error:  # unknown name, with close matches and the known ones
        raise BenchError(f"{flag}: {error}") from None
    if _has_weights(name, task):
        return
    have = ", ".join(n for n in POLICIES.names() if _has_weights(n, task))
    if not entry.meta.get("learned"):
        raise BenchError(f"{flag}: policy {name!r} has no shipped weights (not a learned "
                         f"policy); the demo compares learned policies, for {task}: {have}")
    raise BenchError(f"{flag}: policy {name!r} has no shipped weights for task {task!r} "
                     f"(registered for {', '.join(entry.meta.get('tasks', ())) or 'no task'}); "
                     f"learned policies with {task} weights: {have}")


def profile_spec(profile: DemoProfile, *, seed: int = 0,
                 pairs: dict[str, tuple[str, str]] | None = None):
    """``profile`` as a :class:`~bench.study.spec.StudySpec` on the demo's assets.

    ``pairs``: ``{task: (pi_1, pi_2)}`` replacing the shipped pair of those tasks (checked
    by :meth:`DemoConfig.policy_pairs`).
    """
    from bench.study.spec import StudySpec

    assets = demo_assets()
    settings = assets.pop("real_world")  # rig and render settings of the real domain
    extra = {c: per_scene for c, per_scene in assets.pop("extra_conditions").items()
             if c in profile.coverage}
    policies = {t: tuple((pairs or {}).get(t, assets["policies"][t])) for t in profile.tasks}
    scenes = list(assets.get("sample_scenes", {})) + list(assets.get("scenes", {}))
    max_frames = profile.max_frames
    if max_frames is None:
        max_frames = {s: v for s, v in _yubi_max_frames().items() if s in scenes}
    elif isinstance(max_frames, dict):  # {task: frames} in every scene
        max_frames = {s: dict(max_frames) for s in scenes}
    if isinstance(max_frames, dict):
        max_frames = {s: {t: f for t, f in v.items() if t in profile.tasks}
                      for s, v in max_frames.items()}
    conditions = tuple(c for c in profile.conditions if c not in profile.coverage)
    return StudySpec(name="demo", **{**assets, "policies": policies},
                     extra_conditions=extra, conditions=conditions,
                     seed=seed, tasks=profile.tasks, trials=profile.trials,
                     real_trials=profile.real_trials, image_size=profile.image_size,
                     max_frames=max_frames, metrics=profile.metrics,
                     obs_policy_every=profile.obs_policy_every,
                     deployment={"fisheye_mode": profile.fisheye_mode}, real_domain="world",
                     real_world={"worlds": {s: WORLDS[s] for s in scenes}, **settings,
                                 "mesh_lights": _mesh_lights(scenes),
                                 **_background_color(profile, scenes)})


def _mesh_lights(scenes: list[str]) -> dict[str, Any]:
    """The shipped mesh lights of ``scenes`` (``bench demo lights``, docs/demo-build.md)."""
    from bench.demo.appearance_assets import load_mesh_lights

    return {s: lights.to_json() for s, lights in load_mesh_lights().items() if s in scenes}


def _background_color(profile: DemoProfile, scenes: list[str]) -> dict[str, Any]:
    """``{"background_color": the shipped fit of scenes}`` if ``profile`` aligns, else ``{}``.

    Unaligned, the key stays out of ``real_world`` (a stored spec keeps its text).
    """
    if profile.background_color == "none":
        return {}
    from bench.demo.appearance_assets import load_background_color

    return {"background_color": {s: fit.to_dict() for s, fit in
                                 load_background_color().items() if s in scenes}}


def _clean_bundle(spec: Any, scene: str) -> Any:
    import dataclasses

    from bench.scene.bundle import load_scene
    from bench.scene.sample import make_sample_scene

    if scene in spec.sample_scenes:
        made = make_sample_scene(seed=spec.sample_scenes[scene], n_gaussians=spec.sample_gaussians)
        return dataclasses.replace(made, name=scene)
    return load_scene(spec.scenes[scene])


def measure_rollout_costs(spec: Any, frames: dict | None = None
                          ) -> dict[tuple[str, str, str], float]:
    """(domain, task, policy) -> seconds of one rollout (first scene, clean, first start).

    ``frames``, when given, receives the same keys -> the rollout's frames (for a cost per
    frame).

    Each env is built as the study's workers build it
    (:func:`bench.study.world_domain.make_domain_env`); env construction is not timed.
    """
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode
    from bench.study.plan import init_index
    from bench.study.world_domain import make_domain_env

    scene = spec.scene_names[0]
    bundle = _clean_bundle(spec, scene)
    costs = {}
    for task in spec.tasks:
        overrides = {"image_size": spec.image_size, "max_frames": spec.frames_limit(scene, task),
                     "render_backend": spec.render_backend}
        for domain in ("sim", "real"):
            env = make_domain_env(spec, scene=scene, task=task, domain=domain, bundle=bundle,
                                  overrides=overrides)
            try:
                for name in spec.policies[task]:
                    policy = make_policy(name, env, seed=spec.seed)
                    started = time.perf_counter()
                    record, _, _ = run_episode(env, policy,
                                               init_index=init_index(spec, domain, 0))
                    costs[(domain, task, name)] = time.perf_counter() - started
                    if frames is not None:
                        frames[(domain, task, name)] = max(1, int(record.frames))
            finally:
                env.close()
    return costs


def estimate_demo(config: DemoConfig, *, report: bool = False) -> dict[str, Any]:
    """Rollout counts of ``config``'s profile and its rollout time from measured costs.

    The estimate is sum(count x measured seconds) over (domain, task, policy), divided by
    the workers (2 workers on 2 cores scale ~1.8x, measured in docs/executors.md, so this
    is optimistic by ~10 %); bundles, quality scoring and the YUBI stage are not included.
    One measured start says little about how long the others run, so the worst case (every
    rollout runs to its time limit at the measured seconds per frame) is given beside it.
    """
    from bench.study.plan import rollout_cells
    from bench.study.preflight import check_obs_policy_frames

    spec = config.study_spec()
    check_obs_policy_frames(spec)  # what the run would refuse at once, refused here too
    profile = config.resolved_profile()
    counts: dict[tuple[str, str, str], int] = {}
    limit_frames: dict[tuple[str, str, str], int] = {}  # rollouts x time limit, frames
    for cell in rollout_cells(spec):
        limit = spec.frames_limit(cell.scene, cell.task) or 600  # the tasks' default
        for name in cell.policies:
            key = (cell.domain, cell.task, name)
            counts[key] = counts.get(key, 0) + cell.trials
            limit_frames[key] = limit_frames.get(key, 0) + cell.trials * limit
    frames: dict[tuple[str, str, str], int] = {}
    costs = measure_rollout_costs(spec, frames)
    seconds = sum(n * costs[key] for key, n in counts.items()) / profile.workers
    worst = sum(f * costs[key] / frames[key] for key, f in limit_frames.items()) / \
        profile.workers
    result = {"profile": profile.name, "workers": profile.workers,
              "sim_rollouts": sum(n for k, n in counts.items() if k[0] == "sim"),
              "real_rollouts": sum(n for k, n in counts.items() if k[0] == "real"),
              "max_frames": spec.max_frames,
              "seconds_per_rollout": {"/".join(k): round(v, 2) for k, v in costs.items()},
              "frames_per_rollout": {"/".join(k): v for k, v in frames.items()},
              "rollout_seconds_estimate": round(seconds, 1),
              "worst_case_seconds": round(worst, 1)}
    if report:
        print(f"[bench demo] profile {profile.name}: {result['sim_rollouts']} simulated + "
              f"{result['real_rollouts']} ground-truth-world rollouts on {profile.workers} "
              f"worker(s), time limits {spec.max_frames}; measured s/rollout "
              f"{result['seconds_per_rollout']} (frames {result['frames_per_rollout']}); "
              f"rollouts ~{_hours(seconds)} at the measured rollouts, {_hours(worst)} if every "
              "rollout ran to its limit (bundles, scoring and the YUBI stage not included)")
    return result


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


@dataclass
class DemoContext:
    """Mutable state handed from stage to stage."""

    config: DemoConfig
    root: Path  # the staged output directory (renamed to config.out at the end)
    records: list[dict[str, Any]] = field(default_factory=list)  # one row per condition
    outputs: dict[str, Path] = field(default_factory=dict)  # name -> file, hashed in manifest
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    study: dict[str, Any] = field(default_factory=dict)  # the study's summary
    yubi: dict[str, Any] = field(default_factory=dict)


def stage_study(ctx: DemoContext) -> None:
    """Run the paired study on the three sample rooms into the output root."""
    from bench.study.runner import run_study

    spec = ctx.config.study_spec()
    result = run_study(spec, ctx.root, overwrite=False,
                       resume=ctx.config.resume, executor=ctx.config.executor(),
                       reuse_from=ctx.config.reuse_from)
    ctx.study = result.tables
    for rel in result.tables["files"]:
        ctx.outputs[rel] = ctx.root / rel
    from bench.demo.success_frames import write_study_success_frames

    for path in write_study_success_frames(ctx.root / "tables", spec):
        ctx.outputs[f"tables/{path.name}"] = path
    sizes = {}  # scene -> clean background size
    for (scene, cond), bundle in sorted(result.bundles.items(), key=lambda kv: kv[0][1] != "clean"):
        manifest = json.loads(bundle.manifest.read_text())
        counts = manifest.get("counts", {})
        if cond == "clean":
            sizes[scene] = counts["gaussians"]
        given = manifest["tool"] in ("prepared/1", "scene/1")  # a bundle used in place
        ctx.records.append({
            "scene": scene, "condition": cond, "tool": manifest["tool"],
            "gaussians": counts["gaussians"] if given else (
                sizes[scene] - counts.get("removed", 0) + counts.get("added", 0)),
            "removed": counts.get("removed", 0), "added": counts.get("added", 0),
            "moved": counts.get("moved", 0),
            "path": _shown_path(bundle.path, ctx.root),
            "manifest_sha256": bundle.manifest_sha256[:12]})


def _shown_path(path: Path, root: Path) -> str:
    """``path`` relative to the output, or to the checkout for a shipped bundle."""
    import bench

    for base in (root, Path(bench.__file__).resolve().parents[1]):
        if path.resolve().is_relative_to(base.resolve()):
            return str(path.resolve().relative_to(base.resolve()))
    return str(path)


def stage_yubi(ctx: DemoContext) -> None:
    """Regenerate the YUBI-Real2Sim tables and figures from the shipped public data."""
    from protocols import DEFAULT_YUBI_DATA
    from protocols.yubi import load_yubi
    from protocols.yubi_report import regenerate

    target = ctx.root / "yubi"
    if target.exists():  # a resumed run regenerates it (deterministic)
        from bench.safety import remove_inside

        remove_inside(target, ctx.root)
    target.mkdir()
    checks = regenerate(load_yubi(DEFAULT_YUBI_DATA), target)
    table1 = checks["table1"]
    ctx.yubi = {"table1_rows_matching": sum(c["match"] for c in table1),
                "table1_rows": len(table1)}
    ctx.outputs["yubi/manifest.json"] = target / "manifest.json"


def stage_summary(ctx: DemoContext) -> None:
    """Write the condition + verdict summary as CSV + Markdown and print it."""
    from protocols.tablefmt import csv_text, markdown_text

    ctx.records.sort(key=lambda r: (r["scene"], r["condition"]))
    columns = ["scene", "condition", "tool", "gaussians", "removed", "added", "moved", "path",
               "manifest_sha256"]
    rows = [[r[c] for c in columns] for r in ctx.records]
    atomic_write_bytes(ctx.root / "summary.csv", csv_text(columns, rows).encode())
    spec = ctx.config.study_spec()
    ranking = [[r["condition"], f"{r['correct']}/{r['eligible']}",
                _agreement_interval(r["correct"], r["eligible"]), r["accuracy"], r["mae"],
                r["mmrv"], r["pearson"]] for r in ctx.study["ranking"]]
    text = markdown_text(columns, rows, title="Conditions")
    if ctx.config.unshipped_note():
        text = f"Note: {ctx.config.unshipped_note()}.\n\n" + text
    text += "\n" + markdown_text(
        ["condition", "agree/eligible", "95 % Wilson", "Acc_rank", "MAE (pp)", "MMRV", "Pearson"],
        ranking, title=f"Ranking agreement with the real domain ({ctx.study['real_source']})",
        notes=["ground-truth-world: the \"real\" trials ran in the MuJoCo ground-truth worlds "
               f"{sorted(set(spec.real_world['worlds'].values()))}, the "
               "simulated ones on the scene bundles (no physical robot); eligible: scene-task "
               "comparisons with a strict real order (real ties are unrankable)."])
    transitions = ctx.study.get("transitions") or []
    if transitions:
        text += "\n" + markdown_text(
            ["condition", "lost / gained", "control's", "worse / better", "McNemar p",
             "Fisher p (pooled)", "underpowered"],
            [[t["condition"], f"{t['sig_lost']} / {t['sig_gained']}",
              t["control_transitions"] or "-", f"{t['worse']} / {t['better']}",
              _p2(t["mcnemar_p"]), _p2(t["fisher_p"]), f"{t['underpowered']}/{t['comparisons']}"]
             for t in transitions],
            title="Transitions vs clean beside the control's (tables/transitions.csv)",
            notes=["control's: lost + gained of clean-repeat, the clean reconstruction on "
                   "other starts (what chance alone gives; - = no control in this profile); "
                   "worse / better: outcomes changed on the shared starts, McNemar over them; "
                   "underpowered: comparisons whose trials cannot detect their observed gap "
                   "at 80 % power (tables/comparisons.csv)."])
    rel = ctx.study["reliability"]
    if "methods" in rel:
        targets = list(next(iter(rel["methods"].values())))
        tasks = [t for t in targets if t in spec.tasks]
        rel_rows = [[m, *[f"{v[t][0]}/{v[t][1]}" for t in targets],
                     f"{sum(v[t][0] for t in tasks)}/{sum(v[t][1] for t in tasks)}"]
                    for m, v in rel["methods"].items()]
        text += "\n" + markdown_text(
            ["method", *targets, "every task's decisions"], rel_rows,
            title="Scene-held-out reliability classifier (correct / decisions)",
            notes=["every task's decisions: the per-task columns summed (each decision once; "
                   "All-three is the pooled target over the tasks together)."])
    else:
        text += f"\nReliability classifier skipped: {rel.get('skipped')}\n"
    if ctx.yubi:
        text += (f"\nYUBI tables regenerated: Table I rows matching the paper "
                 f"{ctx.yubi['table1_rows_matching']}/{ctx.yubi['table1_rows']} (yubi/)\n")
    atomic_write_bytes(ctx.root / "summary.md", text.encode())
    ctx.outputs["summary.csv"] = ctx.root / "summary.csv"
    ctx.outputs["summary.md"] = ctx.root / "summary.md"
    print(text, end="")


def _agreement_interval(correct: int, eligible: int) -> str:
    """95 % Wilson interval of an agreement count, as ``low-high`` (``-`` without comparisons)."""
    from protocols.stats import wilson_interval

    if not eligible:
        return "-"
    interval = wilson_interval(int(correct), int(eligible))
    return f"{interval.low:.2f}-{interval.high:.2f}"


def _p2(p: Any) -> str:
    """A p value to two significant figures (``-`` where there is none)."""
    return "-" if p in (None, "") else f"{float(p):#.2g}"  # "#": 0.0010, not 0.001


STAGES: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("study", stage_study),
    ("yubi", stage_yubi),
    ("summary", stage_summary),
]


def run_demo(config: DemoConfig) -> Path:
    """Run every stage into a staged directory, then move it to ``config.out``.

    With ``config.resume`` the stages run in ``config.out`` itself (created if missing): a
    killed run continues where its results store stopped, every finished rollout kept.

    Returns:
        The output directory (with ``config.json`` and ``manifest.json``).
    """
    if config.resume:
        config.out.parent.mkdir(parents=True, exist_ok=True)
        _run_stages(config, config.out)
        return config.out
    with staged_output_dir(config.out, overwrite=config.overwrite) as tmp:
        _run_stages(config, tmp)
    return config.out


def _run_stages(config: DemoConfig, tmp: Path) -> None:
    """Every stage, then ``config.json``, ``manifest.json`` and the report, into ``tmp``."""
    ctx = DemoContext(config=config, root=tmp)
    for name, stage in STAGES:
        started = time.perf_counter()
        print(f"[bench demo] stage {name} ...", file=sys.stderr)
        stage(ctx)
        ctx.timings[name] = round(time.perf_counter() - started, 3)
        print(f"[bench demo] stage {name} done in {ctx.timings[name]:.1f}s", file=sys.stderr)
    from bench.numerics import numerics_record

    atomic_write_json(tmp / "config.json", config_record(config))
    manifest = make_manifest(tool=f"demo/{VERSION}", params=config, seed=config.seed,
                             outputs=ctx.outputs,
                             counts={"conditions": len(ctx.records)},
                             extra={"stages": [n for n, _ in STAGES],
                                    # the float kernels the numbers were computed with
                                    "numerics": numerics_record()})
    atomic_write_json(tmp / "manifest.json", manifest)
    from bench.study.report import write_report_or_warn

    write_report_or_warn(tmp)  # report/ (its own manifest.json), after the demo's
    print(f"[bench demo] wall time by stage (s): {ctx.timings}", file=sys.stderr)


def config_record(config: DemoConfig) -> dict[str, Any]:
    """What ``config.json`` holds: every field, the resolved profile and the executor.

    ``pairs`` is written as ``[[task, [pi_1, pi_2]], ...]`` (null: the shipped pairs),
    ``frame_limits`` as ``[[task, frames], ...]`` (null: the profile's limits);
    ``DemoConfig(**{f.name: record[f.name] for f in dataclasses.fields(DemoConfig)})`` gives
    the config back (``out`` and ``reuse_from`` as strings).
    """
    import dataclasses

    return {**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)},
            "resolved_profile": config.resolved_profile(),
            "executor": config.executor().to_json()}
