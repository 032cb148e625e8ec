"""The commands added beside the safety layer refuse an --out that would replace their inputs.

`bench task show`, `bench align color|pose` and `bench softbody rollout` arrived in the same
wave as bench.safety: each must refuse, before any work, an --out that contains, equals or lies
inside an input, even with --overwrite, leaving the workspace byte-identical (conftest snapshot).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TASK_FILE = Path(__file__).resolve().parents[2] / "bench" / "sim" / "task_files" / "cup.json"


@pytest.fixture()
def task_in_victim(workspace) -> Path:
    target = workspace / "victim" / "cup.json"
    shutil.copy(TASK_FILE, target)
    return target


def test_task_show_out_containing_the_task_file(refused, task_in_victim):
    refused(["task", "show", task_in_victim, "--out", "victim", "--overwrite"],
            fragment="contains the input FILE")


def test_task_show_out_inside_the_scene(refused, task_in_victim):
    refused(["task", "show", task_in_victim, "--scene", "scene", "--out", "scene/preview"],
            fragment="lies inside the input --scene")


def test_align_pose_out_equal_to_the_splats_folder(refused):
    refused(["align", "pose", "--splats", "scene/background.ply", "--mesh", "victim/scan.ply",
             "--out", "scene", "--overwrite"], fragment="contains the input --splats")


def test_align_color_out_containing_the_captures(refused):
    refused(["align", "color", "--scene", "scene", "--cameras", "victim/cams.json",
             "--captures", "victim/clean", "--out", "victim", "--overwrite"],
            fragment="contains the input --cameras")


def test_softbody_rollout_out_equal_to_the_scene(refused):
    refused(["softbody", "rollout", "--scene", "scene", "--out", "scene", "--overwrite"],
            fragment="must differ from --scene")


def test_scene_init_out_containing_the_scan(refused, workspace):
    shutil.copy(workspace / "scene" / "background.ply", workspace / "victim" / "lab.ply")
    refused(["scene", "init", "--splat", "victim/lab.ply", "--out", "victim", "--overwrite"],
            fragment="contains the input --splat")


def test_scene_crop_out_inside_the_bundle(refused):
    refused(["scene", "crop", "scene", "--keepouts", "--out", "scene/cropped"],
            fragment="lies inside the input BUNDLE")


def test_scene_edit_in_place_of_a_hand_made_bundle_is_refused(refused, workspace):
    (workspace / "scene" / "manifest.json").unlink(missing_ok=True)
    (workspace / "scene" / ".splatbench-output").unlink(missing_ok=True)
    refused(["scene", "edit", "scene", "--table-height", "0.01"],
            fragment="not written by the bench")
