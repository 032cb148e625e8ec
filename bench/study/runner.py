"""Run a study end to end: condition bundles, quality scores, paired rollouts, verdicts.

Stages (each skips work already in the results store, so ``resume=True``
continues a killed run without redoing or duplicating anything):

1. :func:`prepare_conditions` - the clean bundle of every scene (a given
   directory, or a generated sample room) and one bundle + ``manifest.json``
   per artifact preset (``perturbations.apply``); prepared extra bundles
   (coverage retrainings) are referenced. Manifests go into the store.
   With ``reuse_from`` the rows of an earlier study that the plan still needs are then
   copied after a spot check (:func:`bench.study.reuse.reuse_from`), so the stages below
   compute only what is missing.
2. :func:`score_quality` - Test views: the held-out ``test`` cameras rendered
   in every condition, scored against the "captured" images; OBS-Probe: the
   clean scene's probe trajectory rendered in every condition (NR metrics).
   In the synthetic world the captured images are the clean scene's Test
   renders plus seeded sensor noise (``capture_noise``), so full-reference
   scores stay finite on clean.
3. :func:`bench.study.rollouts.run_rollouts` - for every scene, condition, task, policy
   and trial of the plan (:func:`bench.study.plan.rollout_plan`), one rollout in the
   Gymnasium env from initial condition ``sim_condition_offset + trial``
   (:func:`bench.study.plan.init_index`; the same index in every condition: paired), run
   by the chosen executor (:mod:`bench.study.executors`).
   The "real" domain of the synthetic world is the same env on the *clean*
   scene with initial conditions ``real_condition_offset + trial`` (a disjoint
   seeded block of the task grid): the policy's true skill on the undamaged
   world, measured on starts the simulated trials never see. With
   ``real_domain: "world"`` the "real" trials run in the scenes' MuJoCo ground-truth
   worlds instead (:mod:`bench.study.world_domain`, labelled ``ground-truth-world``).
4. :func:`score_obs_policy` - OBS-Policy: the wrist frames every simulated
   rollout's policy saw (every ``obs_policy_every``-th query, kept under
   ``obs_policy/``) scored with the NR metrics per condition.
5. :func:`bench.study.analysis.analyse` - Wilson intervals, ranking agreement,
   MAE, MMRV and Pearson vs real, Fisher transitions vs clean, the scene-held-out
   reliability classifier; tables (CSV + Markdown) and figures (PNG + PDF).

Real studies (``docs/studies.md``): with ``real_results`` no "real" rollouts
run - the robot's counts come from the CSV (:mod:`bench.study.real_results`);
``captures`` replace the synthetic capture by held-out images
(:mod:`bench.study.captures`); ``coverage`` conditions are retrained from the
scene's capture manifest in stage 1 (:mod:`bench.study.coverage`).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest, sha256_file
from bench.safety import check_name, remove_inside
from bench.study.lock import OutputLock
from bench.study.rollouts import run_rollouts
from bench.study.spec import CLEAN, CONTROL, StudySpec
from bench.study.store import ResultsStore

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
    reuse: Any = None  # bench.study.reuse.ReuseReport with reuse_from


def _log(message: str) -> None:
    print(f"[bench study] {message}", file=sys.stderr)


# --------------------------------------------------------------------------- output directory


def _contents(out: Path) -> list[Path]:
    """Entries of ``out`` other than the bench's ownership marker and lock file."""
    from bench.safety import MARKER
    from bench.study.lock import LOCK_FILE

    return [p for p in out.iterdir() if p.name not in (MARKER, LOCK_FILE)]


def _is_study_output(out: Path) -> bool:
    """Ours: the bench's ownership marker (written first) or a study spec."""
    from bench.safety import MARKER

    return (out / MARKER).is_file() or (out / SPEC_FILE).is_file()


