"""The next paper run, in progress: Tape's blur pair (issue 33 items 4 and 5).

Tape's pair for the next paper run, `bc-aux-dagger-blur-5` vs `bc-aux-dagger-blur`, was
chosen on held-out starts (docs/demo-policies.md, "Tape: blur augmentation"). Its time limit,
400 frames, was measured for it on the starts 7000+. The run takes more than one session, so
its store is committed between sittings (`results/demo-paper-next/results.sqlite`) and
resumed with the command in docs/demo.md. Until it finishes, `DEMO_POLICIES` keeps today's
pair, and the run is the paper profile with `--pair` and `--max-frames`. These tests keep the
committed store resumable and honest:

- it holds that spec exactly as `--resume` compares it;
- every stored rollout is one the spec plans, from the planned start, within its limit;
- its Cup and Pen rows are the finished paper run's rows, column for column. It reused them
  from `results/demo-paper` (`--reuse-from`, recorded in the store's meta).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from bench.demo.run import DemoConfig
from bench.study.plan import count_rollouts, init_index, rollout_plan
from bench.study.store import ROLLOUT_COLUMNS, ROLLOUT_KEY

ROOT = Path(__file__).resolve().parents[3]
NEXT = ROOT / "results" / "demo-paper-next"
PAPER_ROWS = ROOT / "results" / "demo-paper" / "tables" / "rollouts.csv"
PAIR = {"tape": ("bc-aux-dagger-blur-5", "bc-aux-dagger-blur")}
LIMITS = {"tape": 400}


def _spec():
    return DemoConfig(out=Path("unused"), profile="paper", pairs=PAIR,
                      frame_limits=LIMITS).study_spec()


def _store() -> sqlite3.Connection:
    path = NEXT / "results.sqlite"
    if not path.is_file():
        pytest.skip("no next paper run committed")
    # immutable: reading the committed file never writes a -wal / -shm beside it
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def test_next_paper_store_resumes_under_its_spec():
    db = _store()
    try:
        stored = db.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()
        reused = db.execute("SELECT value FROM meta WHERE key = 'reused_from'").fetchone()
    finally:
        db.close()
    assert stored is not None and stored[0] == json.dumps(_spec().to_json(), sort_keys=True)
    assert reused is not None
    (record,) = json.loads(reused[0])
    assert record["source"] == "results/demo-paper"
    # Cup's and Pen's rows (16,200 - 5,400 Tape rows, less the 24 spot-check rollouts)
    assert sum(record["copied"].values()) == 10_776 and len(record["checked"]) == 24
    assert not any(key.startswith("tape/") for key in record["copied"])


def test_next_paper_rollouts_are_planned_and_cup_pen_equal_the_paper_run():
    spec = _spec()
    planned = {  # key -> (initial condition, frame limit), from the runner's own plan
        (spec.name, scene, cond, task, policy, domain, str(trial)):
            (init_index(spec, domain, trial, cond), spec.frames_limit(scene, task))
        for domain, scene, cond, task, trial in rollout_plan(spec)
        for policy in spec.policies[task]}
    assert len(planned) == count_rollouts(spec) == 16_200
    db = _store()
    try:
        cursor = db.execute(f"SELECT {', '.join(ROLLOUT_COLUMNS)} FROM rollouts")
        rows = [dict(zip(ROLLOUT_COLUMNS, r, strict=True)) for r in cursor]
    finally:
        db.close()
    with PAPER_ROWS.open(newline="") as f:
        paper = {tuple(r[k] for k in ROLLOUT_KEY): r for r in csv.DictReader(f)}
    tape = 0
    for row in rows:
        key = tuple(str(row[k]) for k in ROLLOUT_KEY)
        assert key in planned, f"{key} is not a rollout of the next paper spec"
        start, limit = planned[key]
        assert int(row["init_index"]) == start and int(row["frames"]) <= limit, key
        if row["task"] == "tape":
            tape += 1
            continue
        assert all(str(row[c]) == paper[key][c] for c in ROLLOUT_COLUMNS), key
    assert len(rows) - tape == 10_800  # every Cup and Pen rollout is there
