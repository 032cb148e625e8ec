"""Coverage conditions retrained inside a study (CPU, tiny), planless bundles refused, and
resume after SIGKILL during a retraining and during rollouts (0 lost, 0 duplicated)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.study.runner import run_study
from bench.study.spec import StudySpec, spec_from_dict
from bench.study.store import ResultsStore

REPO = Path(__file__).resolve().parents[3]


def _splat_camera(bundle, cam, width, height, name):
    """``cam`` (world frame) moved into the bundle's splat frame, where captures live."""
    sim = bundle.world_from_splat
    scale = np.cbrt(np.linalg.det(sim[:3, :3]))
    rot = sim[:3, :3] / scale
    pose = np.eye(4)
    pose[:3, :3] = rot.T @ cam.world_from_camera[:3, :3]
    pose[:3, 3] = rot.T @ (cam.world_from_camera[:3, 3] - sim[:3, 3]) / scale
    return cam.resized(width, height).replace(world_from_camera=pose, name=name)


def _room_capture(folder, bundle):
    """A capture of the user's room: 10 probe views (frames) + 2 held-out test views."""
    import imageio.v3 as iio

    from bench.recon.capture import CaptureManifest, SourceFrame, View
    from bench.recon.synthetic import write_seed_ply
    from bench.render import render
    from metrics.views import scene_cameras

    (folder / "images").mkdir(parents=True)
    splats = bundle.splat_background()

    def shoot(cam, rel):
        rgb = np.clip(np.asarray(render(splats, cam).rgb), 0, 1)
        iio.imwrite(folder / rel, (rgb * 255 + 0.5).astype(np.uint8))

    frames, views, tests = [], [], []
    for i, cam in enumerate(scene_cameras(bundle, "obs_probe")[:10]):
        rel = f"images/f{i:03d}.png"
        cam = _splat_camera(bundle, cam, 32, 24, rel)
        shoot(cam, rel)
        frames.append(SourceFrame(f"f{i:03d}", float(i), {}))
        views.append(View(f"f{i:03d}/forward", rel, cam, frame=f"f{i:03d}"))
    for i, cam in enumerate(scene_cameras(bundle, "test")[:2]):
        rel = f"images/test{i:03d}.png"
        cam = _splat_camera(bundle, cam, 32, 24, rel)
        shoot(cam, rel)
        tests.append(View(f"test{i:03d}", rel, cam))
    CaptureManifest(tuple(frames), tuple(views), tuple(tests), folder).save(
        folder / "capture.json")
    write_seed_ply(folder / "seed.ply", splats.means, np.clip(0.5 + 0.2820948 * splats.sh_dc,
                                                              0, 1))
    return folder / "capture.json", folder / "seed.ply"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from bench.scene.bundle import load_scene, write_scene_files
    from bench.scene.sample import make_sample_scene

    root = tmp_path_factory.mktemp("coverage")
    write_scene_files(dataclasses.replace(make_sample_scene(seed=0, n_gaussians=2000),
                                          name="lab"), root / "lab")
    manifest, seed_points = _room_capture(root / "capture", load_scene(root / "lab"))
    data = {"name": "cov", "scenes": {"lab": str(root / "lab")},
            "captures": {"lab": str(manifest)},
            "initial_points": {"lab": str(seed_points)},
            "conditions": ["clean"], "coverage": {"random-30": {"fraction": 0.3, "seed": 0}},
            "coverage_training": {"iters": 4, "backend": "cpu", "threads": 1, "densify": False},
            "tasks": ["cup"], "trials": 2, "real_trials": 1, "max_frames": 40,
            "real_domain": "simulated", "metrics": ["psnr"], "image_size": [64, 64]}
    return root, data


@pytest.fixture(scope="module")
def study(inputs):
    root, data = inputs
    spec = spec_from_dict(data)
    out = root / "out"
    result = run_study(spec, out, progress=False)
    return out, result, spec


