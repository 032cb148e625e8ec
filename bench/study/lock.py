"""One writer per study output: an advisory ``fcntl`` lock on ``<out>/.splatbench-lock``.

``bench study run`` (fresh, ``--resume`` or ``--overwrite``) holds the lock
from the moment the output directory exists until it returns; the kernel
releases it when the process ends, however it ends (a SIGKILL too), so a lock
is never stale in the ``flock`` sense. The file records the holder's pid and
host, which the refusal message quotes; a holder pid that is no longer alive
while the lock is still held means a leftover child process (e.g. a pool
worker of the killed run) kept the file open, and the message says so.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path

from bench.errors import BenchError

LOCK_FILE = ".splatbench-lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _holder(path: Path) -> tuple[int | None, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return None, ""
    pid = int(text[0]) if text and text[0].isdigit() else None
    return pid, text[1] if len(text) > 1 else ""


class OutputLock:
    """An exclusive, non-blocking advisory lock of one study output directory.

    Args:
        out: The output directory (must exist).

    Raises:
        BenchError: Another process holds the lock (with its pid and what to do).
    """

    def __init__(self, out: str | os.PathLike) -> None:
        self.path = Path(out) / LOCK_FILE
        if self.path.is_symlink():
            raise BenchError(f"{self.path} is a symbolic link; remove it (the lock file must be "
                             "a plain file of the study output)")
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            self._fd = None
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid, host = _holder(self.path)
            here = socket.gethostname()
            who = f"pid {pid}" + (f" on {host}" if host and host != here else "")
            if pid is not None and host in ("", here) and not _pid_alive(pid):
                raise BenchError(
                    f"{Path(out)} is locked by a leftover process of the finished run {who} "
                    f"(it is no longer alive, but a child still holds {self.path}); stop that "
                    "child (`fuser -v` on the lock file shows it), then --resume") from None
            raise BenchError(
                f"{Path(out)} is in use by another `bench study run` ({who}); wait for it to "
                "finish or stop it, then run again with --resume (never --overwrite: that "
                "would delete its results)") from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()} {socket.gethostname()}\n".encode())

    def release(self) -> None:
        """Release the lock (idempotent). The file stays: removing it would race a waiter."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
