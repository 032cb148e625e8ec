r"""A real tabletop end to end: RGB-D frames -> CPU 3DGS -> registered table -> damage -> study.

One command regenerates ``results/real-tabletop/`` from a posed RGB-D sequence (the 7-Scenes
"redkitchen" frames of ``../shared/data/7scenes-redkitchen``; their frames are never written
into the results, only derived tables and a few figures)::

    python -m bench.demo.real_tabletop_cli --data ../shared/data/7scenes-redkitchen \\
        --out out/real-tabletop --results results/real-tabletop

Stages (each the bench's own command or function, in order; ``--resume`` reuses finished ones
under ``OUT/work``):

1. ``bench capture import-rgbd``: capture manifest, every 5th frame held out as a real Test
   view, dense seed from the training frames' depth (:mod:`bench.recon.rgbd`);
2. ``bench train`` (Warp CPU trainer) from that seed: :class:`RealTabletopConfig` states the
   resolution, schedule and Gaussian cap; the wall time is measured;
3. ``bench scene init --metric`` on the trained background, then the acceptance against the
   sensors (:mod:`bench.recon.depth_table`: measured gravity, the plane of the held-out frames'
   raw depth, its inlier footprint, the floor);
4. per-frame Test PSNR / SSIM / LPIPS against the real held-out frames, raw and after a
   per-image affine colour fit (the handheld Kinect's auto exposure);
5. ``bench scene crop`` of the Cup task's area (the real clutter there would collide with the
   simulated cup and plate), then ``bench study run``: clean, the six artifact presets and
   the three coverage retrainings, scored on the real Test frames and OBS-Probe views, and
   two scripted visual policies on the Cup task; the kitchen has no robot, so the "real"
   domain is the ``simulated-real`` stand-in (labelled so in every table; no finding rests
   on it);
6. tables (CSV + Markdown), figures (PNG + PDF), ``manifest.json`` and ``ATTRIBUTION.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError

TOOL_ID = "real-tabletop/1"
#: study condition -> (YUBI condition in results/yubi/data/test_metrics_common_set.csv)
PAPER_CONDITIONS = {"clean": "clean", "hole-54": "hole_54", "hole-90": "hole_90",
                    "floaters-low": "float_low8", "floaters-mid": "float_mid8",
                    "floaters-high": "float_high8", "warp": "tablegeo_s1",
                    "central-pinhole": "fov_center", "contiguous-30": "pinhole_adjacent_remove_30",
                    "random-30": "pinhole_random_remove_30"}
PRESETS = ("hole-54", "hole-90", "floaters-low", "floaters-mid", "floaters-high", "warp")
#: coverage retrainings; central-pinhole keeps each frame's forward view, and an RGB-D frame
#: has exactly one view, so its plan keeps every training view: the clean training itself
COVERAGE = {"contiguous-30": {"fraction": 0.3, "seed": 0},
            "random-30": {"fraction": 0.3, "seed": 0}}
ATTRIBUTION = """# Attribution

The tables and figures in this folder are derived from 100 frames (every 10th of frames 0-999)
of the Microsoft Research 7-Scenes "redkitchen" sequence, as redistributed in
andyzeng/tsdf-fusion-python (commit 3f22a940d90f684145b1f29b1feaa92e09eb1db6, folder `data/`).
7-Scenes is provided by Microsoft Research for non-commercial research use. The frames
themselves are not part of this repository.