def clean_staging(out: Path) -> int:
    """Remove staging leftovers of killed runs (``.*.tmp`` anywhere under ``out``); count."""
    from bench.safety import remove_inside

    removed = 0
    for dirpath, dirnames, filenames in os.walk(out):  # does not follow links
        for name in [*dirnames, *filenames]:
            if name.startswith(".") and name.endswith(".tmp"):
                remove_inside(Path(dirpath) / name, out)
                removed += 1
        dirnames[:] = [d for d in dirnames if not (d.startswith(".") and d.endswith(".tmp"))]
    return removed


def _spec_difference(stored: str, current: str) -> str:
    """The top-level spec fields two spec texts disagree on, for a refused resume's message.

    ``bench demo`` writes its asset paths relative to the working directory when they lie
    under it, so its resume from another directory or checkout shows up as path fields.
    """
    a, b = json.loads(stored), json.loads(current)
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(keys) if keys else "formatting only"


def open_output(spec: StudySpec, out: Path, *, resume: bool, overwrite: bool,
                inputs: list[Path] | None = None) -> ResultsStore:
    """Create or reopen ``out`` under its lock and open the store; a resume needs the same spec.

    ``out`` is ours when it carries the bench's ownership marker (written first,
    right after the directory is made, so a run killed before its spec was
    written is still recognised) or a ``study.json``. The lock
    (:class:`bench.study.lock.OutputLock`) is held by the returned store and released
    by its ``close()``.
    """
    from bench import safety

    spec_text = json.dumps(spec.to_json(), sort_keys=True)
    if out.is_symlink():
        raise BenchError(f"--out {out} is a symbolic link; pass the directory itself")
    if out.exists() and not out.is_dir():
        raise BenchError(f"--out {out} is a file, not a directory; choose a directory path")
    if out.is_dir() and _contents(out) and not _is_study_output(out):  # before any write
        raise BenchError(f"{out} exists and is not a study output (no {SPEC_FILE} or "
                         f"{safety.MARKER}); choose another --out")
    fresh = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    if fresh or not _contents(out):
        atomic_write_bytes(out / safety.MARKER, safety.marker_json())
    lock = OutputLock(out)
    try:
        existing = _contents(out)
        if existing:
            if not _is_study_output(out):
                raise BenchError(f"{out} exists and is not a study output (no {SPEC_FILE} or "
                                 f"{safety.MARKER}); choose another --out")
            if overwrite and not resume:
                safety.check_output_path(out, inputs=inputs or [])
                for entry in existing:
                    safety.remove_inside(entry, out)
                atomic_write_bytes(out / safety.MARKER, safety.marker_json())
            elif not resume:
                raise BenchError(f"{out} already holds a study; pass --resume to continue it "
                                 "or --overwrite to delete it and start again")
            else:
                removed = clean_staging(out)
                if removed:
                    _log(f"removed {removed} staging leftover(s) of a killed run")
        store = ResultsStore(out)
        stored = store.get_meta("spec")
        if stored is None:
            store.set_meta("spec", spec_text)
        elif stored != spec_text:
            store.close()
            raise BenchError(f"{out} holds a study with a different spec (it differs in "
                             f"{_spec_difference(stored, spec_text)}); resume with the same "
                             "--spec or choose a new --out")
        try:
            check_store_numerics(store, out)
        except BenchError:
            store.close()
            raise
        atomic_write_json(out / SPEC_FILE, spec.to_json())
    except BaseException:
        lock.release()
        raise
    store.hold(lock)
    return store


