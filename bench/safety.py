"""The safe-path layer: what a command may write, delete, read and call a name.

Rules (documented for users in ``docs/safety.md``):

* **Outputs never touch inputs.** An output directory (or file) is never equal
  to, a parent of, or inside any input of the command, compared after
  resolving symbolic links (:func:`check_output_path`).
* **``--overwrite`` removes only what the bench wrote.** Every directory made by
  :func:`bench.provenance.staged_output_dir` carries the ownership marker
  :data:`MARKER`; an existing directory is replaced only when it carries that
  marker (or a bench ``manifest.json`` from before the marker existed) and
  contains no input (:func:`check_replaceable`).
* **Writes cannot lose data.** Replacing an output is a journaled swap that the next
  command rolls back if it was killed half-way; an in-place write replaces only the
  files the bench owns; staging folders of killed runs are deleted by the next write
  (:mod:`bench.swap`, run from :func:`preflight_output_dir`).
* **Names used as path parts** (scene, condition, task, policy, study, camera)
  match :data:`NAME_PATTERN` (:func:`check_name`).
* **Bundles are closed.** A path read from a bundle's files resolves inside the
  bundle root (or an explicit allow-list of roots); absolute paths are refused
  unless the caller allows them; symbolic links leaving the bundle are refused
  (:func:`resolve_inside`, :func:`copy_tree_closed`).

Everything here is standard library only, so every subsystem can import it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.marker import MARKER, MARKER_FORMAT, is_bench_output, marker_json  # noqa: F401

#: What a name used as a path part must match: a letter or digit, then letters, digits, ``._-``.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_RULE = "[A-Za-z0-9][A-Za-z0-9._-]*"
#: Longest accepted name (a path component is at most 255 bytes on common file systems).
MAX_NAME_LENGTH = 128


# --------------------------------------------------------------------------- names


def check_name(value: Any, *, what: str) -> str:
    """Return ``value`` if it is a safe path-part name, else raise a one-line error.

    Args:
        value: The name (must be a ``str``).
        what: What it names, for the message (e.g. ``"scene name"``).

    Raises:
        BenchError: Not a string, empty, too long, or not matching :data:`NAME_PATTERN`.
    """
    if not isinstance(value, str):
        raise BenchError(f"{what} must be a string matching {NAME_RULE}, got "
                         f"{type(value).__name__} {value!r:.60}")
    if len(value) > MAX_NAME_LENGTH:
        raise BenchError(f"{what} {value[:40]!r}... is {len(value)} characters; use at most "
                         f"{MAX_NAME_LENGTH}")
    if NAME_PATTERN.fullmatch(value) is None or value in (".", ".."):
        raise BenchError(f"{what} {value!r:.80} is not a safe name: it must match {NAME_RULE} "
                         "(letters, digits, '.', '_', '-'; no slashes, no leading dot); rename it")
    return value


# --------------------------------------------------------------------------- paths


def real(path: str | os.PathLike) -> Path:
    """``path`` made absolute with every symbolic link resolved (it need not exist)."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def is_within(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether ``path`` equals ``root`` or lies below it, after resolving links."""
    return real(path).is_relative_to(real(root))


def _input_list(inputs: Iterable[Any] | None) -> list[tuple[str, Path]]:
    """(label, path) of every given input; an entry is a path or a ``(flag, path)`` pair."""
    out = []
    for item in inputs or ():
        label, path = item if isinstance(item, tuple) else ("", item)
        if path is not None and os.fspath(path) != "":
            out.append((label, Path(path)))
    return out


