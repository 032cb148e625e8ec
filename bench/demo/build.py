"""Reconstructed Gaussian backgrounds of the demo worlds: build, ship, load.

Per ground-truth world (:data:`DEMO_WORLDS`) :func:`build` runs the simulated
handheld capture of :mod:`bench.demo.capture` and then :func:`bench.recon.train.train`
once per condition (:data:`DEMO_CONDITIONS`):

=================  ==================================================================
``clean``          every selected frame, all nine pinhole views (coverage plan ``full``)
``central-pinhole`` every frame, the forward view only
``contiguous-30``  forward views minus one consecutive 30 % of the frames (plan seed 0)
``random-30``      forward views minus 30 % of the frames drawn at random (plan seed 0)
=================  ==================================================================

All four train from the same poses, dense seed points, seed and settings
(:class:`BuildConfig`). The poses are the renderer's, in the world frame, so each
bundle is registered to its world by construction; :func:`bench.recon.train.registered_bundle`
takes the ground-truth scene (:func:`bench.worlds.real.ground_truth_scene`: the world's table
spec, identity ``world_from_splat``) as the reference, so the task grid and robot apply.

Output layout under ``out`` (the shipped assets, :data:`ASSETS`, are the first two)::

    scenes/<world>/<condition>/  scene.json, background.ply, coverage_plan.json, train_config.json,
                                 train_log.json, train_manifest.json, manifest.json
    captures/<world>/            capture.json (frames' poses + test_views), test/*.png,
                                 seed_points.ply, manifest.json
    work/<world>/capture/        the full capture (video frames, training views): regenerated
    timings/<world>__<condition>.json   wall time of each step (kept out of the artifacts)

Every artifact is staged and renamed into place, and keyed by the sha256 of its inputs,
so ``--resume`` redoes only what is missing or stale.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.demo.capture import CaptureConfig
from bench.errors import BenchError

TOOL_ID = "demo-build/1"
ASSETS = Path(__file__).resolve().parent / "assets"
DEMO_WORLDS = ("gt-duo", "gt-flat", "gt-g2")
DEMO_CONDITIONS = ("clean", "central-pinhole", "contiguous-30", "random-30")
#: condition -> (coverage plan mode, removed fraction)
PLANS = {"clean": ("full", 0.3), "central-pinhole": ("central-pinhole", 0.3),
         "contiguous-30": ("contiguous", 0.3), "random-30": ("random", 0.3)}
TRAINER_SOURCES = ("bench/recon/train.py", "bench/recon/densify.py", "bench/render/warp_grad.py",
                   "bench/render/torch_raster.py")


@dataclass(frozen=True)
class BuildConfig:
    """Settings of the demo backgrounds (the single source of their defaults).

    Attributes:
        capture: The simulated capture of every world.
        iters: Training iterations per background.
        sh_degree_interval: Steps between SH degree increases (degree 1 from step 300).
        seed: Training seed (view order, split samples).
        plan_seed: Seed of the contiguous / random coverage plans.
        sh_degree: SH degree of the backgrounds.
        max_gaussians: Cap on the Gaussians of a background (CPU trainer).
        eval_every: Steps between held-out evaluations in the training log.
        threads: CPU threads of one training (results do not depend on it).
        backend: ``auto`` (gsplat on CUDA, else the CPU Warp trainer), ``cpu`` or ``gsplat``.
    """

    capture: CaptureConfig = field(default_factory=CaptureConfig)
    iters: int = 2000
    sh_degree_interval: int = 300
    seed: int = 0
    plan_seed: int = 0
    sh_degree: int = 1
    max_gaussians: int = 22_000
    eval_every: int = 300
    threads: int = 1
    backend: str = "auto"

    def train_config(self):
        """The :class:`~bench.recon.train.TrainConfig` of one background training."""
        from bench.recon.train import TrainConfig

        return TrainConfig(iters=self.iters, seed=self.seed, backend=self.backend,
                           sh_degree=self.sh_degree,
                           sh_degree_interval=self.sh_degree_interval,
                           max_gaussians=self.max_gaussians,
                           eval_every=self.eval_every, threads=self.threads)

    def to_json(self) -> dict[str, Any]:
        """This config as a JSON-ready dict (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)