def check_store_numerics(store: ResultsStore, out: Path) -> None:
    """Refuse to add rows computed under other reference numerics than the stored ones.

    A store's rows must come from one float environment: a resumed run whose reference
    numerics (:mod:`bench.numerics`) differ from those its rows were computed with would
    silently mix two kinds of rollouts. The first writer records its numerics in ``meta``; a
    store written before that record existed is judged by the ``numerics`` of the run's
    ``manifest.json`` (``bench demo`` writes one). Native numerics promise nothing across
    machines, so a store made with them is not guarded.
    """
    from bench.numerics import numerics_record

    record = numerics_record()
    now = {"mode": record["mode"], "env": record["env"]}
    stored = store.get_meta("numerics")
    before = json.loads(stored) if stored is not None else _manifest_numerics(out)
    if before is not None and before["mode"] == "reference" and before != now:
        if now["mode"] != "reference":
            why = "this process runs with native numerics"
        else:
            old, new = before.get("env") or {}, now["env"]
            differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            why = f"{', '.join(differ)} differ"
        raise BenchError(f"{out} holds rows computed under other reference numerics ({why}); "
                         "rows of two float environments cannot be mixed: resume it with the "
                         "bench version that started it or choose a new --out")
    if stored is None:
        store.set_meta("numerics", json.dumps(now, sort_keys=True))


def _manifest_numerics(out: Path) -> dict[str, Any] | None:
    """``{"mode", "env"}`` of the numerics ``out/manifest.json`` records; None without one."""
    try:
        recorded = json.loads((out / "manifest.json").read_text()).get("numerics")
    except (OSError, ValueError, AttributeError):  # no manifest, not JSON, not an object
        return None
    if not isinstance(recorded, dict) or "mode" not in recorded:
        return None
    return {"mode": recorded["mode"], "env": recorded.get("env")}


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
        remove_inside(target, out)
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
            remove_inside(target, out)
        if not clean:
            clean.append(load_scene(clean_dir))
        save_perturbed(apply_perturbation(clean[0], cond, seed=spec.seed), target)
    return target


def _scene_entries(spec: StudySpec, out: Path, scene: str, *, progress: bool = False
                   ) -> list[tuple[str, Path, Path, str]]:
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
        if cond == CONTROL:  # the clean bundle, run on its own starts (bench.study.plan)
            entries.append((CONTROL, *entries[0][1:]))
        elif cond != CLEAN:
            target = _preset_bundle(spec, out, scene, cond, clean_dir, clean)
            entries.append((cond, target, target / "manifest.json", tool_id(cond)))
    for cond, per_scene in spec.extra_conditions.items():
        source = Path(per_scene[scene])
        entries.append((cond, source, _reference_manifest(out, scene, cond, source, "prepared/1"),
                        "prepared/1"))
    if spec.coverage:
        from bench.study.coverage import TOOL_ID as COVERAGE_TOOL
        from bench.study.coverage import retrain

        for cond in spec.coverage:
            target = retrain(spec, out, scene, cond, clean_dir, progress=progress)
            entries.append((cond, target, target / "manifest.json", COVERAGE_TOOL))
    return entries


