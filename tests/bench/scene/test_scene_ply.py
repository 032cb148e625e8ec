"""PLY I/O: bit-exact round trips, plyfile interoperability, ASCII/BE, validation."""

import numpy as np
import plyfile
import pytest

from bench.errors import BenchError
from bench.scene.gaussians import SH_C0, GaussianSplats
from bench.scene.ply import (
    decode_vertices,
    decode_vertices_reference,
    encode_ply,
    parse_header,
    read_gaussians,
    read_ply,
    write_ply,
)

CORE = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def random_splats(n=257, k=15, seed=0, extra=True):
    rng = np.random.default_rng(seed)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    extras = {}
    if extra:
        extras = {"nx": f(n), "ny": f(n), "nz": f(n),
                  "segment": rng.integers(-5, 1000, n).astype(np.int32),
                  "flag": rng.integers(0, 256, n).astype(np.uint8),
                  "weight": rng.standard_normal(n)}  # float64
    return GaussianSplats(f(n, 3), f(n, 4), f(n, 3), f(n), f(n, 3), f(n, k, 3), extras)


def assert_same(a, b, *, extras=True):
    for name in CORE:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.float32, name
        assert x.tobytes() == y.tobytes(), name  # bit-exact, NaN payloads included
    if extras:
        assert list(a.extra) == list(b.extra)
        for name in a.extra:
            assert a.extra[name].dtype == b.extra[name].dtype, name
            assert a.extra[name].tobytes() == b.extra[name].tobytes(), name


@pytest.mark.parametrize("k", [0, 3, 8, 15])
def test_round_trip_every_property_bit_exact(tmp_path, k):
    splats = random_splats(k=k)
    write_ply(tmp_path / "a.ply", splats)
    back = read_ply(tmp_path / "a.ply")
    assert_same(splats, back)
    assert back.sh_degree == {0: 0, 3: 1, 8: 2, 15: 3}[k]
    # writing what was read gives the same bytes
    write_ply(tmp_path / "b.ply", back)
    assert (tmp_path / "a.ply").read_bytes() == (tmp_path / "b.ply").read_bytes()


def test_normals_zero_by_default_and_optional(tmp_path):
    splats = random_splats(extra=False)
    write_ply(tmp_path / "n.ply", splats)
    back = read_ply(tmp_path / "n.ply")
    assert list(back.extra) == ["nx", "ny", "nz"]
    assert all((back.extra[c] == 0).all() for c in ("nx", "ny", "nz"))
    write_ply(tmp_path / "nn.ply", splats, normals=False)
    names = [p.name for p in plyfile.PlyData.read(tmp_path / "nn.ply")["vertex"].properties]
    assert "nx" not in names and read_ply(tmp_path / "nn.ply").extra == {}


def test_standard_property_order_and_channel_major_rest(tmp_path):
    splats = random_splats(k=3, extra=False)
    write_ply(tmp_path / "o.ply", splats)
    vertex = plyfile.PlyData.read(tmp_path / "o.ply")["vertex"]
    names = [p.name for p in vertex.properties]
    expected = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    expected += [f"f_rest_{i}" for i in range(9)]
    expected += ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    assert names == expected
    # channel-major: f_rest_{c*K + k} is coefficient k of channel c (INRIA layout)
    for c in range(3):
        for k in range(3):
            np.testing.assert_array_equal(vertex[f"f_rest_{c * 3 + k}"], splats.sh_rest[:, k, c])


def plyfile_vertices(splats, *, order="shuffled", double_x=False):
    """A vertex element built with plyfile, properties in a non-standard order."""
    n, k = len(splats), splats.sh_rest.shape[1]
    cols = {"x": splats.means[:, 0].astype(np.float64 if double_x else np.float32),
            "y": splats.means[:, 1], "z": splats.means[:, 2],
            "opacity": splats.opacity_logits}
    for i in range(3):
        cols[f"f_dc_{i}"] = splats.sh_dc[:, i]
        cols[f"scale_{i}"] = splats.log_scales[:, i]
    for i in range(4):
        cols[f"rot_{i}"] = splats.quats[:, i]
    for c in range(3):
        for j in range(k):
            cols[f"f_rest_{c * k + j}"] = splats.sh_rest[:, j, c]
    cols.update(splats.extra)
    names = list(cols)
    if order == "shuffled":
        names = list(np.random.default_rng(1).permutation(names))
    data = np.empty(n, dtype=[(nm, cols[nm].dtype.str) for nm in names])
    for nm in names:
        data[nm] = cols[nm]
    return plyfile.PlyElement.describe(data, "vertex")


