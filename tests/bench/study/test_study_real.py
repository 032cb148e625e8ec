"""A real study on two tiny user bundles: the robot's outcomes from a CSV, held-out captures.

Scenes ``lab`` and ``den`` are saved sample rooms (3,000 Gaussians) used as user
bundles. Real outcomes come from a per-trial CSV whose counts are chosen here;
the expected Acc_rank, MAE and reliability labels are computed by hand from those
counts and the simulated counts the study stored. The captures are known images:
``lab``'s are exact 8-bit renders of its clean background (COLMAP text model), so
clean PSNR is inf; ``den``'s are the renders shifted by 5 grey levels
(transforms.json), so clean PSNR is 20 log10(255 / 5) = 34.1514 dB for every view.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest

from bench.errors import BenchError
from bench.study.runner import run_study
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore

REAL = {  # (scene, policy) -> per-trial successes (cup)
    ("lab", "visual-servo"): [1, 1, 1, 1],
    ("lab", "visual-glance"): [1, 0, 0, 0],
    ("den", "visual-servo"): [0, 1, 0, 0],
    ("den", "visual-glance"): [1, 1, 1, 0],
}
SHIFT = 5  # grey levels


def splat_cameras(bundle, count=3, width=96, height=72):
    """The bundle's first test cameras moved into its splat frame (captures live there)."""
    from metrics.views import scene_cameras

    sim = bundle.world_from_splat
    scale = np.cbrt(np.linalg.det(sim[:3, :3]))
    rot = sim[:3, :3] / scale
    cams = []
    for cam in scene_cameras(bundle, "test")[:count]:
        pose = np.eye(4)
        pose[:3, :3] = rot.T @ cam.world_from_camera[:3, :3]
        pose[:3, 3] = rot.T @ (cam.world_from_camera[:3, 3] - sim[:3, 3]) / scale
        cams.append(cam.resized(width, height).replace(world_from_camera=pose,
                                                       name=f"{cam.name}.png"))
    return cams


def write_capture(folder, bundle, *, shift, fmt):
    import imageio.v3 as iio

    from bench.render import render
    from bench.scene.camera_files import save_cameras

    cams = splat_cameras(bundle)
    (folder / "images").mkdir(parents=True)
    for cam in cams:
        rgb = np.clip(np.asarray(render(bundle.splat_background(), cam).rgb), 0, 1)
        image = (rgb * 255 + 0.5).astype(np.int16)
        if shift:  # +shift where it stays <= 255, else -shift: |difference| = shift everywhere
            image = np.where(image + shift <= 255, image + shift, image - shift)
        iio.imwrite(folder / "images" / cam.name, image.astype(np.uint8))
    if fmt == "colmap":
        (folder / "sparse" / "0").mkdir(parents=True)
        save_cameras(folder / "sparse" / "0", cams, format="colmap-text")
    else:
        save_cameras(folder / "transforms.json", cams)
    return cams


def user_bundle(path, seed):
    from bench.scene.bundle import load_scene, write_scene_files
    from bench.scene.sample import make_sample_scene

    bundle = dataclasses.replace(make_sample_scene(seed=seed, n_gaussians=3000), name=path.name)
    write_scene_files(bundle, path)
    return load_scene(path)


def write_real_csv(path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["scene", "task", "policy", "trial", "success", "progress", "notes"])
        for (scene, policy), outcomes in REAL.items():
            for trial, ok in enumerate(outcomes):
                writer.writerow([scene, "cup", policy, trial, ok, 1.0 if ok else 0.3, "lab day 1"])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    lab = user_bundle(root / "lab", 0)
    den = user_bundle(root / "den", 1)
    write_capture(root / "lab_caps", lab, shift=0, fmt="colmap")
    write_capture(root / "den_caps", den, shift=SHIFT, fmt="transforms")
    write_real_csv(root / "real.csv")
    spec = StudySpec(
        name="real", scenes={"lab": str(root / "lab"), "den": str(root / "den")},
        conditions=("clean", "floaters-mid"), tasks=("cup",), trials=2,
        max_frames={"lab": {"cup": 90}, "den": {"cup": 60}}, metrics=("psnr", "nvs-sqa"),
        image_size=(72, 72), real_results=str(root / "real.csv"),
        captures={"lab": str(root / "lab_caps"), "den": str(root / "den_caps")},
        obs_policy_every=2)
    return root, spec


