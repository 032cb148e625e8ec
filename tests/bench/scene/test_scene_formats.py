"""Scan readers (bench.scene.formats) against the reference decoders' values.

Golden values: ``tests/data/scans/reference_values.npz`` holds what the reference
decoders produced for the files next to it (nianticlabs/spz ``loadSpz`` to RDF +
``saveSplatToPly``; splat-transform 3.7.0's compressed-PLY decompressor), see the
README there. Round-trip tolerances are the formats' quantisation steps.
"""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.scene.formats import (
    read_compressed_ply,
    read_scan,
    read_spz,
    scan_format,
    stored_scan_count,
)
from bench.scene.gaussians import SH_C0, GaussianSplats
from bench.scene.ply import read_splat, write_ply
from bench.scene.sample import sample_background

DATA = Path(__file__).parents[2] / "data" / "scans"
SPZ_FILES = ["room-v2.spz", "room-v3.spz", "room-v4.spz", "biker-sub4.spz", "minimal-v2.spz",
             "minimal-v3.spz", "minimal-v4.spz"]
COMPRESSED_FILES = ["room.compressed.ply", "guitar.compressed.ply"]


@pytest.fixture(scope="module")
def reference():
    with np.load(DATA / "reference_values.npz") as data:
        return {k: data[k] for k in data.files}


def _columns(splats: GaussianSplats) -> dict[str, np.ndarray]:
    cols = {"x": splats.means[:, 0], "y": splats.means[:, 1], "z": splats.means[:, 2],
            "opacity": splats.opacity_logits}
    for i in range(3):
        cols[f"f_dc_{i}"] = splats.sh_dc[:, i]
        cols[f"scale_{i}"] = splats.log_scales[:, i]
    for i in range(4):
        cols[f"rot_{i}"] = splats.quats[:, i]
    k = splats.sh_rest.shape[1]
    for c in range(3):
        for j in range(k):
            cols[f"f_rest_{c * k + j}"] = splats.sh_rest[:, j, c]
    return cols


def _compare(name: str, splats: GaussianSplats, reference: dict, *, alpha_levels: int) -> None:
    rows = reference[f"{name}:rows"]
    ours = _columns(splats)
    keys = [k.split(":", 1)[1] for k in reference if k.startswith(f"{name}:") and
            not k.endswith(":rows")]
    assert set(keys) == set(ours), (name, sorted(set(keys) ^ set(ours)))
    for key in keys:
        want = reference[f"{name}:{key}"].astype(np.float64)
        got = ours[key][rows].astype(np.float64)
        finite = np.isfinite(want)
        # float32 round-off of the reference's own float32 arithmetic
        np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=2e-5,
                                   err_msg=f"{name}:{key}")
        if key == "opacity" and (~finite).any():  # alpha byte 0 / 255: clamped half a step in
            edge = math.log((alpha_levels - 0.5) / 0.5)
            np.testing.assert_allclose(np.abs(got[~finite]), edge, rtol=1e-5)
            assert np.all(np.sign(got[~finite]) == np.sign(want[~finite]))


@pytest.mark.parametrize("name", SPZ_FILES)
def test_spz_matches_reference_decoder(name, reference):
    splats = read_spz(DATA / name)
    assert len(splats) == stored_scan_count(DATA / name, "spz")
    _compare(name, splats, reference, alpha_levels=255)


@pytest.mark.parametrize("name", COMPRESSED_FILES)
def test_compressed_ply_matches_reference_decoder(name, reference):
    splats = read_compressed_ply(DATA / name)
    _compare(name, splats, reference, alpha_levels=255)


def test_formats_detected_from_content(tmp_path):
    assert scan_format(DATA / "room-v2.spz") == "spz"  # gzip stream
    assert scan_format(DATA / "room-v4.spz") == "spz"  # NGSP header
    assert scan_format(DATA / "guitar.compressed.ply") == "compressed-ply"
    assert scan_format(DATA / "minimal.splat") == "splat"
    renamed = tmp_path / "scan.bin"
    shutil.copy(DATA / "room-v3.spz", renamed)
    splats, fmt, dropped = read_scan(renamed)
    assert fmt == "spz" and dropped == 0 and len(splats) == 3000
    plain = tmp_path / "plain.ply"
    write_ply(plain, sample_background(seed=0, n_gaussians=200))
    assert scan_format(plain) == "ply"
    splat, fmt, _ = read_scan(DATA / "minimal.splat")
    assert fmt == "splat" and np.array_equal(splat.means, read_splat(DATA / "minimal.splat").means)


