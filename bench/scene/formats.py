"""Readers for the splat formats scans come in: INRIA PLY, ``.splat``, ``.spz``, compressed PLY.

:func:`read_scan` (what ``bench scene init`` and ``bench scene info`` read) picks the
reader with :func:`scan_format`: the ``.splat`` suffix decides for the headerless
antimatter15 format; every other format is decided by its content (gzip / ``NGSP``
magic, checked down to the .spz header's magic and version; a PLY header and its
elements):

- INRIA 3DGS ``.ply`` (gsplat, nerfstudio, Postshot, ...): :func:`bench.scene.ply.read_ply`.
- antimatter15 ``.splat``: :func:`bench.scene.ply.read_splat`.
- Niantic ``.spz`` (Scaniverse exports), versions 1-3 (one gzip stream, 16-byte
  header) and 4 (32-byte plain header, table of contents, one zstd stream per
  attribute): :func:`read_spz`. Layout per Gaussian, attribute-major:
  positions 3 x 24-bit signed fixed point (``fractional_bits`` in the header;
  version 1: float16), alpha uint8 (``sigmoid(opacity) * 255``), colour uint8
  (``f_dc * 0.15 * 255 + 127.5``), scales uint8 (``(log_scale + 10) * 16``),
  rotation (version 2: x, y, z as ``(q + 1) * 127.5`` with w >= 0 implied;
  version >= 3: "smallest three", 2 bits index of the largest component + 3 x
  (9-bit magnitude / 511 / sqrt 2, sign bit), x y z w order), SH rest int8-like
  uint8 ``(c - 128) / 128``, coefficient-major with the colour channel
  innermost. ``.spz`` stores the Right-Up-Back axes (three.js); the reader
  converts to the PLY convention (Right-Down-Front, a 180 degree turn about x:
  y and z flip) exactly like the reference library's ``UnpackOptions.to = RDF``.
- SuperSplat / splat-transform compressed PLY (``.compressed.ply``): elements
  ``chunk`` (per 256 Gaussians: min/max of position, log-scale and optionally
  colour, float32), ``vertex`` (``packed_position`` 11-10-11 bits,
  ``packed_rotation`` 2 + 3 x 10 bits smallest three in w x y z order,
  ``packed_scale`` 11-10-11, ``packed_color`` RGBA 8-8-8-8, uint32) and optional
  ``sh`` (uint8 ``f_rest_*``, decoded as ``((v + 0.5) / 256 - 0.5) * 8`` with
  0 -> -4 and 255 -> 4): :func:`read_compressed_ply`.

Every decoder is vectorised numpy (no loop per Gaussian). Quantised opacities
of exactly 0 or 255 (infinite logits in the reference decoders) are clamped to
half a quantisation step inside (0, 1) so that every value stays finite.
SH degree 4 (``.spz`` only) is truncated to degree 3 with a warning.
"""

from __future__ import annotations

import gzip
import math
import os
import warnings
import zlib
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.scene.gaussians import SH_C0, SH_REST_COUNTS, GaussianSplats
from bench.scene.ply import (
    MAX_HEADER_BYTES,
    PLY_TYPES,
    SPLAT_ROW,
    check_finite,
    read_head,
    read_ply,
    read_ply_header,
    read_splat,
)

SPZ_MAGIC = 0x5053474E  # "NGSP"
GZIP_MAGIC = b"\x1f\x8b"
SPZ_COLOR_SCALE = 0.15
SPZ_SH_DIMS = {0: 0, 1: 3, 2: 8, 3: 15, 4: 24}
COMPRESSED_CHUNK = 256
FORMATS = ("ply", "compressed-ply", "splat", "spz")


class FormatWarning(UserWarning):
    """A scan was read with a loss the user should know about (e.g. SH degree 4 dropped)."""


def _logit_u8(alpha: np.ndarray) -> np.ndarray:  # [N] uint8 -> [N] float32
    """Logit of ``alpha / 255`` with 0 and 255 clamped half a step inside (0, 1)."""
    a = np.clip(alpha.astype(np.float64), 0.5, 254.5) / 255.0
    return np.log(a / (1.0 - a)).astype(np.float32)


