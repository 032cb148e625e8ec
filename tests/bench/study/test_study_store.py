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
                      domain="sim", trial=trial, init_condition=trial, success=success,
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
