"""Provenance helpers: sha256, atomic writes and JSON manifests.

Every artifact the bench writes goes through :func:`atomic_write_bytes` (write
to a temp file in the destination directory, fsync, rename) so that a failure
never leaves a half-written file, and gets a manifest built by
:func:`make_manifest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import __version__
from bench.errors import BenchError


def sha256_file(path: str | os.PathLike, *, chunk_bytes: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in chunks (works for multi-GB PLYs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of a bytes object."""
    return hashlib.sha256(data).hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file + rename (never half-written)."""
    atomic_write_chunks(path, (data,))


def atomic_write_chunks(path: str | os.PathLike, chunks: Iterable[Any]) -> None:
    """Write the bytes-like ``chunks`` one after another to ``path``, atomically.

    Like :func:`atomic_write_bytes` (temp file + fsync + rename), for outputs
    produced piece by piece (e.g. a large PLY encoded in row chunks), so the whole
    file never has to sit in memory.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; follow the umask like open()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | os.PathLike, *, what: str, fix: str) -> Any:
    """Read a JSON file; a missing or malformed file raises a one-line error.

    Args:
        path: The file.
        what: What the file is, for the message (e.g. ``"coverage plan"``).
        fix: How the user repairs it (e.g. ``"recreate it with `bench coverage plan`"``).

    Raises:
        FileNotFoundError: ``path`` is not a file.
        BenchError: The file is not UTF-8 JSON.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist; {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchError(
            f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno}); {fix}"
        ) from None
    except UnicodeDecodeError:
        raise BenchError(f"{what} {path} is not valid JSON (not UTF-8 text); {fix}") from None


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, paths and dataclasses into plain JSON values."""
    import dataclasses

    import numpy as np

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically (deterministic bytes)."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def make_manifest(
    *,
    tool: str,
    params: dict[str, Any],
    seed: int | None,
    inputs: dict[str, str | os.PathLike] | None = None,
    outputs: dict[str, str | os.PathLike] | None = None,
    counts: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a manifest dict: tool id + version, params, seed, sha256 of files, counts.

    Args:
        tool: Tool id with its version, e.g. ``"hole/1"``.
        params: Resolved parameters (JSON-able).
        seed: Seed of the ``numpy.random.Generator`` used, or None if not stochastic.
        inputs: Name -> path of input files; each is hashed.
        outputs: Name -> path of output files; each is hashed.
        counts: Integer counts (removed / added / moved ...).
        extra: Any further JSON-able fields.

    Returns:
        A JSON-able dict. No wall-clock time is stored, so manifests are byte-stable.
    """
    manifest: dict[str, Any] = {
        "tool": tool,
        "bench_version": __version__,
        "params": to_jsonable(params),
        "seed": seed,
        "inputs": _hashed(inputs),
        "outputs": _hashed(outputs),
        "counts": to_jsonable(counts or {}),
    }
    if extra:
        manifest.update(to_jsonable(extra))
    return manifest


def _hashed(paths: dict[str, str | os.PathLike] | None) -> dict[str, dict[str, str]]:
    return {k: {"path": Path(p).name, "sha256": sha256_file(p)} for k, p in (paths or {}).items()}


@contextmanager
def staged_output_dir(out_dir: str | os.PathLike, *, overwrite: bool,
                      inputs: Iterable[Any] | None = (),
                      flag: str = "--out",
                      owned_files: Callable[[Path], Iterable[str]] | None = None
                      ) -> Iterator[Path]:
    """Yield a temp directory next to ``out_dir``; move it into place on success.

    The safety rules of :mod:`bench.safety` are enforced here, so every command
    inherits them: ``out_dir`` may not equal, contain or lie inside any of
    ``inputs`` (links resolved); an existing ``out_dir`` is refused unless
    ``overwrite``, and even then it is replaced only if the bench wrote it (it
    carries the ownership marker :data:`bench.safety.MARKER`, which this function
    writes into every directory it stages). On any exception the temp directory
    is removed and ``out_dir`` is left as it was.

    The move is recoverable at every instant (:mod:`bench.swap`): a run killed
    mid-swap is rolled back by the next command that touches ``out_dir`` (this
    function, :func:`bench.safety.preflight_output_dir`, the bundle loader), which
    also deletes the staging folders of killed runs.

    Args:
        out_dir: The output directory.
        overwrite: Replace an existing bench output directory.
        inputs: Every path the command reads (files or directories; or ``(flag, path)``).
        flag: The option that named ``out_dir``, for messages.
        owned_files: An in-place write (``out_dir`` is also what the command read):
            a function giving the relative paths of the files the bench owns in the
            existing ``out_dir`` (e.g. :func:`bench.scene.bundle.bundle_owned_files`).
            Only those are replaced or removed; every other file (the user's) is kept
            untouched. None replaces the whole directory.
    """
    from bench import safety, swap

    out_dir = safety.preflight_output_dir(out_dir, overwrite=overwrite, inputs=inputs, flag=flag)
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp, lock = swap.new_staging(out_dir)  # the marker inside is held while we work
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700; follow the umask like mkdir
        swap.install(tmp, out_dir, owned_files=owned_files,
                     check=lambda out: safety.check_replaceable(out, inputs=inputs, flag=flag))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(lock)