def prepare_conditions(spec: StudySpec, out: Path, store: ResultsStore, *,
                       progress: bool = True) -> dict[tuple[str, str], ConditionBundle]:
    """Clean + preset + extra bundles of every scene, each with a stored manifest.

    On resume a bundle whose manifest changed is refused by the store (its
    ``conditions`` row is stored with the old sha256).
    """
    from bench.progress import progress as progress_bar

    bundles: dict[tuple[str, str], ConditionBundle] = {}
    total = len(spec.scene_names) * len(spec.all_conditions)
    bar = progress_bar(total=total, desc="conditions", unit="bundle", file=sys.stderr,
                       disable=not progress)
    for scene in spec.scene_names:
        for cond, path, manifest, tool in _scene_entries(spec, out, scene, progress=progress):
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
        name = check_name(getattr(cam, "name", "") or f"view_{i:04d}",
                          what=f"test camera name of scene {scene!r}") + ".png"
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
    """Test (FR + NR) and OBS-Probe (NR) scores of every scene x condition into the store.

    Test references: the scene's held-out ``captures`` (undistorted, 8-bit), else for a
    generated world the synthetic capture; a user scene without captures gets NR scores of
    its test-camera renders only (the spec refuses FR metrics there).
    """
    import dataclasses

    from bench.progress import progress as progress_bar
    from bench.scene.bundle import load_scene
    from metrics.registry import get_scorer
    from metrics.views import obs_probe_views, scene_cameras, score_views, test_views

    scorers = [get_scorer(m) for m in spec.metrics]
    nr = [s for s in scorers if s.info.mode == "NR"]
    bar = progress_bar(total=len(spec.scene_names) * len(spec.quality_conditions), desc="quality",
                       unit="condition", file=sys.stderr, disable=not progress)
    from bench.study.captures import SYNTHETIC, capture_views, prepare_test_capture

    sources = {}
    for scene in spec.scene_names:
        clean = bundles[(scene, CLEAN)]
        held_out = prepare_test_capture(spec, out, scene) if scene in spec.captures else None
        gt = capture_images(spec, out, scene, clean, progress=False) if (
            held_out is None and scene in spec.sample_scenes) else None
        sources[scene] = held_out.label if held_out is not None else (
            SYNTHETIC if gt is not None else "renders-only")
        clean_bundle = load_scene(clean.path)
        probe = probe_cameras(clean_bundle)
        test = scene_cameras(clean_bundle, "test") if held_out is None else None
        for cond in spec.quality_conditions:  # the control's bundle is clean's: not rescored
            bar.set_postfix_str(f"{scene}/{cond}")
            todo = [p for p in ("test", "obs-probe")
                    if not store.has_quality(spec.name, scene, cond, p)]
            if todo and not (todo == ["obs-probe"] and not nr):
                bundle = load_scene(bundles[(scene, cond)].path)
                rows = []
                if "test" in todo and held_out is not None:
                    for views in capture_views(bundle, held_out, scene=scene, condition=cond,
                                               backend=spec.render_backend):
                        rows += score_views(views, scorers, progress=False)
                elif "test" in todo and gt is not None:
                    views = test_views(bundle, gt, variant=cond, cameras=test,
                                       backend=spec.render_backend, progress=False)
                    rows += score_views(_renamed(views, scene), scorers, progress=False)
                elif "test" in todo and nr:  # a user scene without captures: NR on renders
                    views = obs_probe_views(bundle, variant=cond, cameras=scene_cameras(
                        clean_bundle, "test"), backend=spec.render_backend, progress=False)
                    views = dataclasses.replace(views, protocol="test")
                    rows += score_views(_renamed(views, scene), nr, progress=False)
                if "obs-probe" in todo and nr:
                    views = obs_probe_views(bundle, variant=cond, cameras=probe,
                                            backend=spec.render_backend, progress=False)
                    rows += score_views(_renamed(views, scene), nr, progress=False)
                store.add_quality(spec.name, rows)
            bar.update(1)
    bar.close()
    store.set_meta("test_sources", json.dumps(sources, sort_keys=True))


def probe_cameras(bundle: Any) -> list:
    """OBS-Probe cameras: the scene's ``obs_probe`` role, else a default probe orbit.

    The default is the sample room's probe (12 pinhole views, 128 x 128 px, on a 60-degree
    arc of radius 0.9 m, 0.45 m above the table centre, looking at it), placed at the
    bundle's table: a scene that ships no probe cameras (e.g. the demo's reconstructions)
    is still probed from where a robot would look.
    """
    from metrics.views import scene_cameras

    if "obs_probe" in bundle.cameras:
        return scene_cameras(bundle, "obs_probe")
    from bench.scene.cameras import Camera, orbit

    target = (*bundle.table.center, bundle.table.height)
    return [Camera("pinhole", 128, 128, 90.0, 90.0, 64.0, 64.0, pose, name=f"probe_{i:02d}")
            for i, pose in enumerate(orbit(target, radius=0.9, height=0.45, num_views=12,
                                           start_deg=-120.0, sweep_deg=60.0))]


def _renamed(views: Any, scene: str) -> Any:
    import dataclasses

    return dataclasses.replace(views, scene=scene)


# --------------------------------------------------------------------------- entry point