def test_plan_and_trainer_manifests(study):
    out, result, _ = study
    folder = out / "scenes" / "lab" / "random-30"
    plan = json.loads((folder / "coverage_plan.json").read_text())
    # 10 frames, n_remove = round_half_up(0.3 * 10) = 3 -> 7 kept
    assert plan["counts"] == {"frames": 10, "kept": 7, "removed": 3}
    trainer = json.loads((folder / "train_manifest.json").read_text())
    assert trainer["counts"]["train_views"] == 7 and trainer["counts"]["iterations"] == 4
    assert trainer["params"]["backend_used"] == "cpu"
    assert trainer["coverage_mode"] == "random"
    assert set(trainer["inputs"]) == {"capture_manifest", "coverage_plan", "reference_scene",
                                      "init"}
    with ResultsStore(out) as store:
        stored = {c["condition"]: c for c in store.conditions()}
        rows = store.rollouts()
    assert stored["random-30"]["tool"] == "coverage-retrain/1"
    manifest = json.loads(stored["random-30"]["manifest_json"])
    assert manifest["plan"]["kept"] == plan["kept"]
    assert manifest["trainer"]["counts"] == trainer["counts"]
    # registered like the clean bundle: same world_from_splat and table
    clean = json.loads((out.parent / "lab" / "scene.json").read_text())
    retrained = json.loads((folder / "scene.json").read_text())
    assert retrained["world_from_splat"] == clean["world_from_splat"]
    assert retrained["table"] == clean["table"]
    assert {r.condition for r in rows if r.domain == "sim"} == {"clean", "random-30"}
    ranking = (out / "tables" / "ranking.md").read_text()
    assert "simulated-real" in ranking


def test_retraining_is_cached(study, monkeypatch):
    import bench.recon.train

    out, _, spec = study

    def refuse(*args, **kwargs):
        raise AssertionError("retrained although the inputs did not change")

    monkeypatch.setattr(bench.recon.train, "train", refuse)
    assert run_study(spec, out, resume=True, progress=False).new_rollouts == 0


def test_planless_and_captureless_coverage_refused(inputs, tmp_path):
    root, data = inputs
    from bench.scene.bundle import load_scene
    from perturbations.apply import apply_perturbation, save_perturbed

    save_perturbed(apply_perturbation(load_scene(root / "lab"), "floaters-mid", seed=0),
                   tmp_path / "fake")
    bad = {**data, "coverage": {}, "extra_conditions": {"random-30": {"lab": str(tmp_path /
                                                                                  "fake")}}}
    with pytest.raises(BenchError, match="has no random coverage plan"):
        spec_from_dict(bad).validate_inputs()
    with pytest.raises(BenchError, match="need each scene's capture manifest"):
        spec_from_dict({**data, "captures": {}, "metrics": []})
    with pytest.raises(BenchError, match="cannot tell the plan"):
        spec_from_dict({**data, "coverage": {"fewer": {}}})
    with pytest.raises(BenchError, match="needs \"fraction\""):
        spec_from_dict({**data, "coverage": {"random-30": {"seed": 0}}})


def _spawn(spec_path, out, *, resume):
    env = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl")
    cmd = [sys.executable, "-m", "bench.cli", "study", "run", "--spec", str(spec_path),
           "--out", str(out), "--no-progress"] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)


def _count(out):
    try:
        db = sqlite3.connect(out / "results.sqlite", timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_sigkill_during_retraining_and_rollouts(inputs, tmp_path):
    root, data = inputs
    data = {**data, "coverage_training": {**data["coverage_training"], "iters": 400}}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(data))
    out = tmp_path / "killed"
    # 1. killed while retraining: no bundle, no rollout left behind
    proc = _spawn(spec_path, out, resume=False)
    for line in proc.stderr:
        if "retraining lab/random-30" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "scenes" / "lab" / "random-30" / "manifest.json").exists()
    assert _count(out) == 0
    # 2. resumed, killed again after two committed rollouts
    proc = _spawn(spec_path, out, resume=True)
    deadline = time.monotonic() + 300
    while _count(out) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _count(out)
    assert partial >= 2
    # 3. resumed to the end: every rollout once, equal to an uninterrupted run
    spec = spec_from_dict(data)
    result = run_study(spec, out, resume=True, progress=False)
    reference = run_study(spec, tmp_path / "reference", progress=False)
    total = 2 * 2 * 2 + 2  # conditions x policies x trials + simulated-real
    assert reference.new_rollouts == total
    assert result.new_rollouts == total - partial  # 0 lost, 0 duplicated
    assert (out / "tables" / "rollouts.csv").read_bytes() == \
        (tmp_path / "reference" / "tables" / "rollouts.csv").read_bytes()


def test_max_frames_yubi_mapping():
    from bench.study.spec import YUBI_MAX_FRAMES

    spec = StudySpec(sample_scenes={"duo": 0, "flat": 1, "g2": 2}, max_frames=YUBI_MAX_FRAMES)
    assert spec.frames_limit("duo", "tape") == 1800 and spec.frames_limit("g2", "pen") == 1800
    assert spec.frames_limit("duo", "cup") is None  # the task default, 600
    assert spec.frames_limit("flat", "pen") is None
