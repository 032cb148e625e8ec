"""Fuzz suite: bad inputs to every command group give exit 2, one line, and change nothing.

Each case builds its bad input inside the workspace (a scene bundle ``scene/``
plus the sentinel ``victim/``, see conftest.py), runs ``bench`` in-process and
checks the one-line refusal and that the whole workspace is byte-identical
afterwards. The cases named ``issue10_*`` are the defects listed in issue 10
(each reproduced before its fix); the generated families below them cover
truncation, wrong JSON types, NaN/inf, huge sizes, traversal names, symbolic
links and unwritable outputs (a file in place of a directory: it stops writes
even as root, unlike chmod).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DELETE:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


_DELETE = object()


def write_ply_like(ws: Path, name: str, edit) -> Path:
    """A copy of the workspace scene whose background Gaussians went through ``edit``."""
    import dataclasses

    from bench.scene.ply import read_ply, write_ply

    bundle = ws / name
    shutil.copytree(ws / "scene", bundle)
    splats = read_ply(bundle / "background.ply")
    write_ply(bundle / "background.ply", edit(splats, dataclasses))
    return bundle


def perturb(scene, out, *extra):
    return ["perturb", "--preset", "hole-54", "--scene", scene, "--out", out, *extra]


def render(scene, out, *extra):
    return ["render", "--scene", scene, "--out", out, "--backend", "cpu", *extra]


# --------------------------------------------------------------------------- issue 10 cases


def test_issue10_perturb_overwrite_parent_of_input_keeps_input(workspace, refused):
    """`bench perturb --scene D/room --out D --overwrite` removed room/."""
    d = workspace / "D"
    shutil.copytree(workspace / "scene", d / "room")
    refused(perturb(d / "room", d, "--overwrite"), fragment="contains the input")
    assert (d / "room" / "scene.json").is_file()


@pytest.mark.parametrize("command", ["render", "rollout", "reliability", "perturb"])
def test_issue10_overwrite_never_deletes_an_input(workspace, refused, command):
    d = workspace / "D"
    shutil.copytree(workspace / "scene", d / "room")
    (d / "scores.csv").write_text("scene,variant,method,quality\nr,clean,psnr,30\n")
    (d / "labels.csv").write_text("scene,variant,task,label\nr,clean,cup,1\n")
    argv = {
        "render": render(d / "room", d, "--role", "test", "--overwrite"),
        "rollout": ["rollout", "--scene", d / "room", "--task", "cup", "--out", d,
                    "--overwrite", "--obs-mode", "state", "--episodes", "1"],
        "reliability": ["reliability", "--scores", d / "scores.csv", "--labels",
                        d / "labels.csv", "--out", d, "--overwrite"],
        "perturb": perturb(d / "room", d / "room" / "sub", "--overwrite"),
    }[command]
    refused(argv)


def test_issue10_overwrite_refuses_a_directory_the_bench_did_not_write(workspace, refused):
    mine = workspace / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    refused(perturb(workspace / "scene", mine, "--overwrite"), fragment="not written by the bench")


def test_issue10_overwrite_replaces_a_bench_output(workspace, capsys):
    out = workspace / "out"
    assert main([str(a) for a in perturb("scene", out)]) == 0
    assert (out / ".splatbench-output").is_file()
    assert main([str(a) for a in perturb("scene", out, "--overwrite", "--seed", "1")]) == 0
    assert json.loads((out / "manifest.json").read_text())["seed"] == 1
    assert sorted(p.name for p in workspace.iterdir()) == ["out", "scene", "victim"]


def test_issue10_tables_yubi_out_inside_data_refused(workspace, refused):
    data = workspace / "data"
    shutil.copytree(Path(__file__).resolve().parents[2] / "results" / "yubi" / "data", data)
    refused(["tables", "yubi", "--data", data, "--out", data / "tables"], fragment="inside")
    refused(["tables", "yubi", "--data", data, "--out", workspace, "--overwrite"],
            fragment="would replace the input data")


@pytest.mark.parametrize(("value", "fragment"), [
    ("../../../../etc/passwd", "outside"),
    ("/etc/passwd", "absolute path"),
    (5, "must be a non-empty string"),
    ([1, 2], "must be a non-empty string"),
    (None, "must be a non-empty string"),
])
def test_issue10_scene_background_closed_and_typed(workspace, refused, value, fragment):
    edit_json(workspace / "scene" / "scene.json", background=value)
    refused(perturb("scene", "out"), fragment=fragment)
    refused(render("scene", "out", "--role", "test"), fragment=fragment)


def test_issue10_background_symlink_leaving_bundle_refused(workspace, refused):
    outside = workspace / "victim" / "scan.ply"
    (workspace / "scene" / "background.ply").unlink()
    (workspace / "scene" / "background.ply").symlink_to(outside)
    refused(perturb("scene", "out"), fragment="outside")


def test_issue10_camera_symlink_to_outside_is_not_copied(workspace, refused):
    link = workspace / "scene" / "cameras" / "passwd.json"
    link.symlink_to(workspace / "victim" / "clean" / "important.txt")
    refused(perturb("scene", "out"), fragment="symbolic link")


def test_issue10_camera_role_traversal_refused(workspace, refused):
    edit_json(workspace / "scene" / "scene.json",
              cameras={"test": "../victim/clean/important.txt"})
    refused(render("scene", "out", "--role", "test"), fragment="outside")


def test_issue10_absolute_paths_allowed_only_by_the_documented_switch(workspace, capsys,
                                                                      monkeypatch):
    scene = workspace / "scene"
    edit_json(scene / "scene.json", background=str((scene / "background.ply").resolve()))
    code = main(["scene", "info", str(scene)])
    assert code == 2 and "SPLATBENCH_ALLOW_ABSOLUTE_PATHS" in capsys.readouterr().err
    monkeypatch.setenv("SPLATBENCH_ALLOW_ABSOLUTE_PATHS", "1")
    assert main(["scene", "info", str(scene)]) == 0


def test_issue10_scene_name_and_table_types(workspace, refused):
    scene_json = workspace / "scene" / "scene.json"
    original = scene_json.read_text()
    edit_json(scene_json, name={"a": 1})
    refused(perturb("scene", "out"), fragment='"name" must be a non-empty string')
    scene_json.write_text(original)
    data = json.loads(original)
    data["table"]["height"] = "0.0"
    scene_json.write_text(json.dumps(data))
    refused(perturb("scene", "out"), fragment="table.height")


@pytest.mark.parametrize(("content", "fragment"), [
    ("[1, 2, 3]", "list of camera objects"),
    ("[]", "empty list"),
    ('{"frames": "abc"}', "'frames' must be a list"),
    ('{"frames": []}', "'frames' is empty"),
])
def test_issue10_camera_json_shapes(workspace, refused, content, fragment):
    (workspace / "cams.json").write_text(content)
    refused(render("scene", "out", "--cameras", "cams.json"), fragment=fragment)


def test_issue10_camera_width_true_refused(workspace, refused):
    cams = json.loads((workspace / "scene" / "cameras" / "test.json").read_text())
    cams[0]["width"] = True
    (workspace / "cams.json").write_text(json.dumps(cams))
    refused(render("scene", "out", "--cameras", "cams.json"), fragment="width=True")


def _colmap(ws: Path, fmt: str) -> Path:
    from bench.scene.camera_files import load_cameras, save_cameras

    model = ws / f"colmap_{fmt}"
    save_cameras(model, load_cameras(ws / "scene" / "cameras" / "test.json"),
                 format=f"colmap-{fmt}")
    return model


def test_issue10_truncated_colmap_binary(workspace, refused):
    model = _colmap(workspace, "binary")
    data = (model / "cameras.bin").read_bytes()
    (model / "cameras.bin").write_bytes(data[: len(data) // 2])
    refused(render("scene", "out", "--cameras", model), fragment="truncated or corrupt")


def test_issue10_colmap_text_bad_int(workspace, refused):
    model = _colmap(workspace, "text")
    lines = (model / "cameras.txt").read_text().splitlines()
    body = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    parts = lines[body[0]].split()
    parts[2] = "wide"
    lines[body[0]] = " ".join(parts)
    (model / "cameras.txt").write_text("\n".join(lines) + "\n")
    refused(render("scene", "out", "--cameras", model), fragment="re-export the model")


def test_issue10_corrupt_png_in_score(workspace, refused):
    pred, gt = workspace / "pred", workspace / "gt"
    pred.mkdir()
    gt.mkdir()
    import imageio.v3 as iio

    image = np.zeros((8, 8, 3), np.uint8)
    iio.imwrite(gt / "a.png", image)
    (pred / "a.png").write_bytes(iio.imwrite("<bytes>", image, extension=".png")[:40])
    refused(["score", "--pred", pred, "--gt", gt, "--metrics", "psnr", "--out", "s.csv",
             "--device", "cpu"])


def test_issue10_csv_unclosed_quote(workspace, refused):
    (workspace / "scores.csv").write_text('scene,variant,method,quality\n"r,clean,psnr,30\n')
    (workspace / "labels.csv").write_text("scene,variant,task,label\nr,clean,cup,1\n")
    refused(["reliability", "--scores", "scores.csv", "--labels", "labels.csv", "--out", "o"],
            fragment="fix the quoting")
    (workspace / "scores.csv").write_text("scene,variant,method,quality\nr,clean\n")
    refused(["reliability", "--scores", "scores.csv", "--labels", "labels.csv", "--out", "o"],
            fragment="wrong number of fields")


@pytest.mark.parametrize(("argv", "fragment"), [
    (["stats", "wilson", "1e400", "10"], "whole number"),
    (["stats", "wilson", "3", "10", "--confidence", "nan"], "--confidence"),
    (["stats", "wilson", "3", "1e13"], "whole number"),
    (["stats", "fisher", "inf", "10", "3", "10"], "whole number"),
])
def test_issue10_stats_numbers(workspace, refused, argv, fragment):
    refused(argv, fragment=fragment)


def test_issue10_huge_sizes_refused_before_allocation(workspace, refused):
    refused(render("scene", "out", "--role", "test", "--width", "30000"), fragment="16384")
    refused(render("scene", "out", "--role", "test", "--width", "10000", "--height", "10000"),
            fragment="100,000,000 px")
    refused(["rollout", "--scene", "scene", "--task", "cup", "--out", "o", "--image-size",
             "100000", "100000"], fragment="16384")
    refused(["perturb", "--kind", "floaters", "--clusters", "100000000", "--per-cluster",
             "100000", "--scene", "scene", "--out", "o"], fragment="clusters x")


def test_issue10_fps_and_seed_messages(workspace, refused):
    (workspace / "frames").mkdir()
    refused(["capture", "select", "--images", "left=frames", "--fps", "-10", "--intervals", "2",
             "--out", "cap"], fragment="--fps must be a positive frame rate")
    refused(["scene", "sample", "--out", "s", "--seed", "-1"], fragment="--seed")
    refused(["rollout", "--scene", "scene", "--task", "cup", "--out", "o",
             "--policy-seed", "-1"], fragment="--policy-seed")
    refused(["demo", "--out", "d", "--seed", "-1"], fragment="--seed")


def test_issue10_ply_zero_vertices_zero_quats_huge_scale(workspace, refused):
    write_ply_like(workspace, "empty", lambda s, dc: s.subset(np.zeros(len(s), bool)))
    refused(perturb("empty", "out"), fragment="0 Gaussians")

    def zero_quat(s, dc):
        q = s.quats.copy()
        q[3] = 0.0
        return dc.replace(s, quats=q)

    write_ply_like(workspace, "zq", zero_quat)
    refused(perturb("zq", "out"), fragment="zero rotation quaternions")

    def huge(s, dc):
        ls = s.log_scales.copy()
        ls[5] = np.log(1e30)
        return dc.replace(s, log_scales=ls)

    write_ply_like(workspace, "huge", huge)
    refused(render("huge", "out", "--role", "test"), fragment="scales outside")


def test_issue10_long_ply_comment_is_legal(workspace, capsys):
    """A 2 MB comment in the PLY header is legal PLY (was reported as a damaged file)."""
    ply = workspace / "scene" / "background.ply"
    data = ply.read_bytes()
    head, rest = data.split(b"\n", 1)
    ply.write_bytes(head + b"\ncomment " + b"x" * (2 << 20) + b"\n" + rest)
    assert main(["scene", "info", "scene"]) == 0, capsys.readouterr().err


def test_issue10_stdout_to_dev_full_is_one_line(workspace):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "bench.cli", "stats", "wilson", "3", "10"],
                              stdout=full, stderr=subprocess.PIPE, text=True, env=env,
                              timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("bench stats wilson: error: cannot write to standard output")


def test_issue10_study_export_refuses_foreign_database(workspace, refused):
    db = workspace / "foreign.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
        con.execute("INSERT INTO notes VALUES ('mine')")
    refused(["study", "export", "--results", db, "--out", "csv"], fragment="not a splatbench")
    with sqlite3.connect(db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master")]
    assert tables == ["notes"]


# --------------------------------------------------------------------------- generated families


@pytest.mark.parametrize("name", ["../../victim", "..", "a/b", ".hidden", "", "x" * 200,
                                  "with space", "semi;colon", "nul\x00byte"])
def test_traversal_and_bad_names_refused_in_study_specs(workspace, refused, name):
    spec = {"name": "s", "sample_scenes": {name: 0}, "sample_gaussians": 200,
            "conditions": ["clean"], "tasks": ["cup"], "trials": 1, "real_trials": 1,
            "metrics": ["psnr"]}
    (workspace / "spec.json").write_text(json.dumps(spec))
    refused(["study", "run", "--spec", "spec.json", "--out", "o", "--no-progress"])


def _truncations(data: bytes) -> list[bytes]:
    return [b"", data[:1], data[: len(data) // 3], data[:-1]]


@pytest.mark.parametrize("cut", range(4))
def test_truncated_files(workspace, refused, cut):
    ply = workspace / "scene" / "background.ply"
    ply.write_bytes(_truncations(ply.read_bytes())[cut])
    refused(perturb("scene", "out"))
    scene_json = workspace / "scene" / "scene.json"
    scene_json.write_bytes(_truncations(scene_json.read_bytes())[cut])
    refused(render("scene", "out", "--role", "test"))
    cams = workspace / "scene" / "cameras" / "test.json"
    (workspace / "c.json").write_bytes(_truncations(cams.read_bytes())[cut])
    refused(render("scene", "out", "--cameras", "c.json"))


_BAD_VALUES = [None, True, "1", [], {}, float("nan"), float("inf"), -1, 1e308, [1, "a"]]


@pytest.mark.parametrize("value", _BAD_VALUES, ids=repr)
@pytest.mark.parametrize("key", ["world_from_splat", "table", "keepouts", "cameras", "format"])
def test_wrong_types_in_scene_json(workspace, refused, key, value):
    text = json.dumps({key: value}).replace("NaN", "NaN").replace("Infinity", "Infinity")
    data = json.loads((workspace / "scene" / "scene.json").read_text())
    data[key] = json.loads(text)[key]
    (workspace / "scene" / "scene.json").write_text(json.dumps(data))
    if key == "keepouts" and value in ([], None):
        pytest.skip("no keepouts is a valid scene")
    if key == "cameras" and value in ([], {}, None):
        pytest.skip("a scene without camera roles is valid")
    if key == "table" and value in (None, {}):
        pytest.skip("no table, or {} (every table field at its documented default), is valid")
    if key == "keepouts" and value == {}:
        pytest.skip("an empty keepouts value means none")
    refused(["scene", "info", "scene"])


@pytest.mark.parametrize("value", _BAD_VALUES + [0, 2**40, "wide"], ids=repr)
@pytest.mark.parametrize("key", ["width", "height", "fx", "cx", "world_from_camera", "model"])
def test_wrong_types_in_camera_files(workspace, refused, key, value):
    cams = json.loads((workspace / "scene" / "cameras" / "test.json").read_text())
    cams[0][key] = value
    (workspace / "c.json").write_text(json.dumps(cams))
    if key in ("fx", "cx") and isinstance(value, int | float) and not isinstance(value, bool) \
            and np.isfinite(value) and (key == "cx" or value > 0):
        pytest.skip("a finite intrinsic is a valid (if odd) camera")
    refused(render("scene", "out", "--cameras", "c.json"))


@pytest.mark.parametrize("argv", [
    ["perturb", "--preset", "hole-54", "--scene", "scene", "--out", "afile/out"],
    ["render", "--scene", "scene", "--role", "test", "--out", "afile/out", "--backend", "cpu"],
    ["scene", "sample", "--out", "afile/out", "--gaussians", "100"],
    ["reliability", "--scores", "s.csv", "--labels", "l.csv", "--out", "afile/out"],
    ["tables", "yubi", "--out", "afile/out"],
    ["coverage", "plan", "--manifest", "m.json", "--mode", "random", "--fraction", "0.5",
     "--out", "afile/p.json"],
    ["score", "--pred", "scene", "--gt", "scene", "--out", "afile/s.csv", "--metrics", "psnr"],
    ["study", "run", "--spec", "spec.json", "--out", "afile/out", "--no-progress"],
    ["study", "export", "--results", "r.sqlite", "--out", "afile/out"],
    ["demo", "--out", "afile/out", "--quick"],
])
def test_unwritable_output_file_in_place_of_directory(workspace, refused, argv):
    """A file where the output's parent directory should be stops writes even for root."""
    (workspace / "afile").write_text("a plain file\n")
    (workspace / "s.csv").write_text("scene,variant,method,quality\nr,clean,psnr,30\n")
    (workspace / "l.csv").write_text("scene,variant,task,label\nr,clean,cup,1\n")
    (workspace / "m.json").write_text("{}")
    (workspace / "spec.json").write_text(json.dumps(
        {"name": "s", "sample_scenes": {"a": 0}, "sample_gaussians": 200, "tasks": ["cup"],
         "conditions": ["clean"], "trials": 1, "real_trials": 1, "metrics": ["psnr"]}))
    from bench.study.store import ResultsStore

    ResultsStore(workspace / "r.sqlite").close()
    refused(argv)


