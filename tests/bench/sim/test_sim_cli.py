"""`bench rollout`: outputs, manifest hashes, byte-identical reruns, one-line errors."""

import csv
import json

import pytest

from bench.cli import main
from bench.provenance import sha256_file


def _run(scene_dir, out, *extra):
    return main(
        [
            "rollout",
            "--scene",
            str(scene_dir),
            "--task",
            "cup",
            "--policy",
            "expert",
            "--episodes",
            "2",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_rollout_writes_records_manifest_and_video(scene_dir, tmp_path):
    out = tmp_path / "run"
    assert _run(scene_dir, out, "--video", "--image-size", "48", "48", "--seed-start", "3") == 0
    records = json.loads((out / "episodes.json").read_text())
    assert records["summary"]["episodes"] == 2
    assert [e["condition"] for e in records["episodes"]] == [3, 4]
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert [r["success"] for r in rows] == [str(e["success"]) for e in records["episodes"]]
    config = json.loads((out / "config.json").read_text())
    assert config["env"]["image_size"] == [48, 48] and config["execute"] == 16
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "rollout/1"
    for name in ("episodes.json", "episodes.csv", "config.json"):
        assert manifest["outputs"][name]["sha256"] == sha256_file(out / name)
    assert manifest["inputs"]["scene.json"]["sha256"] == sha256_file(scene_dir / "scene.json")
    gifs = sorted((out / "videos").glob("*.gif"))
    assert len(gifs) == 2 and gifs[0].stat().st_size > 1000


def test_rollout_is_byte_identical_across_runs(scene_dir, tmp_path):
    args = ("--obs-mode", "state", "--policy", "noisy-expert")
    assert _run(scene_dir, tmp_path / "a", *args) == 0
    assert _run(scene_dir, tmp_path / "b", *args) == 0
    for name in ("episodes.json", "episodes.csv", "config.json", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--episodes", "0"), "--episodes must be >= 1"),
        (("--policy", "expret"), "did you mean"),
        (("--task", "cupp"), "did you mean"),
        (("--video", "--obs-mode", "state"), "--video needs --obs-mode rgb"),
    ],
)
def test_rollout_bad_input_is_one_line_exit_2(scene_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "bad"
    assert _run(scene_dir, out, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench rollout: error:") and message in err[0]
    assert not out.exists()


def test_rollout_missing_scene_and_existing_out(scene_dir, tmp_path, capsys):
    assert _run(tmp_path / "nowhere", tmp_path / "o") == 2
    assert "not a scene bundle" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert _run(scene_dir, tmp_path / "taken", "--obs-mode", "state") == 2
    assert "exists" in capsys.readouterr().err


def test_rollout_mp4_without_ffmpeg_is_a_clear_error(scene_dir, tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is not None:
        pytest.skip("imageio-ffmpeg is installed: mp4 works")
    assert _run(scene_dir, tmp_path / "v", "--video", "--video-format", "mp4") == 2
    assert "imageio-ffmpeg" in capsys.readouterr().err


def test_rollout_bad_force_threshold(scene_dir, tmp_path, capsys):
    out = tmp_path / "f"
    assert _run(scene_dir, out, "--grasp", "friction", "--force-threshold", "-1") == 2
    assert "force_threshold" in capsys.readouterr().err and not out.exists()


def test_rollout_video_and_records_are_byte_identical(scene_dir, tmp_path):
    args = ("--video", "--image-size", "32", "32", "--episodes", "1", "--max-frames", "40")
    assert _run(scene_dir, tmp_path / "a", *args) == 0
    assert _run(scene_dir, tmp_path / "b", *args) == 0
    for name in ("episodes.json", "manifest.json", "videos/episode_0000.gif"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