Cite: J. Shotton, B. Glocker, C. Zach, S. Izadi, A. Criminisi, A. Fitzgibbon, "Scene Coordinate
Regression Forests for Camera Relocalization in RGB-D Images", CVPR 2013.
"""


@dataclass(frozen=True)
class RealTabletopConfig:
    """Settings of the real-tabletop run (the single source of their defaults).

    Attributes:
        width: Training / Test image width in pixels (160 x 120 from 640 x 480).
        test_every: Every k-th frame is a held-out Test view.
        iters: Training iterations (clean and each coverage retraining).
        sh_degree: SH degree of the backgrounds.
        sh_degree_interval: Steps between SH degree increases.
        max_gaussians: Cap on the Gaussians (CPU trainer).
        eval_every: Steps between held-out evaluations in the training log.
        threads: CPU threads of a training (results do not depend on it).
        seed: Seed of the import subsample, the training, the RANSAC and the study.
        task: Study task.
        policies: The two scripted visual policies compared.
        trials: Simulated rollouts per cell.
        real_trials: ``simulated-real`` stand-in rollouts per policy.
        crop_box: World box (centre x y z, size x y z, metres) cleared for the task's meshes.
        study: Run stage 5 (False: registration and Test scores only, e.g. in the fast test).
        metrics: Quality metrics of the study (nvs-sqa: the no-reference score of the
            OBS-Probe views).
        min_contrast: ``bench scene init --min-contrast`` (its default: the flatness band now
            widens to a patch's measured thickness, so the trained ~2 cm-thick top scores 5.3).
    """

    width: int = 160
    test_every: int = 5
    iters: int = 5000
    sh_degree: int = 1
    sh_degree_interval: int = 1000
    max_gaussians: int = 100_000
    eval_every: int = 500
    threads: int = 1
    seed: int = 0
    task: str = "cup"
    policies: tuple[str, str] = ("visual-servo", "visual-glance")
    trials: int = 10
    real_trials: int = 10
    crop_box: tuple[float, ...] = (0.0, -0.04, 0.16, 0.56, 0.72, 0.3)
    study: bool = True
    metrics: tuple[str, ...] = ("psnr", "ssim", "lpips", "nvs-sqa")
    min_contrast: float = 5.0

    def train_config(self):
        """The :class:`bench.recon.config.TrainConfig` of every training of this run."""
        from bench.recon.config import TrainConfig

        return TrainConfig(iters=self.iters, seed=self.seed, backend="cpu",
                           sh_degree=self.sh_degree, sh_degree_interval=self.sh_degree_interval,
                           max_gaussians=self.max_gaussians, eval_every=self.eval_every,
                           threads=self.threads)


@dataclass
class Paths:
    """Where a run writes (``out``) and what it publishes (``results``)."""

    out: Path
    results: Path | None
    capture: Path = field(init=False)
    raw: Path = field(init=False)
    scene: Path = field(init=False)
    task_scene: Path = field(init=False)
    study: Path = field(init=False)

    def __post_init__(self) -> None:
        work = self.out / "work"
        self.capture, self.raw = work / "capture", work / "scenes" / "raw"
        self.scene, self.task_scene = work / "scenes" / "kitchen", work / "scenes" / "kitchen-task"
        self.study = work / "study"


def _bench(argv: list[str]) -> None:
    """Run one ``bench`` command in this process; a failure stops the run with its line."""
    from bench.cli import main

    code = main([str(a) for a in argv])
    if code != 0:
        raise BenchError(f"`bench {' '.join(map(str, argv[:2]))}` failed (exit {code}); see "
                         "the line above")


# --------------------------------------------------------------------------- stages
def stage_import(data: Path, paths: Paths, config: RealTabletopConfig, *, resume: bool) -> dict:
    """Stage 1: ``bench capture import-rgbd``."""
    if not (resume and (paths.capture / "manifest.json").is_file()):
        _bench(["capture", "import-rgbd", data, "--out", paths.capture, "--width", config.width,
                "--test-every", config.test_every, "--seed", config.seed, "--overwrite"])
    return json.loads((paths.capture / "manifest.json").read_text())


def stage_train(paths: Paths, config: RealTabletopConfig, *, resume: bool) -> dict:
    """Stage 2: the Warp CPU trainer from the depth seed; returns log, counts and wall time."""
    from bench.provenance import atomic_write_json

    timing = paths.raw / "timing.json"
    if not (resume and timing.is_file()):
        tc = config.train_config()
        start = time.perf_counter()
        _bench(["train", "--manifest", paths.capture / "capture.json", "--init",
                paths.capture / "seed_points.ply", "--out", paths.raw, "--iters", tc.iters,
                "--seed", tc.seed, "--backend", "cpu", "--sh-degree", tc.sh_degree,
                "--eval-every", tc.eval_every, "--max-gaussians", tc.max_gaussians,
                "--threads", tc.threads, "--name", "kitchen", "--overwrite"])
        seconds = time.perf_counter() - start
        atomic_write_json(timing, {"wall_s": seconds})  # kept out of the byte-stable artifacts
    manifest = json.loads((paths.raw / "train_manifest.json").read_text())
    return {"log": json.loads((paths.raw / "train_log.json").read_text()),
            "manifest": manifest, "wall_s": json.loads(timing.read_text())["wall_s"]}


def stage_register(data: Path, paths: Paths, config: RealTabletopConfig, *,
                   resume: bool) -> dict:
    """Stage 3: ``bench scene init --metric`` and the acceptance against the sensors."""
    from bench.recon.depth_table import (
        AcceptanceConfig,
        compare_registration,
        depth_points,
        floor_heights,
        measure_table,
        registered_floor_to_table,
    )
    from bench.recon.rgbd import RgbdImportConfig, read_rgbd_source, split_frames
    from bench.scene.ply import read_ply
    from bench.scene.register import NoTableError, RegisterConfig, ScaleSpec, register_scan

    source = read_rgbd_source(data, config=RgbdImportConfig(test_every=config.test_every))
    if source.gravity is None:
        raise BenchError(f"{data} has no gravity-direction.txt; the up-axis acceptance needs "
                         "the sensor's measured gravity")
    up = -source.gravity  # the accelerometer's, recorded by the import (sensor, not by hand)
    splats = read_ply(paths.raw / "background.ply")
    try:  # first without any help, as a user would start
        register_scan(splats, cfg=RegisterConfig(seed=config.seed), scale=ScaleSpec(metric=True))
        automatic = "found"
    except NoTableError as exc:
        automatic = str(exc)
    from bench.scene.init_cli import recorded_gravity_up

    recorded, _ = recorded_gravity_up(paths.raw / "background.ply")
    # a training recorded the capture's gravity (`bench train` since issue 34): scene init
    # uses it by itself; a run trained before that is given the same sensor gravity as --up
    given_up = [] if recorded is not None else ["--up", ",".join(f"{v:.9f}" for v in up)]
    # the default contrast is not passed: the command is the one a user types
    contrast = ([] if config.min_contrast == RegisterConfig().min_contrast
                else ["--min-contrast", config.min_contrast])
    if not (resume and (paths.scene / "manifest.json").is_file()):
        _bench(["scene", "init", "--splat", paths.raw / "background.ply", "--out", paths.scene,
                "--metric", *given_up, *contrast, "--seed", config.seed, "--name", "kitchen",
                "--overwrite"])
    # the same registration again (seeded, deterministic) for its fit details
    registration = register_scan(splats, cfg=RegisterConfig(seed=config.seed,
                                                            min_contrast=config.min_contrast),
                                 scale=ScaleSpec(metric=True), up=up)
    _, test = split_frames(source.frames, config.test_every)
    accept = AcceptanceConfig()
    held_out = measure_table(depth_points(source, test, config=accept), -source.gravity,
                             config=accept, frames=len(test))
    everything = measure_table(depth_points(source, source.frames, config=dataclasses.replace(
        accept, stride=4)), -source.gravity, config=accept, frames=len(source.frames))
    # plane from the held-out frames (never trained on); the footprint from every frame's
    # depth: 20 held-out frames see only part of a 2 m table
    truth = dataclasses.replace(everything, plane=held_out.plane,
                                center=everything.center + (held_out.plane.offset - float(
                                    held_out.plane.normal @ everything.center))
                                * held_out.plane.normal)
    floors = floor_heights(source, source.frames, truth.plane, config=dataclasses.replace(
        accept, stride=4))
    measured = float(np.median([h for _, h in floors])) if floors else None
    floor = registered_floor_to_table(registration)
    result = compare_registration(registration, truth, config=accept, floor_to_table=floor,
                                  depth_floor_to_table=measured)
    # the up direction is the capture's recorded gravity (as scene init reads it), not a flag
    rule = "capture gravity" if recorded is not None else registration.fit.gravity_rule
    result.update({"gravity_rule": rule,
                   "automatic_without_up": automatic,
                   "plane_rms_m": registration.fit.rms, "inliers": registration.fit.inliers,
                   "depth_plane_rms_m": held_out.plane.rms,
                   "depth_plane_inliers": held_out.plane.inliers,
                   "depth_points_held_out": held_out.points,
                   "floor_to_table_plane_fit_m": everything.floor_to_table,
                   "floor_frames": len(floors),
                   "floor_to_table_frames_min_m": min((h for _, h in floors), default=None),
                   "floor_to_table_frames_max_m": max((h for _, h in floors), default=None),
                   "gravity_vs_depth_plane_deg": float(np.degrees(np.arccos(min(1.0, abs(float(
                       held_out.plane.normal @ -source.gravity))))))})
    return {"acceptance": result, "registration": registration, "truth": truth,
            "tolerances": dataclasses.asdict(accept)}


def affine_colour(render: np.ndarray, target: np.ndarray) -> np.ndarray:  # [H, W, 3] x2 -> same
    """``render`` mapped by the least-squares affine colour transform onto ``target``.

    ``target ~ [r g b 1] @ A`` with A [4, 3] fitted over all pixels: the per-image gain and
    offset of a camera's auto exposure and white balance (colour-corrected PSNR, as
    mip-NeRF 360 / Zip-NeRF report it for handheld captures).
    """
    x = np.concatenate([render.reshape(-1, 3), np.ones((render.shape[0] * render.shape[1], 1))],
                       axis=1).astype(np.float64)
    coef, *_ = np.linalg.lstsq(x, target.reshape(-1, 3).astype(np.float64), rcond=None)
    return np.clip(x @ coef, 0.0, 1.0).reshape(render.shape).astype(np.float32)


def score_test_frames(bundle: Path, capture: Path, *, metrics: tuple[str, ...]) -> list[dict]:
    """Per held-out frame: PSNR / SSIM / LPIPS of the render (8-bit), raw and colour-fitted."""
    from bench.recon.capture import CaptureManifest
    from bench.recon.train import load_image
    from bench.render import render
    from bench.scene.bundle import load_scene
    from metrics.registry import get_scorer

    gaussians = load_scene(bundle).splat_background()  # the capture cameras' (splat) frame
    manifest = CaptureManifest.load(capture / "capture.json", require_views=False)
    scorers = {m: get_scorer(m) for m in metrics}
    rows = []
    for view in manifest.test_views:
        rgb = np.clip(render(gaussians, view.camera, backend="cpu").rgb, 0, 1)
        rgb = (np.floor(rgb * 255 + 0.5) / 255).astype(np.float32)
        target = load_image(manifest.root / view.image)
        fitted = (np.floor(affine_colour(rgb, target) * 255 + 0.5) / 255).astype(np.float32)
        row: dict[str, Any] = {"view": view.id, "mean_brightness": float(target.mean())}
        for name, scorer in scorers.items():
            row[name] = float(scorer(rgb[None], target[None])[0])
            row[f"{name}_colour_fitted"] = float(scorer(fitted[None], target[None])[0])
        rows.append(row)
    return rows


def stage_crop(paths: Paths, config: RealTabletopConfig, *, resume: bool) -> dict:
    """Stage 5a: clear the task's area of real Gaussians (``bench scene crop --box``)."""
    if not (resume and (paths.task_scene / "manifest.json").is_file()):
        _bench(["scene", "crop", paths.scene, "--out", paths.task_scene, "--box",
                *config.crop_box, "--overwrite"])
    return json.loads((paths.task_scene / "manifest.json").read_text())


