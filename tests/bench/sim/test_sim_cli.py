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
    assert [e["init_index"] for e in records["episodes"]] == [3, 4]
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


def test_rollout_saves_state_streams_that_rescore_offline(scene_dir, tmp_path):
    import numpy as np

    from bench.sim.progress import score_stream
    from bench.sim.task_progress import progress_spec
    from bench.sim.tasks import get_task

    out = tmp_path / "s"
    assert _run(scene_dir, out, "--obs-mode", "state", "--save-states", "--episodes", "1") == 0
    rows = list(csv.DictReader((out / "states" / "episode_0000.csv").open()))
    record = json.loads((out / "episodes.json").read_text())["episodes"][0]
    assert len(rows) == record["frames"] + 1  # frame 0 (reset) .. last frame
    assert [int(r["frame"]) for r in rows] == list(range(len(rows)))
    pose = ("x", "y", "z", "qw", "qx", "qy", "qz")

    def block(prefix):
        return np.array([[float(r[f"{prefix}_{p}"]) for p in pose] for r in rows])

    from bench.sim.progress import Frames

    frames = Frames(
        objects={"cup": block("cup"), "plate": block("plate")},
        ee_pose=block("ee"),
        gripper=np.array([float(r["gripper"]) for r in rows]),
    )
    success = np.array([r["success"] == "1" for r in rows])  # the env's declared success
    trace = score_stream(progress_spec(get_task("cup")), frames, dt=0.1, success=success)
    # offline scoring of the CSV stream reproduces the online reward of every frame
    # (CSV keeps repr() floats, so the stream is exact)
    np.testing.assert_array_equal(trace.score, [float(r["progress"]) for r in rows])
    assert record["success"] == success[-1]
    assert record["progress_final"] == pytest.approx(trace.final_score, abs=5e-7)  # 6 digits
    assert (trace.final_score == 1.0) == record["success"]
    assert record["first_grasp_frame"] == next(int(r["frame"]) for r in rows if r["held"] == "1")
    manifest = json.loads((out / "manifest.json").read_text())
    assert "states/episode_0000.csv" in manifest["outputs"]


def test_parser_defaults_match_env_config():
    # the env flags are built from EnvConfig / GraspConfig fields: the parser's defaults are
    # the dataclasses' defaults, field for field
    import argparse

    from bench.cli import build_parser
    from bench.rollout_cli import ENV_FLAGS
    from bench.sim.config import EnvConfig
    from bench.sim.grasp import GraspConfig

    parser = build_parser()
    args = parser.parse_args(["rollout", "--scene", "s", "--out", "o"])
    config, grasp = EnvConfig(), GraspConfig()
    assert args.task == config.task
    assert args.obs_mode == config.obs_mode
    assert args.background == config.background
    assert args.fisheye_mode == config.fisheye_mode
    assert args.render_backend == config.render_backend
    assert tuple(args.image_size) == config.image_size
    assert args.execute is config.execute is None and args.max_frames is config.max_frames is None
    assert args.grasp == grasp.mode and args.force_threshold == grasp.force_threshold
    for name in ENV_FLAGS:
        value = getattr(args, name)
        assert (tuple(value) if isinstance(value, list) else value) == getattr(config, name), name
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "(default: None)" not in sub.choices["rollout"].format_help()
