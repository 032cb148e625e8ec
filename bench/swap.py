"""Recoverable replacement of output directories: the swap journal and its recovery.

:func:`bench.provenance.staged_output_dir` builds every output in a staging directory
``.<name>.XXXXXXXX.tmp`` next to ``<name>`` (the ownership marker inside it is held under
an ``flock`` while the command runs) and hands it to :func:`install`:

* ``<name>`` absent: one rename, staging -> ``<name>`` (atomic).
* **replace** (``--overwrite`` of a bench output): the whole old directory is moved
  aside and the new one moved in.
* **merge** (an in-place write, e.g. ``bench scene edit BUNDLE``): only the files the bench
  owns in ``<name>`` (``owned_files``: the files its manifest lists) are moved aside and
  replaced or removed; every other file and folder (the user's) stays where it is, untouched.
  A staged file at a path the bench does not own is dropped when it is byte-identical to the
  file there (a copy of it) and refused otherwise (one line, before anything moved).

Before the first rename of an existing ``<name>`` a journal is written:
``.<name>.splatbench-swap/`` (fixed, documented name next to ``<name>``) holding the marker,
``journal.json`` (mode, the files to install with the inode each keeps through its rename,
the files moved aside, the folders created) and ``old/`` (what was moved aside). The swap
commits by unlinking ``journal.json`` after its last rename; the folder is deleted after that.

:func:`recover` (run at the start of every ``staged_output_dir`` / ``preflight_output_dir``
and by the bundle loader) finds a ``.<name>.splatbench-swap/`` whose journal is still there,
i.e. a swap that was killed before its commit, and rolls it back: a path that carries an
inode the journal installed is the unfinished new output and is removed, then ``old/`` goes
back. Every step is idempotent, so recovery killed half-way is finished by the next run.
Afterwards ``<name>`` holds the complete old output; a swap that reached its commit holds the
complete new one. It also restores the leftovers of the previous scheme
(``.<name>.XXXXXXXX.old.tmp/previous``) and removes staging folders of killed runs (only those
named ``.<name>.XXXXXXXX.tmp`` that carry the marker and whose marker nobody holds).

Test hook (documented in docs/safety.md): ``SPLATBENCH_FAULT_AT=rename:N`` SIGKILLs the
process just before the Nth rename this module makes (counting from 1, recovery's renames
included); ``SPLATBENCH_FAULT_AT=commit`` just before a swap commits, ``cleanup`` just after.
Nothing else reads the variable.

Standard library only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.errors import BenchError

#: Suffix of the journal folder ``.<name>.splatbench-swap`` next to an output being replaced.
SWAP_SUFFIX = ".splatbench-swap"
JOURNAL = "journal.json"
JOURNAL_FORMAT = "splatbench-swap/1"
#: Test hook: ``rename:N`` | ``commit`` | ``cleanup`` (see the module docstring).
FAULT_ENV = "SPLATBENCH_FAULT_AT"
#: Seconds recovery waits for a swap another process is making right now.
LOCK_WAIT_S = 10.0

_renames = [0]


# --------------------------------------------------------------------------- small helpers


def _fault(point: str) -> None:
    """The test hook: SIGKILL this process at ``point`` when SPLATBENCH_FAULT_AT names it."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if point == "rename":
        _renames[0] += 1
        if wanted == f"rename:{_renames[0]}":
            os.kill(os.getpid(), signal.SIGKILL)
    elif wanted == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _rename(src: Path, dst: Path) -> None:
    _fault("rename")
    os.rename(src, dst)


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _notice(text: str) -> None:
    print(f"bench: notice: {text}", file=sys.stderr, flush=True)


def _absolute(out: str | os.PathLike) -> Path:
    return Path(os.path.abspath(os.fspath(out)))


def swap_path(out: str | os.PathLike) -> Path:
    """The journal folder of ``out``: ``.<name>.splatbench-swap`` next to it."""
    out = _absolute(out)
    return out.parent / f".{out.name}{SWAP_SUFFIX}"


def _staging_re(name: str) -> re.Pattern[str]:  # tempfile.mkdtemp: 8 of [a-z0-9_]
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")