def study_spec(paths: Paths, config: RealTabletopConfig) -> dict:
    """The study of stage 5 as a spec document (written to ``work/study_spec.json``)."""
    tc = config.train_config()
    return {
        "name": "real-tabletop",
        "scenes": {"kitchen": str(paths.task_scene.resolve())},
        "captures": {"kitchen": str((paths.capture / "capture.json").resolve())},
        "initial_points": {"kitchen": str((paths.capture / "seed_points.ply").resolve())},
        "conditions": ["clean", *PRESETS],
        "coverage": COVERAGE,
        # the study's retraining keys (its SH interval is TrainConfig's 1000, as ours)
        "coverage_training": {"iters": tc.iters, "sh_degree": tc.sh_degree,
                              "max_gaussians": tc.max_gaussians, "threads": tc.threads,
                              "backend": "cpu"},
        "tasks": [config.task],
        "policies": {config.task: list(config.policies)},
        "trials": config.trials,
        "real_trials": config.real_trials,
        "real_domain": "simulated",
        "metrics": list(config.metrics),
        "seed": config.seed,
    }


def _retrain_one(spec_path: str, out: str, condition: str) -> str:
    """One coverage retraining exactly as ``bench study run`` does it (its cache key)."""
    from bench.study.coverage import retrain
    from bench.study.spec_file import load_spec

    spec = load_spec(spec_path).spec
    scene = spec.scene_names[0]
    return str(retrain(spec, Path(out), scene, condition, Path(spec.scenes[scene]),
                       progress=False))


