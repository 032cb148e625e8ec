"""Fuzz cases of issue 30 item 3: scan formats decided one way, CSVs with a byte-order mark.

Each refused case is one line, exit 2, and leaves the workspace byte-identical (see
conftest.py); the accepted cases show that ``bench scene info`` reads every scan format
``bench scene init`` reads and that the CSV readers take Excel's "CSV UTF-8" files.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "scans"
BOM = b"\xef\xbb\xbf"


def _snapshot(root: Path) -> dict[str, str]:
    """conftest.snapshot (pytest's importlib mode does not put conftest.py on sys.path)."""
    spec = importlib.util.spec_from_file_location("fuzz_conftest",
                                                  Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.snapshot(root)


def _scan(ws: Path, name: str, data: bytes) -> Path:
    path = ws / name
    path.write_bytes(data)
    return path


def _spz_payload() -> bytearray:
    return bytearray(gzip.decompress((DATA / "room-v3.spz").read_bytes()))


def _wrong_magic() -> bytes:
    raw = _spz_payload()
    raw[:4] = b"XXXX"
    return gzip.compress(bytes(raw), mtime=0)


def _gzip_version(version: int) -> bytes:
    raw = _spz_payload()
    raw[4:8] = np.uint32(version).tobytes()
    return gzip.compress(bytes(raw), mtime=0)


def _v4_toc_outside() -> bytes:
    data = bytearray((DATA / "room-v4.spz").read_bytes())
    data[16:20] = np.uint32(1 << 30).tobytes()
    return bytes(data)


def _compressed_chunk_count() -> bytes:
    data = (DATA / "room.compressed.ply").read_bytes()
    return data.replace(b"element chunk 12\n", b"element chunk 11\n", 1)


def _ply_as_splat() -> bytes:
    data = (DATA / "room.compressed.ply").read_bytes()
    return data if len(data) % 32 else data + b"\n"


BAD_SCANS = {  # case -> (file name, bytes, fragment of the one-line error)
    "gzip-wrong-magic": ("scan.spz", _wrong_magic, "'NGSP'"),
    "gzip-wrong-magic-other-suffix": ("scan.bin", _wrong_magic, "not an .spz file"),
    "gzip-version-7": ("scan.spz", lambda: _gzip_version(7), ".spz version 7"),
    "gzip-version-4": ("scan.spz", lambda: _gzip_version(4), ".spz version 4 in a gzip"),
    "gzipped-ply": ("scan.spz",
                    lambda: gzip.compress(b"ply\nformat ascii 1.0\nend_header\n", mtime=0),
                    "gunzip it first"),
    "v4-toc-outside": ("scan.spz", _v4_toc_outside, "table of contents"),
    "spz-suffix-junk": ("scan.spz", lambda: b"\x00" * 64, "neither gzip"),
    "compressed-chunk-count": ("scan.compressed.ply", _compressed_chunk_count, "re-export it"),
    "ply-named-splat": ("scan.splat", _ply_as_splat, "name it .ply"),
    "unknown": ("scan.bin", lambda: b"\x00" * 64, "needs its .splat suffix"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCANS))
@pytest.mark.parametrize("command", ["info", "init"])
def test_bad_scan_refused_by_info_and_init_alike(case, command, workspace, refused):
    name, make, fragment = BAD_SCANS[case]
    scan = _scan(workspace, name, make())
    argv = (["scene", "info", scan.name] if command == "info" else
            ["scene", "init", "--splat", scan.name, "--out", "out", "--no-previews"])
    line = refused(argv, fragment=fragment)
    assert scan.name in line  # the message names the file
    assert not (workspace / "out").exists()


@pytest.mark.parametrize("name", ["room.compressed.ply", "guitar.compressed.ply", "room-v2.spz",
                                  "room-v3.spz", "room-v4.spz", "biker-sub4.spz",
                                  "minimal.splat"])
def test_scene_info_reads_every_init_format(name, workspace, capsys):
    shutil.copy(DATA / name, workspace / name)
    before = _snapshot(workspace)
    assert main(["scene", "info", name, "--json"]) == 0, capsys.readouterr().err
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "file" and info["gaussians"] > 0 and info["bounds_min"] is not None
    assert _snapshot(workspace) == before  # scene info writes nothing


@pytest.mark.parametrize("head", [b"\x1f\x8b\x08\x3f", b"ply\x3f", b"NGSP"])
def test_lookalike_splat_read_by_info(head, workspace, capsys):
    rows = np.fromfile(DATA / "minimal.splat", np.uint8).copy()
    rows[:4] = np.frombuffer(head, np.uint8)
    (workspace / "scan.splat").write_bytes(rows.tobytes())
    assert main(["scene", "info", "scan.splat", "--json"]) == 0, capsys.readouterr().err
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "splat" and info["gaussians"] == 4
    assert np.float32(info["bounds_max"][0]) == max(np.frombuffer(head, "<f4")[0], 0.0)


# --------------------------------------------------------------------------- CSVs with a BOM
def _reliability_inputs(ws: Path, *, bom: bool, scores_header: str = "scene,variant,method,"
                        "quality") -> None:
    mark = BOM if bom else b""
    rows = "".join(f"{s},{v},PSNR,{q}\n" for s, v, q in
                   (("A", "x", 0.9), ("A", "y", 0.1), ("B", "x", 0.8), ("B", "y", 0.2)))
    if "variant" not in scores_header:
        rows = "".join(f"{s},PSNR,{q}\n" for s, q in (("A", 0.9), ("B", 0.8)))
    (ws / "s.csv").write_bytes(mark + (scores_header + "\n" + rows).encode())
    labels = "".join(f"Cup,{s},{v},{y}\n" for s, v, y in
                     (("A", "x", 0), ("A", "y", 1), ("B", "x", 0), ("B", "y", 1)))
    (ws / "l.csv").write_bytes(mark + ("target,scene,variant,label\n" + labels).encode())


def test_reliability_with_bom_runs_like_without(workspace, capsys):
    outputs = {}
    for bom in (False, True):
        _reliability_inputs(workspace, bom=bom)
        out = workspace / f"rel{int(bom)}"
        assert main(["reliability", "--scores", "s.csv", "--labels", "l.csv", "--lower-better",
                     "PSNR", "--out", str(out.name)]) == 0, capsys.readouterr().err
        outputs[bom] = (out / "reliability.csv").read_bytes()
    assert outputs[True] == outputs[False]


def test_reliability_bom_missing_column_one_line(workspace, refused):
    _reliability_inputs(workspace, bom=True, scores_header="scene,method,quality")
    line = refused(["reliability", "--scores", "s.csv", "--labels", "l.csv", "--out", "o"],
                   fragment="lacks columns ['variant']")
    assert "\ufeff" not in line


def test_plan_pilot_bom_bad_count_names_the_line(workspace, refused):
    (workspace / "pilot.csv").write_bytes(
        BOM + b"scene,task,policy,successes,trials\ns,t,a,5,4\ns,t,b,1,4\n")
    refused(["plan", "trials", "--pilot", "pilot.csv", "--out", "o"], fragment="line 2")
