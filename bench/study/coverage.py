"""Coverage conditions retrained inside a study (spec key ``coverage``).

A coverage condition (YUBI: Central pinhole, Contiguous 30%, Random 30%) is the
background retrained from fewer capture images. For each scene the runner

1. reads the scene's capture manifest (spec ``captures``; ``bench capture``),
2. makes the plan with :func:`perturbations.coverage.make_plan` (mode, fraction
   and seed from the condition's options),
3. trains with :func:`bench.recon.train.train` from the same poses, intrinsics,
   initial points (spec ``initial_points``, else the trainer's random init) and
   seed (the study's ``seed``); gsplat on CUDA, the CPU trainer otherwise
   (``coverage_training``: ``iters``, ``resolution`` ...),
4. registers the result like the clean bundle
   (:func:`bench.recon.train.registered_bundle` with the clean bundle as the
   reference) and writes the plan, the trainer manifest and a condition
   manifest embedding both into ``scenes/<scene>/<condition>/``.

A retraining is keyed by the sha256 of its inputs (capture images, cameras,
plan, training config, initial points, reference scene.json): a finished
bundle with the same key is reused; a killed retraining leaves no bundle (the
output is staged and renamed into place) and is redone on ``--resume``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from bench.errors import BenchError

TOOL_ID = "coverage-retrain/1"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Condition-name prefix -> coverage plan mode (``perturbations.coverage``).
MODE_BY_PREFIX = (("central-pinhole", "central-pinhole"), ("contiguous", "contiguous"),
                  ("random", "random"), ("full", "full"))
PLAN_KEYS = ("mode", "fraction", "seed")
DEFAULT_ITERS = 30_000


def mode_from_name(name: str) -> str | None:
    """The plan mode a condition name implies (``random-30`` -> ``random``), or None."""
    lowered = name.lower()
    for prefix, mode in MODE_BY_PREFIX:
        if lowered == prefix or lowered.startswith(prefix + "-"):
            return mode
    return None


def plan_options(condition: str, options: dict[str, Any]) -> tuple[str, float, int]:
    """(mode, fraction, seed) of a coverage condition; refuses bad names and values."""
    from perturbations.coverage import COVERAGE_PLANS

    if not NAME_PATTERN.fullmatch(condition):
        raise BenchError(f"coverage condition name {condition!r} must match "
                         "[A-Za-z0-9][A-Za-z0-9._-]* (it names a folder)")
    unknown = sorted(set(options) - set(PLAN_KEYS))
    if unknown:
        raise BenchError(f"coverage[{condition!r}] has unknown keys {unknown}; valid keys: "
                         f"{list(PLAN_KEYS)}")
    mode = options.get("mode", mode_from_name(condition))
    if mode is None:
        raise BenchError(f"coverage condition {condition!r}: cannot tell the plan from the name; "
                         "add \"mode\": one of central-pinhole, contiguous, random, full")
    try:
        entry = COVERAGE_PLANS.entry(mode)
    except ValueError as exc:
        raise BenchError(f"coverage[{condition!r}]: {exc}") from None
    fraction = options.get("fraction", 0.3)
    if entry.meta["uses_fraction"] and "fraction" not in options:
        raise BenchError(f"coverage[{condition!r}] ({mode}) needs \"fraction\" (e.g. 0.3)")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (
            0.0 <= fraction < 1.0):
        raise BenchError(f"coverage[{condition!r}] fraction must be a number in [0, 1), "
                         f"got {fraction!r}")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise BenchError(f"coverage[{condition!r}] seed must be an integer >= 0, got {seed!r}")
    return mode, float(fraction), seed


def refuse_planless_coverage(spec: Any) -> None:
    """Refuse a prepared bundle that claims to be a coverage condition but carries no plan.

    An ``extra_conditions`` entry named like a coverage plan (``random-30`` ...) must be a
    ``bench train`` output trained with a plan of that mode (its ``train_manifest.json``
    names the plan); otherwise any bundle (e.g. a floater edit) could pose as a retraining.
    """
    for cond, per_scene in spec.extra_conditions.items():
        mode = mode_from_name(cond)
        if mode is None:
            continue
        for scene, path in per_scene.items():
            manifest = Path(path) / "train_manifest.json"
            data = json.loads(manifest.read_text()) if manifest.is_file() else {}
            has_plan = "coverage_plan" in data.get("inputs", {})
            if not has_plan or data.get("coverage_mode") != mode:
                raise BenchError(
                    f"extra condition {cond!r}, scene {scene!r}: {path} has no {mode} coverage "
                    "plan (no train_manifest.json naming one); list it under \"coverage\" so the "
                    "study retrains it from the capture, or rename the condition")


def training_config(spec: Any):
    """The :class:`bench.recon.config.TrainConfig` of every retraining of ``spec``."""
    from bench.recon.config import TrainConfig

    options = {k: v for k, v in spec.coverage_training.items() if k != "resolution"}
    options.setdefault("iters", DEFAULT_ITERS)
    try:
        config = TrainConfig(seed=spec.seed, **options)
    except TypeError as exc:
        raise BenchError(f"coverage_training: {exc}") from None
    config.validate()
    return config


def training_resolution(spec: Any) -> int | None:
    """The image side retrainings use (``coverage_training.resolution``), None for the capture's."""
    value = spec.coverage_training.get("resolution")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 8):
        raise BenchError(f"coverage_training resolution must be a pixel count >= 8 or null, "
                         f"got {value!r}")
    return value