def test_read_only_output_directory(workspace, refused):
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod does not stop writes (the file-in-place-of-a-"
                    "directory cases above cover unwritable outputs)")
    ro = workspace / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        refused(perturb("scene", ro / "out"), fragment="Permission denied")
    finally:
        ro.chmod(0o755)


def test_out_is_a_symlink_to_an_input(workspace, refused):
    (workspace / "link").symlink_to(workspace / "scene")
    refused(perturb("scene", "link", "--overwrite"), fragment="must differ")
    (workspace / "link2").symlink_to(workspace / "victim")
    refused(perturb("scene", "link2", "--overwrite"), fragment="symbolic link")


def test_colmap_binary_generated_corruptions(workspace, refused):
    model = _colmap(workspace, "binary")
    good = (model / "images.bin").read_bytes()
    for data in (good[:9], good[:-3], struct.pack("<Q", 10**12) + good[8:]):
        (model / "images.bin").write_bytes(data)
        refused(render("scene", "out", "--cameras", model))


def _capture(ws: Path) -> Path:
    """A tiny capture manifest whose frame image lies inside its directory."""
    cap = ws / "cap"
    cap.mkdir()
    import imageio.v3 as iio

    iio.imwrite(cap / "f0.png", np.zeros((8, 8, 3), np.uint8))
    manifest = {"format": "splatbench-capture/1",
                "frames": [{"id": "f0", "timestamp": 0.0, "images": {"left": "f0.png"}}]}
    (cap / "capture.json").write_text(json.dumps(manifest))
    return cap / "capture.json"


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda m: m["frames"][0]["images"].update(left="../victim/scan.ply"), "outside"),
    (lambda m: m["frames"][0]["images"].update(left="/etc/passwd"), "absolute path"),
    (lambda m: m["frames"][0].update(timestamp="soon"), "'timestamp' must be a number"),
    (lambda m: m.update(image_roots="frames"), "'image_roots' must be a list"),
])
def test_capture_manifests_closed_and_typed(workspace, refused, edit, fragment):
    from bench.recon.capture import CAPTURE_FORMAT

    path = _capture(workspace)
    data = json.loads(path.read_text())
    data["format"] = CAPTURE_FORMAT
    edit(data)
    path.write_text(json.dumps(data))
    refused(["coverage", "plan", "--manifest", path, "--mode", "random", "--fraction", "0.5",
             "--out", "plan.json"], fragment=fragment)