def _legacy_re(name: str) -> re.Pattern[str]:  # the scheme before the journal
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.old\.tmp")


def _check_rel(rel: Any) -> str:
    """A relative path inside a folder: no '..', not absolute, normalised; else BenchError."""
    if not isinstance(rel, str) or rel in ("", ".") or "\x00" in rel or os.path.isabs(rel) \
            or os.path.normpath(rel) != rel or rel.split(os.sep)[0] == "..":
        raise BenchError(f"not a relative path inside the output: {rel!r:.80}")
    return rel


def _inside(root: Path, rel: str) -> bool:
    """Whether the folder of ``root/rel`` resolves inside ``root`` (no link leads out)."""
    return Path(os.path.realpath(root / os.path.dirname(rel))).is_relative_to(
        os.path.realpath(root))


def _lock(path: Path, *, wait: float) -> int | None:
    """An fd of ``path`` holding its exclusive flock, or None if someone else holds it."""
    fd = os.open(path, os.O_RDONLY)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) \
                    or time.monotonic() >= deadline:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return None
                raise
            time.sleep(0.05)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files (links followed: a bundle's own links point inside it) hold the same."""
    if not a.is_file() or not b.is_file():
        return False
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            block = fa.read(1 << 22)
            if block != fb.read(1 << 22):
                return False
            if not block:
                return True


def _files_under(root: Path) -> list[str]:
    """Relative paths of every file and link under ``root`` (folders walked, not listed)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in filenames + [d for d in dirnames if (base / d).is_symlink()]:
            found.append(os.path.relpath(base / name, root))
    return sorted(found)


# --------------------------------------------------------------------------- staging


def new_staging(out: str | os.PathLike) -> tuple[Path, int]:
    """A fresh staging folder next to ``out`` with the marker inside, held under a flock.

    Returns:
        The folder and the fd holding the lock (close it when the command is done with
        the folder: a folder whose marker nobody holds is a leftover of a killed run).
    """
    out = _absolute(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        fd = _held_marker(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp, fd


def _held_marker(directory: Path) -> int:
    """Write the marker into ``directory`` already locked (a cleaner never sees it free)."""
    from bench.marker import MARKER, marker_json

    part = directory / f"{MARKER}.part"
    fd = os.open(part, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, marker_json())
        os.rename(part, directory / MARKER)
    except BaseException:
        os.close(fd)
        raise
    return fd


def bench_manifest_outputs(directory: str | os.PathLike) -> set[str]:
    """Relative paths of the files a bench ``manifest.json`` in ``directory`` lists.

    ``manifest.json`` itself counts when it is a bench manifest (``tool`` and
    ``bench_version``). An output entry names its file by key (``"cameras/test.json"``)
    or, for named outputs (``"background"``), by its ``path`` (a file name in the folder).
    """
    directory = Path(directory)
    manifest = directory / "manifest.json"
    if manifest.is_symlink() or not manifest.is_file():
        return set()
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict) or "tool" not in data or "bench_version" not in data:
        return set()
    owned = {"manifest.json"}
    outputs = data.get("outputs")
    for key, entry in (outputs.items() if isinstance(outputs, dict) else ()):
        for rel in (key, entry.get("path") if isinstance(entry, dict) else None):
            try:
                rel = _check_rel(rel)
            except BenchError:
                continue
            if (directory / rel).is_file() and not (directory / rel).is_symlink():
                owned.add(rel)
                break
    return owned


# --------------------------------------------------------------------------- the swap


def _begin(out: Path, journal: dict[str, Any]) -> tuple[Path, int]:
    """Make ``.<name>.splatbench-swap`` (marker held, journal written); its path and lock fd."""
    swap = swap_path(out)
    if _present(swap):
        raise BenchError(f"another bench command is replacing {out} right now ({swap.name} "
                         "exists); wait for it to finish and run again")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    fd = None
    try:
        fd = _held_marker(tmp)
        with open(tmp / JOURNAL, "w", encoding="utf-8") as handle:
            json.dump(journal, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        (tmp / "old").mkdir()
        _rename(tmp, swap)
    except BaseException:
        if fd is not None:
            os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(out.parent)
    return swap, fd


def _merge_plan(staging: Path, out: Path, owned: set[str]) -> dict[str, Any]:
    """Which files move: install (staged, with inode), aside (old owned), dirs to create."""
    new = _files_under(staging)
    install, aside, dirs = [], [], set()
    for rel in new:
        target = out / rel
        if not _inside(out, rel):
            raise BenchError(f"in-place write of {out}: {out / os.path.dirname(rel)} leads "
                             "outside the folder (a symbolic link); replace the link with a "
                             "real folder or write to a new --out")
        if _present(target):
            if target.is_dir() and not target.is_symlink():
                raise BenchError(f"in-place write of {out}: {target} is a folder where the "
                                 "bench writes a file; move it out of the way and run again")
            if rel in owned:
                aside.append(rel)
            elif _same_bytes(staging / rel, target):
                continue  # a copy of the user's own file: theirs stays, untouched
            else:
                raise BenchError(
                    f"in-place write of {out}: {target} was not written by the bench (its "
                    "manifest does not list it) and differs from the file the bench would "
                    "write there; move it out of the folder, or write to a new --out, and "
                    "run again")
        else:
            for parent in reversed(Path(rel).parents[:-1]):  # shallow first
                where = out / parent
                if not _present(where):
                    dirs.add(str(parent))
                elif not where.is_dir():
                    raise BenchError(f"in-place write of {out}: {where} is a file where the "
                                     "bench writes a folder; move it out of the way and run "
                                     "again")
        install.append([rel, (staging / rel).lstat().st_ino])
    staged = set(new)
    for rel in sorted(owned - staged):
        target = out / rel
        if _present(target) and not (target.is_dir() and not target.is_symlink()) \
                and _inside(out, rel):
            aside.append(rel)  # the bench wrote it before and writes it no more: removed
    return {"install": install, "aside": sorted(aside),
            "dirs": sorted(dirs, key=lambda d: (d.count(os.sep), d))}


def install(staging: str | os.PathLike, out: str | os.PathLike, *,
            owned_files: Callable[[Path], Iterable[str]] | None = None,
            check: Callable[[Path], None] | None = None) -> None:
    """Move the complete staged output ``staging`` to ``out``, recoverably (module docstring).

    Args:
        staging: The staged folder (from :func:`new_staging`), complete.
        out: The output folder; absent, or an existing bench output.
        owned_files: For an in-place write: the relative paths of the files the bench owns
            in the existing ``out``; only those are replaced or removed (merge mode).
            None replaces the whole folder.
        check: Called with ``out`` when it exists, before anything moves (e.g. the
            ownership check); it raises to refuse.

    Raises:
        BenchError: A conflict of an in-place write (nothing moved); an interrupted swap
            that could not be undone in-process (the next run recovers it).
    """
    staging, out = Path(staging), _absolute(out)
    swap = swap_path(out)
    if swap.is_dir() and not swap.is_symlink():  # a dead swap since the preflight: undone first
        for text in _recover_swap(out, swap):
            _notice(text)
    if not _present(out):
        _rename(staging, out)  # nothing to lose: atomic
        _fsync_dir(out.parent)
        return
    if check is not None:
        check(out)
    if owned_files is None:
        journal: dict[str, Any] = {"mode": "replace", "staging_ino": staging.lstat().st_ino}
    else:
        owned = set()
        for rel in owned_files(out):
            try:
                owned.add(_check_rel(rel))
            except BenchError:
                continue
        journal = {"mode": "merge", **_merge_plan(staging, out, owned)}
    journal.update({"format": JOURNAL_FORMAT, "out": out.name, "staging": staging.name})
    swap, fd = _begin(out, journal)
    try:
        try:
            if journal["mode"] == "replace":
                _rename(out, swap / "old" / "tree")
                _rename(staging, out)
            else:
                for rel in journal["aside"]:
                    (swap / "old" / rel).parent.mkdir(parents=True, exist_ok=True)
                    _rename(out / rel, swap / "old" / rel)
                for rel in journal["dirs"]:
                    (out / rel).mkdir(exist_ok=True)
                for rel, _ino in journal["install"]:
                    _rename(staging / rel, out / rel)
            _fsync_dir(out)
            _fault("commit")
            os.unlink(swap / JOURNAL)  # the commit: from here on `out` is the new output
            _fsync_dir(swap)
        except BaseException:
            try:
                _rollback(out, swap, journal)
                shutil.rmtree(swap, ignore_errors=True)
            except BaseException:  # noqa: BLE001 - the next run's recovery finishes it
                pass
            raise
        _fault("cleanup")
        if journal["mode"] == "merge":
            _prune(out, [rel for rel in journal["aside"]
                         if rel not in {r for r, _ in journal["install"]}])
        shutil.rmtree(swap, ignore_errors=True)
        if journal["mode"] == "merge":
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        os.close(fd)


def _prune(out: Path, removed: list[str]) -> None:
    """Remove folders that only held files the swap removed (they are empty now)."""
    for rel in removed:
        for parent in Path(rel).parents[:-1]:
            try:
                os.rmdir(out / parent)
            except OSError:
                break


def _rollback(out: Path, swap: Path, journal: dict[str, Any]) -> None:
    """Undo an uncommitted swap (idempotent): ``out`` gets the complete old output back."""
    old = swap / "old"
    if journal["mode"] == "replace":
        tree = old / "tree"
        if _present(tree):
            if _present(out):
                if out.lstat().st_ino != journal["staging_ino"]:
                    raise BenchError(f"cannot undo the interrupted replacement of {out}: both "
                                     f"{out} and the previous output {tree} exist; keep the one "
                                     f"you want and delete {swap}")
                from bench.marker import MARKER, marker_json

                trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp",
                                              dir=out.parent))
                (trash / MARKER).write_bytes(marker_json())  # a leftover the next run deletes
                _rename(out, trash / "new")  # out is absent at once; the rest is deleting
                _rename(tree, out)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                _rename(tree, out)
    else:
        for rel, ino in journal["install"]:
            target = out / rel
            if _present(target) and target.lstat().st_ino == ino:
                target.unlink()  # the unfinished new file
        for rel in journal["aside"]:
            kept = old / rel
            if not _present(kept):
                continue
            if _present(out / rel):
                raise BenchError(f"cannot undo the interrupted in-place write of {out}: "
                                 f"{out / rel} exists and its previous version is {kept}; "
                                 f"keep the one you want and delete {swap}")
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            _rename(kept, out / rel)
        for rel in reversed(journal["dirs"]):
            try:
                os.rmdir(out / rel)
            except OSError:
                pass
    staging = out.parent / journal["staging"]  # the unfinished new output's folder
    if staging.is_dir() and not staging.is_symlink():
        shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(out.parent)
    (swap / JOURNAL).unlink(missing_ok=True)  # rolled back: nothing left to undo


def _read_journal(swap: Path, out: Path) -> dict[str, Any]:
    path = swap / JOURNAL
    fix = (f"move {out} and {swap} somewhere safe and inspect them (the previous output is "
           f"under {swap / 'old'})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != JOURNAL_FORMAT \
                or data.get("out") != out.name or data.get("mode") not in ("replace", "merge") \
                or not isinstance(data.get("staging"), str) \
                or not _staging_re(out.name).fullmatch(data["staging"]):
            raise ValueError("not a bench swap journal")
        if data["mode"] == "replace":
            if not isinstance(data.get("staging_ino"), int):
                raise ValueError("no staging_ino")
        else:
            for _rel, ino in data["install"]:
                if not isinstance(ino, int):
                    raise ValueError("bad inode")
            for rel in (*(r for r, _ in data["install"]), *data["aside"], *data["dirs"]):
                if not _inside(out, _check_rel(rel)):
                    raise ValueError(f"{rel!r} leads outside {out}")
    except (OSError, ValueError, TypeError, KeyError, BenchError) as exc:
        raise BenchError(f"the journal {path} of an interrupted write is unreadable ({exc}); "
                         f"{fix}") from None
    return data


# --------------------------------------------------------------------------- recovery


def recover(out: str | os.PathLike, *, clean_staging: bool = True) -> list[str]:
    """Finish what killed runs left around ``out``; returns the notices printed.

    1. A ``.<name>.splatbench-swap`` with its journal: the uncommitted swap is rolled back
       (``out`` holds the complete old output again); without its journal (committed):
       deleted. A swap another process holds is left to it.
    2. ``.<name>.XXXXXXXX.old.tmp/previous`` of the previous scheme: moved back to ``out``
       when ``out`` is missing, else deleted (that swap had completed).
    3. With ``clean_staging``: staging folders ``.<name>.XXXXXXXX.tmp`` that carry the marker
       and whose marker no live process holds are deleted.

    Raises:
        BenchError: A swap that cannot be undone safely (the message says what to keep).
    """
    out = _absolute(out)
    if not out.name or not out.parent.is_dir():
        return []
    notices = []
    swap = swap_path(out)
    if swap.is_dir() and not swap.is_symlink():
        notices += _recover_swap(out, swap)
    if clean_staging or not _present(out):
        notices += _recover_legacy(out)
    if clean_staging:
        notices += _clean_staging(out)
    for text in notices:
        _notice(text)
    return notices


def _recover_swap(out: Path, swap: Path) -> list[str]:
    from bench.marker import MARKER

    fd = None
    try:
        fd = _lock(swap / MARKER, wait=LOCK_WAIT_S)
    except FileNotFoundError:
        pass  # a committed swap being deleted (the marker went first) or already gone
    else:
        if fd is None:
            return []  # another process is making this swap right now
    try:
        if not _present(swap / JOURNAL):  # committed (or already rolled back): garbage
            shutil.rmtree(swap, ignore_errors=True)
            return []
        journal = _read_journal(swap, out)
        try:
            _rollback(out, swap, journal)
        except OSError as exc:
            raise BenchError(f"cannot undo the interrupted write of {out} ({exc.strerror}: "
                             f"{exc.filename}); fix that and run again (the previous output "
                             f"is kept in {swap / 'old'})") from None
        shutil.rmtree(swap, ignore_errors=True)
        what = "replacement" if journal["mode"] == "replace" else "in-place write"
        return [f"{out}: an interrupted {what} (killed mid-swap) was rolled back; the previous "
                "output is complete again and the unfinished new one was discarded"]
    finally:
        if fd is not None:
            os.close(fd)


def _recover_legacy(out: Path) -> list[str]:
    from bench.marker import is_bench_output

    pattern = _legacy_re(out.name)
    notices = []
    for entry in _siblings(out, pattern):
        previous = entry / "previous"
        if previous.is_dir() and not previous.is_symlink() and is_bench_output(previous):
            if not _present(out):
                _rename(previous, out)
                notices.append(f"{out}: restored from {entry.name}/previous, left by a bench "
                               "run killed while replacing it")
            else:  # that swap had completed: this is the output the user replaced
                shutil.rmtree(entry, ignore_errors=True)
                continue
        try:
            entry.rmdir()  # only when empty: nothing of anyone's is deleted
        except OSError:
            pass
    return notices


def _siblings(out: Path, pattern: re.Pattern[str]) -> list[Path]:
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    return [out.parent / n for n in sorted(names) if pattern.fullmatch(n)
            and (out.parent / n).is_dir() and not (out.parent / n).is_symlink()]


def _clean_staging(out: Path) -> list[str]:
    from bench.marker import MARKER

    removed = []
    for entry in _siblings(out, _staging_re(out.name)):
        marker = entry / MARKER
        if not marker.is_file() or marker.is_symlink():  # killed while writing the marker?
            marker = entry / f"{MARKER}.part"
        if marker.is_symlink() or not marker.is_file():
            continue  # not a bench staging folder: never touched
        try:
            fd = _lock(marker, wait=0.0)
        except OSError:
            continue
        if fd is None:
            continue  # a live command is writing it
        try:
            shutil.rmtree(entry)
            removed.append(entry.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    if not removed:
        return []
    return [f"removed {len(removed)} staging folder(s) of killed runs next to {out}: "
            + ", ".join(removed)]
