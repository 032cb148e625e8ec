"""Rollout faults and per-query latency, beside the results store.

A policy fault (dead, refusing, slow or malformed server; a malformed chunk) is not
a task failure: the rollout is *not* stored in ``rollouts`` (so analysis never sees
it and ``bench study run --resume`` reruns exactly those), its reason goes into
``rollout_errors``. Every rollout's query latency (median, p95, count) goes into
``rollout_latency``; wall-clock numbers are kept out of ``rollouts`` so result
files stay byte-identical across runs. Both tables live in the study's
``results.sqlite`` (their own connection; WAL) and are exported as
``errors.csv`` / ``latency.csv``.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.provenance import atomic_write_bytes

KEY = ("study", "scene", "condition", "task", "policy", "domain", "trial")
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS rollout_errors (
    study TEXT, scene TEXT, condition TEXT, task TEXT, policy TEXT, domain TEXT,
    trial INTEGER, reason TEXT NOT NULL, attempts INTEGER NOT NULL,
    PRIMARY KEY ({", ".join(KEY)}));
CREATE TABLE IF NOT EXISTS rollout_latency (
    study TEXT, scene TEXT, condition TEXT, task TEXT, policy TEXT, domain TEXT,
    trial INTEGER, queries INTEGER NOT NULL, p50_ms REAL NOT NULL, p95_ms REAL NOT NULL,
    PRIMARY KEY ({", ".join(KEY)}));
CREATE TABLE IF NOT EXISTS rollout_attempts (
    study TEXT, scene TEXT, condition TEXT, task TEXT, policy TEXT, domain TEXT,
    trial INTEGER, attempt INTEGER NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY ({", ".join(KEY)}, attempt));
CREATE TABLE IF NOT EXISTS policy_latency (
    study TEXT, task TEXT, policy TEXT, p50_ms REAL NOT NULL, PRIMARY KEY (study, task, policy));
"""
ERROR_COLUMNS = (*KEY, "reason", "attempts")
LATENCY_COLUMNS = (*KEY, "queries", "p50_ms", "p95_ms")
ATTEMPT_COLUMNS = (*KEY, "attempt", "reason")


class RolloutLog:
    """Open the fault / latency tables of ``<out>/results.sqlite`` (``path``: the file)."""

    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(Path(path), isolation_level=None, timeout=30.0)
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> RolloutLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_error(self, key: Sequence[Any], reason: str) -> None:
        """Record one failed attempt of a rollout (the count of attempts goes up by one)."""
        row = self._db.execute(f"SELECT attempts FROM rollout_errors WHERE "
                               f"{' AND '.join(f'{k} = ?' for k in KEY)}", tuple(key)).fetchone()
        attempts = (row[0] if row else 0) + 1
        self._db.execute(f"INSERT OR REPLACE INTO rollout_errors VALUES ({', '.join('?' * 9)})",
                         (*key, reason, attempts))

    def clear_error(self, key: Sequence[Any]) -> None:
        """Forget a rollout's error (it has now succeeded)."""
        self._db.execute(f"DELETE FROM rollout_errors WHERE "
                         f"{' AND '.join(f'{k} = ?' for k in KEY)}", tuple(key))

    def errors(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every recorded rollout error (of ``study`` if given), sorted by key."""
        return self._rows("rollout_errors", ERROR_COLUMNS, study)

    def add_attempt(self, key: Sequence[Any], reason: str) -> int:
        """Record a failed execution of a rollout (executor error); its attempt number."""
        row = self._db.execute(f"SELECT MAX(attempt) FROM rollout_attempts WHERE "
                               f"{' AND '.join(f'{k} = ?' for k in KEY)}", tuple(key)).fetchone()
        attempt = (row[0] or 0) + 1
        self._db.execute(f"INSERT INTO rollout_attempts VALUES ({', '.join('?' * 9)})",
                         (*key, attempt, reason))
        return attempt

    def attempts(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every failed execution (executor errors, retried), sorted by key."""
        return self._rows("rollout_attempts", ATTEMPT_COLUMNS, study)

    def add_latency(self, key: Sequence[Any], latencies_ms: Sequence[float]) -> None:
        """Store a rollout's policy-query latencies as count, p50 and p95, milliseconds."""
        values = np.asarray(latencies_ms, dtype=np.float64)
        p50 = float(np.median(values)) if len(values) else 0.0
        p95 = float(np.percentile(values, 95)) if len(values) else 0.0
        self._db.execute(f"INSERT OR REPLACE INTO rollout_latency VALUES ({', '.join('?' * 10)})",
                         (*key, len(values), p50, p95))

    def latency(self, study: str | None = None) -> list[dict[str, Any]]:
        """Every stored rollout latency summary (of ``study`` if given), sorted by key."""
        return self._rows("rollout_latency", LATENCY_COLUMNS, study)

    def policy_latency(self, study: str, task: str, policy: str) -> float | None:
        """The stored p50 latency of a policy on a task, ms; None when not measured yet."""
        row = self._db.execute("SELECT p50_ms FROM policy_latency WHERE study = ? AND task = ? "
                               "AND policy = ?", (study, task, policy)).fetchone()
        return None if row is None else float(row[0])

    def set_policy_latency(self, study: str, task: str, policy: str, p50_ms: float) -> None:
        """Store a policy's measured p50 latency (the first measurement is kept)."""
        self._db.execute("INSERT OR IGNORE INTO policy_latency VALUES (?, ?, ?, ?)",
                         (study, task, policy, float(p50_ms)))

    def _rows(self, table: str, columns: Sequence[str], study: str | None) -> list[dict]:
        where, args = ("WHERE study = ?", (study,)) if study is not None else ("", ())
        cursor = self._db.execute(f"SELECT {', '.join(columns)} FROM {table} {where} "
                                  f"ORDER BY {', '.join(KEY)}", args)
        return [dict(zip(columns, row, strict=True)) for row in cursor]

    def export_csv(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``errors.csv``, ``latency.csv`` and, if any, ``attempts.csv`` (key order)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name, rows, columns in (("errors", self.errors(), ERROR_COLUMNS),
                                    ("latency", self.latency(), LATENCY_COLUMNS),
                                    ("attempts", self.attempts(), ATTEMPT_COLUMNS)):
            if name == "attempts" and not rows:  # executor errors are rare: no empty table
                continue
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows([row[c] for c in columns] for row in rows)
            path = out / f"{name}.csv"
            atomic_write_bytes(path, buffer.getvalue().encode())
            written[name] = path
        return written
