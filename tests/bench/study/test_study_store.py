"""Results store: idempotent inserts, resume after a killed writer, deterministic CSV export."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from bench.errors import BenchError
from bench.study.store import ROLLOUT_COLUMNS, ResultsStore, RolloutRow


def _row(trial: int, *, success: bool = True, policy: str = "pi1") -> RolloutRow:
    return RolloutRow(study="s", scene="duo", condition="clean", task="cup", policy=policy,
                      domain="sim", trial=trial, init_index=trial, success=success,
                      progress_final=0.5, progress_max=0.75, frames=60, failure="",
                      truncated=False, first_grasp_frame=20, manifest_sha256="ab" * 32)


def test_insert_is_idempotent(tmp_path):
    with ResultsStore(tmp_path) as store:
        assert store.add_rollout(_row(0)) is True
        assert store.add_rollout(_row(0)) is False  # same key, same values: no-op
        assert store.count_rollouts() == 1
        assert store.has_rollout(_row(0).key)
        assert not store.has_rollout(_row(1).key)
        assert store.rollouts() == [_row(0)]


def test_conflicting_values_are_refused(tmp_path):
    with ResultsStore(tmp_path) as store:
        store.add_rollout(_row(0, success=True))
        with pytest.raises(BenchError, match="different values"):
            store.add_rollout(_row(0, success=False))
        assert store.rollouts()[0].success is True


def test_bad_domain_refused(tmp_path):
    import dataclasses

    with ResultsStore(tmp_path) as store, pytest.raises(BenchError, match="domain"):
        store.add_rollout(dataclasses.replace(_row(0), domain="mars"))


def test_database_uses_wal(tmp_path):
    import sqlite3

    ResultsStore(tmp_path).close()
    mode = sqlite3.connect(tmp_path / "results.sqlite").execute("PRAGMA journal_mode").fetchone()
    assert mode[0] == "wal"


def test_resume_after_killed_writer(tmp_path):
    """A writer SIGKILLed after 7 rollouts leaves exactly those 7; a resumed run adds the rest."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(os.path.dirname(__file__))!r})
        from test_study_store import _row
        from bench.study.store import ResultsStore
        store = ResultsStore({str(tmp_path)!r})
        for t in range(20):
            if t == 7:
                os.kill(os.getpid(), signal.SIGKILL)
            store.add_rollout(_row(t))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with ResultsStore(tmp_path) as store:
        assert [r.trial for r in store.rollouts()] == list(range(7))
        new = [t for t in range(20) if not store.has_rollout(_row(t).key)]
        for t in new:
            store.add_rollout(_row(t))
        assert new == list(range(7, 20))
        assert [r.trial for r in store.rollouts()] == list(range(20))


class _Score:
    def __init__(self, frame: str, value: float) -> None:
        self.scene, self.variant, self.view_protocol = "duo", "warp", "test"
        self.metric, self.frame, self.value = "psnr", frame, value