def _check_file(path: Path) -> None:
    """Refuse a missing path or a directory in place of a scan file."""
    if not path.exists():
        raise BenchError(f"scan file {path} not found; check the path (pass a .ply, "
                         ".compressed.ply, .splat or .spz export)")
    if not path.is_file():
        raise BenchError(f"{path} is not a file; pass the scan file itself (.ply, "
                         ".compressed.ply, .splat or .spz)")


# ------------------------------------------------------------------ .spz
REEXPORT_SPZ = "re-export the scan as .spz (or re-copy the file)"
OTHER_FORMATS = "export the scan as .spz, .ply (3DGS layout), .compressed.ply or .splat"


def _parse_spz_header(head: bytes, *, plain: bool, source: str) -> dict:
    """Header fields of an .spz file, checked: NGSP magic, a supported version, SH degree.

    Args:
        head: The first bytes of the decompressed gzip stream (versions 1-3,
            16-byte header) or of the file itself (``plain``: version 4, 32 bytes).
        plain: True for the uncompressed version-4 header.
        source: The file, for messages.

    Raises:
        BenchError: A short header, a wrong magic (e.g. some other gzip file), a
            version the container does not hold, an invalid SH degree.
    """
    need = 32 if plain else 16
    if len(head) < need:
        raise BenchError(f"{source}: .spz header truncated ({len(head)} of {need} bytes); "
                         f"{REEXPORT_SPZ}")
    magic, version, count = (int(v) for v in np.frombuffer(head[:12], "<u4"))
    if magic != SPZ_MAGIC:
        where = "the file" if plain else "the gzip stream"
        raise BenchError(f"{source}: not an .spz file ({where} starts with magic 0x{magic:08x}, "
                         f"an .spz with 0x{SPZ_MAGIC:08x} 'NGSP'); {OTHER_FORMATS}"
                         + ("" if plain else " (a gzipped PLY: gunzip it first)"))
    supported = (4,) if plain else (1, 2, 3)
    if version not in supported:
        container = "an uncompressed 'NGSP' header" if plain else "a gzip stream"
        raise BenchError(f"{source}: .spz version {version} in {container} is not supported "
                         f"(versions 1-3 are gzip streams, 4 has the 'NGSP' header); re-export "
                         "with a current Scaniverse / spz tool")
    header = {"magic": magic, "version": version, "count": count, "sh_degree": int(head[12]),
              "fractional_bits": int(head[13]), "flags": int(head[14])}
    if header["sh_degree"] not in SPZ_SH_DIMS:
        raise BenchError(f"{source}: .spz SH degree {header['sh_degree']} is invalid (0-4); "
                         f"the header is damaged, {REEXPORT_SPZ}")
    if plain:
        header.update(streams=int(head[15]), toc=int(np.frombuffer(head[16:20], "<u4")[0]))
    return header


