"""Readers for the splat formats scans come in: INRIA PLY, ``.splat``, ``.spz``, compressed PLY.

:func:`read_scan` picks the reader from the file's content (magic bytes / PLY
elements), not only its suffix:

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
from bench.scene.ply import PLY_TYPES, check_finite, read_ply, read_splat

SPZ_MAGIC = 0x5053474E  # "NGSP"
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


# ------------------------------------------------------------------ .spz
def _spz_sections(data: bytes, source: str) -> tuple[dict, list[bytes]]:
    """Header fields and the six raw attribute streams of an .spz file."""
    if data[:2] == b"\x1f\x8b":  # versions 1-3: one gzip stream
        try:
            raw = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            raise BenchError(f"{source}: damaged .spz (gzip stream does not decompress); "
                             "re-export the file") from None
        if len(raw) < 16:
            raise BenchError(f"{source}: .spz header truncated; re-export the file")
        magic, version, count = np.frombuffer(raw[:12], "<u4")
        degree, frac, flags = raw[12], raw[13], raw[14]
        header = {"magic": int(magic), "version": int(version), "count": int(count),
                  "sh_degree": int(degree), "fractional_bits": int(frac), "flags": int(flags)}
        return header, [raw[16:]]
    if len(data) < 32:
        raise BenchError(f"{source}: not an .spz file (too short, no gzip or NGSP header)")
    magic, version, count = np.frombuffer(data[:12], "<u4")
    if int(magic) != SPZ_MAGIC:
        raise BenchError(f"{source}: not an .spz file (neither gzip nor 'NGSP' magic); "
                         "export the scan as .spz, .ply or .compressed.ply")
    header = {"magic": int(magic), "version": int(version), "count": int(count),
              "sh_degree": int(data[12]), "fractional_bits": int(data[13]),
              "flags": int(data[14]), "streams": int(data[15]),
              "toc": int(np.frombuffer(data[16:20], "<u4")[0])}
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a declared dependency
        raise BenchError(f"{source}: .spz version 4 needs the 'zstandard' package; "
                         "pip install zstandard") from None
    toc_end = header["toc"] + 16 * header["streams"]
    if header["toc"] < 32 or toc_end > len(data):
        raise BenchError(f"{source}: damaged .spz (table of contents outside the file)")
    toc = np.frombuffer(data[header["toc"]:toc_end], "<u8").reshape(-1, 2)
    streams, at = [], toc_end
    for compressed, size in toc.tolist():
        if at + compressed > len(data):
            raise BenchError(f"{source}: truncated .spz (stream runs past the end); "
                             "re-copy the file")
        try:
            part = zstandard.ZstdDecompressor().decompress(data[at:at + compressed],
                                                           max_output_size=size)
        except zstandard.ZstdError:
            raise BenchError(f"{source}: damaged .spz (zstd stream does not decompress)") from None
        if len(part) != size:
            raise BenchError(f"{source}: damaged .spz (stream size mismatch)")
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
    if not path.is_file():
        raise BenchError(f"file not found: {path}; check the path")
    header, streams = _spz_sections(path.read_bytes(), source)
    version, n, degree = header["version"], header["count"], header["sh_degree"]
    if version not in (1, 2, 3, 4):
        raise BenchError(f"{source}: .spz version {version} is not supported (1-4); "
                         "re-export with a current Scaniverse / spz tool")
    if degree not in SPZ_SH_DIMS:
        raise BenchError(f"{source}: .spz SH degree {degree} is invalid (0-4)")
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
                             f"{n} Gaussians, {at} needed); re-copy the file")
    else:
        # version 4 skips empty streams (SH of degree 0)
        nonempty = [size for size in sizes if size]
        if len(streams) != len(nonempty) or [len(s) for s in streams] != nonempty:
            raise BenchError(f"{source}: damaged .spz (stream sizes do not match {n} Gaussians)")
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
def _ply_elements(data: bytes, source: str) -> tuple[list[tuple[str, int, list]], int, str]:
    """Elements ``(name, count, [(prop, code)])`` of a PLY header, body offset and format."""
    end = data.find(b"end_header")
    newline = data.find(b"\n", end)
    if not data.startswith(b"ply") or end < 0 or newline < 0:
        raise BenchError(f"{source}: not a PLY file (no complete header); re-export the scan")
    elements: list[tuple[str, int, list]] = []
    fmt = None
    for line in data[:end].decode("ascii", errors="replace").splitlines()[1:]:
        words = line.split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        if words[0] == "format":
            fmt = words[1] if len(words) > 1 else None
        elif words[0] == "element" and len(words) == 3 and words[2].isdigit():
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property" and elements and len(words) == 3 and words[1] in PLY_TYPES:
            elements[-1][2].append((words[2], PLY_TYPES[words[1]]))
        elif words[0] == "property" and elements:
            elements[-1][2].append((words[-1], "list"))
    return elements, newline + 1, fmt or ""


def is_compressed_ply(path: str | os.PathLike) -> bool:
    """True for a SuperSplat / splat-transform compressed PLY (``chunk`` + packed vertex)."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16)
    if not head.startswith(b"ply"):
        return False
    elements, _, _ = _ply_elements(head, str(path))
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
            vertex count, missing properties, a truncated body.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise BenchError(f"file not found: {path}; check the path")
    data = path.read_bytes()
    elements, offset, fmt = _ply_elements(data[: 1 << 20], source)
    if fmt != "binary_little_endian":
        raise BenchError(f"{source}: compressed PLY must be binary_little_endian, got {fmt!r}")
    tables = {}
    for name, count, props in elements:
        if any(code == "list" for _, code in props):
            raise BenchError(f"{source}: list property in element {name!r}; not a compressed PLY")
        dtype = np.dtype([(p, "<" + code) for p, code in props])
        need = count * dtype.itemsize
        if offset + need > len(data):
            raise BenchError(f"{source}: truncated compressed PLY (element {name!r} needs {need} "
                             "bytes); re-copy the file")
        tables[name] = np.frombuffer(data, dtype, count=count, offset=offset)
        offset += need
    chunk, vertex = tables.get("chunk"), tables.get("vertex")
    packed = ("packed_position", "packed_rotation", "packed_scale", "packed_color")
    bounds = [f"{m}_{a}" for m in ("min", "max") for a in "xyz"] + \
        [f"{m}_scale_{a}" for m in ("min", "max") for a in "xyz"]
    if chunk is None or vertex is None or any(p not in vertex.dtype.names for p in packed) \
            or any(b not in chunk.dtype.names for b in bounds):
        raise BenchError(f"{source}: not a SuperSplat compressed PLY (needs 'chunk' bounds and "
                         "packed_* vertex properties)")
    n = len(vertex)
    if len(chunk) != -(-n // COMPRESSED_CHUNK):
        raise BenchError(f"{source}: {len(chunk)} chunks for {n} Gaussians (expected "
                         f"{-(-n // COMPRESSED_CHUNK)}); the file is damaged")
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
                             f"{len(sh)} rows; expected 9/24/45 for {n} Gaussians")
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
    """The format of a scan file (one of :data:`FORMATS`), from its content."""
    path = Path(path)
    if not path.exists():
        raise BenchError(f"scan file {path} not found; pass a .ply, .compressed.ply, .splat "
                         "or .spz export")
    if path.is_dir():
        raise BenchError(f"{path} is a directory; pass the scan file itself (.ply/.spz/.splat)")
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head[:2] == b"\x1f\x8b" or head == b"NGSP":
        return "spz"
    if head[:3] == b"ply":
        return "compressed-ply" if is_compressed_ply(path) else "ply"
    if path.suffix.lower() == ".splat":
        return "splat"
    raise BenchError(f"{path}: unknown scan format (not PLY, .spz or .splat); export the scan "
                     "as .ply (3DGS layout), .compressed.ply, .spz or .splat")


def stored_scan_count(path: str | os.PathLike, fmt: str) -> int:
    """Gaussians the file stores, before any NaN/Inf rows are dropped.

    Reads only the header where the format has one.
    """
    from bench.scene.ply import stored_count

    if fmt in ("ply", "splat"):
        return stored_count(path)
    if fmt == "compressed-ply":
        with open(path, "rb") as handle:
            elements, _, _ = _ply_elements(handle.read(1 << 16), str(path))
        return next(count for name, count, _ in elements if name == "vertex")
    header, _ = _spz_sections(Path(path).read_bytes(), str(path))
    return header["count"]


def read_scan(path: str | os.PathLike, *,
              drop_nonfinite: bool = False) -> tuple[GaussianSplats, str, int]:
    """Read any supported scan file.

    Args:
        path: The scan (format detected from its content, see :func:`scan_format`).
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