def stage_study(paths: Paths, config: RealTabletopConfig, *, resume: bool, jobs: int = 1
                ) -> Path:
    """Stage 5b: ``bench study run`` on the cropped real background.

    With ``jobs > 1`` the coverage retrainings run first in that many processes, through the
    study's own :func:`bench.study.coverage.retrain` into the study's folder, so the study
    finds them cached by the sha256 of their inputs (same bundles as a serial run).
    """
    from bench import safety
    from bench.provenance import atomic_write_bytes, atomic_write_json

    spec_path = paths.out / "work" / "study_spec.json"
    atomic_write_json(spec_path, study_spec(paths, config))
    if paths.study.exists() and not resume:
        shutil.rmtree(paths.study)
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        paths.study.mkdir(parents=True, exist_ok=True)
        if not (paths.study / safety.MARKER).exists():
            atomic_write_bytes(paths.study / safety.MARKER, safety.marker_json())
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(_retrain_one, [str(spec_path)] * len(COVERAGE),
                          [str(paths.study)] * len(COVERAGE), list(COVERAGE)))
    args = ["study", "run", "--spec", spec_path, "--out", paths.study]
    if paths.study.exists():
        args.append("--resume")
    _bench(args)
    return paths.study


# --------------------------------------------------------------------------- tables
def _paper_and_replica() -> dict[str, dict[str, float]]:
    """Mean Test PSNR per condition: YUBI's three rigs and the demo replica's three rooms."""
    import csv

    from bench.tabular import open_csv_text
    from protocols import DEFAULT_YUBI_DATA

    root = Path(__file__).resolve().parents[2] / "results"
    paper: dict[str, list[float]] = {}
    with open_csv_text(DEFAULT_YUBI_DATA / "test_metrics_common_set.csv") as handle:
        for row in csv.DictReader(handle):
            paper.setdefault(row["condition"], []).append(float(row["psnr_all"]))
    replica: dict[str, dict[str, list[float]]] = {}
    with open_csv_text(root / "demo-cup" / "tables" / "quality.csv") as handle:
        for row in csv.DictReader(handle):
            if row["view_protocol"] == "test" and row["metric"] == "psnr":
                replica.setdefault(row["condition"], {}).setdefault(row["scene"], []).append(
                    float(row["value"]))
    out = {}
    for cond, yubi in PAPER_CONDITIONS.items():
        rep = replica.get(cond, {})
        out[cond] = {"paper": float(np.mean(paper[yubi])) if yubi in paper else float("nan"),
                     "replica": float(np.mean([np.mean(v) for v in rep.values()]))
                     if rep else float("nan")}
    return out