def _gunzip_head(data: bytes, size: int, source: str) -> bytes:
    """The first ``size`` decompressed bytes of a gzip stream (the rest is not inflated)."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[: 1 << 16], size)
    except zlib.error:
        raise BenchError(f"{source}: damaged .spz (gzip stream does not decompress); "
                         f"{REEXPORT_SPZ}") from None


def spz_header(path: str | os.PathLike) -> dict:
    """The checked header of an .spz file (reads at most 64 KiB; see :func:`_parse_spz_header`).

    Raises:
        BenchError: Not gzip or 'NGSP', or a header :func:`_parse_spz_header` refuses.
    """
    path = Path(path)
    source = str(path)
    with open(path, "rb") as handle:
        head = handle.read(1 << 16)
    if head[:2] == GZIP_MAGIC:
        return _parse_spz_header(_gunzip_head(head, 16, source), plain=False, source=source)
    if head[:4] == b"NGSP":
        return _parse_spz_header(head, plain=True, source=source)
    raise BenchError(f"{source}: not an .spz file (starts with neither gzip 1f 8b nor 'NGSP'); "
                     f"{OTHER_FORMATS}")


def _spz_sections(data: bytes, source: str) -> tuple[dict, list[bytes]]:
    """Header fields (checked) and the raw attribute streams of an .spz file."""
    if data[:2] == GZIP_MAGIC:  # versions 1-3: one gzip stream
        # the magic is checked before the whole stream is inflated (any gzip file may come here)
        _parse_spz_header(_gunzip_head(data, 16, source), plain=False, source=source)
        try:
            raw = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            raise BenchError(f"{source}: damaged .spz (gzip stream does not decompress); "
                             f"{REEXPORT_SPZ}") from None
        return _parse_spz_header(raw, plain=False, source=source), [raw[16:]]
    if data[:4] != b"NGSP":
        raise BenchError(f"{source}: not an .spz file (starts with neither gzip 1f 8b nor "
                         f"'NGSP'); {OTHER_FORMATS}")
    header = _parse_spz_header(data, plain=True, source=source)
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a declared dependency
        raise BenchError(f"{source}: .spz version 4 needs the 'zstandard' package; "
                         "pip install zstandard") from None
    toc_end = header["toc"] + 16 * header["streams"]
    if header["toc"] < 32 or toc_end > len(data):
        raise BenchError(f"{source}: damaged .spz (table of contents outside the file); "
                         f"{REEXPORT_SPZ}")
    toc = np.frombuffer(data[header["toc"]:toc_end], "<u8").reshape(-1, 2)
    streams, at = [], toc_end
    for compressed, size in toc.tolist():
        if at + compressed > len(data):
            raise BenchError(f"{source}: truncated .spz (stream runs past the end); "
                             f"{REEXPORT_SPZ}")
        try:
            part = zstandard.ZstdDecompressor().decompress(data[at:at + compressed],
                                                           max_output_size=size)
        except zstandard.ZstdError:
            raise BenchError(f"{source}: damaged .spz (zstd stream does not decompress); "
                             f"{REEXPORT_SPZ}") from None
        if len(part) != size:
            raise BenchError(f"{source}: damaged .spz (stream size mismatch); {REEXPORT_SPZ}")
        streams.append(part)
        at += compressed
    return header, streams


def _smallest_three_xyzw(packed: np.ndarray) -> np.ndarray:  # [N, 4] uint8 -> [N, 4] x y z w
    word = packed.astype(np.uint32)
    comp = word[:, 0] | (word[:, 1] << 8) | (word[:, 2] << 16) | (word[:, 3] << 24)
    largest = (comp >> 30).astype(np.int64)
    out = np.zeros((len(comp), 4), np.float64)
    mask = np.uint32(511)
    # components are stored from the highest index down, 10 bits each from the low end
    rest = comp.copy()
    filled = np.zeros(len(comp), np.float64)
    for index in (3, 2, 1, 0):
        skip = largest == index
        mag = (rest & mask).astype(np.float64)
        negative = ((rest >> 9) & 1).astype(bool)
        value = math.sqrt(0.5) * mag / 511.0
        value = np.where(negative, -value, value)
        out[:, index] = np.where(skip, 0.0, value)
        filled += np.where(skip, 0.0, value * value)
        rest = np.where(skip, rest, rest >> 10)
    out[np.arange(len(comp)), largest] = np.sqrt(np.maximum(0.0, 1.0 - filled))
    return out


def read_spz(path: str | os.PathLike, *, drop_nonfinite: bool = False) -> GaussianSplats:
    """Read a Niantic ``.spz`` file (versions 1-4) into the PLY (RDF) convention.

    Args:
        path: The ``.spz`` file.
        drop_nonfinite: Drop Gaussians with NaN/Inf values instead of raising.

    Returns:
        The Gaussians, SH degree <= 3, axes converted from the file's RUB to the
        3DGS PLY convention (y and z negated, quaternions and SH rotated to match).

    Raises:
        BenchError: Not an .spz file, a damaged or truncated stream, an unknown version.
    """
    path = Path(path)
    source = str(path)
    _check_file(path)
    header, streams = _spz_sections(path.read_bytes(), source)
    version, n, degree = header["version"], header["count"], header["sh_degree"]
    if header["flags"] & 0x2:
        warnings.warn(f"{source}: .spz vendor extensions are ignored (data read in the default "
                      "RUB storage axes)", FormatWarning, stacklevel=2)
    dim = SPZ_SH_DIMS[degree]
    rot_bytes = 4 if version >= 3 else 3
    pos_bytes = 6 if version == 1 else 9
    sizes = [n * pos_bytes, n, n * 3, n * 3, n * rot_bytes, n * dim * 3]
    if len(streams) == 1:  # legacy: one stream, attributes back to back
        blob, parts, at = streams[0], [], 0
        for size in sizes:
            parts.append(blob[at:at + size])
            at += size
        if at > len(blob):
            raise BenchError(f"{source}: truncated .spz ({len(blob)} bytes of data for "
                             f"{n} Gaussians, {at} needed); {REEXPORT_SPZ}")
    else:
        # version 4 skips empty streams (SH of degree 0)
        nonempty = [size for size in sizes if size]
        if len(streams) != len(nonempty) or [len(s) for s in streams] != nonempty:
            raise BenchError(f"{source}: damaged .spz (stream sizes do not match {n} "
                             f"Gaussians); {REEXPORT_SPZ}")
        parts = [streams[i] for i in range(len(nonempty))] + [b""] * (6 - len(nonempty))
    pos_raw, alpha_raw, color_raw, scale_raw, rot_raw, sh_raw = (
        np.frombuffer(p, np.uint8) for p in parts)
    if version == 1:
        means = np.frombuffer(parts[0], "<f2").reshape(n, 3).astype(np.float64)
    else:
        b = pos_raw.reshape(n, 3, 3).astype(np.int32)
        fixed = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
        fixed = np.where(fixed & 0x800000, fixed - (1 << 24), fixed)
        means = fixed.astype(np.float64) / float(1 << header["fractional_bits"])
    log_scales = scale_raw.reshape(n, 3).astype(np.float64) / 16.0 - 10.0
    if version >= 3:
        xyzw = _smallest_three_xyzw(rot_raw.reshape(n, 4))
    else:
        xyz = rot_raw.reshape(n, 3).astype(np.float64) / 127.5 - 1.0
        w = np.sqrt(np.maximum(0.0, 1.0 - (xyz * xyz).sum(1)))
        xyzw = np.concatenate([xyz, w[:, None]], axis=1)
    sh_dc = (color_raw.reshape(n, 3).astype(np.float64) / 255.0 - 0.5) / SPZ_COLOR_SCALE
    sh = (sh_raw.reshape(n, dim, 3).astype(np.float64) - 128.0) / 128.0
    if degree == 4:
        warnings.warn(f"{source}: SH degree 4 is truncated to degree 3 (the bench renders "
                      "SH <= 3)", FormatWarning, stacklevel=2)
        sh = sh[:, :15]
    # RUB (file) -> RDF (PLY): a 180 degree turn about x
    means = means * (1.0, -1.0, -1.0)
    quats = np.stack([xyzw[:, 3], xyzw[:, 0], -xyzw[:, 1], -xyzw[:, 2]], axis=1)
    sh = sh * _x_turn_sh_signs(sh.shape[1])[None, :, None]
    splats = GaussianSplats(
        means=means.astype(np.float32), quats=quats.astype(np.float32),
        log_scales=log_scales.astype(np.float32), opacity_logits=_logit_u8(alpha_raw),
        sh_dc=sh_dc.astype(np.float32), sh_rest=sh.astype(np.float32))
    return check_finite(splats, drop_nonfinite=drop_nonfinite, source=source)


def _x_turn_sh_signs(k: int) -> np.ndarray:  # [K] +-1
    """SH rest sign flips of a 180 degree turn about x (y -> -y, z -> -z), bands 1-3.

    Derived from :func:`bench.scene.transforms.sh_rotation_matrices` (a diagonal
    +-1 matrix for this rotation).
    """
    from bench.scene.transforms import sh_rotation_matrices

    if k == 0:
        return np.ones(0)
    degree = next(d for d, count in SH_REST_COUNTS.items() if count == k)
    diag = np.concatenate([np.diag(m) for m in
                           sh_rotation_matrices(np.diag([1.0, -1.0, -1.0]), degree)])
    return np.round(diag)


# ------------------------------------------------------------------ compressed PLY
REEXPORT_COMPRESSED = ("re-export it from SuperSplat / splat-transform as a compressed PLY "
                       "(or as a 3DGS .ply), or re-copy the file")


def _ply_elements(data: bytes, source: str) -> tuple[list[tuple[str, int, list]], int, str]:
    """Elements ``(name, count, [(prop, code)])`` of a PLY header, body offset and format.

    Raises:
        BenchError: No complete header, a malformed ``element`` / ``property`` line, a
            property named twice in one element.
    """
    end = data.find(b"end_header")
    newline = data.find(b"\n", end) if end >= 0 else -1
    if not data.startswith(b"ply") or newline < 0:
        raise BenchError(f"{source}: not a PLY file (no complete header); {REEXPORT_COMPRESSED}")
    elements: list[tuple[str, int, list]] = []
    fmt = None
    for line in data[:end].decode("ascii", errors="replace").splitlines()[1:]:
        words = line.split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        if words[0] == "format":
            fmt = words[1] if len(words) > 1 else None
        elif words[0] == "element":
            if len(words) != 3 or not words[2].isdigit():
                raise BenchError(f"{source}: malformed PLY header line {line.strip()!r}; "
                                 f"{REEXPORT_COMPRESSED}")
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property":
            if not elements:
                raise BenchError(f"{source}: PLY property before any element "
                                 f"({line.strip()!r}); {REEXPORT_COMPRESSED}")
            if len(words) >= 2 and words[1] == "list":
                code = "list"
            elif len(words) == 3 and words[1] in PLY_TYPES:
                code = PLY_TYPES[words[1]]
            else:
                raise BenchError(f"{source}: unsupported PLY property line {line.strip()!r}; "
                                 f"{REEXPORT_COMPRESSED}")
            name, props = words[-1], elements[-1][2]
            if any(name == p for p, _ in props):
                raise BenchError(f"{source}: property {name!r} appears twice in element "
                                 f"{elements[-1][0]!r}; {REEXPORT_COMPRESSED}")
            props.append((name, code))
    return elements, newline + 1, fmt or ""


def is_compressed_ply(path: str | os.PathLike) -> bool:
    """True for a SuperSplat / splat-transform compressed PLY (``chunk`` + packed vertex).

    Reads the whole header (however long its comments); a file whose header the
    compressed-PLY parser cannot read is no compressed PLY (the plain PLY reader
    then names what is wrong with it).
    """
    with open(path, "rb") as handle:
        head = read_head(handle)
    if not head.startswith(b"ply"):
        return False
    try:
        elements, _, _ = _ply_elements(head, str(path))
    except BenchError:
        return False
    names = {e[0]: [p for p, _ in e[2]] for e in elements}
    return "chunk" in names and "packed_position" in names.get("vertex", [])


def _unorm(value: np.ndarray, shift: int, bits: int) -> np.ndarray:  # uint32 -> float64 [0, 1]
    top = (1 << bits) - 1
    return ((value >> np.uint32(shift)) & np.uint32(top)).astype(np.float64) / top


def read_compressed_ply(path: str | os.PathLike, *,
                        drop_nonfinite: bool = False) -> GaussianSplats:
    """Read a SuperSplat / splat-transform compressed PLY (see module docstring).

    Raises:
        BenchError: Not a compressed PLY, a chunk count that does not match the
            vertex count, missing or mistyped properties, a truncated body; every
            message names the file and the fix.
    """
    path = Path(path)
    source = str(path)
    _check_file(path)
    data = path.read_bytes()
    elements, offset, fmt = _ply_elements(data[:MAX_HEADER_BYTES], source)
    if fmt != "binary_little_endian":
        raise BenchError(f"{source}: compressed PLY must be binary_little_endian, got {fmt!r}; "
                         f"{REEXPORT_COMPRESSED}")
    tables = {}
    for name, count, props in elements:
        if any(code == "list" for _, code in props):
            raise BenchError(f"{source}: list property in element {name!r}; not a compressed "
                             f"PLY, {REEXPORT_COMPRESSED}")
        dtype = np.dtype([(p, "<" + code) for p, code in props])
        need = count * dtype.itemsize
        if offset + need > len(data):
            raise BenchError(f"{source}: truncated compressed PLY (element {name!r} needs {need} "
                             f"bytes); {REEXPORT_COMPRESSED}")
        tables[name] = np.frombuffer(data, dtype, count=count, offset=offset)
        offset += need
    chunk, vertex = tables.get("chunk"), tables.get("vertex")
    packed = ("packed_position", "packed_rotation", "packed_scale", "packed_color")
    bounds = [f"{m}_{a}" for m in ("min", "max") for a in "xyz"] + \
        [f"{m}_scale_{a}" for m in ("min", "max") for a in "xyz"]
    if chunk is None or vertex is None or any(p not in vertex.dtype.names for p in packed) \
            or any(b not in chunk.dtype.names for b in bounds):
        raise BenchError(f"{source}: not a SuperSplat compressed PLY (needs 'chunk' bounds and "
                         f"packed_* vertex properties); {REEXPORT_COMPRESSED}")
    mistyped = [p for p in packed if vertex.dtype[p] != np.dtype("<u4")]
    if mistyped:
        raise BenchError(f"{source}: compressed PLY property {mistyped[0]!r} is "
                         f"{vertex.dtype[mistyped[0]]}, not uint32; {REEXPORT_COMPRESSED}")
    n = len(vertex)
    if len(chunk) != -(-n // COMPRESSED_CHUNK):
        raise BenchError(f"{source}: {len(chunk)} chunks for {n} Gaussians (expected "
                         f"{-(-n // COMPRESSED_CHUNK)}); the file is damaged, "
                         f"{REEXPORT_COMPRESSED}")
    owner = np.arange(n) // COMPRESSED_CHUNK

    def lerp(prefix: str, suffix: str, t: np.ndarray) -> np.ndarray:
        lo = chunk[f"min_{prefix}{suffix}"].astype(np.float64)[owner]
        hi = chunk[f"max_{prefix}{suffix}"].astype(np.float64)[owner]
        return lo * (1.0 - t) + hi * t

    def unpack_111011(word: np.ndarray) -> list[np.ndarray]:
        return [_unorm(word, 21, 11), _unorm(word, 11, 10), _unorm(word, 0, 11)]

    pos = unpack_111011(vertex["packed_position"])
    means = np.stack([lerp("", a, t) for a, t in zip("xyz", pos, strict=True)], axis=1)
    scl = unpack_111011(vertex["packed_scale"])
    log_scales = np.stack([lerp("scale_", a, t) for a, t in zip("xyz", scl, strict=True)], axis=1)
    word = vertex["packed_rotation"]
    norm = 1.0 / (math.sqrt(2.0) * 0.5)
    abc = np.stack([(_unorm(word, s, 10) - 0.5) * norm for s in (20, 10, 0)], axis=1)
    largest = (word >> np.uint32(30)).astype(np.int64)
    rest = np.sqrt(np.maximum(0.0, 1.0 - (abc * abc).sum(1)))
    quats = np.empty((n, 4), np.float64)  # w x y z == rot_0..rot_3
    for index in range(4):
        at = largest == index
        others = [i for i in range(4) if i != index]
        quats[at, index] = rest[at]
        quats[np.ix_(at, others)] = abc[at]
    color = vertex["packed_color"]
    rgba = [_unorm(color, s, 8) for s in (24, 16, 8, 0)]
    if "min_r" in chunk.dtype.names:
        rgb = [lerp("", c, t) for c, t in zip("rgb", rgba[:3], strict=True)]
    else:
        rgb = rgba[:3]
    sh_dc = (np.stack(rgb, axis=1) - 0.5) / SH_C0
    alpha_u8 = np.round(rgba[3] * 255.0).astype(np.uint8)
    sh_rest = np.zeros((n, 0, 3), np.float32)
    if "sh" in tables:
        sh = tables["sh"]
        count = len(sh.dtype.names)
        if count not in (9, 24, 45) or len(sh) != n:
            raise BenchError(f"{source}: compressed PLY 'sh' element has {count} properties for "
                             f"{len(sh)} rows; expected 9/24/45 for {n} Gaussians, "
                             f"{REEXPORT_COMPRESSED}")
        wrong = [f"f_rest_{i}" for i in range(count) if f"f_rest_{i}" not in sh.dtype.names
                 or sh.dtype[f"f_rest_{i}"] != np.dtype("u1")]
        if wrong:
            raise BenchError(f"{source}: compressed PLY 'sh' element lacks uint8 {wrong[0]!r} "
                             f"(needs f_rest_0..{count - 1}); {REEXPORT_COMPRESSED}")
        raw = np.stack([sh[f"f_rest_{i}"] for i in range(count)], axis=1).astype(np.float64)
        unit = np.where(raw == 0, 0.0, np.where(raw == 255, 1.0, (raw + 0.5) / 256.0))
        k = count // 3
        sh_rest = ((unit - 0.5) * 8.0).reshape(n, 3, k).transpose(0, 2, 1).astype(np.float32)
    splats = GaussianSplats(
        means=means.astype(np.float32), quats=quats.astype(np.float32),
        log_scales=log_scales.astype(np.float32), opacity_logits=_logit_u8(alpha_u8),
        sh_dc=sh_dc.astype(np.float32), sh_rest=np.ascontiguousarray(sh_rest))
    return check_finite(splats, drop_nonfinite=drop_nonfinite, source=source)


# ------------------------------------------------------------------ dispatch
def scan_format(path: str | os.PathLike) -> str:
    """The format of a scan file (one of :data:`FORMATS`); every reader decides through this.

    The rules (``bench scene init`` and ``bench scene info`` alike):

    1. A ``.splat`` suffix decides: the antimatter15 format has no header, so its first
       bytes are a float32 position and may be anything (``1f 8b``, ``ply``, ``NGSP``).
    2. Otherwise the content decides: a gzip stream (``1f 8b``) or an ``NGSP`` header is
       ``.spz`` and must carry the NGSP magic and a supported version (1-3 gzip, 4
       ``NGSP``); a file starting with ``ply`` is a compressed PLY when it has a
       ``chunk`` element and ``packed_position`` vertices, else a 3DGS PLY.
    3. A ``.ply`` / ``.spz`` suffix on other content is read as that format, whose
       reader names what is wrong; any other file is refused.

    Raises:
        BenchError: A missing path, a directory, a gzip file that is not an .spz, an
            .spz version the bench does not read, an unknown format.
    """
    path = Path(path)
    _check_file(path)
    if path.name.lower().endswith(".splat"):
        return "splat"
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head[:2] == GZIP_MAGIC or head == b"NGSP":
        spz_header(path)  # magic and version checked before any reader runs
        return "spz"
    if head[:3] == b"ply":
        return "compressed-ply" if is_compressed_ply(path) else "ply"
    suffix = path.suffix.lower()
    if suffix == ".ply":
        return "ply"  # read_ply says what is wrong (empty file, no 'ply' magic, ...)
    if suffix == ".spz":
        spz_header(path)  # raises: starts with neither gzip nor 'NGSP'
    raise BenchError(f"{path}: unknown scan format (not PLY, .spz or .splat); export the scan "
                     "as .ply (3DGS layout), .compressed.ply, .spz or .splat (a .splat file "
                     "needs its .splat suffix: the format has no header)")


def stored_scan_count(path: str | os.PathLike, fmt: str) -> int:
    """Gaussians the file stores, before any NaN/Inf rows are dropped.

    Reads only the header where the format has one.
    """
    if fmt == "splat":
        return Path(path).stat().st_size // SPLAT_ROW.itemsize
    if fmt == "ply":
        return read_ply_header(path).num_vertices
    if fmt == "compressed-ply":
        with open(path, "rb") as handle:
            elements, _, _ = _ply_elements(read_head(handle), str(path))
        return next(count for name, count, _ in elements if name == "vertex")
    return spz_header(path)["count"]


def read_scan(path: str | os.PathLike, *,
              drop_nonfinite: bool = False) -> tuple[GaussianSplats, str, int]:
    """Read any supported scan file (what ``bench scene init`` and ``bench scene info`` read).

    Args:
        path: The scan (format from :func:`scan_format`).
        drop_nonfinite: Drop Gaussians with NaN/Inf values instead of raising.

    Returns:
        The Gaussians (file frame, PLY conventions), the detected format name and
        the number of NaN/Inf Gaussians dropped.
    """
    fmt = scan_format(path)
    reader = {"ply": read_ply, "compressed-ply": read_compressed_ply, "splat": read_splat,
              "spz": read_spz}[fmt]
    splats = reader(path, drop_nonfinite=drop_nonfinite)
    dropped = stored_scan_count(path, fmt) - len(splats) if drop_nonfinite else 0
    return splats, fmt, dropped
