"""The results store: one SQLite database (WAL) per study output directory.

``<out>/results.sqlite`` holds these tables (and the fault / latency tables of
:mod:`bench.study.faults`):

* ``rollouts`` - one row per rollout, keyed by
  ``(study, scene, condition, task, policy, domain, trial)``, with the outcome
  (success, progress, frames, failure reason), the initial-condition index and
  the sha256 of the condition's manifest;
* ``quality`` - one row per (scene, condition, view protocol, metric, frame) score;
* ``conditions`` - each condition bundle's tool id and manifest (JSON + sha256);
* ``meta`` - key/value pairs (the resolved spec and its hash);
* ``policy_replies`` - per rollout and query, the reply keys a remote policy's server sent
  that the client does not read (openpi forward compatibility: a newer server's extras),
  as JSON; empty for in-process policies. Kept out of ``rollouts`` so ``rollouts.csv``
  keeps its bytes; exported as ``tables/policy_replies.csv`` only when not empty.

Every insert is idempotent and committed on its own: writing a row that is
already stored with the same values is a no-op, so a study killed at any point
resumes without losing a committed rollout or storing one twice. Writing a row
whose key is stored with *different* values raises a :class:`BenchError`
(a study must be deterministic; a silent overwrite would hide that it is not).

Tables are exported to CSV sorted by key, so the same results give the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.provenance import atomic_write_bytes

DB_NAME = "results.sqlite"
SCHEMA_VERSION = "splatbench-results/2"
#: Older schemas this bench opens, with the SQL that migrates a store to the current one.
#: /1 -> /2: ``rollouts.init_condition`` (the task-grid index) is named ``init_index`` so that
#: "condition" only means the study condition.
MIGRATIONS = {
    "splatbench-results/1": ("ALTER TABLE rollouts RENAME COLUMN init_condition TO init_index",),
}
DOMAINS = ("sim", "real")


@dataclass(frozen=True)
class RolloutRow:
    """One stored rollout.

    Attributes:
        study: Study name.
        scene: Scene name.
        condition: Condition name (``clean``, ``hole-54`` ...; the real domain uses ``clean``).
        task: Task name.
        policy: Policy registry name.
        domain: ``"sim"`` or ``"real"`` (see docs: the synthetic world's "real" robot).
        trial: Trial index within the cell (0-based).
        init_index: Initial-condition index of the task's grid (``env.reset(seed=...)``).
        success: Strict success predicate held.
        progress_final: Progress score at the last frame, in [0, 1].
        progress_max: Highest progress score reached.
        frames: Control frames executed (10 Hz).
        failure: Failure reason, "" when none.
        truncated: Hit the time limit.
        first_grasp_frame: Frame of the first grasp, -1 if never.
        manifest_sha256: sha256 of the condition bundle's manifest.json.
    """

    study: str
    scene: str
    condition: str
    task: str
    policy: str
    domain: str
    trial: int
    init_index: int
    success: bool
    progress_final: float
    progress_max: float
    frames: int
    failure: str
    truncated: bool
    first_grasp_frame: int
    manifest_sha256: str

    @classmethod
    def from_episode(cls, record: Any, *, study: str, scene: str, condition: str, task: str,
                     policy: str, domain: str, trial: int, manifest_sha256: str) -> RolloutRow:
        """The stored row of one rollout: its outcome from a ``bench.sim.rollout.EpisodeRecord``.

        Args:
            record: The episode record (its ``init_index``, success, progress, frames,
                failure, truncation and first-grasp frame are copied).
            study: Study name.
            scene: Scene name (the study's, which may differ from the record's bundle name).
            condition: Study condition name.
            task: The study's task name (a task file's label may differ from the record's).
            policy: The study's policy label.
            domain: ``"sim"`` or ``"real"``.
            trial: Trial index within the cell.
            manifest_sha256: sha256 of the condition bundle's manifest.json.
        """
        outcome = {name: getattr(record, name) for name in EPISODE_FIELDS}
        return cls(study=study, scene=scene, condition=condition, task=task, policy=policy,
                   domain=domain, trial=trial,
                   manifest_sha256=manifest_sha256, **outcome)

    @property
    def key(self) -> tuple[str, str, str, str, str, str, int]:
        """The primary key ``(study, scene, condition, task, policy, domain, trial)``."""
        return (self.study, self.scene, self.condition, self.task, self.policy, self.domain,
                self.trial)


#: RolloutRow fields copied from the episode record (:meth:`RolloutRow.from_episode`).
EPISODE_FIELDS = ("init_index", "success", "progress_final", "progress_max", "frames", "failure",
                  "truncated", "first_grasp_frame")
ROLLOUT_KEY = ("study", "scene", "condition", "task", "policy", "domain", "trial")
ROLLOUT_COLUMNS = tuple(f.name for f in fields(RolloutRow))
QUALITY_KEY = ("study", "scene", "condition", "view_protocol", "metric", "frame")
QUALITY_COLUMNS = (*QUALITY_KEY, "value")
CONDITION_KEY = ("study", "scene", "condition")
CONDITION_COLUMNS = (*CONDITION_KEY, "tool", "path", "manifest_sha256", "manifest_json")
REPLY_KEY = (*ROLLOUT_KEY, "query")
REPLY_COLUMNS = (*REPLY_KEY, "extras")
#: Largest JSON text of one query's reply extras that is stored; a larger one is stored as
#: ``{"__omitted_bytes__": n}`` (a server returning e.g. attention maps per query would
#: otherwise grow the database by megabytes per rollout).
MAX_REPLY_EXTRAS_BYTES = 64 << 10

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rollouts (
    study TEXT NOT NULL, scene TEXT NOT NULL, condition TEXT NOT NULL, task TEXT NOT NULL,
    policy TEXT NOT NULL, domain TEXT NOT NULL CHECK (domain IN {DOMAINS!r}),
    trial INTEGER NOT NULL CHECK (trial >= 0), init_index INTEGER NOT NULL,
    success INTEGER NOT NULL, progress_final REAL NOT NULL, progress_max REAL NOT NULL,
    frames INTEGER NOT NULL, failure TEXT NOT NULL, truncated INTEGER NOT NULL,
    first_grasp_frame INTEGER NOT NULL, manifest_sha256 TEXT NOT NULL,
    PRIMARY KEY ({", ".join(ROLLOUT_KEY)}));
CREATE TABLE IF NOT EXISTS quality (
    study TEXT NOT NULL, scene TEXT NOT NULL, condition TEXT NOT NULL,
    view_protocol TEXT NOT NULL, metric TEXT NOT NULL, frame TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY ({", ".join(QUALITY_KEY)}));
CREATE TABLE IF NOT EXISTS conditions (
    study TEXT NOT NULL, scene TEXT NOT NULL, condition TEXT NOT NULL, tool TEXT NOT NULL,
    path TEXT NOT NULL, manifest_sha256 TEXT NOT NULL, manifest_json TEXT NOT NULL,
    PRIMARY KEY ({", ".join(CONDITION_KEY)}));
CREATE TABLE IF NOT EXISTS policy_replies (
    study TEXT NOT NULL, scene TEXT NOT NULL, condition TEXT NOT NULL, task TEXT NOT NULL,
    policy TEXT NOT NULL, domain TEXT NOT NULL, trial INTEGER NOT NULL,
    query INTEGER NOT NULL CHECK (query >= 0), extras TEXT NOT NULL,
    PRIMARY KEY ({", ".join(REPLY_KEY)}));
"""


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: arrays as nested lists, bytes as hex, NaN / inf as text."""
    import numpy as np

    if isinstance(value, np.ndarray | np.generic):
        return _jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf", "-inf": strict JSON has no such numbers
    if value is None or isinstance(value, str | int | float):  # bool is an int
        return value
    return str(value)


def reply_rows(extras: Sequence[Any]) -> list[tuple[int, str]]:
    """(query index, JSON text) of every query whose reply extras are not empty.

    Args:
        extras: One mapping per policy query (a policy's ``episode_extras``).

    Keys sorted, compact separators: the same replies give the same text. A query's text
    over :data:`MAX_REPLY_EXTRAS_BYTES` is replaced by ``{"__omitted_bytes__": n}``.
    """
    rows = []
    for query, data in enumerate(extras):
        if not data:
            continue
        text = json.dumps(_jsonable(dict(data)), sort_keys=True, separators=(",", ":"),
                          allow_nan=False)
        if len(text.encode()) > MAX_REPLY_EXTRAS_BYTES:
            text = json.dumps({"__omitted_bytes__": len(text.encode())})
        rows.append((query, text))
    return rows


_FLAGS = {0: False, 1: True, "0": False, "1": True, "false": False, "true": True}


def _flag(path: Path, row: dict[str, Any], column: str) -> bool:
    """A stored 0/1 (or true/false) column as a bool; anything else refused with the row."""
    value = row[column]
    key = value.strip().lower() if isinstance(value, str) else value
    if isinstance(key, float) and key in (0.0, 1.0):
        key = int(key)
    if isinstance(key, str | int) and key in _FLAGS:
        return _FLAGS[key]
    where = "/".join(str(row[k]) for k in ROLLOUT_KEY)
    raise BenchError(f"{path}: rollout {where} has {column} {value!r:.40}; {column} must be 0/1 "
                     "(or true/false) - fix or drop the row (the database was not written by "
                     "this bench, or was edited)")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)
    return a == b


class ResultsStore:
    """Open (or create) ``<out>/results.sqlite``.

    Args:
        path: The database file, or a directory (``results.sqlite`` inside it).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        path = Path(path)
        self.path = path / DB_NAME if path.is_dir() or path.suffix == "" else path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            tables = {r[0] for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            stored = self.get_meta("schema") if "meta" in tables else None
            if stored in MIGRATIONS:
                self._migrate(stored)
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise BenchError(f"{self.path} is not a splatbench results database ({exc}); "
                             "choose another --out") from None
        stored = self.get_meta("schema")
        if stored is None:
            self.set_meta("schema", SCHEMA_VERSION)
        elif stored != SCHEMA_VERSION:
            raise BenchError(f"{self.path} has schema {stored!r}, this bench writes "
                             f"{SCHEMA_VERSION!r}; use a new --out")

    def _migrate(self, stored: str) -> None:
        """Bring a store of an older schema to :data:`SCHEMA_VERSION` in one transaction."""
        with self.transaction() as db:
            for statement in MIGRATIONS[stored]:
                db.execute(statement)
            self.set_meta("schema", SCHEMA_VERSION)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One all-or-nothing transaction on the store's connection (it autocommits otherwise)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @classmethod
    def open_read_only(cls, path: str | os.PathLike) -> ResultsStore:
        """Open an existing results database read-only (``mode=ro``); nothing is written to it.

        Raises:
            BenchError: ``path`` is missing, not SQLite, or not a splatbench results store
                (its ``meta`` table lacks the schema row this bench writes).
        """
        from urllib.parse import quote

        path = Path(path)
        if not path.is_file():
            raise BenchError(f"no results database at {path}; pass a study output directory")
        store = cls.__new__(cls)
        store.path = path
        try:
            # No -wal file: no writer has it open (WAL writers keep one), so read it as
            # immutable - SQLite then creates no -shm/-wal beside it. Else plain read-only.
            live = Path(f"{path}-wal").exists()
            uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if live else "&immutable=1")
            store._db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            tables = {r[0] for r in store._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            schema = store.get_meta("schema") if "meta" in tables else None
        except sqlite3.DatabaseError as exc:
            raise BenchError(f"{path} is not a splatbench results database ({exc}); pass the "
                             "results.sqlite of a study output") from None
        missing = {"meta", "rollouts", "quality", "conditions"} - tables
        store._rollout_select = ROLLOUT_COLUMNS
        if schema in MIGRATIONS and not missing:  # read an old store as it is: rename on read
            store._rollout_select = tuple("init_condition AS init_index" if c == "init_index"
                                          else c for c in ROLLOUT_COLUMNS)
        elif schema != SCHEMA_VERSION or missing:
            store._db.close()
            raise BenchError(f"{path} is not a splatbench results store (schema {schema!r}, "
                             f"expected {SCHEMA_VERSION!r}); pass the results.sqlite of a "
                             "study output")
        return store

    # -- lifecycle ------------------------------------------------------------------------
    def hold(self, lock: Any) -> None:
        """Keep ``lock`` (an object with ``release()``) until :meth:`close`."""
        self._lock = lock

    def close(self) -> None:
        """Close the database and release the held lock."""
        self._db.close()
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            lock.release()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key`` in ``meta``, None when absent."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` in ``meta`` (replacing it)."""
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- generic idempotent insert ----------------------------------------------------------
    def _insert(self, table: str, columns: Sequence[str], key: Sequence[str],
                values: Sequence[Any]) -> bool:
        """Insert one row; True if new. Same key + same values: no-op; different: BenchError."""
        placeholders = ", ".join("?" for _ in columns)
        cursor = self._db.execute(
            f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({placeholders})",
            tuple(values))
        if cursor.rowcount == 1:
            return True
        where = " AND ".join(f"{k} = ?" for k in key)
        key_values = tuple(values[columns.index(k)] for k in key)
        stored = self._db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}",
                                  key_values).fetchone()
        if not all(_same(a, b) for a, b in zip(stored, values, strict=True)):
            raise BenchError(
                f"{table} row {dict(zip(key, key_values, strict=True))} is already stored with "
                "different values; the study is not deterministic or the spec changed - "
                "use a new --out"
            )
        return False

    # -- rollouts -------------------------------------------------------------------------
    def add_rollout(self, row: RolloutRow) -> bool:
        """Store one rollout (committed at once); True if it was not stored yet."""
        if row.domain not in DOMAINS:
            raise BenchError(f"domain must be one of {DOMAINS}, got {row.domain!r}")
        values = [int(v) if isinstance(v, bool) else v for v in asdict(row).values()]
        return self._insert("rollouts", ROLLOUT_COLUMNS, ROLLOUT_KEY, values)

    def has_rollout(self, key: Sequence[Any]) -> bool:
        """True when a rollout with this primary key is stored."""
        where = " AND ".join(f"{k} = ?" for k in ROLLOUT_KEY)
        return self._db.execute(f"SELECT 1 FROM rollouts WHERE {where}", tuple(key)).fetchone() \
            is not None

    def _select(self, table: str, columns: Sequence[str], key: Sequence[str],
                study: str | None, *, select: Sequence[str] | None = None
                ) -> list[dict[str, Any]]:
        """Every row of ``table`` (of ``study`` if given) as column -> value, sorted by key."""
        sql = f"SELECT {', '.join(select or columns)} FROM {table}"
        args: tuple = ()
        if study is not None:
            sql, args = sql + " WHERE study = ?", (study,)
        rows = self._db.execute(sql + f" ORDER BY {', '.join(key)}", args).fetchall()
        return [dict(zip(columns, r, strict=True)) for r in rows]

    def rollouts(self, study: str | None = None) -> list[RolloutRow]:
        """Every stored rollout (of ``study`` if given), sorted by key."""
        out = []
        select = getattr(self, "_rollout_select", ROLLOUT_COLUMNS)
        for data in self._select("rollouts", ROLLOUT_COLUMNS, ROLLOUT_KEY, study, select=select):
            for flag in ("success", "truncated"):  # issue 30: bool(7) counted 7 as a success
                data[flag] = _flag(self.path, data, flag)
            out.append(RolloutRow(**data))
        return out

    def count_rollouts(self) -> int:
        """Number of stored rollouts."""
        return int(self._db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0])

    # -- policy replies ---------------------------------------------------------------------
    def set_policy_replies(self, key: Sequence[Any], rows: Sequence[tuple[int, str]]) -> None:
        """Store a rollout's reply extras (:func:`reply_rows`), in one transaction.

        Rows an earlier attempt of the same rollout left (killed before its row committed)
        are replaced: a rollout has the extras of the run that stored it.
        """
        where = " AND ".join(f"{k} = ?" for k in ROLLOUT_KEY)
        with self.transaction() as db:
            db.execute(f"DELETE FROM policy_replies WHERE {where}", tuple(key))
            db.executemany(
                f"INSERT INTO policy_replies ({', '.join(REPLY_COLUMNS)}) VALUES "
                f"({', '.join('?' for _ in REPLY_COLUMNS)})",
                [(*key, int(query), text) for query, text in rows])

    def policy_replies(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every stored reply-extras row (of ``study`` if given), sorted by key and query."""
        tables = {r[0] for r in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "policy_replies" not in tables:  # a store written before the table existed
            return []
        return self._select("policy_replies", REPLY_COLUMNS, REPLY_KEY, study)

    def export_policy_replies(self, out_dir: str | os.PathLike) -> Path | None:
        """Write ``policy_replies.csv`` (key order) when any row is stored; its path, or None."""
        import csv
        import io

        rows = self.policy_replies()
        if not rows:  # in-process policies send no replies: no empty table
            return None
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(REPLY_COLUMNS)
        writer.writerows([row[c] for c in REPLY_COLUMNS] for row in rows)
        path = Path(out_dir) / "policy_replies.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, buffer.getvalue().encode())
        return path

    # -- quality --------------------------------------------------------------------------
    def add_quality(self, study: str, rows: Iterable[Any]) -> int:
        """Store per-frame scores (``metrics.views.ScoreRow``-like, ``variant`` = condition).

        All rows go in one transaction. Returns the number of new rows.
        """
        new = 0
        self._db.execute("BEGIN")
        try:
            for r in rows:
                new += self._insert("quality", QUALITY_COLUMNS, QUALITY_KEY,
                                    [study, r.scene, r.variant, r.view_protocol, r.metric,
                                     r.frame, float(r.value)])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return new

    def has_quality(self, study: str, scene: str, condition: str, protocol: str) -> bool:
        """True when any score of this scene, condition and view protocol is stored."""
        return self._db.execute(
            "SELECT 1 FROM quality WHERE study = ? AND scene = ? AND condition = ? "
            "AND view_protocol = ? LIMIT 1", (study, scene, condition, protocol)
        ).fetchone() is not None

    def quality(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every stored score (of ``study`` if given), sorted by key."""
        return self._select("quality", QUALITY_COLUMNS, QUALITY_KEY, study)

    # -- conditions -----------------------------------------------------------------------
    def add_condition(self, study: str, scene: str, condition: str, *, tool: str, path: str,
                      manifest_sha256: str, manifest: dict[str, Any]) -> bool:
        """Store a condition bundle's tool id, path and manifest; True if it was not stored yet."""
        text = json.dumps(manifest, sort_keys=True)
        return self._insert("conditions", CONDITION_COLUMNS, CONDITION_KEY,
                            [study, scene, condition, tool, path, manifest_sha256, text])

    def conditions(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every stored condition manifest (of ``study`` if given), sorted by key."""
        return self._select("conditions", CONDITION_COLUMNS, CONDITION_KEY, study)

    # -- export ---------------------------------------------------------------------------
    def tables(self, study: str | None = None) -> dict[str, Any]:
        """The stored results as long-format pandas DataFrames, sorted by key.

        Args:
            study: Only this study's rows (default: every stored row).

        Returns:
            ``{"rollouts", "quality", "conditions"}`` -> DataFrame: one row per rollout (bools as
            0/1), per score, per condition bundle (its manifest JSON left out).
        """
        import pandas as pd

        rollouts = pd.DataFrame([asdict(r) for r in self.rollouts(study)],
                                columns=list(ROLLOUT_COLUMNS))
        for column in ("success", "truncated"):
            rollouts[column] = rollouts[column].astype("int64")
        return {
            "rollouts": rollouts,
            "quality": pd.DataFrame(self.quality(study), columns=list(QUALITY_COLUMNS)),
            "conditions": pd.DataFrame(self.conditions(study), columns=list(CONDITION_COLUMNS))
            .drop(columns="manifest_json"),
        }

    def export_csv(self, out_dir: str | os.PathLike) -> dict[str, Path]:
        """Write ``rollouts.csv``, ``quality.csv`` and ``conditions.csv`` (sorted by key).

        Floats are written in Python's shortest round-trip form (``repr``), so the same results
        give the same bytes.
        """
        return self.export(out_dir, fmt="csv")

    def export(self, out_dir: str | os.PathLike, *, fmt: str = "csv") -> dict[str, Path]:
        """Write the :meth:`tables` as ``<name>.csv`` or ``<name>.parquet`` files in ``out_dir``.

        Args:
            out_dir: Output directory (created).
            fmt: ``"csv"`` or ``"parquet"`` (needs pyarrow).

        Returns:
            Table name -> written path.
        """
        if fmt not in EXPORT_FORMATS:
            raise BenchError(f"export format {fmt!r} is not one of {EXPORT_FORMATS}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name, frame in self.tables().items():
            path = out / f"{name}.{fmt}"
            if fmt == "csv":
                data = frame.to_csv(index=False, lineterminator="\n", na_rep="nan").encode()
            else:
                data = _parquet_bytes(frame)
            atomic_write_bytes(path, data)
            written[name] = path
        return written


EXPORT_FORMATS = ("csv", "parquet")


def _parquet_bytes(frame: Any) -> bytes:
    import importlib.util
    import io

    if importlib.util.find_spec("pyarrow") is None:
        raise BenchError("Parquet export needs pyarrow; pip install pyarrow, or export CSV")
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False, engine="pyarrow")
    return buffer.getvalue()
