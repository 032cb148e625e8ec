"""Progress that suits terminals and logs: every progress report of the bench goes through here.

:func:`progress` returns a tqdm bar when its stream is a terminal, and otherwise a
:class:`LogProgress`, which writes plain lines instead of carriage-return frames: one line
when the stage starts (``[render] start: 720 view``), at most one line per ``interval``
seconds (``[render] 120/720 view, 3.1 view/s, ETA 3m13s``) and one when it ends
(``[render] done: 720 view in 3m52s``). Both take the same calls at the call sites:
iteration, ``update(n)``, ``set_postfix(...)`` / ``set_postfix_str(...)``, ``close()`` and
``with``. tqdm is imported only when a terminal asks for a bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

__all__ = ["DEFAULT_INTERVAL", "LogProgress", "format_duration", "is_terminal", "progress"]

#: Seconds between two progress lines of a :class:`LogProgress`.
DEFAULT_INTERVAL = 10.0


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes, closed streams)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def progress(iterable: Iterable | None = None, *, total: float | None = None, desc: str = "",
             unit: str = "it", file: TextIO | None = None, disable: bool | None = False,
             interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] | None = None,
             **tqdm_options: Any) -> Any:
    """A progress reporter over ``iterable`` (or ``total`` manual updates) on ``file``.

    Args:
        iterable: Items to pass through, counting one per item (None: count with ``update``).
        total: Expected count (default: ``len(iterable)`` where it has one).
        desc: Stage name, the prefix of every line.
        unit: Name of one counted item (``view``, ``ep``, ...).
        file: The stream written to (default ``sys.stderr`` at the call).
        disable: True: report nothing; None: report only on a terminal (tqdm's meaning).
        interval: Seconds between two progress lines off a terminal.
        clock: Monotonic clock in seconds off a terminal (default ``time.monotonic``; tests
            pass a fake one).
        **tqdm_options: Further tqdm options (``mininterval``, ``smoothing``, ...), used only
            on a terminal.

    Returns:
        A ``tqdm.tqdm`` bar when ``file`` is a terminal, else a :class:`LogProgress`.
    """
    stream = sys.stderr if file is None else file
    terminal = is_terminal(stream)
    if disable is None:
        disable = not terminal
    if terminal and not disable:
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, file=stream, **tqdm_options)
    return LogProgress(iterable, total=total, desc=desc, unit=unit, file=stream,
                       disable=bool(disable), interval=interval, clock=clock)


def format_duration(seconds: float) -> str:
    """``42s``, ``3m13s`` or ``2h05m`` (rounded to whole seconds)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _count(n: float) -> str:
    return f"{n:g}" if isinstance(n, float) else str(n)


class LogProgress:
    """Plain-line progress for logs: a start line, at most one line per interval, a done line.

    Takes the calls tqdm takes at the bench's call sites (iteration, ``update``,
    ``set_postfix``, ``set_postfix_str``, ``set_description``, ``close``, ``with``).
    """

    def __init__(self, iterable: Iterable | None = None, *, total: float | None = None,
                 desc: str = "", unit: str = "it", file: TextIO | None = None,
                 disable: bool = False, interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] | None = None):
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except (TypeError, AttributeError):
                total = None
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.file = sys.stderr if file is None else file
        self.disable, self.interval = disable, float(interval)
        self.clock = time.monotonic if clock is None else clock
        self.n = 0
        self.postfix = ""
        self.closed = False
        self.start = self.last = self.clock()
        what = f"{_count(total)} {unit}" if total is not None else unit
        self._write(f"start: {what}")

    # ------------------------------------------------------------------ tqdm's interface
    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("this progress reporter has no iterable; call update(n) instead")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __len__(self) -> int:
        return int(self.total) if self.total is not None else len(self.iterable)  # type: ignore

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        """Count ``n`` more items; write a line when ``interval`` seconds passed since the last."""
        self.n += n
        if self.disable or self.closed:
            return
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            self._write(self._status(now))

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True,
                    **kwargs: Any) -> None:
        """Show ``key=value`` pairs after the next progress lines."""
        items = dict(ordered_dict or {}, **kwargs)
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Show ``s`` after the next progress lines."""
        self.postfix = str(s)

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Rename the stage (the prefix of the following lines)."""
        self.desc = desc or ""

    def refresh(self) -> None:
        """Nothing to redraw off a terminal."""

    def close(self) -> None:
        """Write the final line (once)."""
        if self.closed:
            return
        self.closed = True
        elapsed = format_duration(self.clock() - self.start)
        if self.total is None or self.n >= self.total:
            self._write(f"done: {_count(self.n)} {self.unit} in {elapsed}")
        else:
            self._write(f"stopped: {_count(self.n)}/{_count(self.total)} {self.unit} "
                        f"after {elapsed}")

    # ------------------------------------------------------------------ lines
    def _status(self, now: float) -> str:
        elapsed = now - self.start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        count = (f"{_count(self.n)}/{_count(self.total)}" if self.total is not None
                 else _count(self.n))
        parts = [f"{count} {self.unit}"]
        if rate >= 1 or rate == 0:
            parts.append(f"{rate:.1f} {self.unit}/s")
        else:
            parts.append(f"{1 / rate:.1f} s/{self.unit}")
        if self.total is not None and rate > 0:
            parts.append(f"ETA {format_duration(max(0.0, self.total - self.n) / rate)}")
        line = ", ".join(parts)
        return f"{line} ({self.postfix})" if self.postfix else line

    def _write(self, text: str) -> None:
        if self.disable:
            return
        prefix = f"[{self.desc}] " if self.desc else ""
        try:
            print(prefix + text, file=self.file, flush=True)
        except (ValueError, OSError):  # the stream was closed under us: progress is optional
            pass