def _study_quality(study: Path) -> dict[tuple[str, str, str], float]:
    """(condition, protocol, metric) -> mean over frames, from the study's quality table."""
    import csv

    from bench.tabular import open_csv_text

    sums: dict[tuple[str, str, str], list[float]] = {}
    with open_csv_text(study / "tables" / "quality.csv") as handle:
        for row in csv.DictReader(handle):
            sums.setdefault((row["condition"], row["view_protocol"], row["metric"]), []).append(
                float(row["value"]))
    return {k: float(np.mean(v)) for k, v in sums.items()}


def write_tables(results: Path, info: dict) -> list[Path]:
    """Every table of the run into ``results/tables`` (CSV + Markdown)."""
    from protocols.tablefmt import write_table

    tables = results / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    counts = info["import"]["counts"]
    written += write_table(
        tables, "import", ["quantity", "value"], [[k, v] for k, v in counts.items()],
        title="bench capture import-rgbd: frames, split and dense seed (counts)",
        notes=["Depth pixels are counted at the seed's stride (every 4th pixel in x and y) over "
               "the training frames; cells are 1 cm voxels."])
    train = info["train"]
    last = train["log"][-1]
    cfg = info["config"]
    written += write_table(
        tables, "training", ["setting", "value"],
        [["images", f"{cfg['width']} x {cfg['width'] * 3 // 4} px (640 x 480 resized)"],
         ["training views", train["manifest"]["counts"]["train_views"]],
         ["held-out Test views", train["manifest"]["counts"]["test_views"]],
         ["iterations", cfg["iters"]], ["SH degree", cfg["sh_degree"]],
         ["Gaussian cap", cfg["max_gaussians"]],
         ["Gaussians initial (depth seed)", train["manifest"]["counts"]["gaussians_initial"]],
         ["Gaussians final", last["num_gaussians"]],
         ["held-out PSNR at step 0 (dB)", train["log"][0]["test_psnr"]],
         ["held-out PSNR at the end (dB)", last["test_psnr"]],
         ["wall time (s)", round(train["wall_s"], 1)], ["threads", cfg["threads"]]],
        title="Warp CPU training of the real kitchen (bench train)",
        notes=["Wall time on the shared 2-core development VM (other jobs running), so an upper "
               "bound on an idle machine's; the training log is byte-stable, the time is not."])
    rows = info["test_frames"]
    header = ["view", "mean_brightness", *[k for k in rows[0] if k not in ("view",
                                                                             "mean_brightness")]]
    mean = ["mean", float(np.mean([r["mean_brightness"] for r in rows]))] + [
        float(np.mean([r[k] for r in rows])) for k in header[2:]]
    written += write_table(
        tables, "test_frames", header, [[r[k] for k in header] for r in rows] + [mean],
        title="Clean reconstruction vs the real held-out frames (8-bit renders)",
        notes=["`*_colour_fitted`: the render after a least-squares per-image affine colour "
               "transform onto the frame (the Kinect's auto exposure and white balance)."])
    acc = info["registration"]
    tol = acc["tolerances"]
    a = acc["acceptance"]
    reg_rows = [
        ["up vs measured gravity (deg)", a["up_error_deg"], tol["up_deg"], a["up_ok"]],
        ["table centre to held-out depth plane (m)", a["plane_error_m"], tol["plane_m"],
         a["plane_ok"]],
        ["footprint corners vs depth footprint, worst (m)", a["footprint_error_m"],
         tol["footprint_m"], a["footprint_ok"]],
        ["floor-to-table: registered - depth (m)", a["floor_to_table_error_m"], tol["floor_m"],
         a["floor_ok"]],
    ]
    written += write_table(
        tables, "registration", ["check", "measured", "tolerance", "pass"], reg_rows,
        title="bench scene init on the real kitchen, against the sequence's own sensors",
        notes=[f"Registered table {a['size_registered_m'][0]:.3f} x "
               f"{a['size_registered_m'][1]:.3f} m, depth footprint "
               f"{a['size_depth_m'][0]:.3f} x {a['size_depth_m'][1]:.3f} m; yaw error "
               f"{a['yaw_error_deg']:.2f} deg; centre error {a['centre_error_m']:.3f} m; "
               f"plane tilt {a['plane_tilt_deg']:.2f} deg; gravity rule {a['gravity_rule']}.",
               f"Floor-to-table from depth: median {a['floor_to_table_depth_m']:.3f} m over "
               f"{a['floor_frames']} frames that see the floor (range "
               f"{a['floor_to_table_frames_min_m']:.3f}-{a['floor_to_table_frames_max_m']:.3f} "
               f"m); one plane fit to all frames' floor points "
               f"{a['floor_to_table_plane_fit_m']:.3f} m; registered "
               + ("n/a" if a["floor_to_table_registered_m"] is None
                  else f"{a['floor_to_table_registered_m']:.3f} m") + "."])
    written += write_table(
        tables, "registration_details", ["quantity", "value"],
        [[k, json.dumps(v) if isinstance(v, list) else v] for k, v in sorted(a.items())],
        title="Registration acceptance: every measured quantity")
    if info.get("conditions"):
        written += write_table(
            tables, "conditions", ["condition", "test_psnr", "test_ssim", "test_lpips",
                                   "probe_nvs_sqa", "drop_db", "paper_drop_db", "replica_drop_db"],
            info["conditions"],
            title="Test PSNR per condition on the real kitchen (real held-out frames) beside "
                  "YUBI's and the demo replica's",
            notes=["drop = clean - condition (dB). Paper: mean `psnr_all` of Duo / Flat / G2 in "
                   "results/yubi/data/test_metrics_common_set.csv (warp = TableGeometryS1); "
                   "replica: mean Test PSNR of the demo's three rooms (results/demo-cup/tables/"
                   "quality.csv). probe_nvs_sqa: the no-reference NVS-SQA score of the OBS-Probe "
                   "trajectory rendered in the condition (higher is better)."])
    return written