def trainer_version() -> dict[str, Any]:
    """Trainer tool id and the sha256 of its sources (records which trainer made a bundle)."""
    from bench.provenance import sha256_file
    from bench.recon.train import TOOL_ID as TRAIN_TOOL

    root = Path(__file__).resolve().parents[2]
    return {"tool": TRAIN_TOOL, "sources_sha256": {
        rel: sha256_file(root / rel) for rel in TRAINER_SOURCES if (root / rel).is_file()}}


def check_names(worlds: tuple[str, ...], conditions: tuple[str, ...]) -> None:
    """Raise a BenchError unless ``worlds`` and ``conditions`` are non-empty, known demo names."""
    bad = [w for w in worlds if w not in DEMO_WORLDS]
    if bad or not worlds:
        raise BenchError(f"unknown demo world(s) {bad or worlds}; choose from {list(DEMO_WORLDS)}")
    bad = [c for c in conditions if c not in DEMO_CONDITIONS]
    if bad or not conditions:
        raise BenchError(f"unknown demo condition(s) {bad or conditions}; choose from "
                         f"{list(DEMO_CONDITIONS)}")


# --------------------------------------------------------------------------- shipped assets
def shipped_bundle(world: str, condition: str = "clean", *, root: Path | None = None) -> Path:
    """The shipped (or built, with ``root``) scene bundle of ``world`` under ``condition``."""
    check_names((world,), (condition,))
    path = (ASSETS if root is None else Path(root)) / "scenes" / world / condition
    if not (path / "scene.json").is_file():
        raise BenchError(f"no demo background {path}; regenerate it with `bench demo build "
                         f"--out DIR --worlds {world} --conditions {condition}`")
    return path


def shipped_capture(world: str, *, root: Path | None = None) -> Path:
    """The capture manifest (frame poses + held-out ``test_views``) of ``world``."""
    check_names((world,), DEMO_CONDITIONS)
    path = (ASSETS if root is None else Path(root)) / "captures" / world / "capture.json"
    if not path.is_file():
        raise BenchError(f"no demo capture {path}; regenerate it with `bench demo build "
                         f"--out DIR --worlds {world}`")
    return path


# --------------------------------------------------------------------------- steps
def _key(parts: dict[str, Any]) -> str:
    from bench.provenance import sha256_bytes

    return sha256_bytes(json.dumps(parts, sort_keys=True, default=str).encode())


def _done(folder: Path, key: str) -> bool:
    manifest = folder / "manifest.json"
    return manifest.is_file() and json.loads(manifest.read_text()).get("inputs_sha256") == key


def _record_time(out: Path, name: str, seconds: float, **extra: Any) -> None:
    from bench.provenance import atomic_write_json

    atomic_write_json(out / "timings" / f"{name}.json",
                      {"seconds": round(seconds, 1), **extra})


def build_capture(world: str, out: Path, config: BuildConfig, *, progress: bool = True) -> Path:
    """The full capture of ``world`` (work/) and its shipped part (captures/); cached."""
    import shutil

    from bench.demo.capture import TOOL_ID as CAPTURE_TOOL
    from bench.demo.capture import simulate_capture
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.recon.capture import CaptureManifest

    key = _key({"tool": CAPTURE_TOOL, "world": world, "capture": config.capture.to_json()})
    work = out / "work" / world / "capture"
    shipped = out / "captures" / world
    if _done(shipped, key) and (work / "capture.json").is_file():
        return work / "capture.json"
    start = time.perf_counter()
    print(f"[bench demo build] capture {world}", file=sys.stderr)
    with staged_output_dir(work, overwrite=True) as tmp:
        simulate_capture(world, tmp, config=config.capture, progress=progress)
    full = CaptureManifest.load(work / "capture.json")
    with staged_output_dir(shipped, overwrite=True) as tmp:
        (tmp / "test").mkdir()
        for view in full.test_views:
            shutil.copyfile(work / view.image, tmp / view.image)
        shutil.copyfile(work / "seed_points.ply", tmp / "seed_points.ply")
        frames = tuple(dataclasses.replace(f, images={}) for f in full.frames)
        CaptureManifest(frames, (), full.test_views, tmp).save(tmp / "capture.json")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={"world": world, "capture": config.capture.to_json(),
                                  "note": "held-out Test views and frame poses of the "
                                  "simulated capture; its video and training views are "
                                  "regenerated by `bench demo build`"},
            seed=config.capture.seed,
            outputs={"capture": tmp / "capture.json", "seed_points": tmp / "seed_points.ply",
                     **{v.id: tmp / v.image for v in full.test_views}},
            counts={"frames": len(frames), "test_views": len(full.test_views)},
            extra={"inputs_sha256": key,
                   "capture_manifest": json.loads((work / "manifest.json").read_text())}))
    _record_time(out, f"{world}__capture", time.perf_counter() - start)
    return work / "capture.json"