def test_quality_and_conditions_and_export(tmp_path):
    with ResultsStore(tmp_path / "db") as store:
        store.add_rollout(_row(1, policy="pi2"))
        store.add_rollout(_row(0, policy="pi2", success=False))
        store.add_rollout(_row(0))
        assert store.add_quality("s", [_Score("a", 30.0), _Score("b", 31.5)]) == 2
        assert store.add_quality("s", [_Score("a", 30.0)]) == 0
        assert store.has_quality("s", "duo", "warp", "test")
        store.add_condition("s", "duo", "warp", tool="warp/1", path="scenes/duo/warp",
                            manifest_sha256="cd" * 32, manifest={"tool": "warp/1"})
        first = store.export_csv(tmp_path / "csv")
        blobs = {k: p.read_bytes() for k, p in first.items()}
        second = store.export_csv(tmp_path / "csv")
        assert {k: p.read_bytes() for k, p in second.items()} == blobs  # byte-stable
    with open(first["rollouts"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == ROLLOUT_COLUMNS
    # sorted by key: policy pi1 before pi2, then trial
    assert [(r["policy"], r["trial"], r["success"]) for r in rows] == [
        ("pi1", "0", "1"), ("pi2", "0", "0"), ("pi2", "1", "1")]
    with open(first["quality"], newline="") as f:
        assert [r["value"] for r in csv.DictReader(f)] == ["30.0", "31.5"]
    with open(first["conditions"], newline="") as f:
        assert next(csv.DictReader(f))["tool"] == "warp/1"


def test_not_a_database(tmp_path):
    (tmp_path / "results.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BenchError, match="not a splatbench results database"):
        ResultsStore(tmp_path)


# The rollouts table of schema splatbench-results/1 (bench/study/store.py before the
# init_condition -> init_index rename), verbatim; the other tables are unchanged in /2.
_SCHEMA_V1_ROLLOUTS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE rollouts (
    study TEXT NOT NULL, scene TEXT NOT NULL, condition TEXT NOT NULL, task TEXT NOT NULL,
    policy TEXT NOT NULL, domain TEXT NOT NULL CHECK (domain IN ('sim', 'real')),
    trial INTEGER NOT NULL CHECK (trial >= 0), init_condition INTEGER NOT NULL,
    success INTEGER NOT NULL, progress_final REAL NOT NULL, progress_max REAL NOT NULL,
    frames INTEGER NOT NULL, failure TEXT NOT NULL, truncated INTEGER NOT NULL,
    first_grasp_frame INTEGER NOT NULL, manifest_sha256 TEXT NOT NULL,
    PRIMARY KEY (study, scene, condition, task, policy, domain, trial));
"""


def _old_store(path, rows):
    """A schema-/1 results.sqlite holding ``rows`` (as a bench before the rename wrote it)."""
    import sqlite3

    from bench.study.store import _SCHEMA

    db = sqlite3.connect(path / "results.sqlite")
    db.executescript(_SCHEMA_V1_ROLLOUTS)
    db.executescript(_SCHEMA)  # quality and conditions (CREATE ... IF NOT EXISTS)
    db.execute("INSERT INTO meta VALUES ('schema', 'splatbench-results/1')")
    for r in rows:
        values = [int(v) if isinstance(v, bool) else v for v in r.__dict__.values()]
        db.execute(f"INSERT INTO rollouts VALUES ({', '.join('?' * len(values))})", values)
    db.commit()
    db.close()


def test_old_schema_store_migrates_and_exports_identically(tmp_path):
    from bench.study.store import SCHEMA_VERSION

    rows = [_row(t, success=t % 2 == 0) for t in range(4)] + [_row(0, policy="pi2")]
    new, old = tmp_path / "new", tmp_path / "old"
    with ResultsStore(new) as store:
        for r in rows:
            store.add_rollout(r)
        store.export_csv(new / "csv")
    old.mkdir()
    _old_store(old, rows)
    # read-only: the old store is read as it is (nothing written), with the new names
    with ResultsStore.open_read_only(old / "results.sqlite") as store:
        assert store.rollouts() == sorted(rows, key=lambda r: r.key)
        assert store.get_meta("schema") == "splatbench-results/1"
    with ResultsStore(old) as store:  # writable: migrated in place
        assert store.get_meta("schema") == SCHEMA_VERSION
        assert store.rollouts() == sorted(rows, key=lambda r: r.key)
        store.export_csv(old / "csv")
        assert store.add_rollout(rows[0]) is False  # still the same row after the migration
    for name in ("rollouts.csv", "quality.csv", "conditions.csv"):
        assert (old / "csv" / name).read_bytes() == (new / "csv" / name).read_bytes(), name
    header = (new / "csv" / "rollouts.csv").read_text().splitlines()[0].split(",")
    assert "init_index" in header and "init_condition" not in header


def test_rollout_row_from_episode_record():
    from bench.sim.rollout import EpisodeRecord

    record = EpisodeRecord(episode=3, init_index=7, task="cup", policy="pi1", scene="bundle",
                           success=True, progress_final=0.5, progress_max=0.75,
                           failure="", truncated=False, frames=60, policy_queries=4,
                           first_grasp_frame=20, init_x=0.0, init_y=0.0, init_yaw_deg=0.0)
    row = RolloutRow.from_episode(record, study="s", scene="duo", condition="clean",
                                  task="cup", policy="pi1", domain="sim", trial=7,
                                  manifest_sha256="ab" * 32)
    assert row == _row(7)


def _reference_csv(header, rows) -> bytes:
    """The csv-module export the pandas one replaced (floats as repr, bools as 0/1)."""
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[repr(v) if isinstance(v, float) else int(v) if isinstance(v, bool) else v
                       for v in row] for row in rows])
    return buffer.getvalue().encode()


def test_pandas_export_matches_the_csv_module_reference(tmp_path):
    import dataclasses
    from types import SimpleNamespace

    from bench.study.store import CONDITION_COLUMNS, QUALITY_COLUMNS

    rows = [dataclasses.replace(_row(t), progress_final=v, failure=f)
            for t, (v, f) in enumerate([(0.1 + 0.2, ""), (1e-17, "a,b"), (1.0, 'say "x"'),
                                        (2.5e300, "left_workspace:cup")])]
    scores = [SimpleNamespace(scene="duo", variant="clean", view_protocol="test", metric=m,
                              frame=f"{i:04d}", value=v)
              for i, (m, v) in enumerate([("psnr", 31.123456789), ("ssim", 0.1 + 0.7),
                                          ("lpips", float("inf")), ("psnr", 7.0)])]
    with ResultsStore(tmp_path) as store:
        for r in rows:
            store.add_rollout(r)
        store.add_quality("s", scores)
        store.add_condition("s", "duo", "clean", tool="copy/1", path="scenes/duo",
                            manifest_sha256="cd" * 32, manifest={"a": 1})
        written = store.export_csv(tmp_path / "csv")
        expected = {
            "rollouts": _reference_csv(ROLLOUT_COLUMNS, [dataclasses.astuple(r) for r in rows]),
            "quality": _reference_csv(QUALITY_COLUMNS, [[r[c] for c in QUALITY_COLUMNS]
                                                        for r in store.quality()]),
            "conditions": _reference_csv(CONDITION_COLUMNS[:-1],
                                         [[r[c] for c in CONDITION_COLUMNS[:-1]]
                                          for r in store.conditions()]),
        }
        for name, path in written.items():
            assert path.read_bytes() == expected[name], name
        parquet = store.export(tmp_path / "pq", fmt="parquet")
        tables = store.tables()
    import pandas as pd

    for name, path in parquet.items():
        pd.testing.assert_frame_equal(pd.read_parquet(path), tables[name])
    with pytest.raises(BenchError, match="not one of"):
        ResultsStore(tmp_path).export(tmp_path / "x", fmt="xlsx")