def check_output_path(out: str | os.PathLike, *, inputs: Iterable[Any] | None = (),
                      flag: str = "--out") -> Path:
    """Refuse an output that equals, contains or lies inside one of ``inputs``.

    Args:
        out: The output directory or file.
        inputs: Every path the command reads (files or directories; None entries
            skipped); an entry may be a ``(flag, path)`` pair so the message names the flag.
        flag: The option that named ``out``, for the message.

    Returns:
        ``out`` as a Path.

    Raises:
        BenchError: The output and an input overlap.
    """
    out = Path(out)
    if os.fspath(out) == "":
        raise BenchError(f"{flag} is empty; name an output path")
    target = real(out)
    for label, given in _input_list(inputs):
        source = real(given)
        name = f"the input {label} {given}" if label else f"the input {given}"
        if target == source:
            raise BenchError(f"{flag} must differ from {label or 'every input'}: {out} is "
                             f"{name} (it would be replaced); choose a new output path")
        if source.is_relative_to(target):
            raise BenchError(f"{flag} {out} contains {name}; choose an output path outside "
                             "every input (it could be replaced or deleted)")
        if target.is_relative_to(source):
            raise BenchError(f"{flag} {out} lies inside {name}; choose an output path outside "
                             "every input (the input must stay unchanged)")
    return out


def check_parents(out: str | os.PathLike, *, flag: str = "--out") -> None:
    """Refuse an output whose nearest existing ancestor is a file (nothing could be created)."""
    out = Path(out)
    for parent in (out.parent, *out.parent.parents):
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise BenchError(f"{flag} {out}: {parent} is a file, not a directory; choose "
                                 f"another {flag}")
            return


def preflight_output_dir(out: str | os.PathLike, *, overwrite: bool,
                         inputs: Iterable[Any] | None = (),
                         flag: str = "--out") -> Path:
    """Every refusal :func:`bench.provenance.staged_output_dir` makes, without writing.

    Commands call it before expensive work so a refused ``--out`` fails at once. It
    first finishes what killed runs left next to ``out`` (:func:`bench.swap.recover`:
    an interrupted swap is rolled back, dead staging folders are deleted), the only
    writes it makes.

    Raises:
        BenchError: ``out`` overlaps an input, is a file, exists without ``overwrite``,
            or exists with ``overwrite`` but is not a bench output.
    """
    out = check_output_path(out, inputs=inputs, flag=flag)
    from bench.swap import recover

    recover(out)  # roll back a swap killed mid-way; delete staging folders of killed runs
    if out.is_symlink() or out.exists():
        if not out.is_symlink() and not out.is_dir():
            raise BenchError(f"output path {out} is a file, not a directory; choose another "
                             f"{flag}")
        if not overwrite:
            raise BenchError(f"output directory {out} exists; pass --overwrite or choose "
                             f"another {flag}")
        check_replaceable(out, inputs=inputs, flag=flag)
    check_parents(out, flag=flag)
    return out


def check_output_file(out: str | os.PathLike, *, overwrite: bool,
                      inputs: Iterable[Any] | None = (),
                      flag: str = "--out") -> Path:
    """Refusals for a single output file: an input, inside an input, a directory, exists.

    Raises:
        BenchError: ``out`` overlaps an input, is a directory, or exists without ``overwrite``.
    """
    out = check_output_path(out, inputs=inputs, flag=flag)
    if out.is_dir():
        raise BenchError(f"{flag} {out} is a directory; name a file")
    if out.exists() and not overwrite:
        raise BenchError(f"{out} exists; pass --overwrite or choose another {flag}")
    check_parents(out, flag=flag)
    return out


def check_replaceable(out: str | os.PathLike, *,
                      inputs: Iterable[Any] | None = (),
                      flag: str = "--out") -> None:
    """Refuse to replace ``out`` unless the bench wrote it and it holds no input.

    Raises:
        BenchError: ``out`` is a link, not a directory, not ours, or contains an input.
    """
    out = Path(out)
    if out.is_symlink():
        raise BenchError(f"{flag} {out} is a symbolic link; pass the directory itself "
                         "(--overwrite never replaces through a link)")
    if not out.is_dir():
        raise BenchError(f"{flag} {out} is a file, not a directory; choose another {flag}")
    check_output_path(out, inputs=inputs, flag=flag)
    if not is_bench_output(out):
        raise BenchError(f"{flag} {out} exists and was not written by the bench (no {MARKER} "
                         f"or bench manifest.json); --overwrite only replaces bench outputs - "
                         f"remove it yourself or choose another {flag}")