def build_condition(world: str, condition: str, out: Path, config: BuildConfig, *,
                    progress: bool = True) -> Path:
    """Train the background of ``world`` under ``condition`` into ``out/scenes``; cached."""
    from bench.provenance import atomic_write_json, make_manifest, sha256_file, staged_output_dir
    from bench.recon.capture import CaptureManifest
    from bench.recon.train import config_dict, load_seed, registered_bundle, train
    from bench.scene.bundle import write_scene_files
    from bench.worlds.real import ground_truth_scene
    from perturbations.coverage import make_plan

    capture_path = build_capture(world, out, config, progress=progress)
    manifest = CaptureManifest.load(capture_path)
    reference = out / "work" / world / "reference"
    reference.mkdir(parents=True, exist_ok=True)
    atomic_write_json(reference / "scene.json", ground_truth_scene(world).scene_json())
    mode, fraction = PLANS[condition]
    plan = make_plan(manifest.frames, mode, fraction=fraction, seed=config.plan_seed)
    train_config = config.train_config()
    seed_file = capture_path.parent / "seed_points.ply"
    version = trainer_version()
    key = _key({"tool": TOOL_ID, "world": world, "condition": condition,
                "train_images": manifest.image_digest(manifest.views),
                "test_images": manifest.image_digest(manifest.test_views),
                "plan": plan.to_dict(), "train": config_dict(train_config),
                "seed": sha256_file(seed_file), "reference": sha256_file(reference / "scene.json"),
                "trainer": version})
    target = out / "scenes" / world / condition
    if _done(target, key):
        return target
    print(f"[bench demo build] train {world}/{condition}: {len(plan.kept)}/{len(plan.frames)} "
          f"frames ({plan.views} views), {train_config.iters} iterations", file=sys.stderr)
    start = time.perf_counter()
    init = load_seed(seed_file, config=train_config)
    result = train(manifest, config=train_config, plan=plan, init=init, show_progress=progress)
    seconds = time.perf_counter() - start
    bundle = registered_bundle(result.splats, name=world, reference=reference)
    with staged_output_dir(target, overwrite=True) as tmp:
        written = write_scene_files(bundle, tmp)
        plan.save(tmp / "coverage_plan.json")
        resolved = dict(config_dict(train_config), backend_used=result.backend,
                        scene_scale=result.scene_scale)
        atomic_write_json(tmp / "train_config.json", resolved)
        atomic_write_json(tmp / "train_log.json", result.log)
        inputs = {"capture_manifest": capture_path, "seed_points": seed_file,
                  "reference_scene": reference / "scene.json"}
        trainer = make_manifest(
            tool="train/1", params=resolved, seed=train_config.seed, inputs=inputs,
            outputs={"background": written["background"],
                     "train_config": tmp / "train_config.json",
                     "train_log": tmp / "train_log.json"},
            counts={"train_views": len(result.train_view_ids),
                    "test_views": len(manifest.test_views),
                    "gaussians_initial": result.initial_gaussians,
                    "gaussians_final": len(result.splats), "iterations": train_config.iters},
            extra={"coverage_mode": plan.mode, "coverage_plan": plan.to_dict(),
                   "train_view_ids": result.train_view_ids, "trainer_version": version,
                   "final_test_psnr": result.log[-1]["test_psnr"],
                   "images_sha256": {"train": manifest.image_digest(
                       [v for v in manifest.views if v.id in set(result.train_view_ids)]),
                       "test": manifest.image_digest(manifest.test_views)}})
        trainer["inputs"]["coverage_plan"] = {"path": "coverage_plan.json",
                                              "sha256": sha256_file(tmp / "coverage_plan.json")}
        atomic_write_json(tmp / "train_manifest.json", trainer)
        outputs = {**written, "coverage_plan": tmp / "coverage_plan.json",
                   "train_manifest": tmp / "train_manifest.json"}
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID, params={"world": world, "condition": condition,
                                  "build": config.to_json()},
            seed=train_config.seed, inputs=inputs, outputs=outputs,
            counts={"frames": len(plan.frames), "kept": len(plan.kept),
                    "train_views": len(result.train_view_ids), "gaussians": len(result.splats)},
            # the registration text names the function by its module path when the shipped
            # bundles were built (now bench.worlds.real.ground_truth_scene); kept byte-identical
            # so a rebuild writes the shipped manifests' bytes
            extra={"inputs_sha256": key, "trainer_version": version,
                   "registration": "renderer poses are world-frame: world_from_splat = identity, "
                   "table = the world's table spec (bench.demo.real.ground_truth_scene)"}))
    _record_time(out, f"{world}__{condition}", seconds, backend=result.backend,
                 iters=train_config.iters, train_views=len(result.train_view_ids))
    return target


