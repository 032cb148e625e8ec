"""`bench task validate|show` and `bench rollout` with task files, the arm and the dual rig."""

import csv
import json
from pathlib import Path

import pytest

import bench.sim
from bench.cli import main
from bench.provenance import sha256_file

SHIPPED = Path(bench.sim.__file__).with_name("task_files")


def test_validate_ok_and_bad(capsys, tmp_path, scene_dir):
    assert main(["task", "validate", str(SHIPPED / "cup.json"), "--scene", str(scene_dir)]) == 0
    out = capsys.readouterr().out
    assert "cup: ok" in out and "80 grid conditions" in out and "compiles" in out
    bad = tmp_path / "bad.json"
    data = json.loads((SHIPPED / "cup.json").read_text())
    data["objects"]["cup"]["mass"] = 0
    bad.write_text(json.dumps(data))
    assert main(["task", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "objects.cup.mass: must be > 0" in err
    assert main(["task", "validate", "cupp"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_show_writes_layout_grid_and_manifest(tmp_path):
    out = tmp_path / "show"
    assert main(["task", "show", "pen", "--out", str(out), "--size", "120", "160",
                 "--condition", "3"]) == 0
    for name in ("layout.png", "grid.png", "grid.pdf", "grid.csv", "task.json", "manifest.json"):
        assert (out / name).is_file(), name
    rows = list(csv.DictReader((out / "grid.csv").open()))
    grid = bench.sim.tasks.get_task("pen").grid
    assert len(rows) == 80
    assert float(rows[3]["x_m"]) == grid.condition(3)[0]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["outputs"]["layout.png"]["sha256"] == sha256_file(out / "layout.png")
    from PIL import Image

    assert Image.open(out / "layout.png").size == (160, 120)
    assert main(["task", "show", "pen", "--out", str(out)]) == 2  # exists, no --overwrite


def test_rollout_with_task_file_arm_and_dual_rig(scene_dir, tmp_path):
    task = tmp_path / "tape_copy.json"
    data = json.loads((SHIPPED / "tape.json").read_text())
    data["name"] = "tape-copy"
    task.write_text(json.dumps(data))
    out = tmp_path / "run"
    assert main(["rollout", "--scene", str(scene_dir), "--task", str(task), "--policy", "expert",
                 "--episodes", "1", "--robot", "arm6", "--cameras", "yubi-dual",
                 "--image-size", "32", "32", "--out", str(out), "--save-states"]) == 0
    records = json.loads((out / "episodes.json").read_text())
    assert records["episodes"][0]["task"] == "tape-copy" and records["episodes"][0]["success"]
    config = json.loads((out / "config.json").read_text())
    assert config["robot"] == "arm:arm6"
    assert config["cameras"] == ["wrist_left", "wrist_right"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"]["task"]["sha256"] == sha256_file(task)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--robot", "arm7"], "did you mean"),
        (["--cameras", "triple"], "cameras="),
        (["--video", "--cameras", "yubi-dual", "--obs-mode", "rgb"], "--video records"),
        (["--task", "missing.json"], "not found"),
    ],
)
def test_rollout_bad_robot_camera_task(scene_dir, tmp_path, capsys, extra, message):
    args = ["rollout", "--scene", str(scene_dir), "--episodes", "1", "--obs-mode", "state",
            "--out", str(tmp_path / "x"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0
    assert not (tmp_path / "x").exists()