def record_real_source(spec: StudySpec, out: Path, store: ResultsStore, real: Any) -> None:
    """Store the real outcomes (or the stand-in's label) and write ``real_results.json``.

    A resumed study refuses a real-results file whose content changed.
    """
    from bench.study.real_results import SIMULATED_REAL

    if real is None and spec.real_domain == "world":  # ground-truth worlds (world_domain)
        from bench.study.world_domain import WORLD_REAL

        data = {"kind": WORLD_REAL, "label": WORLD_REAL, "worlds": spec.real_world["worlds"]}
        manifest = make_manifest(tool="real-domain/1", params={"real_domain": spec.real_domain,
                                                               "real_world": spec.real_world},
                                 seed=spec.seed, extra=data)
    elif real is None:
        data = {"kind": SIMULATED_REAL, "label": SIMULATED_REAL}
        manifest = make_manifest(tool="real-domain/1", params={"real_domain": spec.real_domain},
                                 seed=spec.seed, extra=data)
    else:
        data = {"kind": "real_results", "label": real.label, **real.to_json()}
        manifest = make_manifest(
            tool="real-results/1", params={"layout": real.layout}, seed=None,
            inputs={"real_results": real.path} if Path(real.path).is_file() else None,
            counts={"cells": len(real.counts),
                    "trials": sum(n for _, n in real.counts.values())},
            extra={**{k: v for k, v in data.items() if k != "counts"},
                   "cell_counts": data["counts"]})
    stored = store.get_meta("real_source")
    if stored is not None and json.loads(stored).get("sha256") != data.get("sha256"):
        raise BenchError(f"{out} was run with other real results (sha256 changed); use a new "
                         "--out, or restore the file")
    store.set_meta("real_source", json.dumps(data, sort_keys=True))
    atomic_write_json(out / "real_results.json", manifest)