def remove_inside(path: str | os.PathLike, root: str | os.PathLike) -> None:
    """Delete ``path`` (a staging leftover) only if it lies strictly inside ``root``."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()
        return
    if not real(path).is_relative_to(real(root)) or real(path) == real(root):
        raise BenchError(f"refusing to delete {path}: it is not inside {root}")
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


# --------------------------------------------------------------------------- closed bundles


def resolve_inside(root: str | os.PathLike, rel: Any, *, what: str,
                   allow: Iterable[str | os.PathLike] = (), allow_absolute: bool = False,
                   fix: str = "use a path relative to the bundle that stays inside it") -> Path:
    """Resolve ``rel`` (a path read from a bundle file) against ``root``, kept inside.

    Args:
        root: The bundle (or capture) root directory.
        rel: The path as written in the file; must be a non-empty string.
        what: Where it was read, for the message (e.g. ``"scene.json 'background'"``).
        allow: Further roots the path may resolve into (e.g. a capture's image root).
        allow_absolute: Accept absolute paths (still subject to the allowed roots,
            unless ``allow`` is empty and this is True: then any absolute path).
        fix: How to repair the file.

    Returns:
        The path joined to ``root`` (not resolved: callers open it as given).

    Raises:
        BenchError: Wrong type, absolute without permission, or leaving every allowed root.
    """
    if not isinstance(rel, str) or not rel:
        raise BenchError(f"{what} must be a non-empty string path, got "
                         f"{type(rel).__name__} {rel!r:.60}; {fix}")
    if "\x00" in rel:
        raise BenchError(f"{what} {rel!r:.60} contains a NUL byte; {fix}")
    candidate = Path(rel)
    if candidate.is_absolute():
        if not allow_absolute:
            raise BenchError(f"{what} {rel!r} is an absolute path; bundles are closed - {fix}")
        if not list(allow):
            return candidate
        joined = candidate
    else:
        joined = Path(root) / candidate
    roots = [Path(root), *[Path(a) for a in allow]]
    target = real(joined)
    if not any(target.is_relative_to(real(r)) for r in roots):
        raise BenchError(f"{what} {rel!r} resolves to {target}, outside {Path(root)} "
                         f"(symbolic links and '..' may not leave the bundle); {fix}")
    return joined


def check_tree_closed(source: str | os.PathLike) -> None:
    """Refuse a symbolic link under ``source`` that points outside it (or a linked ``source``).

    Raises:
        BenchError: The first such link, with where it points and the fix.
    """
    source = Path(source)
    if source.is_symlink() and not is_within(source, source.parent):
        raise BenchError(f"{source} is a symbolic link leaving its bundle; replace it with the "
                         "real folder")
    base = real(source)
    for dirpath, dirnames, filenames in os.walk(source):
        for name in dirnames + filenames:
            entry = Path(dirpath) / name
            if entry.is_symlink() and not real(entry).is_relative_to(base):
                raise BenchError(f"{entry} is a symbolic link to {os.readlink(entry)}, outside "
                                 f"the bundle folder {source}; replace it with the file itself")


def copy_tree_closed(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy a bundle folder; a symbolic link must point inside ``source`` (copied as its file).

    Raises:
        BenchError: A symbolic link under ``source`` leaves it (the copy is not started).
    """
    check_tree_closed(source)
    shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)  # links checked above


# --------------------------------------------------------------------------- sizes

#: Largest image side (pixels) and image area (pixels) any command renders or reads.
MAX_IMAGE_SIDE = 16384
MAX_IMAGE_PIXELS = 1 << 26  # 67,108,864 px = 8192 x 8192; about 1 GiB at float32 RGBA


