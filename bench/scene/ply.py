"""Vectorised PLY read/write of the standard 3DGS vertex layout (plus ``.splat`` read).

Layout (INRIA 3DGS, what gsplat / Scaniverse / SuperSplat export)::

    x y z [nx ny nz] f_dc_0..2 f_rest_0..f_rest_{3K-1} opacity scale_0..2 rot_0..3 [extra...]

``f_rest`` is channel-major (all K red coefficients, then green, then blue),
K in {0, 3, 8, 15} (SH degree 0-3). Files are read whatever the property order,
with or without normals, as binary little-endian, binary big-endian or ASCII;
every further vertex property is kept in ``GaussianSplats.extra`` (its dtype
too) and written back after the standard ones, in its original order.
Writing is always binary little-endian float32, normals (zeros unless present
in ``extra``) included by default.

Speed: the vertex block is streamed through one small buffer (8 MiB) and
every property group (means, quats, ...) is copied out of it into the
preallocated output arrays through one strided view
(``np.ndarray(buffer=..., strides=(row_bytes, 4))``), never a Python loop per
Gaussian, so reading needs little memory beyond its result; writing fills one
chunk buffer (65,536 rows) through the same kind of views and streams it to
:func:`bench.provenance.atomic_write_chunks`. A plain per-property
reference decoder (:func:`decode_vertices_reference`, structured dtype +
``np.stack``) sits beside the fast path; the tests compare the two.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.provenance import atomic_write_bytes, atomic_write_chunks
from bench.scene.gaussians import SH_C0, GaussianSplats

# PLY scalar type names (both spellings) -> numpy type code without byte order.
PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}
# numpy type code -> canonical PLY name used when writing.
PLY_NAMES = {"i1": "char", "u1": "uchar", "i2": "short", "u2": "ushort",
             "i4": "int", "u4": "uint", "f4": "float", "f8": "double"}
FORMATS = {"binary_little_endian": "<", "binary_big_endian": ">", "ascii": "ascii"}

# Property groups of the 3DGS layout: attribute -> PLY property names.
CORE_GROUPS = {
    "means": ("x", "y", "z"),
    "sh_dc": ("f_dc_0", "f_dc_1", "f_dc_2"),
    "opacity_logits": ("opacity",),
    "log_scales": ("scale_0", "scale_1", "scale_2"),
    "quats": ("rot_0", "rot_1", "rot_2", "rot_3"),
}
NORMALS = ("nx", "ny", "nz")
VALID_REST_COUNTS = (0, 9, 24, 45)  # f_rest properties for SH degree 0, 1, 2, 3
MAX_HEADER_BYTES = 64 << 20  # headers (long comments included) up to 64 MiB are read
HEADER_CHUNK = 1 << 20


def read_head(handle: Any) -> bytes:
    """Bytes from the start of an open PLY up to past its ``end_header`` line (or the cap).

    Reads 1 MiB at a time, so an ordinary file costs one small read while a header
    with megabytes of comments (legal PLY) is still read whole.
    """
    head = handle.read(HEADER_CHUNK)
    while len(head) < MAX_HEADER_BYTES:
        end = head.find(b"end_header")
        if end >= 0 and head.find(b"\n", end) >= 0:
            break
        chunk = handle.read(HEADER_CHUNK)
        if not chunk:
            break
        head += chunk
    return head


@dataclass(frozen=True)
class PlyProperty:
    """One scalar vertex property: its name, numpy type code and byte offset in a row."""

    name: str
    code: str  # e.g. "f4"
    offset: int


@dataclass(frozen=True)
class PlyHeader:
    """Parsed header of a Gaussian PLY file.

    Attributes:
        fmt: ``"<"`` (binary LE), ``">"`` (binary BE) or ``"ascii"``.
        num_vertices: Number of vertices (Gaussians).
        properties: Vertex properties in file order.
        row_bytes: Bytes per vertex in a binary file.
        body_offset: Byte offset of the vertex block.
        comments: Header comment lines (without the ``comment`` keyword).
    """

    fmt: str
    num_vertices: int
    properties: tuple[PlyProperty, ...]
    row_bytes: int
    body_offset: int
    comments: tuple[str, ...] = ()

    def names(self) -> list[str]:
        """Property names in file order."""
        return [p.name for p in self.properties]

    def sh_rest_count(self) -> int:
        """Number of ``f_rest_*`` (higher-order SH) properties."""
        return sum(1 for p in self.properties if p.name.startswith("f_rest_"))

    def by_name(self) -> dict[str, PlyProperty]:
        """Property name -> property."""
        return {p.name: p for p in self.properties}


# ------------------------------------------------------------------ header
REEXPORT = "the header is damaged or non-standard: re-export the PLY from your 3DGS tool"


def parse_header(data: bytes | np.ndarray, *, source: str = "PLY") -> PlyHeader:
    """Parse a PLY header from the start of ``data`` (bytes or a uint8 array).

    Raises:
        BenchError: Not a PLY file, unsupported format, no vertex element, list
            properties in the vertex element, or an element before the vertices.
    """
    head = bytes(data[:MAX_HEADER_BYTES])
    if not head.startswith(b"ply"):
        raise BenchError(f"{source}: not a PLY file (does not start with 'ply'); pass a 3DGS .ply")
    end = head.find(b"end_header")
    if end < 0:
        if len(head) >= MAX_HEADER_BYTES:
            raise BenchError(f"{source}: PLY header is longer than {MAX_HEADER_BYTES >> 20} MiB "
                             "(no 'end_header' found); shorten its comments or re-export it")
        raise BenchError(f"{source}: PLY header has no 'end_header' line; the file is damaged")
    newline = head.find(b"\n", end)
    if newline < 0:
        raise BenchError(f"{source}: PLY header is truncated after 'end_header'; "
                         "re-export the file")
    lines = head[:end].decode("ascii", errors="replace").splitlines()[1:]
    fmt, comments = None, []
    elements: list[tuple[str, int, list[tuple[str, str]]]] = []  # (name, count, [(name, code)])
    for raw in lines:
        words = raw.split()
        if not words or words[0] in ("obj_info",):
            continue
        if words[0] == "comment":
            comments.append(raw.strip()[len("comment"):].strip())
        elif words[0] == "format":
            if len(words) < 2 or words[1] not in FORMATS:
                raise BenchError(f"{source}: unsupported PLY format line {raw.strip()!r}; "
                                 "expected binary_little_endian, binary_big_endian or ascii")
            fmt = FORMATS[words[1]]
        elif words[0] == "element":
            if len(words) != 3 or not words[2].isdigit():
                raise BenchError(f"{source}: malformed PLY header line {raw.strip()!r}; {REEXPORT}")
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property":
            if not elements:
                raise BenchError(f"{source}: PLY property before any element: {raw.strip()!r}; "
                                 f"{REEXPORT}")
            name, count, props = elements[-1]
            if len(words) >= 2 and words[1] == "list":
                if name == "vertex":
                    raise BenchError(f"{source}: vertex list property {words[-1]!r} is not "
                                     "supported in a Gaussian PLY; re-export without it")
                props.append((words[-1], "list"))
                continue
            if len(words) != 3 or words[1] not in PLY_TYPES:
                raise BenchError(f"{source}: unsupported PLY property line {raw.strip()!r}; "
                                 f"{REEXPORT}")
            props.append((words[2], PLY_TYPES[words[1]]))
        else:
            raise BenchError(f"{source}: unexpected PLY header line {raw.strip()!r}; {REEXPORT}")
    if fmt is None:
        raise BenchError(f"{source}: PLY header has no 'format' line; the file is damaged")
    vertex_at = [i for i, e in enumerate(elements) if e[0] == "vertex"]
    if not vertex_at:
        raise BenchError(f"{source}: PLY file has no 'vertex' element; not a Gaussian splat file")
    if any(count > 0 for _, count, _ in elements[: vertex_at[0]]):
        raise BenchError(f"{source}: the 'vertex' element must come first in the PLY file; "
                         f"{REEXPORT}")
    _, num, vertex_props = elements[vertex_at[0]]
    properties, offset = [], 0
    seen = set()
    for name, code in vertex_props:
        if name in seen:
            raise BenchError(f"{source}: vertex property {name!r} appears twice in the PLY header; "
                             f"{REEXPORT}")
        seen.add(name)
        properties.append(PlyProperty(name, code, offset))
        offset += int(code[1])
    return PlyHeader(fmt, num, tuple(properties), offset, newline + 1, tuple(comments))


def _check_required(header: PlyHeader, source: str) -> int:
    """Validate the property set; returns K (rest coefficients per channel)."""
    names = set(header.names())
    missing = [n for group in CORE_GROUPS.values() for n in group if n not in names]
    if missing:
        raise BenchError(f"{source}: missing required vertex properties {', '.join(missing)}; "
                         "expected the 3DGS layout (x y z f_dc_* opacity scale_* rot_*)")
    rest = header.sh_rest_count()
    if rest not in VALID_REST_COUNTS:
        raise BenchError(f"{source}: {rest} f_rest_* properties; expected 0, 9, 24 or 45 "
                         "(SH degree 0-3); re-export with a supported SH degree")
    absent = [f"f_rest_{i}" for i in range(rest) if f"f_rest_{i}" not in names]
    if absent:
        raise BenchError(f"{source}: f_rest_* properties are not numbered 0..{rest - 1} "
                         f"(missing {absent[0]}); the file is damaged")
    return rest // 3


def _extra_names(header: PlyHeader) -> list[str]:
    standard = {n for group in CORE_GROUPS.values() for n in group}
    return [p.name for p in header.properties
            if p.name not in standard and not p.name.startswith("f_rest_")]


# ------------------------------------------------------------------ decoding
def _column_view(body: np.ndarray, header: PlyHeader, prop: PlyProperty) -> np.ndarray:  # [N]
    dtype = np.dtype(header.fmt + prop.code)
    return np.ndarray(shape=(header.num_vertices,), dtype=dtype, buffer=body,
                      offset=prop.offset, strides=(header.row_bytes,))


def _copy_group(body: np.ndarray, header: PlyHeader, names: tuple[str, ...],
                out: np.ndarray) -> None:
    """Copy properties ``names`` of every row in ``body`` into ``out`` [n, len(names)]."""
    props = header.by_name()
    first = props[names[0]]
    size = int(first.code[1])
    contiguous = all(
        props[n].code == first.code and props[n].offset == first.offset + i * size
        for i, n in enumerate(names)
    )
    if contiguous:  # one strided view over the whole group, one copy
        view = np.ndarray(shape=(header.num_vertices, len(names)),
                          dtype=np.dtype(header.fmt + first.code), buffer=body,
                          offset=first.offset, strides=(header.row_bytes, size))
        np.copyto(out, view, casting="unsafe")
        return
    for i, name in enumerate(names):
        np.copyto(out[:, i], _column_view(body, header, props[name]), casting="unsafe")


def _copy_sh_rest(body: np.ndarray, header: PlyHeader, out: np.ndarray) -> None:  # [n, K, 3]
    k = out.shape[1]
    if k == 0:
        return
    names = tuple(f"f_rest_{i}" for i in range(3 * k))
    props = header.by_name()
    first = props[names[0]]
    contiguous = all(props[nm].code == "f4" and props[nm].offset == first.offset + 4 * i
                     for i, nm in enumerate(names))
    if contiguous:  # read channel-major [n, 3, K] as [n, K, 3] straight from the buffer
        view = np.ndarray(shape=(header.num_vertices, k, 3), dtype=np.dtype(header.fmt + "f4"),
                          buffer=body, offset=first.offset,
                          strides=(header.row_bytes, 4, 4 * k))
        np.copyto(out, view, casting="unsafe")
        return
    for c in range(3):
        _copy_group(body, header, names[c * k:(c + 1) * k], out[:, :, c])


def _allocate(header: PlyHeader, k: int) -> dict[str, np.ndarray]:
    n = header.num_vertices
    arrays = {name: np.empty((n, len(cols)), dtype=np.float32)
              for name, cols in CORE_GROUPS.items()}
    arrays["sh_rest"] = np.empty((n, k, 3), dtype=np.float32)
    props = header.by_name()
    arrays.update({f"extra:{name}": np.empty(n, dtype=np.dtype(props[name].code))
                   for name in _extra_names(header)})
    return arrays


def _decode_into(body: np.ndarray, header: PlyHeader, arrays: dict[str, np.ndarray],
                 rows: slice) -> None:
    """Decode the rows held in ``body`` into ``arrays[...][rows]``."""
    if header.num_vertices == 0:
        return
    for name, cols in CORE_GROUPS.items():
        _copy_group(body, header, cols, arrays[name][rows])
    _copy_sh_rest(body, header, arrays["sh_rest"][rows])
    props = header.by_name()
    for key, arr in arrays.items():
        if key.startswith("extra:"):
            np.copyto(arr[rows], _column_view(body, header, props[key[6:]]), casting="unsafe")


def _assemble(arrays: dict[str, np.ndarray]) -> GaussianSplats:
    return GaussianSplats(
        means=arrays["means"], quats=arrays["quats"], log_scales=arrays["log_scales"],
        opacity_logits=arrays["opacity_logits"][:, 0], sh_dc=arrays["sh_dc"],
        sh_rest=arrays["sh_rest"],
        extra={key[6:]: arr for key, arr in arrays.items() if key.startswith("extra:")})


def decode_vertices(body: np.ndarray,  # [num_vertices * row_bytes] uint8
                    header: PlyHeader, *, source: str = "PLY") -> GaussianSplats:
    """Fast path: binary vertex block -> GaussianSplats via one strided view per group.

    Args:
        body: uint8 array holding at least ``num_vertices * row_bytes`` bytes.
        header: The parsed header (binary format).
        source: Name used in error messages.
    """
    k = _check_required(header, source)
    arrays = _allocate(header, k)
    _decode_into(body, header, arrays, slice(0, header.num_vertices))
    return _assemble(arrays)


def _read_binary_chunked(handle, header: PlyHeader, k: int, source: str,
                         chunk_bytes: int) -> GaussianSplats:
    """Stream the vertex block through one small buffer into the output arrays.

    Peak memory is the output arrays plus one chunk, instead of a second full
    copy of the file.
    """
    arrays = _allocate(header, k)
    n, row = header.num_vertices, header.row_bytes
    chunk_rows = max(1, chunk_bytes // max(row, 1))
    buffer = np.empty(chunk_rows * row, dtype=np.uint8)
    handle.seek(header.body_offset)
    for start in range(0, n, chunk_rows):
        rows = min(chunk_rows, n - start)
        view = memoryview(buffer)[: rows * row]
        got = handle.readinto(view)
        if got != rows * row:  # the size check passed, so the file shrank while reading
            raise BenchError(f"{source}: truncated PLY while reading vertex {start + got // row}")
        part = PlyHeader(header.fmt, rows, header.properties, row, 0, header.comments)
        _decode_into(buffer, part, arrays, slice(start, start + rows))
    return _assemble(arrays)


def decode_vertices_reference(body: np.ndarray,  # [num_vertices * row_bytes] uint8
                              header: PlyHeader) -> GaussianSplats:
    """Plain reference decoder: a structured dtype and one field copy per property."""
    k = _check_required(header, "PLY")
    dtype = np.dtype({"names": header.names(),
                      "formats": [header.fmt + p.code for p in header.properties],
                      "offsets": [p.offset for p in header.properties],
                      "itemsize": header.row_bytes})
    rows = np.frombuffer(body, dtype=dtype, count=header.num_vertices)

    def stack(names):
        return np.stack([rows[n].astype(np.float32) for n in names], axis=1)

    n = header.num_vertices
    rest = stack([f"f_rest_{i}" for i in range(3 * k)]) if k else np.zeros((n, 0), np.float32)
    props = header.by_name()
    return GaussianSplats(
        means=stack(CORE_GROUPS["means"]),
        quats=stack(CORE_GROUPS["quats"]),
        log_scales=stack(CORE_GROUPS["log_scales"]),
        opacity_logits=rows["opacity"].astype(np.float32),
        sh_dc=stack(CORE_GROUPS["sh_dc"]),
        sh_rest=rest.reshape(n, 3, k).transpose(0, 2, 1).copy(),
        extra={nm: rows[nm].astype(props[nm].code) for nm in _extra_names(header)},
    )


def _ascii_to_binary(data: np.ndarray, header: PlyHeader, source: str) -> np.ndarray:
    """Parse an ASCII vertex block into a little-endian binary block (same layout)."""
    n, p = header.num_vertices, len(header.properties)
    lines = bytes(data[header.body_offset:]).split(b"\n")
    rows = [line for line in lines if line.strip()][:n]
    if len(rows) < n:
        raise BenchError(f"{source}: truncated ASCII PLY: {len(rows)} of {n} vertex lines; "
                         "the file is incomplete (re-export or re-copy it)")
    try:
        table = np.array(b" ".join(rows).split(), dtype=np.float64)
    except ValueError:
        raise BenchError(f"{source}: ASCII PLY vertex data contains a non-number") from None
    if table.size != n * p:
        raise BenchError(f"{source}: ASCII PLY vertex lines do not all have {p} values")
    table = table.reshape(n, p)
    dtype = np.dtype({"names": header.names(),
                      "formats": ["<" + q.code for q in header.properties],
                      "offsets": [q.offset for q in header.properties],
                      "itemsize": header.row_bytes})
    out = np.zeros(n, dtype=dtype)
    for i, prop in enumerate(header.properties):
        out[prop.name] = table[:, i]
    return out.view(np.uint8).reshape(-1)


# ------------------------------------------------------------------ reading
def read_ply_header(path: str | os.PathLike) -> PlyHeader:
    """Parse only the header of a PLY file (cheap: reads at most 1 MiB)."""
    path = Path(path)
    if not path.exists():
        raise BenchError(f"file not found: {path}; check the path")
    with open(path, "rb") as handle:
        head = read_head(handle)
    header = parse_header(head, source=str(path))
    _check_required(header, str(path))
    return header


def read_ply(path: str | os.PathLike, *, drop_nonfinite: bool = False,
             chunk_bytes: int = 8 << 20) -> GaussianSplats:
    """Read a 3DGS PLY file into a :class:`GaussianSplats` (storage convention).

    Args:
        path: A ``.ply`` file (binary little/big-endian or ASCII).
        drop_nonfinite: Drop Gaussians with NaN/Inf in any core property instead
            of raising.
        chunk_bytes: Size of the read buffer for binary files (memory beyond
            the output arrays).

    Returns:
        The Gaussians; properties outside the 3DGS layout (and ``nx, ny, nz``)
        are in ``extra``.

    Raises:
        BenchError: Missing or truncated file, wrong header, missing required
            properties, an f_rest count other than 0/9/24/45, or NaN/Inf values
            (unless ``drop_nonfinite``).
    """
    path = Path(path)
    source = str(path)
    if not path.exists():
        raise BenchError(f"file not found: {path}; check the path")
    if path.is_dir():
        raise BenchError(f"{path} is a directory, expected a .ply file")
    size = path.stat().st_size
    if size == 0:
        raise BenchError(f"{source}: empty file; re-export or re-copy the PLY")
    with open(path, "rb") as handle:
        head = read_head(handle)
        header = parse_header(head, source=source)
        k = _check_required(header, source)
        if header.fmt == "ascii":
            data = np.frombuffer(head + handle.read(), dtype=np.uint8)
            body = _ascii_to_binary(data, header, source)
            header = PlyHeader("<", header.num_vertices, header.properties, header.row_bytes, 0,
                               header.comments)
            splats = decode_vertices(body, header, source=source)
        else:
            need = header.num_vertices * header.row_bytes
            have = size - header.body_offset
            if have < need:
                raise BenchError(f"{source}: truncated PLY: header promises "
                                 f"{header.num_vertices} vertices ({need} bytes) but only "
                                 f"{have} bytes follow; the file is incomplete "
                                 "(re-export or re-copy it)")
            splats = _read_binary_chunked(handle, header, k, source, chunk_bytes)
    return check_finite(splats, drop_nonfinite=drop_nonfinite, source=source)


#: |log scale| above this (scale outside [1e-13, 1e13] file units) is a broken export, not data.
MAX_ABS_LOG_SCALE = 30.0


def check_finite(splats: GaussianSplats, *, drop_nonfinite: bool, source: str) -> GaussianSplats:
    """Raise on NaN/Inf or degenerate Gaussians, or drop them when ``drop_nonfinite``.

    Degenerate: a zero-norm rotation quaternion (no orientation) or a log scale
    beyond :data:`MAX_ABS_LOG_SCALE` (e.g. scale 1e30), which no renderer can draw.
    """
    nonfinite = splats.nonfinite_mask()
    with np.errstate(invalid="ignore", over="ignore"):
        zero_quat = ~(np.abs(splats.quats) > 0).any(axis=1) & ~nonfinite
        huge = (np.abs(splats.log_scales) > MAX_ABS_LOG_SCALE).any(axis=1) & ~nonfinite
    bad = int(nonfinite.sum())
    degenerate = zero_quat | huge
    if bad == 0 and not degenerate.any():
        return splats
    if not drop_nonfinite:
        if bad:
            raise BenchError(f"{source}: {bad} of {len(splats)} Gaussians have NaN/Inf values; "
                             "pass --drop-nonfinite (drop_nonfinite=True) to drop them")
        raise BenchError(
            f"{source}: {int(zero_quat.sum())} of {len(splats)} Gaussians have zero rotation "
            f"quaternions (rot_0..3 all 0) and {int(huge.sum())} have scales outside "
            f"[1e-13, 1e13] (|scale_i| > {MAX_ABS_LOG_SCALE:g} in log space); fix the export or "
            "pass --drop-nonfinite (drop_nonfinite=True) to drop them")
    return splats.subset(~(nonfinite | degenerate))


# ------------------------------------------------------------------ writing
def ply_layout(splats: GaussianSplats, *, normals: bool = True) -> list[tuple[str, str]]:
    """Property (name, numpy code) list of the file :func:`write_ply` produces."""
    k = splats.sh_rest.shape[1]
    layout = [(n, "f4") for n in CORE_GROUPS["means"]]
    if normals:
        layout += [(n, "f4") for n in NORMALS]
    layout += [(n, "f4") for n in CORE_GROUPS["sh_dc"]]
    layout += [(f"f_rest_{i}", "f4") for i in range(3 * k)]
    layout += [(n, "f4") for n in ("opacity", *CORE_GROUPS["log_scales"], *CORE_GROUPS["quats"])]
    for name, arr in splats.extra.items():
        if name in NORMALS:
            continue
        code = arr.dtype.kind + str(arr.dtype.itemsize)
        if code not in PLY_NAMES:
            raise BenchError(f"extra property {name!r} has dtype {arr.dtype}, which PLY "
                             "cannot store; cast it to a 1-, 2-, 4- or 8-byte number")
        layout.append((name, code))
    return layout


def _ply_head(layout: list[tuple[str, str]], n: int, comments: tuple[str, ...] = ()) -> bytes:
    lines = ["ply", "format binary_little_endian 1.0"]
    lines += [f"comment {c}" for c in comments]
    lines.append(f"element vertex {n}")
    lines += [f"property {PLY_NAMES[code]} {name}" for name, code in layout]
    return ("\n".join(lines) + "\nend_header\n").encode("ascii")


def _encode_rows(splats: GaussianSplats, layout: list[tuple[str, str]], rows: slice,
                 buf: np.ndarray, *, normals: bool) -> None:
    """Fill ``buf`` (uint8, exactly the rows' bytes) with vertex rows ``rows`` of ``splats``."""
    n = rows.stop - rows.start
    if n == 0:  # no vertex block: views into it would start past the buffer
        return
    row = sum(int(code[1]) for _, code in layout)
    offsets, at = {}, 0
    for name, code in layout:
        offsets[name] = at
        at += int(code[1])

    def block(first: str, width: int) -> np.ndarray:  # writable [n, width] view into buf
        return np.ndarray(shape=(n, width), dtype="<f4", buffer=buf, offset=offsets[first],
                          strides=(row, 4))

    block("x", 3)[...] = splats.means[rows]
    if normals and all(nm in splats.extra for nm in NORMALS):
        normal = block("nx", 3)
        for i, nm in enumerate(NORMALS):
            normal[:, i] = splats.extra[nm][rows]
    block("f_dc_0", 3)[...] = splats.sh_dc[rows]
    k = splats.sh_rest.shape[1]
    if k:  # [N, K, 3] -> channel-major f_rest, written through a transposed view
        rest = np.ndarray(shape=(n, k, 3), dtype="<f4", buffer=buf, offset=offsets["f_rest_0"],
                          strides=(row, 4, 4 * k))
        rest[...] = splats.sh_rest[rows]
    block("opacity", 1)[:, 0] = splats.opacity_logits[rows]
    block("scale_0", 3)[...] = splats.log_scales[rows]
    block("rot_0", 4)[...] = splats.quats[rows]
    for name, code in layout:
        if name in splats.extra and name not in NORMALS:
            view = np.ndarray(shape=(n,), dtype="<" + code, buffer=buf, offset=offsets[name],
                              strides=(row,))
            view[...] = splats.extra[name][rows]


def encode_ply(splats: GaussianSplats, *, normals: bool = True,
               comments: tuple[str, ...] = ()) -> np.ndarray:  # [file bytes] uint8
    """Encode as a binary little-endian PLY; returns the whole file as a uint8 array.

    Args:
        splats: The Gaussians.
        normals: Write ``nx ny nz`` (from ``extra`` if present, else zeros).
        comments: Header comment lines.
    """
    layout = ply_layout(splats, normals=normals)
    n = len(splats)
    head = _ply_head(layout, n, comments)
    row = sum(int(code[1]) for _, code in layout)
    buf = np.zeros(len(head) + n * row, dtype=np.uint8)
    buf[: len(head)] = np.frombuffer(head, dtype=np.uint8)
    _encode_rows(splats, layout, slice(0, n), buf[len(head):], normals=normals)
    return buf


#: Rows per chunk of :func:`iter_ply_chunks` (~16 MiB at SH degree 3).
WRITE_CHUNK_ROWS = 65536


def iter_ply_chunks(splats: GaussianSplats, *, normals: bool = True,
                    comments: tuple[str, ...] = (),
                    chunk_rows: int = WRITE_CHUNK_ROWS) -> Iterator[np.ndarray]:
    """The bytes of :func:`encode_ply`, as the header then blocks of ``chunk_rows`` rows.

    One reused chunk buffer (yielded; consume it before the next step), so
    writing needs ``chunk_rows`` rows of memory instead of the whole file.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    layout = ply_layout(splats, normals=normals)
    n = len(splats)
    yield np.frombuffer(_ply_head(layout, n, comments), dtype=np.uint8)
    row = sum(int(code[1]) for _, code in layout)
    buf = np.zeros(min(chunk_rows, max(n, 1)) * row, dtype=np.uint8)
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        part = buf[: (stop - start) * row]
        part[...] = 0  # normals absent from extra are zeros, as in encode_ply
        _encode_rows(splats, layout, slice(start, stop), part, normals=normals)
        yield part


def encode_ply_reference(splats: GaussianSplats, *, normals: bool = True) -> bytes:
    """Plain reference of :func:`encode_ply`: a structured array filled property by property."""
    layout = ply_layout(splats, normals=normals)
    n, k = len(splats), splats.sh_rest.shape[1]
    rows = np.zeros(n, dtype=[(name, "<" + code) for name, code in layout])
    columns = {"x": splats.means[:, 0], "y": splats.means[:, 1], "z": splats.means[:, 2],
               "opacity": splats.opacity_logits, **splats.extra}
    for i in range(3):
        columns[f"f_dc_{i}"] = splats.sh_dc[:, i]
        columns[f"scale_{i}"] = splats.log_scales[:, i]
    for i in range(4):
        columns[f"rot_{i}"] = splats.quats[:, i]
    for c in range(3):
        for j in range(k):
            columns[f"f_rest_{c * k + j}"] = splats.sh_rest[:, j, c]
    for name, _ in layout:
        if name in columns:  # normals absent from extra stay zero
            rows[name] = columns[name]
    lines = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    lines += [f"property {PLY_NAMES[code]} {name}" for name, code in layout]
    return ("\n".join(lines) + "\nend_header\n").encode("ascii") + rows.tobytes()


def write_ply(path: str | os.PathLike, splats: GaussianSplats, *, normals: bool = True,
              chunk_rows: int | None = None) -> None:
    """Write a binary little-endian 3DGS PLY atomically (temp file + rename).

    The rows are encoded and written ``chunk_rows`` at a time
    (:func:`iter_ply_chunks`; same bytes as :func:`encode_ply`), so a 3 M-Gaussian
    file costs one ~16 MiB buffer instead of a second copy of the scene.

    Args:
        path: Destination ``.ply``.
        splats: The Gaussians (storage convention).
        normals: Include ``nx ny nz`` (zeros unless present in ``extra``), as
            the INRIA trainer writes them.
        chunk_rows: Vertex rows encoded per write (None: :data:`WRITE_CHUNK_ROWS`).
    """
    rows = WRITE_CHUNK_ROWS if chunk_rows is None else chunk_rows
    atomic_write_chunks(path, iter_ply_chunks(splats, normals=normals, chunk_rows=rows))


# ------------------------------------------------------------------ .splat
SPLAT_ROW = np.dtype([("position", "<f4", 3), ("scale", "<f4", 3),
                      ("rgba", "u1", 4), ("rot", "u1", 4)])  # antimatter15 32-byte rows


def read_splat(path: str | os.PathLike, *, drop_nonfinite: bool = False) -> GaussianSplats:
    """Read an antimatter15 ``.splat`` file (32 bytes per Gaussian, SH degree 0).

    The format has no header (the first bytes are the first position's float32 x),
    so it is only ever recognised by its ``.splat`` suffix (see
    :func:`bench.scene.formats.scan_format`). The format stores linear scales,
    8-bit RGBA and an 8-bit quaternion ``q * 128 + 128``, so values are quantised;
    opacity 0/255 are clipped to 1/255 and 254/255 before the logit so that they
    stay finite.
    """
    path = Path(path)
    if not path.exists():
        raise BenchError(f"scan file {path} not found; check the path")
    if not path.is_file():
        raise BenchError(f"{path} is not a file; pass the .splat file itself")
    data = np.fromfile(path, dtype=np.uint8)
    if data.size == 0 or data.size % SPLAT_ROW.itemsize:
        head = bytes(data[:4])
        looks = (" (it starts like a PLY: name it .ply)" if head[:3] == b"ply" else
                 " (it starts like an .spz: name it .spz)" if head[:2] == b"\x1f\x8b"
                 or head == b"NGSP" else "")
        raise BenchError(f"{path}: size {data.size} bytes is not a positive multiple of 32, so "
                         f"not an antimatter15 .splat file (or a truncated one){looks}; "
                         "re-export or re-copy the .splat")
    rows = data.view(SPLAT_ROW)
    rgba = rows["rgba"].astype(np.float32) / 255.0
    alpha = np.clip(rgba[:, 3], 1.0 / 255.0, 254.0 / 255.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # scale <= 0: caught by check_finite
        log_scales = np.log(rows["scale"]).astype(np.float32)
    splats = GaussianSplats(
        means=rows["position"].astype(np.float32),
        quats=((rows["rot"].astype(np.float32) - 128.0) / 128.0),
        log_scales=log_scales,
        opacity_logits=np.log(alpha / (1.0 - alpha)).astype(np.float32),
        sh_dc=((rgba[:, :3] - 0.5) / SH_C0).astype(np.float32),
        sh_rest=np.zeros((len(rows), 0, 3), dtype=np.float32),
    )
    return check_finite(splats, drop_nonfinite=drop_nonfinite, source=str(path))


def stored_count(path: str | os.PathLike) -> int:
    """Number of Gaussians a ``.ply`` (header) or ``.splat`` (file size) file stores.

    Cheap (the body is not read); used to report how many Gaussians
    ``drop_nonfinite`` removed.
    """
    path = Path(path)
    if path.suffix.lower() == ".splat":
        return path.stat().st_size // SPLAT_ROW.itemsize
    return read_ply_header(path).num_vertices


def read_gaussians(path: str | os.PathLike, *, drop_nonfinite: bool = False) -> GaussianSplats:
    """Read a ``.ply`` or ``.splat`` file, chosen by suffix."""
    path = Path(path)
    if path.suffix.lower() == ".splat":
        return read_splat(path, drop_nonfinite=drop_nonfinite)
    return read_ply(path, drop_nonfinite=drop_nonfinite)


def write_point_ply(path: Path, points: np.ndarray, colours: np.ndarray) -> None:
    """A binary little-endian PLY of ``x y z red green blue`` (points [N, 3], colours [N, 3]).

    A capture's seed point cloud (simulated captures and ``bench capture import-rgbd``), which
    :mod:`bench.recon.train` initialises from.
    """
    header = ("ply\nformat binary_little_endian 1.0\n"
              f"element vertex {len(points)}\n"
              "property float x\nproperty float y\nproperty float z\n"
              "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n")
    rows = np.zeros(len(points), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                        ("red", "u1"), ("green", "u1"), ("blue", "u1")])
    for k, name in enumerate("xyz"):
        rows[name] = points[:, k]
    for k, name in enumerate(("red", "green", "blue")):
        rows[name] = colours[:, k]
    atomic_write_bytes(path, header.encode("ascii") + rows.tobytes())