@pytest.fixture(scope="module")
def study(inputs):
    root, spec = inputs
    out = root / "out"
    result = run_study(spec, out, progress=False)
    return out, result, spec


def _rates(rows, scene, cond, policy):
    hits = [r.success for r in rows if (r.scene, r.condition, r.policy) == (scene, cond, policy)]
    return sum(hits) / len(hits)


@pytest.mark.slow
def test_real_counts_replace_real_rollouts(study):
    from bench.provenance import sha256_file

    out, result, spec = study
    with ResultsStore(out) as store:
        rows = store.rollouts()
    assert {r.domain for r in rows} == {"sim"}  # no simulated "real" rollouts
    assert result.new_rollouts == len(rows) == 2 * 2 * 2 * 2
    # per scene-task time limits
    assert max(r.frames for r in rows if r.scene == "den") <= 60
    assert max(r.frames for r in rows if r.scene == "lab") <= 90
    sha = sha256_file(spec.real_results)
    manifest = json.loads((out / "real_results.json").read_text())
    assert manifest["inputs"]["real_results"] == {"path": "real.csv", "sha256": sha}
    assert manifest["counts"] == {"cells": 4, "trials": 16}
    label = f"real_results:real.csv sha256:{sha[:12]}"
    for stem in ("success_rates", "ranking", "transitions", "reliability", "reliability_labels"):
        text = (out / "tables" / f"{stem}.md").read_text()
        assert label in text and "simulated-real" not in text, stem
    with open(out / "tables" / "success_rates.csv", newline="") as f:
        real_rows = [r for r in csv.DictReader(f) if r["domain"] == "real"]
    assert {(r["scene"], r["policy"], r["successes"], r["trials"]) for r in real_rows} == {
        (s, p, str(sum(v)), "4") for (s, p), v in REAL.items()}


def test_ranking_mae_and_labels_by_hand(study):
    out, _, _ = study
    with ResultsStore(out) as store:
        rows = store.rollouts()
    with open(out / "tables" / "ranking.csv", newline="") as f:
        ranking = {r["condition"]: r for r in csv.DictReader(f)}
    expected_labels = {}
    for cond in ("clean", "floaters-mid"):
        correct = eligible = 0
        errors = []
        for scene in ("lab", "den"):
            r1 = sum(REAL[(scene, "visual-servo")]) / 4
            r2 = sum(REAL[(scene, "visual-glance")]) / 4
            s1 = _rates(rows, scene, cond, "visual-servo")
            s2 = _rates(rows, scene, cond, "visual-glance")
            # both real gaps are strict (lab 4/4 vs 1/4, den 1/4 vs 3/4): eligible
            eligible += 1
            agree = (r1 - r2) * (s1 - s2) > 0
            correct += agree
            errors += [abs(r1 - s1) * 100, abs(r2 - s2) * 100]
            expected_labels[(scene, cond)] = 0 if agree else 1
        assert int(ranking[cond]["eligible"]) == eligible
        assert int(ranking[cond]["correct"]) == correct
        assert float(ranking[cond]["mae_pp"]) == pytest.approx(np.mean(errors), abs=1e-6)
    with open(out / "tables" / "reliability_labels.csv", newline="") as f:
        labels = {(r["scene"], r["condition"]): int(r["label"]) for r in csv.DictReader(f)
                  if r["target"] == "cup"}
    # YUBI variant set: the counterfactual condition only, clean excluded
    assert labels == {k: v for k, v in expected_labels.items() if k[1] == "floaters-mid"}