# --------------------------------------------------------------------------- figures
def _save(fig, stem: Path) -> list[Path]:
    """PNG + PDF of a figure (PDF without a creation date, so reruns are byte-stable)."""
    import matplotlib.pyplot as plt

    fig.savefig(stem.with_suffix(".png"), dpi=110, metadata={"Software": None})
    fig.savefig(stem.with_suffix(".pdf"), metadata={"CreationDate": None, "Producer": None,
                                                    "Creator": None})
    plt.close(fig)
    return [stem.with_suffix(".png"), stem.with_suffix(".pdf")]


def figure_test_views(paths: Paths, figures: Path, rows: list[dict], *, count: int = 3
                      ) -> list[Path]:
    """Real held-out frames beside the clean reconstruction's renders (worst, median, best)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.recon.capture import CaptureManifest
    from bench.recon.train import load_image
    from bench.render import render
    from bench.scene.bundle import load_scene

    gaussians = load_scene(paths.scene).splat_background()
    manifest = CaptureManifest.load(paths.capture / "capture.json", require_views=False)
    order = np.argsort([r["psnr"] for r in rows])
    picks = [int(order[0]), int(order[len(order) // 2]), int(order[-1])][:count]
    views = {v.id: v for v in manifest.test_views}
    fig, axes = plt.subplots(2, len(picks), figsize=(3.2 * len(picks), 5.0))
    for col, index in enumerate(picks):
        view = views[rows[index]["view"]]
        real = load_image(manifest.root / view.image)
        rgb = np.clip(render(gaussians, view.camera, backend="cpu").rgb, 0, 1)
        for row, (image, label) in enumerate(((real, "real held-out frame"),
                                              (rgb, f"render, {rows[index]['psnr']:.1f} dB"))):
            ax = axes[row, col]
            ax.imshow(image)
            ax.set_title(f"{view.id.split('/')[-1]}: {label}", fontsize=8)
            ax.axis("off")
    fig.suptitle("7-Scenes redkitchen (MSR, non-commercial research use): Test frames vs the "
                 "CPU reconstruction", fontsize=9)
    fig.tight_layout()
    return _save(fig, figures / "test_views")


def figure_registration(figures: Path, registration: dict, data: Path,
                        config: RealTabletopConfig) -> list[Path]:
    """Top view: the depth points on the table plane, the depth footprint and the fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.recon.depth_table import AcceptanceConfig, _corners, depth_points
    from bench.recon.rgbd import RgbdImportConfig, read_rgbd_source
    from bench.scene.register import plane_basis

    truth, reg = registration["truth"], registration["registration"]
    source = read_rgbd_source(data, config=RgbdImportConfig(test_every=config.test_every))
    pts = depth_points(source, source.frames[::4], config=AcceptanceConfig(stride=8))
    e1, e2 = plane_basis(truth.plane.normal)
    h = pts @ truth.plane.normal - truth.plane.offset
    on = np.abs(h) < 0.015
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    ax.scatter(pts[~on] @ e1, pts[~on] @ e2, s=0.2, c="0.8", rasterized=True,
               label="other depth points")
    ax.scatter(pts[on] @ e1, pts[on] @ e2, s=0.2, c="tab:green", rasterized=True,
               label="depth points on the table plane")
    fit = reg.fit
    for corners, colour, label in (
            (truth.corners(), "tab:green", "depth footprint (sensor)"),
            (_corners(fit.center, fit.long_axis, fit.short_axis, fit.size), "tab:red",
             "bench scene init (reconstruction)")):
        ring = np.vstack([corners, corners[:1]])
        ax.plot(ring @ e1, ring @ e2, color=colour, lw=1.5, label=label)
    a = registration["acceptance"]
    ax.set_title(f"table top: up {a['up_error_deg']:.2f} deg, plane {100 * a['plane_error_m']:.1f}"
                 f" cm, corners {100 * a['footprint_error_m']:.1f} cm", fontsize=9)
    ax.set_aspect("equal")
    ax.set_xlabel("m (in the table plane)")
    ax.legend(fontsize=7, markerscale=10, loc="lower right")
    fig.tight_layout()
    return _save(fig, figures / "registration")