# ------------------------------------------------------------------ round trips
@pytest.fixture(scope="module")
def room() -> GaussianSplats:
    """The source of the room-* files (regenerate.py)."""
    return sample_background(seed=1, n_gaussians=3000)


def _rotation_close(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # [N] |<qa, qb>| of unit quats
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.abs((a * b).sum(1))


@pytest.mark.parametrize("version", [2, 3, 4])
def test_spz_round_trip_through_reference_encoder(version, room):
    """Sample room -> reference spz encoder -> our reader == the room within quantisation."""
    back = read_spz(DATA / f"room-v{version}.spz")
    assert len(back) == len(room) and back.sh_degree == 3
    # positions: 24-bit fixed point with 12 fractional bits (the encoder's choice)
    assert np.abs(back.means - room.means).max() <= 0.5 / 4096 + 1e-6
    assert np.abs(back.log_scales - np.clip(room.log_scales, -10, 5.9375)).max() <= 1 / 32 + 1e-6
    alpha = 1 / (1 + np.exp(-room.opacity_logits.astype(np.float64)))
    alpha_back = 1 / (1 + np.exp(-back.opacity_logits.astype(np.float64)))
    assert np.abs(alpha - alpha_back).max() <= 0.5 / 255 + 1e-6
    colour_step = 1 / (0.15 * 255)
    assert np.abs(back.sh_dc - room.sh_dc).max() <= 0.5 * colour_step + 1e-5
    # SH: band 1 in 5-bit buckets, bands 2-3 in 4-bit buckets of the [-1, 1] range
    assert np.abs(back.sh_rest[:, :3] - room.sh_rest[:, :3]).max() <= 8 / 128 + 1e-6
    assert np.abs(back.sh_rest[:, 3:] - room.sh_rest[:, 3:]).max() <= 16 / 128 + 1e-6
    worst = 0.98 if version == 2 else 0.999  # 8-bit first-three vs 10-bit smallest-three
    assert _rotation_close(back.quats, room.quats).min() >= worst


def test_compressed_ply_round_trip_through_reference_encoder(room):
    back = read_compressed_ply(DATA / "room.compressed.ply")
    assert len(back) == len(room) and back.sh_degree == 3
    # splat-transform may reorder Gaussians: match by nearest centre
    from scipy.spatial import cKDTree

    dist, index = cKDTree(room.means).query(back.means)
    assert len(np.unique(index)) == len(room)
    src = room.subset(index)
    extent = room.means.max(0) - room.means.min(0)
    assert (dist <= np.linalg.norm(extent / np.array([2047, 1023, 2047]))).all()
    assert np.abs(back.log_scales - src.log_scales).max() <= (
        room.log_scales.max() - room.log_scales.min()) / 1023
    rgb, rgb_back = 0.5 + SH_C0 * src.sh_dc, 0.5 + SH_C0 * back.sh_dc
    assert np.abs(rgb - rgb_back).max() <= 1.0 / 255 + 1e-5
    assert np.abs(back.sh_rest - src.sh_rest).max() <= 8 / 256 + 1e-5
    assert _rotation_close(back.quats, src.quats).min() >= 0.999


# ------------------------------------------------------------------ bad input
def test_damaged_spz_fails_with_one_line(tmp_path):
    data = (DATA / "room-v3.spz").read_bytes()
    cut = tmp_path / "cut.spz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BenchError, match="damaged .spz|truncated"):
        read_spz(cut)
    short = tmp_path / "short.spz"
    short.write_bytes(gzip.compress(gzip.decompress(data)[:1000]))
    with pytest.raises(BenchError, match="truncated .spz"):
        read_spz(short)
    v4 = (DATA / "room-v4.spz").read_bytes()
    (tmp_path / "cut4.spz").write_bytes(v4[:-100])
    with pytest.raises(BenchError, match="truncated|damaged"):
        read_spz(tmp_path / "cut4.spz")
    junk = tmp_path / "junk.dat"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(BenchError, match="unknown scan format"):
        read_scan(junk)


def test_nonfinite_rows_refused_or_dropped(tmp_path):
    splats = sample_background(seed=0, n_gaussians=500)
    means = splats.means.copy()
    means[[3, 7]] = np.nan
    path = tmp_path / "nan.ply"
    write_ply(path, splats.replace(means=means))
    with pytest.raises(BenchError, match="--drop-nonfinite"):
        read_scan(path)
    kept, fmt, dropped = read_scan(path, drop_nonfinite=True)
    assert (fmt, dropped, len(kept)) == ("ply", 2, 498)