def build(out: str | Path, *, worlds: tuple[str, ...] = DEMO_WORLDS,
          conditions: tuple[str, ...] = DEMO_CONDITIONS, config: BuildConfig = BuildConfig(),
          progress: bool = True) -> list[Path]:
    """Build every (world, condition) background into ``out`` (resumable); returns the bundles."""
    from bench.progress import progress as progress_bar

    check_names(tuple(worlds), tuple(conditions))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(w, c) for w in worlds for c in conditions]
    done = []
    for world, condition in progress_bar(jobs, desc="demo build", unit="background",
                                         disable=not progress):
        done.append(build_condition(world, condition, out, config, progress=progress))
    return done


# --------------------------------------------------------------------------- evaluation
def score_test_views(bundle: Any, capture: Path) -> list[dict[str, Any]]:
    """PSNR / SSIM of a bundle's renders (8-bit) at every Test view of ``capture``.

    ``bundle``: a bundle folder or a loaded :class:`~bench.scene.bundle.SceneBundle`.
    """
    import numpy as np

    from bench.recon.capture import CaptureManifest
    from bench.recon.train import load_image
    from bench.render import render
    from bench.scene.bundle import load_scene
    from metrics.psnr import psnr
    from metrics.ssim import ssim

    scene = load_scene(bundle) if isinstance(bundle, (str, Path)) else bundle
    manifest = CaptureManifest.load(capture, require_views=False)
    rows = []
    for view in manifest.test_views:
        rgb = np.clip(render(scene.background, view.camera, backend="cpu").rgb, 0, 1)
        rgb = np.floor(rgb * 255 + 0.5) / 255  # compared as a saved 8-bit image
        target = load_image(manifest.root / view.image)
        rows.append({"view": view.id, "psnr": float(psnr(rgb[None], target[None])[0]),
                     "ssim": float(ssim(rgb[None].astype(np.float32), target[None])[0])})
    return rows


def near_removed_views(world: str, *, root: Path | None = None) -> list[int]:
    """Indices of the Test views whose nearest capture frame the contiguous-30 plan removed."""
    import numpy as np

    from bench.recon.capture import CaptureManifest

    manifest = CaptureManifest.load(shipped_capture(world, root=root), require_views=False)
    plan = json.loads((shipped_bundle(world, "contiguous-30", root=root) / "coverage_plan.json")
                      .read_text())
    ids = [f.id for f in manifest.frames]
    centres = np.stack([f.cameras["fisheye"].position for f in manifest.frames])
    near = []
    for k, view in enumerate(manifest.test_views):
        nearest = ids[int(np.argmin(np.linalg.norm(centres - view.camera.position, axis=1)))]
        if nearest in plan["removed"]:
            near.append(k)
    return near
