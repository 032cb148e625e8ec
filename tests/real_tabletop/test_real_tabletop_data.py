"""The real kitchen (issue 34 item 7): import, a short CPU training, registration within the
acceptance tolerances, one perturbation scored against real held-out frames.

Runs over ``../shared/data/7scenes-redkitchen`` (7-Scenes, non-commercial research terms: the
frames are read from there, never copied into the repository) and is skipped cleanly where
that folder is absent, as the other reference-data tests are. Small on purpose (64 x 48 px,
300 iterations, the depth seed's 60,000 Gaussians); the full-size numbers are in
results/real-tabletop/.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "7scenes-redkitchen"

pytestmark = pytest.mark.skipif(not (DATA / "camera-intrinsics.txt").is_file(),
                                reason="7-Scenes redkitchen frames not available on this machine")


@pytest.fixture(scope="module")
def kitchen(tmp_path_factory):
    from bench.demo.real_tabletop_cli import RealTabletopConfig, run

    out = tmp_path_factory.mktemp("kitchen")
    config = RealTabletopConfig(width=64, iters=300, max_gaussians=60_000, eval_every=300,
                                study=False, metrics=("psnr", "ssim"))
    return out, config, run(DATA, out, config=config)


def test_import_split_and_seed(kitchen):
    _, _, info = kitchen
    counts = info["import"]["counts"]
    assert (counts["frames"], counts["train_frames"], counts["test_frames"]) == (100, 80, 20)
    # SOURCE.md: invalid depth is stored as 0 / 65535; the seed drops it and the depth edges
    assert counts["invalid_depth"] > 0 and counts["misregistered"] > 0
    assert counts["seed_points"] == 60_000
    assert info["import"]["gravity_down"] is not None


def test_short_training_improves_held_out_psnr(kitchen):
    _, _, info = kitchen
    log = info["train"]["log"]
    assert log[-1]["test_psnr"] > log[0]["test_psnr"] + 1.0


def test_registration_within_issue_34_tolerances(kitchen):
    out, _, info = kitchen
    a = info["registration"]["acceptance"]
    # issue 34 item 3, against the sequence's sensors: up within 2 deg of the accelerometer's
    # gravity, the table top within 2 cm of the held-out frames' depth plane, the footprint
    # within 5 cm of the depth plane's inlier footprint, floor-to-table within 3 cm of the
    # depth's (measured at this size: 1.4 deg, 0.1 mm, 3.6 cm, 5.8 mm; the full-size run's
    # footprint is 7.9 cm off, its yaw 2 deg, docs/real-tabletop.md)
    assert a["up_ok"] and a["up_error_deg"] <= 2.0, a
    assert a["plane_ok"] and a["plane_error_m"] <= 0.02, a
    assert a["footprint_ok"] and a["footprint_error_m"] <= 0.05, a
    assert a["floor_ok"] and a["floor_to_table_error_m"] <= 0.03, a
    # the capture's accelerometer gravity as the training recorded it, not a hand value
    assert a["gravity_rule"] == "capture gravity"
    # `bench scene init` itself took up from the gravity the import recorded and the
    # training carried (no --up, default --min-contrast)
    from bench.demo.real_tabletop_cli import Paths

    scene = json.loads((Paths(out, None).scene / "manifest.json").read_text())
    assert scene["params"]["up_source"] == "capture gravity (train_manifest.json)", scene
    assert scene["params"]["config"]["min_contrast"] == 5.0


def test_perturbation_scored_against_real_frames(kitchen, tmp_path):
    from bench.cli import main
    from bench.demo.real_tabletop_cli import Paths, score_test_frames

    out, config, info = kitchen
    paths = Paths(out, None)
    damaged = tmp_path / "hole90"
    assert main(["perturb", "--preset", "hole-90", "--scene", str(paths.scene), "--out",
                 str(damaged)]) == 0
    clean = info["test_frames"]
    rows = score_test_frames(damaged, paths.capture, metrics=("psnr",))
    assert [r["view"] for r in rows] == [r["view"] for r in clean]
    # a 90-degree hole over the table removes the cabinets and walls the Test frames see
    assert np.mean([r["psnr"] for r in rows]) < np.mean([r["psnr"] for r in clean]) - 0.5
    assert dataclasses.asdict(config)["width"] == 64
