"""Newcomer frictions, round 1 (issue 36 item 4): one test per friction, each a message or a
behaviour a first-time user hit."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError

POLICY_DIR = Path(__file__).parent / "policies"


@pytest.fixture(scope="module")
def room(rendered_sample_room):
    return rendered_sample_room


# 1 ------------------------------------------------------------------------------------------


def test_dry_run_builds_entry_point_policies(monkeypatch):
    """The plan measured the label ("bench_test_policies.make_servo") as a registry name."""
    from bench.study.dry_run import make_plan
    from bench.study.spec import spec_from_dict

    monkeypatch.syspath_prepend(str(POLICY_DIR))
    spec = spec_from_dict({
        "name": "ep", "sample_scenes": {"a": 0}, "sample_gaussians": 2000,
        "conditions": ["clean"], "tasks": ["cup"], "max_frames": 8, "metrics": ["psnr"],
        "policies": {"cup": ["bench_test_policies:make_servo", "hold"]},
        "trials": 1, "real_trials": 1})
    plan = make_plan(spec, measure=True)
    assert set(plan.seconds_per_rollout) == {"cup"} and plan.seconds_per_rollout["cup"] > 0


# 2 ------------------------------------------------------------------------------------------


def _render_captures(room, folder, rename=lambda name: name):
    """A captures folder holding bench render's output as it is written (0000_test_00.png)."""
    folder.mkdir()
    shutil.copy(room / "renders" / "cameras.json", folder / "cameras.json")
    (folder / "images").mkdir()
    for image in sorted((room / "renders" / "rgb").glob("*.png")):
        shutil.copy(image, folder / "images" / rename(image.name))
    return folder


def test_captures_accept_bench_render_names_and_preflight_checks_pairs(room, tmp_path):
    from bench.study.captures import _raw_views
    from bench.study.preflight import check_study
    from bench.study.spec import StudySpec
    from metrics.views import match_references

    caps = _render_captures(room, tmp_path / "caps")
    assert (caps / "images" / "0000_test_00.png").is_file()
    cameras, images, _ = _raw_views(caps)
    assert [p.name for p in images][:2] == ["0000_test_00.png", "0001_test_01.png"]
    assert [c.name for c in cameras][:2] == ["test_00", "test_01"]
    assert match_references(caps / "images", ["test_01", "test_00"]).shape[0] == 2
    spec = StudySpec(name="f", scenes={"room": str(room / "room")},
                     captures={"room": str(caps)}, metrics=("psnr",), real_domain="simulated")
    check_study(spec, tmp_path / "ok")  # paired: no refusal
    bad = _render_captures(room, tmp_path / "bad", rename=lambda n: "view_" + n[5:])
    spec = StudySpec(name="f", scenes={"room": str(room / "room")},
                     captures={"room": str(bad)}, metrics=("psnr",), real_domain="simulated")
    with pytest.raises(BenchError) as info:
        check_study(spec, tmp_path / "out")
    message = str(info.value)
    assert "\n" not in message and not (tmp_path / "out").exists()
    assert "captures of scene 'room'" in message and "camera 'test_00'" in message
    assert "view_test_00.png" in message and "0000_test_00.png" in message


# 3 ------------------------------------------------------------------------------------------


def _blob(n=20000):
    from bench.scene.gaussians import GaussianSplats

    rng = np.random.default_rng(1)
    return GaussianSplats(  # a solid ball of Gaussians: no plane anywhere
        means=(rng.normal(size=(n, 3)) * 0.5).astype(np.float32),
        quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.full((n, 3), -4.0, np.float32), opacity_logits=np.full(n, 2.0, np.float32),
        sh_dc=np.zeros((n, 3), np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))


def test_no_table_with_world_from_splat_names_a_fix_that_applies():
    from bench.scene.register import NoTableError, register_scan

    with pytest.raises(NoTableError) as info:
        register_scan(_blob(), world_from_splat=np.eye(4))
    message = str(info.value)
    assert "\n" not in message and message.startswith("no table found: searched")
    assert "--world-from-splat FILE" not in message and "--up X,Y,Z" not in message
    assert "within 15 deg of +z" in message and "--table-center X,Y,Z" in message
    assert "--up" not in message
    with pytest.raises(NoTableError, match="move --table-center onto the table top"):
        register_scan(_blob(), world_from_splat=np.eye(4), table_center=np.full(3, 50.0))


# 4 ------------------------------------------------------------------------------------------


def test_rollout_exposes_min_table_gaussians_and_the_message_names_it():
    from bench.cli import build_parser
    from bench.scene.sample import make_sample_scene
    from bench.sim.config import EnvConfig
    from bench.sim.env import check_table_registration
    from bench.sim.world import TableGeometry

    parser = build_parser()
    args = parser.parse_args(["rollout", "--scene", "s", "--out", "o"])
    assert args.min_table_gaussians == EnvConfig().min_table_gaussians == 50
    args = parser.parse_args(["rollout", "--scene", "s", "--out", "o",
                              "--min-table-gaussians", "0"])
    assert args.min_table_gaussians == 0
    scene = make_sample_scene(seed=0, n_gaussians=2000)
    table = TableGeometry.from_scene_table(scene.require_table())
    with pytest.raises(BenchError) as info:
        check_table_registration(scene, table, minimum=10**9)
    assert "--min-table-gaussians 0" in str(info.value)
    assert "pass min_table_gaussians=0" not in str(info.value)


# 5 ------------------------------------------------------------------------------------------