def wrist_frames(scene: Path, *, task: str, conditions: tuple[int, ...] = (100, 110)
                 ) -> list[np.ndarray]:
    """The wrist camera's first frame at a few initial conditions of ``task`` on ``scene``."""
    from bench.sim import make_env

    env = make_env(task, scene=str(scene))
    frames = []
    try:
        for condition in conditions:
            obs, _ = env.reset(seed=condition)
            images = [v for k, v in obs.items() if isinstance(v, np.ndarray) and v.ndim == 3]
            frames.append(images[0])
    finally:
        env.close()
    return frames


def figure_wrist(paths: Paths, figures: Path, config: RealTabletopConfig) -> list[Path]:
    """Wrist views of the Cup task: clean and hole-90 backgrounds, same initial conditions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenes = [("clean", paths.task_scene)]
    damaged = paths.study / "scenes" / "kitchen" / "hole-90"
    if damaged.is_dir():
        scenes.append(("hole-90", damaged))
    shots = [(name, wrist_frames(path, task=config.task)) for name, path in scenes]
    fig, axes = plt.subplots(len(shots), len(shots[0][1]), figsize=(6.4, 3.3 * len(shots)),
                             squeeze=False)
    for row, (name, frames) in enumerate(shots):
        for col, frame in enumerate(frames):
            axes[row, col].imshow(frame)
            axes[row, col].set_title(f"{name}, initial condition {(100, 110)[col]}",
                                     fontsize=8)
            axes[row, col].axis("off")
    fig.suptitle("wrist camera on the real kitchen background (7-Scenes redkitchen, MSR)",
                 fontsize=9)
    fig.tight_layout()
    return _save(fig, figures / "wrist_views")


# --------------------------------------------------------------------------- run
def condition_rows(study: Path) -> list[list[Any]]:
    """Rows of the conditions table from the study's quality table and the references."""
    quality = _study_quality(study)
    refs = _paper_and_replica()
    clean = quality.get(("clean", "test", "psnr"), float("nan"))
    rows = []
    for cond in PAPER_CONDITIONS:
        source, label = cond, cond
        if cond == "central-pinhole" and (cond, "test", "psnr") not in quality:
            # its plan keeps every frame's forward view = every training view: clean itself
            source, label = "clean", "central-pinhole (= clean: one view per frame)"
        psnr = quality.get((source, "test", "psnr"))
        if psnr is None:
            continue
        ref = refs[cond]
        rows.append([label, psnr, quality.get((source, "test", "ssim")),
                     quality.get((source, "test", "lpips")),
                     quality.get((source, "obs-probe", "nvs-sqa")), clean - psnr,
                     refs["clean"]["paper"] - ref["paper"],
                     refs["clean"]["replica"] - ref["replica"]])
    return rows