def run_study(spec: StudySpec, out: str | Path, *, resume: bool = False, overwrite: bool = False,
              progress: bool = True, spec_file: str | Path | None = None,
              executor: Any = None, reuse_from: str | Path | None = None) -> StudyResult:
    """Run (or resume) ``spec`` into ``out``; see the module docstring for the stages.

    Every refusal that needs no output (registries, names, sizes, bundles, camera
    files, free space: :func:`bench.study.preflight.check_study`; an unfit ``reuse_from``)
    comes before ``out`` is created; ``out`` is locked while the run writes it. ``executor``
    (:class:`bench.study.executors.ExecutorConfig`; default serial) runs the rollouts.
    ``reuse_from``: an earlier study output whose rows this study plans are copied, checked
    (:mod:`bench.study.reuse`), instead of run again.
    """
    from bench.study.analysis import analyse
    from bench.study.preflight import check_study

    spec.validate_registries()
    spec.validate_inputs()  # every refusal of the spec comes before --out is touched
    out = Path(out)
    real = None
    if spec.real_results is not None:
        from bench.study.real_results import read_real_results

        real = read_real_results(spec)
    inputs = check_study(spec, out, spec_file=spec_file)
    from bench.study.executors import check_executor

    check_executor(executor)  # e.g. an unreachable ray --address: refused before out exists
    source = None
    if reuse_from is not None:
        from bench.study.reuse import check_source

        source = check_source(spec, reuse_from, out=out)
        inputs = [*inputs, source.path]  # --overwrite must not delete it
    store = open_output(spec, out, resume=resume, overwrite=overwrite, inputs=inputs)
    reused = None
    try:
        record_real_source(spec, out, store, real)
        _log("preparing condition bundles")
        bundles = prepare_conditions(spec, out, store, progress=progress)
        if source is not None:  # before quality and rollouts: they then do only what is missing
            from bench.study.reuse import reuse_from as reuse_rows

            _log(f"reusing rollouts of {source.given}")
            reused = reuse_rows(spec, store, source, bundles=bundles, out=out,
                                progress=progress, executor=executor)
            if reused.rows or reused.quality_rows or reused.checked:
                _log(f"reused {reused.rows} rollouts and {reused.quality_rows} quality rows of "
                     f"{source.given}; {len(reused.checked)} re-run as the spot check "
                     "(identical)")
            else:  # a resumed run: the first attempt copied them
                _log(f"nothing left to reuse from {source.given}")
        _log("scoring quality (Test, OBS-Probe)")
        score_quality(spec, out, store, bundles, progress=progress)
        _log("running paired rollouts")
        if spec.sequential is not None:  # issue 17: sequential stopping, bench/study/sequential
            from bench.study.sequential import run_sequential_rollouts

            sequential: dict = {}
            ran = run_sequential_rollouts(spec, store, bundles, out, progress=progress,
                                          write_report=False, results_out=sequential,
                                          executor=executor)
        else:
            ran = run_rollouts(spec, store, bundles, progress=progress, out=out,
                               executor=executor)
        from bench.study.faults import RolloutLog
        from bench.study.obs_policy import score_obs_policy

        with RolloutLog(store.path) as log:
            errors = log.errors(spec.name)
            if errors:  # only the fault tables: a study with errored rollouts is not analysed
                _write_tables(spec, store, out, None, log.export_csv)
                reasons = out / "tables" / "errors.csv"
                raise BenchError(f"{len(errors)} rollouts ended in a policy fault or failed to "
                                 f"execute (not counted as failures; reasons in {reasons}), e.g. "
                                 f"{errors[0]['reason']}; fix the policy or server and rerun with "
                                 "--resume")
            _log("scoring OBS-Policy frames")
            score_obs_policy(spec, out, store, progress=progress)

            def export_extra(tables_dir: Path) -> None:  # into the staged tables/
                log.export_csv(tables_dir)
                store.export_policy_replies(tables_dir)  # only when a server sent extras
                if spec.sequential is not None and sequential:
                    from bench.study.sequential import write_sequential_report

                    write_sequential_report(spec, sequential, tables_dir, out / "figures")

            tables = _write_tables(spec, store, out, analyse, export_extra)
            from bench.study.reuse import RECORD_FILE

            if (out / RECORD_FILE).is_file() and "files" in tables:  # hashed by a demo manifest
                tables["files"] = sorted({*tables["files"], RECORD_FILE})
            skipped = (tables.get("reliability") or {}).get("skipped")
            if skipped:  # said, not silent: bench reliability-inputs would find no labels
                _log(f"no reliability tables: {skipped}")
    finally:
        store.close()  # releases the output lock too
    checked = len(reused.checked) if reused is not None else 0  # run here too, stored as new
    return StudyResult(out=out, bundles=bundles, new_rollouts=ran + checked, tables=tables,
                       reuse=reused)


def _write_tables(spec: StudySpec, store: ResultsStore, out: Path, analyse: Any,
                  export_extra: Any) -> dict:
    """``tables/`` written into a staging directory and renamed into place (never half-done).

    ``export_extra(dir)`` writes the tables beside the analysis' (policy faults, latency,
    sequential decisions); ``analyse`` None writes only those (a study with faults).
    """
    from bench import safety
    from bench.provenance import staged_output_dir

    target = out / "tables"
    if target.exists() and not safety.is_bench_output(target):
        safety.remove_inside(target, out)  # an unmarked tables/ of an older bench: ours too
    with staged_output_dir(target, overwrite=True, flag="tables/") as tmp:
        export_extra(tmp)
        if analyse is None:
            tables = {}
        else:
            tables = analyse(spec, store, tmp)
            store.export_csv(tmp)
    return _moved(tables, tmp, target)


def _moved(value: Any, old: Path, new: Path) -> Any:
    """``value`` with every path under ``old`` (the staging dir) re-rooted at ``new``."""
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_moved(v, old, new) for v in value)
    if isinstance(value, Path) and value.is_relative_to(old):
        return new / value.relative_to(old)
    if isinstance(value, str) and value.startswith(str(old) + os.sep):
        return str(new) + value[len(str(old)):]
    if isinstance(value, str) and value.startswith(old.name + os.sep):  # relative to out
        return new.name + value[len(old.name):]
    return value