def test_score_labels_a_perturbed_bundle_with_its_condition(room, tmp_path, capsys):
    import imageio.v3 as iio

    hole = tmp_path / "hole"
    assert main(["perturb", "--scene", str(room / "room"), "--out", str(hole),
                 "--preset", "hole-54"]) == 0
    clean_json = (room / "room" / "scene.json").read_bytes()
    assert (hole / "scene.json").read_bytes() == clean_json  # the bundle's bytes: unchanged
    gt = tmp_path / "gt"
    gt.mkdir()
    for image in sorted((room / "renders" / "rgb").glob("*.png")):
        iio.imwrite(gt / image.name[5:], iio.imread(image))
    out = tmp_path / "scores.csv"
    assert main(["score", "--scene", str(hole), "--views", "test", "--gt", str(gt),
                 "--metrics", "psnr", "--backend", "cpu", "--out", str(out),
                 "--no-progress"]) == 0
    with open(out, newline="") as handle:
        assert {r["variant"] for r in csv.DictReader(handle)} == {"hole-54"}
    out2 = tmp_path / "given.csv"
    assert main(["score", "--scene", str(hole), "--views", "test", "--gt", str(gt),
                 "--metrics", "psnr", "--backend", "cpu", "--out", str(out2),
                 "--variant", "mine", "--no-progress"]) == 0
    with open(out2, newline="") as handle:
        assert {r["variant"] for r in csv.DictReader(handle)} == {"mine"}
    from perturbations.apply import condition_label

    assert condition_label(hole) == "hole-54" and condition_label(room / "room") is None


# 6 ------------------------------------------------------------------------------------------


def _reliability_files(tmp_path, rows):
    """scores.csv / labels.csv of ``rows`` = [(scene, variant, psnr, lpips, label)]."""
    with open(tmp_path / "s.csv", "w") as f:
        f.write("scene,variant,method,quality\n")
        for scene, variant, p, lp, _ in rows:
            f.write(f"{scene},{variant},psnr test,{p}\n{scene},{variant},lpips test,{lp}\n")
    with open(tmp_path / "l.csv", "w") as f:
        f.write("scene,variant,target,label\n")
        for scene, variant, *_, label in rows:
            f.write(f"{scene},{variant},cup,{label}\n")


def test_reliability_says_tied_or_too_few_instead_of_a_winner(tmp_path, capsys):
    _reliability_files(tmp_path, [("a", "hole", 20.0, 0.2, 0), ("b", "hole", 21.0, 0.3, 0)])
    out = tmp_path / "o"
    assert main(["reliability", "--scores", str(tmp_path / "s.csv"), "--labels",
                 str(tmp_path / "l.csv"), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "best pooled method" not in line and "tied" in line and "needs >= 6" in line
    from protocols.reliability import (
        MIN_DISCORDANT,
        MethodResult,
        Prediction,
        mcnemar_exact_p,
        pooled_choice,
    )

    assert mcnemar_exact_p(5, 0) > 0.05 > mcnemar_exact_p(MIN_DISCORDANT, 0) and MIN_DISCORDANT == 6

    def result(name, correct):
        preds = [Prediction(f"s{i}", "v", 0.0, 0, 0 if ok else 1, ok, "threshold", 0.0)
                 for i, ok in enumerate(correct)]
        return MethodResult(name, {"cup": sum(correct)}, {"cup": len(correct)}), preds

    def choice(a, b):
        (ra, pa), (rb, pb) = result("m1", a), result("m2", b)
        base = MethodResult("Always reliable", {"cup": 0}, {"cup": len(a)})
        return pooled_choice([ra, rb, base], {("m1", "cup"): pa, ("m2", "cup"): pb}, ["cup"])

    few = choice([True, True], [True, False])
    assert few.startswith("too few decisions to choose") and "differ on 1 of 2" in few
    won = choice([True] * 8, [False] * 6 + [True] * 2)
    assert won.startswith("best pooled method: m1") and "p = 0.0312" in won
    assert choice([True] * 8 + [False] * 2, [False] * 3 + [True] * 7).startswith(
        "too few")  # 3 discordant
    assert choice([True] * 6 + [False] * 6, [False] * 6 + [True] * 6).startswith("tied: m1, m2")


# 7 ------------------------------------------------------------------------------------------


def test_one_scene_study_says_why_no_reliability_tables(tmp_path):
    from bench.study.analysis import reliability
    from bench.study.spec import StudySpec
    from protocols.predictor_report import study_inputs

    spec = StudySpec(name="one", sample_scenes={"kitchen": 0}, real_domain="simulated")
    paths, info = reliability(spec, {}, {}, tmp_path)
    assert paths == [] and "leave-one-scene-out reliability needs >= 2 scenes" in info["skipped"]
    assert "has 1 (kitchen)" in info["skipped"]
    tables = tmp_path / "tables"
    tables.mkdir()
    with open(tables / "quality.csv", "w") as f:
        f.write("scene,condition,view_protocol,metric,frame,value\n"
                "kitchen,clean,test,psnr,test_00,30.0\n")
    with pytest.raises(FileNotFoundError) as info:
        study_inputs(tables)
    message = str(info.value)
    assert "reliability_labels.csv not found" in message and "1 scene (kitchen)" in message
    assert "needs >= 2" in message and "\n" not in message


# 8 ------------------------------------------------------------------------------------------


def test_gaussian_counts_are_singular_or_plural():
    from bench.scene.register import check_scan
    from bench.scene.sample import sample_background

    good = sample_background(seed=0, n_gaussians=500)
    with pytest.raises(BenchError, match=r"only 1 Gaussian \(need"):
        check_scan(good.subset(np.arange(1)), source="s")
    with pytest.raises(BenchError, match="only 50 Gaussians"):
        check_scan(good.subset(np.arange(50)), source="s")
    from bench.errors import count_noun

    assert count_noun(1, "Gaussian") == "1 Gaussian"
    assert count_noun(0, "Gaussian") == "0 Gaussians"
    assert count_noun(2000, "Gaussian") == "2,000 Gaussians"