def run(data: str | Path, out: str | Path, *, results: str | Path | None = None,
        config: RealTabletopConfig = RealTabletopConfig(), resume: bool = False,
        jobs: int = 1) -> dict:
    """Every stage; returns the collected numbers (and writes ``results`` when given)."""
    from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest

    data = Path(data)
    if not data.is_dir():
        raise BenchError(f"--data {data} is not a folder; pass the RGB-D sequence's folder "
                         "(e.g. ../shared/data/7scenes-redkitchen)")
    paths = Paths(Path(out), None if results is None else Path(results))
    paths.out.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"config": dataclasses.asdict(config)}
    info["import"] = stage_import(data, paths, config, resume=resume)
    info["train"] = stage_train(paths, config, resume=resume)
    info["registration"] = stage_register(data, paths, config, resume=resume)
    info["test_frames"] = score_test_frames(paths.scene, paths.capture, metrics=tuple(
        m for m in config.metrics if m != "nvs-sqa"))
    if config.study:
        info["crop"] = stage_crop(paths, config, resume=resume)
        stage_study(paths, config, resume=resume, jobs=jobs)
        info["conditions"] = condition_rows(paths.study)
    if paths.results is None:
        return info
    results_dir = paths.results
    results_dir.mkdir(parents=True, exist_ok=True)
    figures = results_dir / "figures"
    figures.mkdir(exist_ok=True)
    written = write_tables(results_dir, info)
    written += figure_test_views(paths, figures, info["test_frames"])
    written += figure_registration(figures, info["registration"], data, config)
    if config.study:
        written += figure_wrist(paths, figures, config)
        study_tables = results_dir / "study"
        if study_tables.exists():
            shutil.rmtree(study_tables)
        shutil.copytree(paths.study / "tables", study_tables)
        written += sorted(study_tables.rglob("*.*"))
    atomic_write_bytes(results_dir / "ATTRIBUTION.md", ATTRIBUTION.encode("utf-8"))
    a = info["registration"]["acceptance"]
    atomic_write_json(results_dir / "manifest.json", make_manifest(
        tool=TOOL_ID, params=dataclasses.asdict(config), seed=config.seed,
        inputs={"capture_manifest": paths.capture / "capture.json",
                "import_manifest": paths.capture / "manifest.json",
                "train_manifest": paths.raw / "train_manifest.json",
                "scene": paths.scene / "scene.json"},
        outputs={p.relative_to(results_dir).as_posix(): p for p in written},
        counts={"frames": info["import"]["counts"]["frames"],
                "test_frames": info["import"]["counts"]["test_frames"],
                "gaussians": info["train"]["log"][-1]["num_gaussians"]},
        extra={"data": str(data), "source_frames_sha256":
               info["import"]["source_frames_sha256"],
               "acceptance": {k: v for k, v in a.items()},
               "train_wall_s": round(info["train"]["wall_s"], 1),
               "real_domain": "simulated-real stand-in (the kitchen has no robot)"}))
    return info


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.demo.real_tabletop_cli --data SEQ --out OUT [--results DIR]``."""
    from bench.cli import OneLineParser

    parser = OneLineParser(prog="python -m bench.demo.real_tabletop_cli", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="the RGB-D sequence's folder")
    parser.add_argument("--out", required=True, type=Path, help="working folder (capture, "
                        "scenes, study); the frames are copied here, resized")
    parser.add_argument("--results", type=Path, default=None,
                        help="write the tables, figures and manifest here "
                        "(results/real-tabletop); no frames")
    parser.add_argument("--no-study", action="store_true",
                        help="stop after the registration and the Test scores")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes for the coverage retrainings (results do not depend "
                        "on it)")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the finished stages under --out/work")
    args = parser.parse_args(argv)
    config = RealTabletopConfig(study=not args.no_study)
    try:
        info = run(args.data, args.out, results=args.results, config=config, resume=args.resume,
                   jobs=max(1, args.jobs))
    except BenchError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    a = info["registration"]["acceptance"]
    print(f"Test PSNR {np.mean([r['psnr'] for r in info['test_frames']]):.2f} dB; up "
          f"{a['up_error_deg']:.2f} deg, plane {a['plane_error_m']:.4f} m, footprint "
          f"{a['footprint_error_m']:.3f} m, floor-to-table error {a['floor_to_table_error_m']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