def test_captures_psnr_closed_form(study):
    out, _, _ = study
    with ResultsStore(out) as store:
        quality = store.quality()
    psnr = {(q["scene"], q["frame"]): q["value"] for q in quality
            if q["metric"] == "psnr" and q["condition"] == "clean"}
    assert len(psnr) == 6
    assert all(math.isinf(v) for (s, _), v in psnr.items() if s == "lab")  # exact render
    closed = 20 * math.log10(255 / SHIFT)  # MSE = (5/255)^2 -> 34.1514 dB
    assert all(v == pytest.approx(closed, abs=1e-9) for (s, _), v in psnr.items() if s == "den")
    # tables/quality.csv is replaced by the store's per-frame export; the summary is the .md
    lines = [line.split(" | ") for line in (out / "tables" / "quality.md").read_text().splitlines()
             if line.startswith("| ") and " test " in line]
    references = {cells[0].lstrip("| "): cells[-1].rstrip(" |") for cells in lines}
    assert references == {"lab": "captures:lab_caps", "den": "captures:den_caps"}
    crops = json.loads((out / "captures" / "den" / "test" / "manifest.json").read_text())
    assert crops["undistortion"][0]["model"] == "pinhole"


def test_obs_policy_rows_and_method(study):
    out, _, spec = study
    with ResultsStore(out) as store:
        quality = store.quality()
        rows = store.rollouts()
    obs = [q for q in quality if q["view_protocol"] == "obs-policy"]
    # NVS-SQA is per sequence: one row per simulated rollout of each scene and condition
    assert len(obs) == len(rows) == 16
    for row in rows:
        path = (out / "obs_policy" / row.scene / row.condition / row.task / row.policy /
                f"trial_{row.trial:04d}.npz")
        with np.load(path) as data:
            assert data["frames"].shape[1:] == (72, 72, 3)
    with open(out / "tables" / "reliability.csv", newline="") as f:
        methods = {r["method"] for r in csv.DictReader(f)}
    assert {"obs-policy:nvs-sqa", "obs-probe:nvs-sqa", "test:psnr"} <= methods


