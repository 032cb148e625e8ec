"""Shared fixtures of the fuzz suites (tests/fuzz/test_fuzz_*.py): workspaces, snapshots, checks.

Every case runs ``bench.cli.main`` in-process with the working directory inside a
fresh temp workspace that holds the inputs and a *sentinel tree* (``victim/``,
the user's data next to the output). A refused case must exit 2 with exactly one
stderr line ``bench <cmd>: error: ...`` and no traceback, and the snapshot
(relative path -> sha256 of every file, and every directory and link) of the whole
workspace must be the same before and after: nothing written, nothing deleted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from bench.cli import main


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> content hash (files), 'dir' or 'link:<target>' of everything under root."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                state[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                state[rel] = "dir"
            else:
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def make_sentinel(root: Path) -> Path:
    """The user's data next to the output: ``victim/clean/important.txt`` and a scan."""
    victim = root / "victim"
    (victim / "clean").mkdir(parents=True)
    (victim / "clean" / "important.txt").write_text("my only copy\n")
    (victim / "scan.ply").write_bytes(b"not really a ply, but precious\n")
    return victim


def copy_scene(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def run_refused(argv: list, capsys, workspace: Path, *, fragment: str | None = None) -> str:
    """Run ``bench argv``; assert exit 2, one clean line, and an unchanged workspace."""
    before = snapshot(workspace)
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    err = captured.err
    # progress lines ("[bench perturb 0.1s] ...") may come first; the error is one last line
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("[bench")]
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("bench ") and ": error: " in lines[0], err
    assert err.rstrip().splitlines()[-1] == lines[0], err
    assert "Traceback" not in err
    if fragment is not None:
        assert fragment in lines[0], lines[0]
    assert snapshot(workspace) == before, "the refused command changed the workspace"
    return lines[0]


@pytest.fixture(scope="session")
def sample_scene(tmp_path_factory) -> Path:
    """A small registered sample room (3000 Gaussians), written once; copy before editing."""
    from bench.scene.bundle import save_scene
    from bench.scene.sample import make_sample_scene

    path = tmp_path_factory.mktemp("fuzz_scene") / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=3000), path)
    return path


@pytest.fixture()
def tree_snapshot():
    """:func:`snapshot` for tests that compare a workspace before and after by hand."""
    return snapshot


@pytest.fixture()
def workspace(tmp_path, monkeypatch, sample_scene) -> Path:
    """A temp workspace (the cwd) with ``scene/`` (a bundle) and the ``victim/`` sentinel tree."""
    ws = tmp_path / "ws"
    ws.mkdir()
    copy_scene(sample_scene, ws / "scene")
    make_sentinel(ws)
    monkeypatch.chdir(ws)
    return ws


@pytest.fixture()
def refused(capsys, workspace):
    """``refused(argv, fragment=None)``: assert a one-line exit-2 refusal changing nothing."""

    def check(argv: list, fragment: str | None = None) -> str:
        return run_refused(argv, capsys, workspace, fragment=fragment)

    return check