def check_image_size(height: Any, width: Any, *, what: str) -> tuple[int, int]:
    """Refuse a non-integer, non-positive or too large image size before anything is allocated.

    Returns:
        ``(height, width)`` as ints.

    Raises:
        BenchError: The size is not two positive integers, a side exceeds
            :data:`MAX_IMAGE_SIDE`, or the area exceeds :data:`MAX_IMAGE_PIXELS`
            (the message shows the product).
    """
    for name, value in (("height", height), ("width", width)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
                or int(value) < 1:
            raise BenchError(f"{what} {name} must be a positive whole number of pixels, got "
                             f"{value!r:.40}")
    height, width = int(height), int(width)
    if max(height, width) > MAX_IMAGE_SIDE:
        raise BenchError(f"{what} {height} x {width} px: a side above {MAX_IMAGE_SIDE} px is "
                         "refused; use a smaller size")
    if height * width > MAX_IMAGE_PIXELS:
        raise BenchError(f"{what} {height} x {width} = {height * width:,} px exceeds the limit "
                         f"of {MAX_IMAGE_PIXELS:,} px (8192 x 8192); use a smaller size")
    return height, width


def check_count(value: Any, *, what: str, low: int = 0, high: int | None = None,
                fix: str = "") -> int:
    """Refuse a count that is not an integer in ``[low, high]`` (bools refused too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BenchError(f"{what} must be a whole number, got {value!r:.40}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high:,}]"
        raise BenchError(f"{what} must be {bound}, got {value:,}" + (f"; {fix}" if fix else ""))
    return value


# --------------------------------------------------------------------------- sizes (issue 30)
# Caps checked before ``--out`` exists (dry runs included); each message shows the arithmetic.

#: Most starts of one task file's grid (x count x y count x yaw count), and of any one axis.
MAX_TASK_GRID = 1_000_000
#: Longest episode time limit, 10 Hz control frames (1 hour of robot time; YUBI uses 600).
MAX_EPISODE_FRAMES = 36_000
#: Most episodes of one ``bench rollout`` / ``bench softbody rollout``.
MAX_EPISODES = 100_000
#: Most rate pairs one ``bench plan trials`` plans (``--grid``: about 100 rates; ``--pilot`` rows).
MAX_PLAN_PAIRS = 5_000
#: Most parallel study workers, and torch threads per worker (no machine has more cores).
MAX_WORKERS = 4096
MAX_THREADS_PER_WORKER = 1024
#: Most retries of a rollout whose execution failed.
MAX_RETRIES = 100
#: Most real trials of one (scene, task, policy) cell in ``real_results``.
MAX_REAL_TRIALS = 1_000_000
#: Largest message a policy server accepts: default and the largest ``--max-message-bytes``.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20  # 16 MiB: a request of five 1024 x 1024 RGB images
MAX_MESSAGE_BYTES = 1 << 30  # 1 GiB
#: ``bench scene edit --scale`` range (a unit change mm <-> km is 1e6).
MIN_EDIT_SCALE, MAX_EDIT_SCALE = 1e-6, 1e6
#: Largest world coordinate or length (metres) a scene edit may set.
MAX_WORLD_METRES = 1e6


def check_real(value: Any, *, what: str, low: float | None = None, high: float | None = None,
               low_open: bool = False, fix: str = "") -> float:
    """Refuse a non-finite number or one outside ``[low, high]`` (``(low, high]``: ``low_open``).

    Bools and strings are refused too.

    Returns:
        ``value`` as a float.
    """
    import math

    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise BenchError(f"{what} must be a finite number, got {value!r:.40}"
                         + (f"; {fix}" if fix else ""))
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        left = "(" if low_open else "["
        bound = (f"in {left}{low:g}, {high:g}]" if low is not None and high is not None else
                 f"{'>' if low_open else '>='} {low:g}" if low is not None else f"<= {high:g}")
        raise BenchError(f"{what} must be {bound}, got {value:g}" + (f"; {fix}" if fix else ""))
    return float(value)


def check_episode_frames(frames: Any, *, what: str) -> int:
    """Refuse an episode time limit that is not a whole number in [1, MAX_EPISODE_FRAMES].

    Returns:
        ``frames`` as an int.
    """
    frames = check_count(frames, what=what, low=1, fix="give a time limit in 10 Hz frames")
    if frames > MAX_EPISODE_FRAMES:
        raise BenchError(f"{what} of {frames:,} frames (at 10 Hz: {frames:,} / 36,000 = "
                         f"{frames / 36_000:,.1f} h of robot time per episode) exceeds the cap of "
                         f"{MAX_EPISODE_FRAMES:,} frames (1 h); lower it (YUBI uses 600)")
    return frames
