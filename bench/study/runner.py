"""Run a study end to end: condition bundles, quality scores, paired rollouts, verdicts.

Stages (each skips work already in the results store, so ``resume=True``
continues a killed run without redoing or duplicating anything):

1. :func:`prepare_conditions` - the clean bundle of every scene (a given
   directory, or a generated sample room) and one bundle + ``manifest.json``
   per artifact preset (``perturbations.apply``); prepared extra bundles
   (coverage retrainings) are referenced. Manifests go into the store.
2. :func:`score_quality` - Test views: the held-out ``test`` cameras rendered
   in every condition, scored against the "captured" images; OBS-Probe: the
   clean scene's probe trajectory rendered in every condition (NR metrics).
   In the synthetic world the captured images are the clean scene's Test
   renders plus seeded sensor noise (``capture_noise``), so full-reference
   scores stay finite on clean.
3. :func:`run_rollouts` - for every scene, condition, task, policy and trial,
   one rollout in the Gymnasium env from initial condition
   ``sim_condition_offset + trial`` (the same index in every condition: paired).
   The "real" domain of the synthetic world is the same env on the *clean*
   scene with initial conditions ``real_condition_offset + trial`` (a disjoint
   seeded block of the task grid): the policy's true skill on the undamaged
   world, measured on starts the simulated trials never see.
4. :func:`bench.study.analysis.analyse` - Wilson intervals, ranking agreement
   and MAE vs real, Fisher transitions vs clean, the scene-held-out
   reliability classifier; tables (CSV + Markdown) and figures (PNG + PDF).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest, sha256_file
from bench.study.spec import CLEAN, StudySpec
from bench.study.store import ResultsStore, RolloutRow

SPEC_FILE = "study.json"


@dataclass(frozen=True)
class ConditionBundle:
    """One scene under one condition, ready to load."""

    scene: str
    condition: str
    path: Path  # bundle directory
    manifest: Path  # its manifest.json
    manifest_sha256: str


@dataclass
class StudyResult:
    """What :func:`run_study` produced."""

    out: Path
    bundles: dict[tuple[str, str], ConditionBundle]
    new_rollouts: int = 0
    tables: dict[str, Any] = field(default_factory=dict)


def _log(message: str) -> None:
    print(f"[bench study] {message}", file=sys.stderr)


# --------------------------------------------------------------------------- output directory


def open_output(spec: StudySpec, out: Path, *, resume: bool, overwrite: bool) -> ResultsStore:
    """Create or reopen ``out`` and its store; a resumed run must use the same spec."""
    spec_text = json.dumps(spec.to_json(), sort_keys=True)
    if out.exists() and not out.is_dir():
        raise BenchError(f"--out {out} is a file, not a directory; choose a directory path")
    if out.exists() and any(out.iterdir()):
        ours = (out / SPEC_FILE).is_file()
        if overwrite and not resume:
            if not ours:
                raise BenchError(f"{out} exists and is not a study output; refusing to replace it")
            shutil.rmtree(out)
        elif not resume:
            raise BenchError(f"{out} already exists; pass --resume to continue that study or "
                             "--overwrite to start again")
        elif not ours:
            raise BenchError(f"{out} is not a study output (no {SPEC_FILE}); check --out")
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out)
    stored = store.get_meta("spec")
    if stored is None:
        store.set_meta("spec", spec_text)
    elif stored != spec_text:
        store.close()
        raise BenchError(f"{out} holds a study with a different spec; resume with the same "
                         "--spec or choose a new --out")
    atomic_write_json(out / SPEC_FILE, spec.to_json())
    return store


# --------------------------------------------------------------------------- conditions


def _scene_dir(out: Path, scene: str, condition: str) -> Path:
    return out / "scenes" / scene / condition


def _reference_manifest(out: Path, scene: str, condition: str, source: Path, tool: str) -> Path:
    """Manifest of a bundle used in place (user scene, prepared extra condition)."""
    from bench.scene.bundle import load_scene

    bundle = load_scene(source)
    inputs = {"scene": source / "scene.json"}
    background = source / "background.ply"
    if background.is_file():
        inputs["background"] = background
    manifest = make_manifest(tool=tool, params={"source": str(source)}, seed=None, inputs=inputs,
                             counts={"gaussians": len(bundle.background)},
                             extra={"scene_name": scene, "condition": condition})
    path = out / "scenes" / scene / f"{condition}.manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, manifest)
    return path


def _make_sample(out: Path, scene: str, seed: int, n_gaussians: int) -> Path:
    from bench.provenance import staged_output_dir
    from bench.scene.bundle import write_scene_files
    from bench.scene.sample import make_sample_scene

    target = _scene_dir(out, scene, CLEAN)
    if (target / "manifest.json").is_file():
        return target
    if target.exists():  # a killed run left a partial directory (staging makes this rare)
        shutil.rmtree(target)
    import dataclasses

    bundle = dataclasses.replace(make_sample_scene(seed=seed, n_gaussians=n_gaussians), name=scene)
    with staged_output_dir(target, overwrite=False) as tmp:
        paths = write_scene_files(bundle, tmp)
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool="sample-room/1", params={"seed": seed, "n_gaussians": n_gaussians}, seed=seed,
            outputs=paths, counts={"gaussians": len(bundle.background)},
            extra={"scene_name": scene}))
    return target


def _preset_bundle(spec: StudySpec, out: Path, scene: str, cond: str, clean_dir: Path,
                   clean: list[Any]) -> Path:
    """The bundle of ``scene`` under artifact preset ``cond`` (made once; kept on resume).

    ``clean`` caches the loaded clean bundle across the presets of one scene.
    """
    from bench.scene.bundle import load_scene
    from perturbations.apply import apply_perturbation, save_perturbed

    target = _scene_dir(out, scene, cond)
    if not (target / "manifest.json").is_file():
        if target.exists():  # a killed run left a partial directory
            shutil.rmtree(target)
        if not clean:
            clean.append(load_scene(clean_dir))
        save_perturbed(apply_perturbation(clean[0], cond, seed=spec.seed), target)
    return target


def _scene_entries(spec: StudySpec, out: Path, scene: str) -> list[tuple[str, Path, Path, str]]:
    """(condition, bundle dir, manifest, tool id) of every condition of one scene."""
    from perturbations.registry import tool_id

    if scene in spec.sample_scenes:
        clean_dir = _make_sample(out, scene, spec.sample_scenes[scene], spec.sample_gaussians)
        entries = [(CLEAN, clean_dir, clean_dir / "manifest.json", "sample-room/1")]
    else:
        clean_dir = Path(spec.scenes[scene])
        entries = [(CLEAN, clean_dir, _reference_manifest(out, scene, CLEAN, clean_dir, "scene/1"),
                    "scene/1")]
    clean: list[Any] = []
    for cond in spec.conditions:
        if cond != CLEAN:
            target = _preset_bundle(spec, out, scene, cond, clean_dir, clean)
            entries.append((cond, target, target / "manifest.json", tool_id(cond)))
    for cond, per_scene in spec.extra_conditions.items():
        source = Path(per_scene[scene])
        entries.append((cond, source, _reference_manifest(out, scene, cond, source, "prepared/1"),
                        "prepared/1"))
    return entries


def prepare_conditions(spec: StudySpec, out: Path, store: ResultsStore, *,
                       progress: bool = True) -> dict[tuple[str, str], ConditionBundle]:
    """Clean + preset + extra bundles of every scene, each with a stored manifest.

    On resume a bundle whose manifest changed is refused by the store (its
    ``conditions`` row is stored with the old sha256).
    """
    from tqdm import tqdm

    bundles: dict[tuple[str, str], ConditionBundle] = {}
    total = len(spec.scene_names) * len(spec.all_conditions)
    bar = tqdm(total=total, desc="conditions", unit="bundle", file=sys.stderr,
               disable=not progress)
    for scene in spec.scene_names:
        for cond, path, manifest, tool in _scene_entries(spec, out, scene):
            sha = sha256_file(manifest)
            shown = path.relative_to(out) if path.is_relative_to(out) else path  # movable output
            store.add_condition(spec.name, scene, cond, tool=tool, path=str(shown),
                                manifest_sha256=sha, manifest=json.loads(manifest.read_text()))
            bundles[(scene, cond)] = ConditionBundle(scene, cond, path, manifest, sha)
            bar.update(1)
    bar.close()
    return bundles


# --------------------------------------------------------------------------- quality


def capture_images(spec: StudySpec, out: Path, scene: str, clean: ConditionBundle, *,
                   progress: bool = True) -> Path:
    """The synthetic world's "captured" Test images: clean renders + seeded sensor noise (PNG)."""
    import imageio.v3 as iio

    from metrics.views import render_frames, scene_cameras

    folder = out / "captures" / scene / "test"
    if (folder / "manifest.json").is_file():
        return folder
    from bench.scene.bundle import load_scene

    bundle = load_scene(clean.path)
    cameras = scene_cameras(bundle, "test")
    frames = render_frames(bundle.background, cameras, backend=spec.render_backend,
                           progress=progress)  # [V, H, W, 3] float in [0, 1]
    seed = int(np.random.SeedSequence([spec.seed, *scene.encode()]).generate_state(1)[0])
    rng = np.random.default_rng(seed)
    noisy = np.clip(frames + rng.normal(0.0, spec.capture_noise, frames.shape), 0.0, 1.0)
    images = (noisy * 255.0 + 0.5).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {}
    for i, (cam, image) in enumerate(zip(cameras, images, strict=True)):
        name = (getattr(cam, "name", "") or f"view_{i:04d}") + ".png"
        path = folder / name
        atomic_write_bytes(path, iio.imwrite("<bytes>", image, extension=".png"))
        outputs[name] = path
    atomic_write_json(folder / "manifest.json", make_manifest(
        tool="synthetic-capture/1", params={"capture_noise": spec.capture_noise}, seed=seed,
        inputs={"background": clean.path / "background.ply"}, outputs=outputs,
        counts={"images": len(outputs)}, extra={"scene_name": scene}))
    return folder