def _resized_capture(manifest: Any, side: int, folder: Path) -> Any:
    """The capture with every image and camera scaled so the longest side is ``side`` px."""
    import dataclasses

    import cv2

    from bench.provenance import atomic_write_bytes
    from bench.recon.capture import CaptureManifest

    def resize(view: Any) -> Any:
        cam = view.camera
        scale = side / max(cam.width, cam.height)
        width, height = max(1, round(cam.width * scale)), max(1, round(cam.height * scale))
        image = cv2.imread(str(manifest.root / view.image), cv2.IMREAD_COLOR)
        if image is None:
            raise BenchError(f"cannot read capture image {manifest.root / view.image}")
        small = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
        rel = f"images/{view.id.replace('/', '__')}.png"
        ok, data = cv2.imencode(".png", small)
        atomic_write_bytes(folder / rel, data.tobytes())
        return dataclasses.replace(view, image=rel, camera=cam.resized(width, height))

    folder.mkdir(parents=True, exist_ok=True)
    resized = CaptureManifest(manifest.frames, tuple(resize(v) for v in manifest.views),
                              tuple(resize(v) for v in manifest.test_views), folder)
    resized.save(folder / "capture.json")
    return CaptureManifest.load(folder / "capture.json", check_files=True)


def inputs_key(manifest: Any, plan: Any, config: Any, init: str | None, reference: Path,
               resolution: int | None) -> str:
    """sha256 of everything a retraining depends on (its cache key)."""
    from bench.provenance import sha256_bytes, sha256_file
    from bench.recon.train import config_dict

    cameras = [v.camera.to_dict() for v in (*manifest.views, *manifest.test_views)]
    parts = {
        "tool": TOOL_ID,
        "train_images": manifest.image_digest(manifest.views),
        "test_images": manifest.image_digest(manifest.test_views),
        "views": [[v.id, v.frame, v.name] for v in manifest.views],
        "cameras": cameras,
        "plan": {"mode": plan.mode, "fraction": plan.fraction, "seed": plan.seed,
                 "kept": list(plan.kept)},
        "config": config_dict(config),
        "resolution": resolution,
        "init": None if init is None else sha256_file(init),
        "reference": sha256_file(reference / "scene.json"),
    }
    return sha256_bytes(json.dumps(parts, sort_keys=True, default=list).encode())