def test_dry_run_writes_nothing(inputs, tmp_path, capsys):
    from bench.cli import main

    root, spec = inputs
    data = spec.to_json()
    data["max_frames"] = 30
    (tmp_path / "spec.json").write_text(json.dumps(data))
    out = tmp_path / "out"
    assert main(["study", "run", "--spec", str(tmp_path / "spec.json"), "--out", str(out),
                 "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "rollouts: 16 simulated + 0 simulated-real" in text
    assert "real domain: real_results:real.csv" in text
    assert "estimated CPU time" in text and "measured per rollout: cup" in text
    assert not out.exists()


# ----------------------------------------------------------------------------- bad inputs


def _spec_with_csv(inputs, tmp_path, text):
    root, spec = inputs
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return spec.replace(real_results=str(path))


HEAD = "scene,task,policy,trial,success\n"
GOOD = ("lab,cup,visual-servo,0,1\nlab,cup,visual-glance,0,0\n"
        "den,cup,visual-servo,0,1\nden,cup,visual-glance,0,1\n")


@pytest.mark.parametrize(("text", "message"), [
    (HEAD + "kitchen,cup,visual-servo,0,1\n" + GOOD, r"bad.csv row 2: unknown scene 'kitchen'"),
    (HEAD + GOOD + "lab,pen,visual-servo,0,1\n", r"row 6: unknown task 'pen'"),
    (HEAD + GOOD + "lab,cup,expert,0,1\n", r"row 6: unknown policy 'expert'"),
    (HEAD + GOOD + "lab,cup,visual-servo,0,0\n", r"row 6: trial 0 of lab/cup/visual-servo is "
     r"listed twice \(also row 2\)"),
    (HEAD + GOOD + "lab,cup,visual-servo,1.5,0\n", r"row 6: trial is '1.5', not a whole number"),
    (HEAD + GOOD + "lab,cup,visual-servo,-1,0\n", r"row 6: trial is '-1', a negative count"),
    (HEAD + GOOD + "lab,cup,visual-servo,1,yes\n", r"row 6: success is 'yes'"),
    (HEAD.strip() + ",init_x\n" + GOOD.replace("\n", ",0.1\n") + "lab,cup,visual-servo,1,1,left\n",
     r"row 6: init_x is 'left'"),
    (HEAD + "lab,cup,visual-servo,0,1\nden,cup,visual-servo,0,1\nden,cup,visual-glance,0,0\n",
     r"lab/cup has outcomes for visual-servo only"),
    ("scene,task,policy,success\nlab,cup,visual-servo,1\n", r"missing columns \['trial'\]"),
    ("scene,task,policy,successes\nlab,cup,visual-servo,1\n", r"missing columns \['trials'\]"),
    ("scene,task,policy,successes,trials\nlab,cup,visual-servo,5,4\n",
     r"row 2: successes 5 > trials 4"),
    ("scene,task,policy,successes,trials\nlab,cup,visual-servo,-1,4\n",
     r"row 2: successes is '-1', a negative count"),
    ("scene,task,policy,successes,trials\nlab,cup,visual-servo,2.5,4\n",
     r"row 2: successes is '2.5', not a whole number"),
    ("scene,task,policy,outcome\nlab,cup,visual-servo,1\n", r"neither per-trial"),
])
def test_bad_real_results(inputs, tmp_path, text, message):
    from bench.study.real_results import read_real_results

    spec = _spec_with_csv(inputs, tmp_path, text)
    with pytest.raises(BenchError, match=message):
        read_real_results(spec)


def test_bad_real_results_cli_one_line_nothing_written(inputs, tmp_path, capsys):
    from bench.cli import main

    spec = _spec_with_csv(inputs, tmp_path, HEAD + GOOD + "lab,cup,visual-servo,0,0\n")
    (tmp_path / "spec.json").write_text(json.dumps(spec.to_json()))
    out = tmp_path / "out"
    assert main(["study", "run", "--spec", str(tmp_path / "spec.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "row 6" in err
    assert not out.exists()


def test_per_cell_layout(inputs, tmp_path):
    from bench.study.real_results import read_real_results

    text = ("scene,task,policy,successes,trials\nlab,cup,visual-servo,4,4\n"
            "lab,cup,visual-glance,1,4\nden,cup,visual-servo,1,4\nden,cup,visual-glance,3,4\n")
    real = read_real_results(_spec_with_csv(inputs, tmp_path, text))
    assert real.layout == "per-cell"
    assert real.counts[("den", "cup", "visual-glance")] == (3, 4)


def test_yubi_public_layout():
    from pathlib import Path

    from bench.study.real_results import read_real_results

    data = Path(__file__).resolve().parents[3] / "results" / "yubi" / "data"
    spec = StudySpec(sample_scenes={"duo": 0, "flat": 1, "g2": 2}, real_results=str(data))
    real = read_real_results(spec)
    assert real.layout == "yubi"
    # success_rate_overall/Duo.csv: Cup,Real (pi_1),0.9,20 and Cup,Real (pi_2),0.95,20
    assert real.counts[("duo", "cup", "visual-servo")] == (18, 20)
    assert real.counts[("duo", "cup", "visual-glance")] == (19, 20)
    assert len(real.counts) == 3 * 3 * 2


def test_spec_refusals(inputs, tmp_path):
    root, spec = inputs
    with pytest.raises(BenchError, match="no real outcomes"):
        StudySpec(scenes=spec.scenes)
    with pytest.raises(BenchError, match="have no held-out captures"):
        spec.replace(captures={"lab": spec.captures["lab"]}).validate_inputs()
    with pytest.raises(BenchError, match="max_frames names scene 'kitchen'"):
        spec.replace(max_frames={"kitchen": {"cup": 10}})
    with pytest.raises(BenchError, match="reliability_variants"):
        spec.replace(reliability_variants=("warp",))
