"""Fuzz cases of the recoverable swap, staging cleanup and executor checks (issue 30, items 4-5).

Crafted leftovers next to an output (a swap journal that points outside the bundle, a swap
folder or a staging name that is a symbolic link to the user's data, an unmarked folder with a
staging name, a manifest that lists files outside the bundle) must never make the bench touch
anything but its own files: each case runs in-process in the fuzz workspace and requires an
unchanged workspace (the ``victim/`` sentinel tree included) or a one-line refusal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.cli import main

MARKER = b'{"format": "splatbench-output/1"}\n'


def _journal(ws: Path, **changes) -> Path:
    swap = ws / ".scene.splatbench-swap"
    (swap / "old").mkdir(parents=True)
    (swap / ".splatbench-output").write_bytes(MARKER)
    journal = {"format": "splatbench-swap/1", "mode": "merge", "out": "scene",
               "staging": ".scene.ab12cd34.tmp", "install": [], "aside": [], "dirs": []}
    journal.update(changes)
    (swap / "journal.json").write_text(json.dumps(journal))
    return swap


@pytest.mark.parametrize("changes", [
    {"aside": ["../victim/clean/important.txt"]},
    {"aside": ["/etc/hostname"]},
    {"install": [["../victim/scan.ply", 1]]},
    {"dirs": ["../victim/clean"]},
    {"staging": "../victim"},
    {"out": "victim"},
    {"mode": "rm -rf"},
    {"format": "other/1"},
], ids=["aside-traversal", "aside-absolute", "install-traversal", "dirs-traversal",
        "staging-traversal", "other-out", "bad-mode", "bad-format"])
def test_crafted_swap_journal_is_refused_and_touches_nothing(workspace, refused, changes):
    """A journal naming paths outside the bundle (or not a bench journal): one line, no move."""
    _journal(workspace, **changes)
    refused(["scene", "info", "scene"], fragment="interrupted write")


def test_journal_through_a_link_leaving_the_bundle_is_refused(workspace, refused):
    """aside 'linked/important.txt' with scene/linked -> victim/clean: never moved there."""
    (workspace / "scene" / "linked").symlink_to(workspace / "victim" / "clean")
    swap = _journal(workspace, aside=["linked/important.txt"],
                    install=[["linked/new.txt", 1]])
    (swap / "old" / "linked").mkdir()
    (swap / "old" / "linked" / "important.txt").write_text("attacker's copy\n")
    refused(["scene", "info", "scene"], fragment="leads outside")


def test_swap_folder_that_is_a_link_is_ignored(workspace, capsys, tree_snapshot):
    (workspace / "victim" / "journal.json").write_text('{"format": "splatbench-swap/1"}')
    (workspace / ".scene.splatbench-swap").symlink_to(workspace / "victim")
    before = tree_snapshot(workspace)
    assert main(["scene", "info", "scene"]) == 0
    assert tree_snapshot(workspace) == before


def test_staging_names_that_are_not_dead_bench_staging_are_kept(workspace, capsys, tree_snapshot):
    """Links, unmarked folders, linked markers and other outputs' names are never deleted."""
    (workspace / "victim" / ".splatbench-output").write_bytes(MARKER)
    (workspace / ".out.ab12cd34.tmp").symlink_to(workspace / "victim")
    unmarked = workspace / ".out.zz99yy88.tmp"
    unmarked.mkdir()
    (unmarked / "notes.txt").write_text("mine")
    linked_marker = workspace / ".out.mm77nn66.tmp"
    linked_marker.mkdir()
    (linked_marker / ".splatbench-output").symlink_to(workspace / "victim" / ".splatbench-output")
    other = workspace / ".out2.ab12cd34.tmp"
    other.mkdir()
    (other / ".splatbench-output").write_bytes(MARKER)
    near = workspace / ".out.ab12cd34x.tmp"  # not a mkdtemp name of `out`
    near.mkdir()
    (near / ".splatbench-output").write_bytes(MARKER)
    before = tree_snapshot(workspace)
    assert main(["scene", "sample", "--out", "out", "--gaussians", "100"]) == 0
    after = tree_snapshot(workspace)
    assert {k: v for k, v in after.items() if k == "out" or not k.startswith("out/")} == \
        {**before, "out": "dir"}


def test_manifest_listing_paths_outside_the_bundle_never_touches_them(workspace, capsys,
                                                                        tree_snapshot):
    """An in-place edit treats only manifest entries inside the bundle as the bench's."""
    manifest = {"tool": "scene-sample/1", "bench_version": "0", "outputs": {
        "../victim/scan.ply": {"path": "../victim/scan.ply", "sha256": "0"},
        "abs": {"path": str(workspace / "victim" / "clean" / "important.txt"), "sha256": "0"},
        "link": {"path": "evil.json", "sha256": "0"}}}
    (workspace / "scene" / "manifest.json").write_text(json.dumps(manifest))
    (workspace / "scene" / "evil.json").symlink_to(workspace / "victim" / "clean" /
                                                   "important.txt")
    victim = {k: v for k, v in tree_snapshot(workspace).items() if k.startswith("victim")}
    assert main(["scene", "edit", "scene", "--table-height", "0.02", "--no-previews"]) == 0
    assert {k: v for k, v in tree_snapshot(workspace).items() if k.startswith("victim")} == victim
    assert os.path.islink(workspace / "scene" / "evil.json")  # a link it does not own: kept


def test_in_place_edit_refuses_to_replace_a_foreign_manifest(workspace, refused):
    """The user's own manifest.json (not a bench manifest) in a bundle is not the bench's."""
    (workspace / "scene" / "manifest.json").write_text('{"my": "own notes"}\n')
    refused(["scene", "edit", "scene", "--table-height", "0.02", "--no-previews"],
            fragment="was not written by the bench")


def test_old_scheme_leftover_that_is_not_a_bench_output_is_not_moved(workspace, refused):
    aside = workspace / ".gone.ab12cd34.old.tmp" / "previous"
    aside.mkdir(parents=True)
    (aside / "holiday.jpg").write_bytes(b"not a bench output")
    refused(["scene", "info", "gone"], fragment="not found")


@pytest.mark.parametrize("address", ["localhost", "host:0", "host:http", "[::1]"])
def test_malformed_ray_address_refused_before_out(workspace, refused, address):
    (workspace / "spec.json").write_text(json.dumps({
        "name": "fz", "sample_scenes": {"a": 0}, "sample_gaussians": 3000, "tasks": ["cup"],
        "conditions": ["clean"], "trials": 1, "real_trials": 1, "metrics": ["psnr"],
        "image_size": [16, 16], "max_frames": 20, "real_domain": "simulated"}))
    pytest.importorskip("ray")
    refused(["study", "run", "--spec", "spec.json", "--out", "out", "--no-progress",
             "--executor", "ray", "--address", address], fragment="is not HOST:PORT")