@pytest.mark.parametrize("byte_order,text", [("<", False), (">", False), ("=", True)])
def test_plyfile_written_file_reads_identically(tmp_path, byte_order, text):
    splats = random_splats(k=8)
    path = tmp_path / "pf.ply"
    plyfile.PlyData([plyfile_vertices(splats)], text=text, byte_order=byte_order).write(path)
    back = read_ply(path)
    assert_same(splats, back, extras=False)
    assert set(back.extra) == set(splats.extra)
    for name, arr in splats.extra.items():
        assert back.extra[name].dtype == arr.dtype
        np.testing.assert_array_equal(back.extra[name], arr)


def test_our_file_reads_identically_in_plyfile(tmp_path):
    splats = random_splats(k=15)
    write_ply(tmp_path / "ours.ply", splats)
    vertex = plyfile.PlyData.read(tmp_path / "ours.ply")["vertex"]
    assert len(vertex.data) == len(splats)
    np.testing.assert_array_equal(np.stack([vertex["x"], vertex["y"], vertex["z"]], 1),
                                  splats.means)
    np.testing.assert_array_equal(vertex["rot_3"], splats.quats[:, 3])
    np.testing.assert_array_equal(vertex["segment"], splats.extra["segment"])
    assert vertex["segment"].dtype == np.int32 and vertex["weight"].dtype == np.float64
    # extras come after the standard properties, in their original order
    names = [p.name for p in vertex.properties]
    assert names[-3:] == ["segment", "flag", "weight"]


def test_fast_decoder_matches_reference_on_irregular_layouts(tmp_path):
    splats = random_splats(k=8, extra=False)
    for i, (order, double_x) in enumerate([("shuffled", False), ("shuffled", True),
                                           ("standard", True)]):
        path = tmp_path / f"l{i}.ply"
        plyfile.PlyData([plyfile_vertices(splats, order=order, double_x=double_x)]).write(path)
        data = np.fromfile(path, dtype=np.uint8)
        header = parse_header(data)
        body = data[header.body_offset:]
        assert_same(decode_vertices(body, header), decode_vertices_reference(body, header))
        # float64 x is converted to float32 (the values were float32 to begin with)
        assert_same(splats, read_ply(path), extras=False)


def test_splat_format_read(tmp_path):
    # antimatter15 layout: 3 f32 position, 3 f32 linear scale, RGBA u8, quaternion u8 (q*128+128)
    row = np.dtype([("p", "<f4", 3), ("s", "<f4", 3), ("c", "u1", 4), ("q", "u1", 4)])
    data = np.zeros(2, dtype=row)
    data["p"] = [[1, 2, 3], [-1, 0, 0.5]]
    data["s"] = [[0.1, 0.2, 0.4], [1.0, 1.0, 1.0]]
    data["c"] = [[255, 0, 128, 255], [0, 51, 102, 0]]
    data["q"] = [[255, 128, 128, 128], [128, 0, 128, 128]]
    path = tmp_path / "x.splat"
    data.tofile(path)
    splats = read_gaussians(path)
    np.testing.assert_allclose(splats.means, data["p"])
    np.testing.assert_allclose(splats.scales(), data["s"], rtol=1e-6)
    np.testing.assert_allclose(splats.rgb(), data["c"][:, :3] / 255.0, atol=1e-6)
    np.testing.assert_allclose(splats.quats[0], [127 / 128, 0, 0, 0])
    # alpha 255 / 0 are clipped to 254/255 and 1/255 so the logit stays finite
    np.testing.assert_allclose(splats.opacities(), [254 / 255, 1 / 255], rtol=1e-5)
    assert splats.sh_degree == 0 and SH_C0 > 0


# ---------------------------------------------------------------- bad input
def good_file(tmp_path, **kwargs):
    path = tmp_path / "good.ply"
    write_ply(path, random_splats(n=20, k=3, extra=False), **kwargs)
    return path


def test_missing_file(tmp_path):
    with pytest.raises(BenchError, match="not found"):
        read_ply(tmp_path / "nope.ply")


def test_truncated_file(tmp_path):
    path = good_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(BenchError, match="truncated PLY: header promises 20 vertices"):
        read_ply(path)