def score_quality(spec: StudySpec, out: Path, store: ResultsStore,
                  bundles: dict[tuple[str, str], ConditionBundle], *,
                  progress: bool = True) -> None:
    """Test (FR + NR) and OBS-Probe (NR) scores of every scene x condition into the store."""
    from tqdm import tqdm

    from bench.scene.bundle import load_scene
    from metrics.registry import get_scorer
    from metrics.views import obs_probe_views, scene_cameras, score_views, test_views

    scorers = [get_scorer(m) for m in spec.metrics]
    nr = [s for s in scorers if s.info.mode == "NR"]
    bar = tqdm(total=len(spec.scene_names) * len(spec.all_conditions), desc="quality",
               unit="condition", file=sys.stderr, disable=not progress)
    for scene in spec.scene_names:
        clean = bundles[(scene, CLEAN)]
        gt = capture_images(spec, out, scene, clean, progress=False)
        clean_bundle = load_scene(clean.path)
        probe = scene_cameras(clean_bundle, "obs_probe")
        test = scene_cameras(clean_bundle, "test")
        for cond in spec.all_conditions:
            bar.set_postfix_str(f"{scene}/{cond}")
            todo = [p for p in ("test", "obs-probe")
                    if not store.has_quality(spec.name, scene, cond, p)]
            if todo and not (todo == ["obs-probe"] and not nr):
                bundle = load_scene(bundles[(scene, cond)].path)
                rows = []
                if "test" in todo:
                    views = test_views(bundle, gt, variant=cond, cameras=test,
                                       backend=spec.render_backend, progress=False)
                    rows += score_views(_renamed(views, scene), scorers, progress=False)
                if "obs-probe" in todo and nr:
                    views = obs_probe_views(bundle, variant=cond, cameras=probe,
                                            backend=spec.render_backend, progress=False)
                    rows += score_views(_renamed(views, scene), nr, progress=False)
                store.add_quality(spec.name, rows)
            bar.update(1)
    bar.close()


