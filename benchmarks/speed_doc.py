"""Write a benchmark's results as a generated Markdown file (``docs/speed/<name>.md``).

Every benchmark script that backs a speed claim in the manuals calls
:func:`write_speed_doc` when given ``--doc PATH``. The file opens with everything a reader
needs to judge or repeat the numbers: the exact command line (rebuilt from ``sys.argv`` with
the ``.venv/bin/python`` prefix, the environment variables that change the result, and
``taskset`` / ``nice`` when the process was pinned or reniced), the UTC start and end time, the
machine (CPU model, cores, memory, load average at start and end) and the versions of Python,
numpy, torch, Warp and MuJoCo. The tables and notes follow. The file is written atomically.

Typical use inside a script::

    start = run_started()           # first thing in main(): load average, clock
    ...                             # measure
    write_speed_doc(args.doc, title="Rendering speed", tables=[Table(...)],
                    notes=["..."], started=start)
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Environment variables that change what a benchmark measures (threads, GL backend, devices).
RELEVANT_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "MUJOCO_GL", "PYOPENGL_PLATFORM", "CUDA_VISIBLE_DEVICES")
# Distributions whose versions go into the header (import names differ: warp-lang is `warp`).
VERSIONED_PACKAGES = ("numpy", "torch", "warp-lang", "mujoco")
PYTHON_PREFIX = ".venv/bin/python"


@dataclass(frozen=True)
class Table:
    """One Markdown table of a speed doc.

    Attributes:
        caption: One line shown above the table (what is measured, units).
        header: Column names.
        rows: One sequence of cells per row; strings are written as they are (so a script
            keeps its own number formatting), other values through ``format_cell``.
        align: Optional ``"l"`` / ``"r"`` per column (default: left).
    """

    caption: str
    header: Sequence[str]
    rows: Sequence[Sequence[object]]
    align: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if not self.header:
            raise ValueError(f"table {self.caption!r} has no columns; give a header")
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: row {list(row)!r} has {len(row)} "
                                 f"cells for {len(self.header)} columns; make them match")
        if self.align is not None and (len(self.align) != len(self.header)
                                       or set(self.align) - {"l", "r"}):
            raise ValueError(f"table {self.caption!r}: align must be one 'l' or 'r' per column")

    @classmethod
    def from_records(cls, caption: str, records: Sequence[Mapping[str, object]], *,
                     columns: Sequence[str] | None = None,
                     align: Sequence[str] | None = None) -> Table:
        """Build a table from a list of dicts (columns: ``columns`` or the first record's keys).

        Args:
            caption: Line above the table.
            records: One mapping per row.
            columns: Keys to show, in order (default: the keys of the first record).
            align: Optional ``"l"`` / ``"r"`` per column.

        Returns:
            The table.
        """
        if columns is None:
            if not records:
                raise ValueError(f"table {caption!r} has no records and no columns; give columns")
            columns = list(records[0])
        missing = [(i, c) for i, r in enumerate(records) for c in columns if c not in r]
        if missing:
            raise ValueError(f"table {caption!r}: record {missing[0][0]} lacks column "
                             f"{missing[0][1]!r}; give every record every column")
        return cls(caption, list(columns), [[r[c] for c in columns] for r in records], align)


@dataclass(frozen=True)
class RunStart:
    """When a benchmark run started: UTC time, monotonic clock, 1/5/15-minute load average,
    and the git commit of the code it runs (taken at the start: edits during a run don't count).
    """

    utc: _dt.datetime
    monotonic: float
    load_average: tuple[float, float, float]
    git_commit: str = "unknown"


def run_started() -> RunStart:
    """Record the start of a run (call first thing in ``main``)."""
    return RunStart(utc=_dt.datetime.now(_dt.UTC), monotonic=time.monotonic(),
                    load_average=_load_average(), git_commit=_git_commit())


def _now() -> RunStart:
    """The end of a run (no git call: the commit is the start's)."""
    return RunStart(utc=_dt.datetime.now(_dt.UTC), monotonic=time.monotonic(),
                    load_average=_load_average())


def format_cell(value: object) -> str:
    """One table cell: strings as given, floats to 4 significant digits, ``|`` escaped."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif value is None:
        text = "-"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(table: Table) -> str:
    """The table as GitHub Markdown (caption line, blank line, header, rule, rows)."""
    align = table.align or ["l"] * len(table.header)
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    lines = [table.caption, "", "| " + " | ".join(format_cell(h) for h in table.header) + " |",
             rule]
    lines += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def command_line(argv: Sequence[str] | None = None, *,
                 env_vars: Sequence[str] = RELEVANT_ENV_VARS,
                 environ: Mapping[str, str] | None = None,
                 affinity: set[int] | None = None, cpu_count: int | None = None,
                 niceness: int | None = None) -> str:
    """The shell command that repeats this run, as typed from the repository root.

    Args:
        argv: The script's argv (default ``sys.argv``); ``argv[0]`` is made relative to the
            repository root.
        env_vars: Variables written in front when set in ``environ``.
        environ: Environment (default ``os.environ``).
        affinity: CPUs the process may run on (default ``os.sched_getaffinity``); a
            ``taskset -c`` prefix is written when it is a strict subset of the machine's CPUs.
        cpu_count: CPUs of the machine (default ``os.cpu_count()``).
        niceness: The process's nice value (default ``os.nice(0)``); ``nice -n`` when > 0.

    Returns:
        e.g. ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_render.py --seconds 2``.
    """
    argv = list(sys.argv if argv is None else argv)
    environ = os.environ if environ is None else environ
    script = Path(argv[0]).resolve()
    try:
        script_text = script.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        script_text = argv[0]
    parts = [f"{name}={shlex.quote(environ[name])}" for name in env_vars if name in environ]
    if niceness is None:
        niceness = os.nice(0)
    if niceness > 0:
        parts += ["nice", "-n", str(niceness)]
    if affinity is None and hasattr(os, "sched_getaffinity"):
        affinity = set(os.sched_getaffinity(0))
    cpu_count = os.cpu_count() if cpu_count is None else cpu_count
    if affinity and cpu_count and len(affinity) < cpu_count:
        parts += ["taskset", "-c", _cpu_list(affinity)]
    parts += [PYTHON_PREFIX, shlex.quote(script_text)] + [shlex.quote(a) for a in argv[1:]]
    return " ".join(parts)


def machine_fields(started: RunStart, *, ended: RunStart | None = None) -> list[tuple[str, str]]:
    """The header's (field, value) pairs: date, duration, machine, load, software, git."""
    ended = ended or _now()
    seconds = max(0.0, ended.monotonic - started.monotonic)
    fmt = "%Y-%m-%d %H:%M:%S"
    end_fmt = fmt if ended.utc.date() != started.utc.date() else "%H:%M:%S"  # past midnight
    load = " / ".join(" ".join(f"{x:.2f}" for x in la)
                      for la in (started.load_average, ended.load_average))
    versions = [f"Python {sys.version.split()[0]}"]
    for dist in VERSIONED_PACKAGES:
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return [
        ("date (UTC)", f"{started.utc.strftime(fmt)} to {ended.utc.strftime(end_fmt)} "
                       f"({_duration(seconds)})"),
        ("CPU", f"{cpu_model()}, {os.cpu_count()} logical cores{_affinity_note()}"),
        ("memory", _memory_total()),
        ("load average (1/5/15 min) at start / end", load),
        ("software", ", ".join(versions)),
        ("git commit", started.git_commit),
    ]


def render_speed_doc(*, title: str, command: str, tables: Sequence[Table],
                     notes: Sequence[str] = (), started: RunStart,
                     ended: RunStart | None = None, script: str | None = None) -> str:
    """The whole Markdown document (see :func:`write_speed_doc`)."""
    script = script or command_script(command)
    ended = ended or _now()
    head = [f"# {title}", "",
            f"Generated by `{script}`; do not edit by hand: run the command again to refresh it.",
            "", "```bash", command, "```", "",
            render_table(Table("Run:", ["field", "value"], machine_fields(started, ended=ended))),
            ""]
    notes = [*busy_machine_notes(started, ended), *notes]
    body = []
    for table in tables:
        body += [render_table(table), ""]
    if notes:
        body += ["## Notes", ""]
        for note in notes:
            body += [f"- {note}"]
        body.append("")
    return "\n".join(head + body)


def write_speed_doc(path: str | os.PathLike, *, title: str, command: str | None = None,
                    tables: Sequence[Table | tuple], notes: Sequence[str] = (),
                    started: RunStart | None = None) -> Path:
    """Write a benchmark's results to ``path`` as Markdown, atomically (temp file + rename).

    Args:
        path: Output file, e.g. ``docs/speed/render.md`` (parent folders are created).
        title: The document's heading.
        command: The command line to print (default: :func:`command_line` of this process).
        tables: :class:`Table` objects, or tuples ``(caption, records)`` (a list of dicts)
            or ``(caption, header, rows)``.
        notes: Sentences written as a bullet list after the tables (conditions of the run,
            reduced sizes, what to read into the numbers).
        started: From :func:`run_started` at the beginning of the run (its time and load
            average go into the header); default: now.

    Returns:
        The path written.
    """
    from bench.provenance import atomic_write_bytes

    started = started or run_started()
    text = render_speed_doc(title=title, command=command or command_line(),
                            tables=[as_table(t) for t in tables], notes=notes, started=started)
    atomic_write_bytes(path, text.encode())
    return Path(path)


def busy_machine_notes(started: RunStart, ended: RunStart, *,
                       cpus: int | None = None) -> list[str]:
    """A note when other work competed for the CPUs (1-minute load above half the cores).

    Args:
        started: Start of the run.
        ended: End of the run.
        cpus: Logical cores (default ``os.cpu_count()``).

    Returns:
        ``[]`` on a quiet machine, else one sentence saying the numbers were taken under load.
    """
    cpus = cpus or os.cpu_count() or 1
    peak = max(started.load_average[0], ended.load_average[0])
    if not peak > cpus / 2:
        return []
    return [f"Measured on a shared machine: 1-minute load average {started.load_average[0]:.1f}"
            f" at the start and {ended.load_average[0]:.1f} at the end on {cpus} logical cores, "
            "so other processes competed for the CPUs. Absolute times are slower and noisier "
            "than on an idle machine; the contenders of a table were measured side by side in "
            "the same run, so their ratios are what to read."]


def as_table(table: Table | tuple) -> Table:
    """Accept a :class:`Table`, ``(caption, records)`` or ``(caption, header, rows)``."""
    if isinstance(table, Table):
        return table
    if len(table) == 2:
        return Table.from_records(table[0], table[1])
    if len(table) == 3:
        return Table(table[0], table[1], table[2])
    raise ValueError(f"table {table!r}: give a Table, (caption, records) or "
                     "(caption, header, rows)")


def command_script(command: str) -> str:
    """The script path in a command line (the first ``*.py`` word; else the whole command)."""
    return next((w for w in shlex.split(command) if w.endswith(".py")), command)


def cpu_model(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:  # not available on this platform
        return (float("nan"),) * 3


def _cpu_list(cpus: set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (taskset's list syntax)."""
    ordered, spans = sorted(cpus), []
    start = prev = ordered[0]
    for cpu in ordered[1:] + [None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        spans.append(f"{start}-{prev}" if prev > start else f"{start}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(spans)


def _affinity_note() -> str:
    if not hasattr(os, "sched_getaffinity"):
        return ""
    cpus = os.sched_getaffinity(0)
    if len(cpus) < (os.cpu_count() or 0):
        return f" (this process pinned to CPU {_cpu_list(set(cpus))})"
    return ""


def _memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _git_commit() -> str:
    try:
        run = {"cwd": REPO_ROOT, "capture_output": True, "text": True, "timeout": 10}
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], check=True,
                              **run).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               check=True, **run).stdout.rstrip("\n")  # "XY path" lines
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    if not dirty:
        return head
    files = [line[3:] for line in dirty.splitlines()]
    listed = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"{head} with uncommitted changes to {listed}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{seconds:.1f} s"