@pytest.mark.parametrize("mutate,message", [
    (lambda b: b"plx" + b[3:], "not a PLY file"),
    (lambda b: b.replace(b"binary_little_endian", b"binary_middle_endian"),
     "unsupported PLY format"),
    (lambda b: b.replace(b"end_header", b"end_headex"), "no 'end_header'"),
    (lambda b: b.replace(b"property float opacity", b"property float opacitx"),
     "missing required vertex properties opacity"),
    (lambda b: b.replace(b"element vertex", b"element vertez"), "no 'vertex' element"),
    (lambda b: b.replace(b"property float x", b"property quad x"), "unsupported PLY property"),
    (lambda b: b.replace(b"element vertex 20", b"element vertex -20"),
     "malformed PLY header line 'element vertex -20'; .* re-export"),
    (lambda b: b.replace(b"property float y", b"property float x"), "'x' appears twice"),
    (lambda b: b.replace(b"format binary", b"fromat binary"), "unexpected PLY header line"),
    (lambda b: b.replace(b"element vertex 20", b"element face 1\nelement vertex 20"),
     "'vertex' element must come first"),
])
def test_wrong_header(tmp_path, mutate, message):
    path = good_file(tmp_path)
    path.write_bytes(mutate(path.read_bytes()))
    with pytest.raises(BenchError, match=message) as caught:
        read_ply(path)
    assert "\n" not in str(caught.value)  # one line, for the CLI


def test_bad_rest_count(tmp_path):
    path = good_file(tmp_path)  # 9 f_rest
    raw = path.read_bytes().replace(b"property float f_rest_8\n", b"")
    path.write_bytes(raw)
    with pytest.raises(BenchError, match="8 f_rest_\\* properties; expected 0, 9, 24 or 45"):
        read_ply(path)


def test_nonfinite_reported_and_dropped(tmp_path):
    splats = random_splats(n=50, k=3, extra=False)
    splats.means[3, 0] = np.nan
    splats.sh_rest[7, 1, 2] = np.inf
    splats.opacity_logits[7] = -np.inf  # same Gaussian: counted once
    splats.quats[11, 0] = np.nan
    write_ply(tmp_path / "nan.ply", splats)
    with pytest.raises(BenchError, match="3 of 50 Gaussians have NaN/Inf values; pass --drop"):
        read_ply(tmp_path / "nan.ply")
    kept = read_ply(tmp_path / "nan.ply", drop_nonfinite=True)
    assert len(kept) == 47 and kept.count_nonfinite() == 0
    keep = np.setdiff1d(np.arange(50), [3, 7, 11])
    np.testing.assert_array_equal(kept.sh_dc, splats.sh_dc[keep])


def test_encode_is_deterministic_and_headers_parse():
    splats = random_splats(k=15)
    a, b = encode_ply(splats), encode_ply(splats)
    assert a.tobytes() == b.tobytes()
    header = parse_header(a)
    assert header.fmt == "<" and header.num_vertices == len(splats)
    assert header.row_bytes * header.num_vertices + header.body_offset == a.size


@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_chunked_read_matches_single_block(tmp_path, byte_order):
    splats = random_splats(n=1001, k=15)
    path = tmp_path / "c.ply"
    plyfile.PlyData([plyfile_vertices(splats)], byte_order=byte_order).write(path)
    data = np.fromfile(path, dtype=np.uint8)
    header = parse_header(data)
    whole = decode_vertices(data[header.body_offset:], header)
    for chunk in (1, 777, 10_000, 1 << 20):  # 1 row per chunk, ragged chunks, one chunk
        assert_same(read_ply(path, chunk_bytes=chunk), whole)


def test_empty_set_and_crlf_header(tmp_path):
    from bench.scene.gaussians import GaussianSplats

    write_ply(tmp_path / "e.ply", GaussianSplats.empty(sh_degree=3))
    empty = read_ply(tmp_path / "e.ply")
    assert len(empty) == 0 and empty.sh_rest.shape == (0, 15, 3)
    # a header written with Windows line endings (some exporters do) reads the same
    splats = random_splats(n=5, k=3, extra=False)
    write_ply(tmp_path / "a.ply", splats)
    raw = (tmp_path / "a.ply").read_bytes()
    end = raw.index(b"end_header\n") + len(b"end_header\n")
    (tmp_path / "crlf.ply").write_bytes(raw[:end].replace(b"\n", b"\r\n") + raw[end:])
    assert_same(read_ply(tmp_path / "crlf.ply"), read_ply(tmp_path / "a.ply"))


@pytest.mark.parametrize("k,extra,normals", [(0, False, True), (15, True, True),
                                             (8, True, False), (3, False, False)])
def test_fast_encoder_matches_reference(k, extra, normals):
    from bench.scene.ply import encode_ply_reference

    splats = random_splats(n=333, k=k, extra=extra)
    assert encode_ply(splats, normals=normals).tobytes() == \
        encode_ply_reference(splats, normals=normals)
