"""View protocols and `bench score`: pairing, paired dQ, CSV/manifest outputs, bad inputs."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from metrics import views as V
from metrics.images import quantize_8bit
from metrics.registry import get_scorer


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """A small sample room (clean), a variant with 30 % of Gaussians removed, and captured
    test images (clean renders + fixed noise, 8-bit PNG, named by camera)."""
    import imageio.v3 as iio

    from bench.render import render
    from bench.scene.bundle import load_scene, save_scene
    from bench.scene.sample import make_sample_scene

    root = tmp_path_factory.mktemp("scenes")
    bundle = make_sample_scene(seed=0, n_gaussians=2000)
    save_scene(bundle, root / "clean")
    keep = np.random.default_rng(0).random(bundle.background.num) > 0.3
    save_scene(bundle.with_background(bundle.background.subset(keep)), root / "hole")
    clean = load_scene(root / "clean")
    gt = root / "gt"
    gt.mkdir()
    rng = np.random.default_rng(1)
    for cam in V.scene_cameras(clean, "test"):
        rgb = render(clean.background, cam, backend="cpu").rgb
        iio.imwrite(gt / f"{cam.name}.png", quantize_8bit(np.clip(
            rgb + 0.02 * rng.standard_normal(rgb.shape), 0, 1)))
    return root


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_test_views_pair_by_camera_name_and_order(scenes, tmp_path):
    by_name = V.test_views(scenes / "clean", scenes / "gt", backend="cpu", progress=False)
    assert by_name.frame_names[0] == "test_00" and by_name.references.shape == (8, 240, 320, 3)
    # same images under other names: paired by natural file order (= camera-file order)
    other = tmp_path / "gt"
    other.mkdir()
    for i, name in enumerate(by_name.frame_names):
        shutil.copy(scenes / "gt" / f"{name}.png", other / f"capture_{i}.png")
    by_order = V.test_views(scenes / "clean", other, backend="cpu", progress=False)
    assert np.array_equal(by_order.references, by_name.references)
    (other / "capture_0.png").unlink()
    with pytest.raises(BenchError, match="7 images for 8 test cameras"):
        V.test_views(scenes / "clean", other, backend="cpu", progress=False)


def test_score_views_rows_equal_direct_scorers(scenes):
    views = V.test_views(scenes / "hole", scenes / "gt", backend="cpu", progress=False)
    psnr, ssim = get_scorer("psnr"), get_scorer("ssim")
    rows = V.score_views(views, [psnr, ssim], batch_frames=3, progress=False)
    got = np.array([r.value for r in rows if r.metric == "ssim"])
    assert np.array_equal(got, ssim(views.frames, views.references))
    summary = {s.metric: s for s in V.summarize(rows)}
    assert summary["psnr"].mean == pytest.approx(psnr(views.frames, views.references).mean())
    assert summary["psnr"].n_frames == 8 and summary["psnr"].oriented == summary["psnr"].mean


def test_fr_scorer_on_nr_protocol_is_refused(scenes):
    views = V.obs_probe_views(scenes / "clean", backend="cpu", progress=False)
    with pytest.raises(BenchError, match="psnr is full-reference"):
        V.score_views(views, [get_scorer("psnr")], progress=False)


def test_cli_test_views_with_clean_pairing(scenes, tmp_path):
    out = tmp_path / "scores.csv"
    code = main(["score", "--scene", str(scenes / "hole"), "--clean", str(scenes / "clean"),
                 "--views", "test", "--gt", str(scenes / "gt"), "--metrics", "psnr,lpips",
                 "--variant", "hole", "--backend", "cpu", "--device", "cpu", "--out", str(out),
                 "--no-progress"])
    assert code == 0
    rows = read_csv(out)
    assert list(rows[0]) == list(V.LONG_COLUMNS)
    summary = {r["metric"]: r for r in read_csv(tmp_path / "scores.summary.csv")}
    for metric in ("psnr", "lpips"):
        per = {v: {r["frame"]: float(r["value"]) for r in rows
                   if r["metric"] == metric and r["variant"] == v} for v in ("hole", "clean")}
        assert set(per["hole"]) == set(per["clean"]) and len(per["hole"]) == 8
        # dQ = Q_variant - Q_clean over the same views (brute force from the long CSV)
        delta = np.mean([per["hole"][f] - per["clean"][f] for f in per["hole"]])
        assert float(summary[metric]["delta"]) == pytest.approx(delta, abs=1e-12)
    # removing Gaussians hurts: PSNR drops, LPIPS rises; both oriented deltas are negative
    assert float(summary["psnr"]["delta"]) < 0 < float(summary["lpips"]["delta"])
    assert float(summary["lpips"]["oriented_delta"]) == -float(summary["lpips"]["delta"])
    manifest = json.loads((tmp_path / "scores.manifest.json").read_text())
    assert manifest["tool"] == "score/1" and manifest["counts"]["frames"] == 8
    assert set(manifest["outputs"]) == {"scores", "summary"}
    assert manifest["image_folders"]["gt"]["files"] == 8
    assert set(manifest["inputs"]) == {"scene_background", "clean_background"}


def test_cli_obs_probe_clean_against_itself_has_zero_delta(scenes, tmp_path):
    out = tmp_path / "probe.csv"
    assert main(["score", "--scene", str(scenes / "clean"), "--clean", str(scenes / "clean"),
                 "--views", "obs-probe", "--backend", "cpu", "--out", str(out),
                 "--no-progress"]) == 0
    (row,) = read_csv(tmp_path / "probe.summary.csv")
    assert row["metric"] == "nvs-sqa" and row["unit"] == "sequence" and row["n_frames"] == "12"
    assert float(row["delta"]) == 0.0


def test_cli_image_folders_deterministic(tmp_path):
    from pathlib import Path

    data = Path(__file__).parent / "data" / "calibration"
    args = ["score", "--pred", str(data / "dist"), "--gt", str(data / "ref"),
            "--metrics", "psnr,ssim", "--out", str(tmp_path / "s.csv"), "--no-progress"]
    assert main(args) == 0
    first = (tmp_path / "s.csv").read_bytes(), (tmp_path / "s.manifest.json").read_bytes()
    assert main(args) == 2  # refuses to overwrite
    assert main([*args, "--overwrite"]) == 0
    assert (tmp_path / "s.csv").read_bytes() == first[0]
    assert (tmp_path / "s.manifest.json").read_bytes() == first[1]
    values = {r["frame"]: float(r["value"]) for r in read_csv(tmp_path / "s.csv")
              if r["metric"] == "psnr"}
    assert values["I06.png"] == pytest.approx(27.0139, abs=1e-4)  # see test_metrics_lpips.py


def _frames_dir(tmp_path, sizes):
    import imageio.v3 as iio

    folder = tmp_path / "frames"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate(sizes):
        iio.imwrite(folder / f"frame_{i}.png", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return folder


def test_cli_obs_policy_and_bad_inputs(tmp_path, capsys):
    frames = _frames_dir(tmp_path, [(72, 80)] * 3)
    out = tmp_path / "policy.csv"
    assert main(["score", "--views", "obs-policy", "--frames", str(frames), "--out", str(out),
                 "--no-progress"]) == 0
    assert [r["metric"] for r in read_csv(out)] == ["nvs-sqa"]

    def error(argv):
        assert main([*argv, "--no-progress"]) == 2
        return capsys.readouterr().err

    bad = tmp_path / "bad.csv"
    assert "no-reference" in error(["score", "--views", "obs-policy", "--frames", str(frames),
                                    "--metrics", "psnr", "--out", str(bad)])
    assert "did you mean 'lpips'" in error(["score", "--pred", str(frames), "--gt", str(frames),
                                            "--metrics", "lpip", "--out", str(bad)])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "contains no images" in error(["score", "--views", "obs-policy", "--frames",
                                          str(empty), "--out", str(bad)])
    (tmp_path / "m").mkdir()
    mixed = _frames_dir(tmp_path / "m", [(72, 80), (80, 72)])
    assert "different sizes" in error(["score", "--views", "obs-policy", "--frames",
                                       str(mixed), "--out", str(bad)])
    assert "--gt" in error(["score", "--views", "test", "--scene", str(tmp_path),
                            "--out", str(bad)])
    assert not bad.exists()  # nothing half-written
    # --out naming an existing directory: refused before scoring, even with --overwrite
    assert "is a directory" in error(["score", "--views", "obs-policy", "--frames", str(frames),
                                      "--out", str(empty), "--overwrite"])
    assert empty.is_dir() and not any(empty.iterdir())


def test_cli_list_metrics(capsys):
    assert main(["score", "--list-metrics"]) == 0
    listing = capsys.readouterr().out
    assert "lpips     FR    lower" in listing and "nvs-sqa   NR    higher  sequence" in listing


def test_cli_obs_policy_rollout_videos(tmp_path, nvs_sqa_scorer):
    import imageio.v3 as iio

    # the layout `bench rollout --video` writes: <out>/videos/episode_XXXX.gif
    videos = tmp_path / "rollout" / "videos"
    videos.mkdir(parents=True)
    rng = np.random.default_rng(4)
    for episode in range(2):
        # 6 levels per channel = 216 colours: exactly representable in a GIF palette
        frames = (rng.integers(0, 6, (3, 72, 80, 3)) * 51).astype(np.uint8)
        iio.imwrite(videos / f"episode_{episode:04d}.gif", frames, duration=100, loop=0)
        assert np.array_equal(V.read_video(videos / f"episode_{episode:04d}.gif"), frames)
    sets = V.policy_views(tmp_path / "rollout")
    assert [s.sequence for s in sets] == ["episode_0000", "episode_0001"]
    assert sets[1].frame_names[2] == "episode_0001/00002"
    out = tmp_path / "policy.csv"
    assert main(["score", "--views", "obs-policy", "--frames", str(tmp_path / "rollout"),
                 "--out", str(out), "--no-progress"]) == 0
    rows = read_csv(out)
    assert [r["frame"] for r in rows] == ["episode_0000/(sequence)", "episode_0001/(sequence)"]
    for row, view_set in zip(rows, sets, strict=True):
        # golden: the scorer called directly on the decoded episode
        assert float(row["value"]) == nvs_sqa_scorer(view_set.frames)[0]
    (summary,) = read_csv(tmp_path / "policy.summary.csv")
    assert summary["n_frames"] == "6"
    assert float(summary["mean"]) == pytest.approx(np.mean([float(r["value"]) for r in rows]))