def _renamed(views: Any, scene: str) -> Any:
    import dataclasses

    return dataclasses.replace(views, scene=scene)


# --------------------------------------------------------------------------- rollouts


def rollout_plan(spec: StudySpec) -> list[tuple[str, str, str, str, int]]:
    """Every (domain, scene, condition, task, trial) block, in execution order."""
    plan = []
    for scene in spec.scene_names:
        for task in spec.tasks:
            plan += [("real", scene, CLEAN, task, t) for t in range(spec.real_trials)]
        for cond in spec.all_conditions:
            for task in spec.tasks:
                plan += [("sim", scene, cond, task, t) for t in range(spec.trials)]
    return plan


def _missing_rollouts(spec: StudySpec, store: ResultsStore
                      ) -> dict[tuple[str, str, str, str], list[tuple[str, int]]]:
    """(scene, condition, task, domain) -> [(policy, trial)] not in the store yet, plan order."""
    todo: dict[tuple[str, str, str, str], list[tuple[str, int]]] = {}
    for domain, scene, cond, task, trial in rollout_plan(spec):
        for policy in spec.policies[task]:
            if not store.has_rollout((spec.name, scene, cond, task, policy, domain, trial)):
                todo.setdefault((scene, cond, task, domain), []).append((policy, trial))
    return todo