def test_capture_image_roots_allow_list(workspace, capsys):
    from bench.recon.capture import CAPTURE_FORMAT, CaptureManifest

    path = _capture(workspace)
    (workspace / "victim" / "f1.png").write_bytes((path.parent / "f0.png").read_bytes())
    data = json.loads(path.read_text())
    data["format"] = CAPTURE_FORMAT
    data["frames"][0]["images"]["left"] = "../victim/f1.png"
    data["image_roots"] = ["../victim"]
    path.write_text(json.dumps(data))
    assert CaptureManifest.load(path, require_views=False).frames[0].images["left"]


@pytest.mark.parametrize("argv", [
    ["perturb", "--preset", "floaters-mid", "--scene", "scene", "--out", "o", "--seed", "-1"],
    ["coverage", "plan", "--manifest", "scene/scene.json", "--mode", "random", "--fraction",
     "0.5", "--seed", "-1", "--out", "p.json"],
    ["train", "--manifest", "scene/scene.json", "--out", "t", "--seed", "-1"],
])
def test_negative_seeds_named(workspace, refused, argv):
    refused(argv, fragment="--seed")


def test_cameras_convert_never_replaces_its_source(workspace, refused):
    shutil.copy(workspace / "scene" / "cameras" / "test.json", workspace / "c.json")
    refused(["cameras", "convert", "c.json", "c.json", "--overwrite"], fragment="must differ")
    model = _colmap(workspace, "text")
    refused(["cameras", "convert", model, model / "cams.json", "--overwrite"], fragment="inside")


@pytest.mark.parametrize(("error", "fragment"), [
    (PermissionError(13, "Permission denied", "/x/out"), "Permission denied: /x/out; check"),
    (IsADirectoryError(21, "Is a directory", "/x/out.csv"), "a directory stands where a file"),
    (OSError(30, "Read-only file system", "/ro"), "file system is read-only"),
    (OSError(28, "No space left on device", "/full"), "disk is full"),
    (MemoryError(), "out of memory"),
    (OverflowError("int too large"), "too large"),
    (struct.error("unpack requires a buffer of 8 bytes"), "truncated or corrupt"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not UTF-8"),
    (TypeError("float() argument must be a string or a real number"), "wrong type"),
    (SyntaxError("broken PNG file"), "image file is corrupt"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
])
def test_funnel_turns_every_user_error_into_one_line(monkeypatch, capsys, error, fragment):
    """Whatever a handler raises from user data comes out as one line with a fix, exit 2."""
    import protocols.cli

    def boom(args):
        raise error

    monkeypatch.setattr(protocols.cli, "_run_stats", boom)
    code = main(["stats", "wilson", "1", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith("bench stats wilson: error: ") and fragment in err[0], err
