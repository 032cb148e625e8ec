"""Fuzz round 3 (issue 30, item 1): camera frames at the command line.

Captures made of ``bench render --role test`` output (world-frame cameras) but
labelled ``"frame": "splat"`` (or written by an older version, without the key) are
refused by ``bench study run`` and its ``--dry-run`` with one line naming the frame
and the fix, before ``--out`` exists; a frame that is neither "world" nor "splat" is
one line in every reader.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.cli import main

SPEC = {"name": "fz", "scenes": {"lab": "scene"}, "captures": {"lab": "caps"},
        "tasks": ["cup"], "conditions": ["clean"], "trials": 1, "real_trials": 1,
        "metrics": ["psnr"], "image_size": [16, 16], "max_frames": 20,
        "real_domain": "simulated"}


def make_captures(ws: Path, *, frame: str | None) -> Path:
    """``caps/``: the scene's Test renders named like their cameras + a cameras.json."""
    argv = ["render", "--scene", "scene", "--role", "test", "--out", "renders",
            "--backend", "cpu"]
    assert main(argv) == 0
    entries = json.loads((ws / "renders" / "cameras.json").read_text())
    (ws / "caps" / "images").mkdir(parents=True)
    for i, entry in enumerate(entries):
        shutil.copy(ws / "renders" / "rgb" / f"{i:04d}_{entry['name']}.png",
                    ws / "caps" / "images" / f"{entry['name']}.png")
        if frame is None:
            entry.pop("frame")
        else:
            entry["frame"] = frame
    (ws / "caps" / "cameras.json").write_text(json.dumps(entries))
    (ws / "spec.json").write_text(json.dumps(SPEC))
    return ws / "caps"


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize(("frame", "fragment"), [
    ("splat", "in the world frame, not splat"),
    (None, 'the default without a "frame" key'),
], ids=["labelled-splat", "no-key"])
def test_world_captures_read_as_splat_refused(workspace, refused, frame, fragment, dry_run):
    make_captures(workspace, frame=frame)
    argv = ["study", "run", "--spec", "spec.json", "--out", "out", "--no-progress"]
    line = refused(argv + (["--dry-run"] if dry_run else []), fragment=fragment)
    assert 'set "frame": "world" in every camera entry' in line
    assert not (workspace / "out").exists()


def test_bad_frame_value_refused_everywhere(workspace, refused):
    caps = make_captures(workspace, frame="world")
    entries = json.loads((caps / "cameras.json").read_text())
    entries[0]["frame"] = "moon"
    (caps / "cameras.json").write_text(json.dumps(entries))
    argv = ["study", "run", "--spec", "spec.json", "--out", "out", "--no-progress"]
    refused(argv, fragment="\"frame\" is 'moon'; use \"world\"")
    refused(["render", "--scene", "scene", "--cameras", caps / "cameras.json", "--out", "r2"],
            fragment="'moon'")
    refused(["cameras", "convert", caps / "cameras.json", "t/transforms.json"],
            fragment="'moon'")
    role = workspace / "scene" / "cameras" / "test.json"
    role.write_text(json.dumps({"frame": "moon", "cameras": json.loads(role.read_text())}))
    refused(["render", "--scene", "scene", "--role", "test", "--out", "r3"], fragment="'moon'")
