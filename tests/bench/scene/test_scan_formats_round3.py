"""Issue 30 item 3: one format decision for every scan reader (``scene info`` == ``scene init``).

Regressions of the review:

- ``bench scene info`` called a valid ``.compressed.ply`` damaged and an ``.spz`` "not a
  PLY file" although ``bench scene init`` reads both;
- a valid headerless ``.splat`` whose first bytes happen to be ``1f 8b`` (gzip), ``ply``
  or ``NGSP`` was misread as .spz / PLY (the ``.splat`` suffix must decide);
- a gzip file whose payload has the wrong .spz magic was parsed as .spz (exit 0);
- compressed-PLY / .spz / .splat errors named neither the file nor the fix (item 6).
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.scene.cli import scene_summary
from bench.scene.formats import (
    read_compressed_ply,
    read_scan,
    read_spz,
    scan_format,
)
from bench.scene.gaussians import SH_C0, GaussianSplats
from bench.scene.ply import SPLAT_ROW, read_splat, write_ply
from bench.scene.sample import make_sample_scene

DATA = Path(__file__).parents[2] / "data" / "scans"
SCANS = {  # file -> (format, Gaussians, SH degree)
    "room.compressed.ply": ("compressed-ply", 3000, 3),
    "guitar.compressed.ply": ("compressed-ply", 90854, 0),
    "room-v2.spz": ("spz", 3000, 3),
    "room-v3.spz": ("spz", 3000, 3),
    "room-v4.spz": ("spz", 3000, 3),
    "minimal-v2.spz": ("spz", 4, 0),
    "minimal.splat": ("splat", 4, 0),
}
#: first four bytes of a .splat (float32 x of the first Gaussian) that look like a header
LOOKALIKE_HEADS = {"gzip": b"\x1f\x8b\x08\x3f", "ply": b"ply\x3f", "ngsp": b"NGSP"}
# a message names the fix with one of these
FIXES = ("re-export", "re-copy", "export the scan", "name it", "gunzip", "check the path",
         "pass ")


def _info(capsys, path: Path) -> dict:
    code = main(["scene", "info", str(path), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _splat_bytes(splats: GaussianSplats) -> np.ndarray:
    """antimatter15 rows of ``splats`` (the format's own quantisation)."""
    rows = np.zeros(len(splats), SPLAT_ROW)
    rows["position"] = splats.means
    rows["scale"] = np.exp(splats.log_scales)
    alpha = 1.0 / (1.0 + np.exp(-splats.opacity_logits.astype(np.float64)))
    rgb = np.clip(0.5 + SH_C0 * splats.sh_dc, 0.0, 1.0)
    rows["rgba"] = np.round(np.concatenate([rgb, alpha[:, None]], axis=1) * 255).astype(np.uint8)
    q = splats.quats / np.linalg.norm(splats.quats, axis=1, keepdims=True)
    rows["rot"] = np.clip(np.round(q * 128 + 128), 0, 255).astype(np.uint8)
    return rows


@pytest.fixture(scope="module")
def room_scan():
    """The sample room's background in its scan frame (20,000 Gaussians, a table to find)."""
    return make_sample_scene(seed=0, n_gaussians=20000).splat_background()


def _lookalike_splat(tmp_path: Path, room: GaussianSplats, head: bytes) -> Path:
    rows = _splat_bytes(room)
    rows["position"][0, 0] = np.frombuffer(head, "<f4")[0]
    path = tmp_path / "room.splat"
    rows.tofile(path)
    assert path.read_bytes()[:4] == head
    return path


# ------------------------------------------------------------------ scene info == scene init
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scene_info_reads_what_scene_init_reads(name, capsys):
    """Was: 'the header is damaged' (.compressed.ply), 'not a PLY file' (.spz)."""
    fmt, count, degree = SCANS[name]
    splats, got_fmt, dropped = read_scan(DATA / name)  # scene init's reader
    info = _info(capsys, DATA / name)
    assert (got_fmt, len(splats), splats.sh_degree, dropped) == (fmt, count, degree, 0)
    assert info["kind"] == "file" and info["frame"] == "file" and info["format"] == fmt
    assert (info["gaussians"], info["sh_degree"]) == (count, degree)
    assert np.allclose(info["bounds_min"], splats.means.min(0))
    assert np.allclose(info["bounds_max"], splats.means.max(0))
    assert main(["scene", "info", str(DATA / name)]) == 0
    text = capsys.readouterr().out
    assert f"file: {fmt}, file frame" in text and f"{count:,} (SH degree {degree})" in text


def test_scene_info_compressed_ply_and_spz_counts_like_a_ply(tmp_path, capsys):
    """The same room as PLY, compressed PLY and .spz: the same summary fields, same counts."""
    room = read_compressed_ply(DATA / "room.compressed.ply")
    write_ply(tmp_path / "room.ply", room)
    plain = _info(capsys, tmp_path / "room.ply")
    for name in ("room.compressed.ply", "room-v3.spz"):
        info = _info(capsys, DATA / name)
        assert set(info) == set(plain)
        assert (info["gaussians"], info["sh_degree"]) == (plain["gaussians"], plain["sh_degree"])
    assert plain["format"] == "ply"


def test_scene_info_bundle_unchanged(tmp_path, capsys):
    from bench.scene.bundle import save_scene

    save_scene(make_sample_scene(seed=0, n_gaussians=500), tmp_path / "s")
    info = _info(capsys, tmp_path / "s")
    assert info["kind"] == "bundle" and info["frame"] == "world" and "format" not in info
    assert info["gaussians"] == 500


# ------------------------------------------------------------------ headerless .splat
@pytest.mark.parametrize("head", sorted(LOOKALIKE_HEADS))
def test_splat_with_header_lookalike_bytes_read_as_splat(head, room_scan, tmp_path, capsys):
    """Was: a .splat starting with 1f 8b read as .spz, one starting with 'ply' as PLY."""
    path = _lookalike_splat(tmp_path, room_scan, LOOKALIKE_HEADS[head])
    assert scan_format(path) == "splat"
    splats, fmt, _ = read_scan(path)
    assert fmt == "splat" and len(splats) == len(room_scan)
    assert np.array_equal(splats.means, read_splat(path).means)
    assert splats.means[0, 0] == np.frombuffer(LOOKALIKE_HEADS[head], "<f4")[0]
    info = _info(capsys, path)
    assert info["format"] == "splat" and info["gaussians"] == len(room_scan)
    assert np.allclose(info["bounds_max"], splats.means.max(0))


@pytest.mark.parametrize("head", ["gzip", "ply"])
def test_scene_init_registers_a_lookalike_splat(head, room_scan, tmp_path, capsys):
    path = _lookalike_splat(tmp_path, room_scan, LOOKALIKE_HEADS[head])
    out = tmp_path / "lab"
    code = main(["scene", "init", "--splat", str(path), "--out", str(out), "--table-size",
                 "1.2", "0.8", "--no-previews"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"{len(room_scan):,} Gaussians (splat)" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["gaussians"] == len(room_scan)


def test_splat_suffix_decides_and_wrong_size_names_the_real_format(tmp_path):
    for source, hint in (("room.compressed.ply", r"starts like a PLY: name it \.ply"),
                         ("room-v3.spz", r"starts like an \.spz: name it \.spz"),
                         ("room-v4.spz", r"starts like an \.spz: name it \.spz")):
        data = (DATA / source).read_bytes()
        path = tmp_path / "scan.splat"  # another format under a .splat name: the suffix decides
        path.write_bytes(data if len(data) % 32 else data + b"\n")
        assert scan_format(path) == "splat"
        with pytest.raises(BenchError, match=rf"scan\.splat: size .* multiple of 32.*{hint}"):
            read_scan(path)


# ------------------------------------------------------------------ .spz magic and version
def _regzip_spz(tmp_path: Path, name: str, edit) -> Path:
    raw = bytearray(gzip.decompress((DATA / "room-v3.spz").read_bytes()))
    edit(raw)
    path = tmp_path / name
    path.write_bytes(gzip.compress(bytes(raw), mtime=0))
    return path


def _one_line_exit_2(argv, capsys) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_gzip_with_wrong_spz_magic_refused(tmp_path, capsys):
    """Was: parsed as .spz (exit 0) when the payload after the magic looked right."""
    bad = _regzip_spz(tmp_path, "scan.spz", lambda raw: raw.__setitem__(slice(0, 4), b"XXXX"))
    with pytest.raises(BenchError, match=r"scan\.spz: not an \.spz file .*'NGSP'"):
        read_scan(bad)
    with pytest.raises(BenchError, match="NGSP"):
        read_spz(bad)
    line = _one_line_exit_2(["scene", "info", bad], capsys)
    assert line.startswith("bench scene info: error: ") and str(bad) in line and "NGSP" in line
    out = tmp_path / "out"
    line = _one_line_exit_2(["scene", "init", "--splat", bad, "--out", out], capsys)
    assert "NGSP" in line and "export the scan as" in line and not out.exists()


def test_gzipped_ply_is_not_an_spz(tmp_path, capsys):
    room = read_compressed_ply(DATA / "room.compressed.ply")
    write_ply(tmp_path / "room.ply", room)
    gz = tmp_path / "room.ply.gz"
    gz.write_bytes(gzip.compress((tmp_path / "room.ply").read_bytes(), mtime=0))
    line = _one_line_exit_2(["scene", "info", gz], capsys)
    assert "not an .spz file" in line and "gunzip it first" in line


@pytest.mark.parametrize(("version", "plain"), [(0, False), (4, False), (7, False),
                                                (3, True), (5, True)])
def test_unsupported_spz_version_refused(version, plain, tmp_path, capsys):
    from bench.scene.formats import spz_header

    if plain:
        data = bytearray((DATA / "room-v4.spz").read_bytes())
        data[4:8] = np.uint32(version).tobytes()
        path = tmp_path / "scan.spz"
        path.write_bytes(bytes(data))
    else:
        path = _regzip_spz(tmp_path, "scan.spz",
                           lambda raw: raw.__setitem__(slice(4, 8), np.uint32(version).tobytes()))
    with pytest.raises(BenchError, match=rf"\.spz version {version} in .* is not supported"):
        spz_header(path)
    line = _one_line_exit_2(["scene", "info", path], capsys)
    assert f"version {version}" in line and "re-export" in line


def test_supported_spz_headers_pass_the_check():
    from bench.scene.formats import spz_header

    for name in ("room-v2.spz", "room-v3.spz", "room-v4.spz", "minimal-v2.spz",
                 "minimal-v3.spz", "minimal-v4.spz", "biker-sub4.spz"):
        header = spz_header(DATA / name)
        assert header["magic"] == 0x5053474E and header["count"] == len(read_spz(DATA / name))


# ------------------------------------------------------------------ errors name file and fix
def _edit_header(data: bytes, old: bytes, new: bytes) -> bytes:
    end = data.index(b"end_header")
    assert data[:end].count(old) == 1, old
    return data[:end].replace(old, new) + data[end:]


def _compressed_cases() -> dict:
    src = (DATA / "room.compressed.ply").read_bytes()
    return {
        "ascii": _edit_header(src, b"binary_little_endian", b"ascii"),
        "chunk count": _edit_header(src, b"element chunk 12", b"element chunk 11"),
        "truncated": src[: len(src) // 2],
        "no packed": _edit_header(src, b"packed_position", b"packed_positiox"),
        "float packed": _edit_header(src, b"uint packed_position", b"float packed_position"),
        "twice": _edit_header(src, b"packed_scale", b"packed_color"),
        "sh count": _edit_header(src, b"property uchar f_rest_44\n", b""),
        "list": _edit_header(src, b"property float min_x", b"property list uchar int min_x"),
        "bad element": _edit_header(src, b"element chunk 12", b"element chunk twelve"),
        "bad property": _edit_header(src, b"property float min_x", b"property quad min_x"),
        "no end": src[: src.index(b"end_header")],
    }


def _spz_cases() -> dict:
    v3 = (DATA / "room-v3.spz").read_bytes()
    raw = gzip.decompress(v3)
    v4 = bytearray((DATA / "room-v4.spz").read_bytes())
    toc_far = bytearray(v4)
    toc_far[16:20] = np.uint32(1 << 30).tobytes()
    zstd_broken = bytearray(v4)
    mid = len(v4) // 2
    zstd_broken[mid:mid + 64] = b"\x00" * 64
    degree = bytearray(raw)
    degree[12] = 7
    return {
        "wrong magic": gzip.compress(b"XXXX" + raw[4:], mtime=0),
        "half gzip": v3[: len(v3) // 2],
        "short payload": gzip.compress(raw[:1000], mtime=0),
        "short header": gzip.compress(raw[:10], mtime=0),
        "degree": gzip.compress(bytes(degree), mtime=0),
        "toc": bytes(toc_far),
        "zstd": bytes(zstd_broken),
        "cut v4": bytes(v4[:-100]),
        "tiny v4": bytes(v4[:20]),
        "neither": b"\x00" * 64,
    }


def _assert_names_file_and_fix(message: str, path: Path) -> None:
    assert str(path) in message, message
    assert "; " in message and any(fix in message for fix in FIXES), message
    assert "\n" not in message


@pytest.mark.parametrize("case", sorted(_compressed_cases()))
def test_compressed_ply_errors_name_file_and_fix(case, tmp_path):
    path = tmp_path / "scan.compressed.ply"
    path.write_bytes(_compressed_cases()[case])
    with pytest.raises(BenchError) as info:
        read_compressed_ply(path)
    _assert_names_file_and_fix(str(info.value), path)


@pytest.mark.parametrize("case", sorted(_spz_cases()))
def test_spz_errors_name_file_and_fix(case, tmp_path):
    path = tmp_path / "scan.spz"
    path.write_bytes(_spz_cases()[case])
    for reader in (read_spz, read_scan):
        with pytest.raises(BenchError) as info:
            reader(path)
        _assert_names_file_and_fix(str(info.value), path)


@pytest.mark.parametrize("case", ["empty", "odd size", "ply inside", "missing", "directory",
                                  "nan", "negative scale"])
def test_splat_errors_name_file_and_fix(case, tmp_path):
    path = tmp_path / "scan.splat"
    rows = _splat_bytes(make_sample_scene(seed=0, n_gaussians=200).background)
    if case == "empty":
        path.write_bytes(b"")
    elif case == "odd size":
        path.write_bytes(rows.tobytes()[:-5])
    elif case == "ply inside":
        shutil.copy(DATA / "room.compressed.ply", path)
        if path.stat().st_size % 32 == 0:
            path.write_bytes(path.read_bytes() + b"\n")
    elif case == "directory":
        path.mkdir()
    elif case == "nan":
        rows["position"][3, 1] = math.nan
        rows.tofile(path)
    elif case == "negative scale":
        rows["scale"][5, 0] = -1.0
        rows.tofile(path)
    for reader in (read_splat, read_scan):
        with pytest.raises(BenchError) as info:
            reader(path)
        _assert_names_file_and_fix(str(info.value), path)


def test_unknown_format_names_the_rules(tmp_path):
    junk = tmp_path / "scan.bin"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(BenchError, match=r"unknown scan format.*needs its \.splat suffix"):
        read_scan(junk)
    assert scan_format(DATA / "room-v3.spz") == "spz"
    renamed = tmp_path / "scan.dat"
    shutil.copy(DATA / "room.compressed.ply", renamed)
    assert scan_format(renamed) == "compressed-ply"  # headered formats: the content decides


def test_long_comment_compressed_detection_and_summary(tmp_path):
    """A plain PLY whose header is longer than 64 KiB is still a PLY (not 'no header')."""
    room = read_compressed_ply(DATA / "room.compressed.ply")
    write_ply(tmp_path / "room.ply", room)
    data = (tmp_path / "room.ply").read_bytes()
    head, rest = data.split(b"\n", 1)
    (tmp_path / "long.ply").write_bytes(head + b"\ncomment " + b"x" * (200 << 10) + b"\n" + rest)
    assert scan_format(tmp_path / "long.ply") == "ply"
    assert scene_summary(str(tmp_path / "long.ply"))["gaussians"] == len(room)