def retrain(spec: Any, out: Path, scene: str, condition: str, clean_dir: Path, *,
            progress: bool = True) -> Path:
    """The retrained bundle of ``scene`` under coverage ``condition`` (trained once, cached).

    Returns:
        The bundle directory (``scenes/<scene>/<condition>``) holding ``manifest.json``.
    """
    import shutil

    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.recon.capture import CaptureManifest
    from bench.recon.train import config_dict, load_seed, registered_bundle, train
    from bench.scene.bundle import write_scene_files
    from perturbations.coverage import make_plan

    source = Path(spec.captures[scene])
    manifest = CaptureManifest.load(source)
    resolution = training_resolution(spec)
    config = training_config(spec)
    if resolution is not None:
        manifest = _resized_capture(manifest, resolution,
                                    out / "coverage" / scene / f"capture-{resolution}px")
    mode, fraction, seed = plan_options(condition, spec.coverage[condition])
    plan = make_plan(manifest.frames, mode, fraction=fraction, seed=seed)
    init = spec.initial_points.get(scene)
    key = inputs_key(manifest, plan, config, init, clean_dir, resolution)
    target = out / "scenes" / scene / condition
    done = target / "manifest.json"
    if done.is_file() and json.loads(done.read_text()).get("inputs_sha256") == key:
        return target
    if target.exists():  # a stale bundle (inputs changed); staging never leaves a partial one
        shutil.rmtree(target)
    print(f"[bench study] retraining {scene}/{condition}: {len(plan.kept)}/{len(plan.frames)} "
          f"frames, {config.iters} iterations", file=sys.stderr)
    seed_splats = load_seed(init, config=config) if init is not None else None
    result = train(manifest, config=config, plan=plan, init=seed_splats, show_progress=progress)
    bundle = registered_bundle(result.splats, name=scene, reference=clean_dir)
    with staged_output_dir(target, overwrite=False) as tmp:
        written = write_scene_files(bundle, tmp)
        plan.save(tmp / "coverage_plan.json")
        resolved = dict(config_dict(config), backend_used=result.backend,
                        scene_scale=result.scene_scale, resolution=resolution)
        atomic_write_json(tmp / "train_config.json", resolved)
        atomic_write_json(tmp / "train_log.json", result.log)
        views_by_id = {v.id: v for v in manifest.views}
        inputs = {"capture_manifest": source, "coverage_plan": tmp / "coverage_plan.json",
                  "reference_scene": clean_dir / "scene.json"}
        if init is not None:
            inputs["init"] = Path(init)
        trainer = make_manifest(
            tool="train/1", params=resolved, seed=config.seed, inputs=inputs,
            outputs={"background": written["background"], "train_config": tmp /
                     "train_config.json", "train_log": tmp / "train_log.json"},
            counts={"train_views": len(result.train_view_ids),
                    "test_views": len(manifest.test_views),
                    "gaussians_initial": result.initial_gaussians,
                    "gaussians_final": len(result.splats), "iterations": config.iters},
            extra={"coverage_mode": plan.mode, "train_view_ids": result.train_view_ids,
                   "final_test_psnr": result.log[-1]["test_psnr"],
                   "images_sha256": {"train": manifest.image_digest(
                       [views_by_id[i] for i in result.train_view_ids]),
                       "test": manifest.image_digest(manifest.test_views)}})
        atomic_write_json(tmp / "train_manifest.json", trainer)
        plan_json = plan.to_dict()
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={"mode": mode, "fraction": plan.fraction, "plan_seed": seed,
                                  "training": resolved},
            seed=config.seed, inputs=inputs, outputs=written,
            counts={"frames": len(plan.frames), "kept": len(plan.kept),
                    "removed": len(plan.removed), "train_views": len(result.train_view_ids),
                    "gaussians": len(result.splats)},
            extra={"scene_name": scene, "condition": condition, "inputs_sha256": key,
                   "plan": plan_json, "trainer": trainer}))
    return target


def planned_trainings(spec: Any) -> list[tuple[str, str, int, int]]:
    """(scene, condition, kept frames, total frames) of every retraining (for --dry-run)."""
    from bench.recon.capture import CaptureManifest
    from perturbations.coverage import make_plan

    rows = []
    for scene in spec.scene_names:
        if not spec.coverage:
            break
        manifest = CaptureManifest.load(spec.captures[scene], check_files=False)
        for cond, options in spec.coverage.items():
            mode, fraction, seed = plan_options(cond, options)
            plan = make_plan(manifest.frames, mode, fraction=fraction, seed=seed)
            rows.append((scene, cond, len(plan.kept), len(plan.frames)))
    return rows