def init_condition(spec: StudySpec, domain: str, trial: int) -> int:
    """Initial-condition index of ``trial``: the same in every condition of a domain (paired)."""
    offset = spec.real_condition_offset if domain == "real" else spec.sim_condition_offset
    return offset + trial


def run_rollouts(spec: StudySpec, store: ResultsStore,
                 bundles: dict[tuple[str, str], ConditionBundle], *,
                 progress: bool = True) -> int:
    """Run every missing rollout; each is committed as soon as it ends. Returns how many ran."""
    from tqdm import tqdm

    import bench.policies.visual  # noqa: F401 - registers the visual policies
    import bench.sim
    from bench.policies import make_policy
    from bench.scene.bundle import load_scene
    from bench.sim.rollout import run_episode

    todo = _missing_rollouts(spec, store)
    bar = tqdm(total=sum(len(v) for v in todo.values()), desc="rollouts", unit="rollout",
               file=sys.stderr, disable=not progress)
    ran = 0
    loaded: dict[tuple[str, str], Any] = {}
    for (scene, cond, task, domain), items in todo.items():
        if (scene, cond) not in loaded:
            loaded.clear()  # keep one background in memory
            loaded[(scene, cond)] = load_scene(bundles[(scene, cond)].path)
        env = bench.sim.make_env(task, loaded[(scene, cond)], image_size=spec.image_size,
                                 max_frames=spec.max_frames, render_backend=spec.render_backend)
        try:
            policies = {p: make_policy(p, env, seed=spec.seed) for p in spec.policies[task]}
            for policy, trial in items:
                bar.set_postfix_str(f"{scene}/{cond}/{task}/{policy}/{domain}")
                start = init_condition(spec, domain, trial)
                record, _, _ = run_episode(env, policies[policy], condition=start,
                                           episode=trial, policy_name=policy)
                store.add_rollout(RolloutRow(
                    study=spec.name, scene=scene, condition=cond, task=task, policy=policy,
                    domain=domain, trial=trial, init_condition=start,
                    success=record.success, progress_final=record.progress_final,
                    progress_max=record.progress_max, frames=record.frames,
                    failure=record.failure, truncated=record.truncated,
                    first_grasp_frame=record.first_grasp_frame,
                    manifest_sha256=bundles[(scene, cond)].manifest_sha256))
                ran += 1
                bar.update(1)
        finally:
            env.close()
    bar.close()
    return ran


# --------------------------------------------------------------------------- entry point


def run_study(spec: StudySpec, out: str | Path, *, resume: bool = False, overwrite: bool = False,
              progress: bool = True) -> StudyResult:
    """Run (or resume) ``spec`` into ``out``; see the module docstring for the stages."""
    from bench.study.analysis import analyse

    spec.validate_registries()
    spec.validate_inputs()  # every refusal of the spec comes before --out is touched
    out = Path(out)
    store = open_output(spec, out, resume=resume, overwrite=overwrite)
    try:
        _log("preparing condition bundles")
        bundles = prepare_conditions(spec, out, store, progress=progress)
        _log("scoring quality (Test, OBS-Probe)")
        score_quality(spec, out, store, bundles, progress=progress)
        _log("running paired rollouts")
        if spec.sequential is not None:  # issue 17: sequential stopping, bench/study/sequential
            from bench.study.sequential import run_sequential_rollouts

            ran = run_sequential_rollouts(spec, store, bundles, out, progress=progress)
        else:
            ran = run_rollouts(spec, store, bundles, progress=progress)
        tables = analyse(spec, store, out / "tables")
        store.export_csv(out / "tables")
    finally:
        store.close()
    return StudyResult(out=out, bundles=bundles, new_rollouts=ran, tables=tables)
