"""The paper run's committed results (issue 33 items 2 and 7).

The paper profile takes several sittings of about three hours on 2 cores, and every session
starts from a fresh clone, so its results store is committed (``results/demo-paper/
results.sqlite``) at the end of each sitting and the next one continues it with
``bench demo --profile paper --out results/demo-paper --resume``. These tests keep that
store resumable and honest while a run is in progress (the run finished on 2026-12-07; its
Tape cells were run again with Tape's blur pair the same day, copying the Cup and Pen rows
with ``--reuse-from``, and the re-run's store replaced the first one's):

- it holds the paper profile's spec exactly as ``--resume`` compares it (any change to the
  paper profile, its policies' ids or its limits would make the store refuse to continue);
- every stored rollout is one the spec plans (no stray key, no duplicate);
- the default profile is the paper run's fast preview: every rollout of the committed
  ``results/demo/tables/rollouts.csv`` is one of the paper run's, from the same start within
  the same limit, and column for column where both were computed with the same float
  numerics (the committed paper run predates the CPU-independent ones).

Once the run is finished the store gives way to ``results/demo-paper/tables/rollouts.csv``;
the same checks then read that table, and every preview rollout must be in it.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from bench.demo.run import DemoConfig
from bench.study.plan import count_rollouts, init_index, rollout_cells
from bench.study.store import ROLLOUT_COLUMNS, ROLLOUT_KEY

ROOT = Path(__file__).resolve().parents[3]
PAPER = ROOT / "results" / "demo-paper"
PREVIEW = ROOT / "results" / "demo" / "tables" / "rollouts.csv"


def _paper_spec():
    return DemoConfig(out="unused", profile="paper").study_spec()


def _read_only(path: Path) -> sqlite3.Connection:
    # immutable: reading the committed file never writes a -wal / -shm beside it
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _paper_rows() -> dict[tuple, dict[str, str]]:
    """The paper run's rollouts by key, as the text ``rollouts.csv`` holds them."""
    table = PAPER / "tables" / "rollouts.csv"
    if table.is_file():
        with table.open(newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        store = PAPER / "results.sqlite"
        if not store.is_file():
            pytest.fail(f"neither {table} nor {store} is committed: the paper run's results "
                        "are lost; resume it (docs/demo.md, 'The paper run')")
        db = _read_only(store)
        try:
            cursor = db.execute(f"SELECT {', '.join(ROLLOUT_COLUMNS)} FROM rollouts")
            rows = [dict(zip(ROLLOUT_COLUMNS, r, strict=True)) for r in cursor]
        finally:
            db.close()
    out = {}
    for row in rows:
        key = tuple(str(row[k]) for k in ROLLOUT_KEY)
        assert key not in out, f"duplicate rollout {key}"
        out[key] = row
    return out


def test_committed_paper_store_resumes_under_the_paper_profile():
    store = PAPER / "results.sqlite"
    if not store.is_file():
        assert (PAPER / "tables" / "rollouts.csv").is_file(), "no paper results committed"
        pytest.skip("the paper run is finished: its tables replace the store")
    db = _read_only(store)
    try:
        stored = db.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()
    finally:
        db.close()
    assert stored is not None, "the committed store has no spec: it cannot be resumed"
    # what bench.study.runner.open_output compares on --resume
    assert stored[0] == json.dumps(_paper_spec().to_json(), sort_keys=True)


def test_paper_rollouts_are_planned_by_the_paper_spec():
    spec = _paper_spec()
    rows = _paper_rows()
    planned = {}  # key -> (initial condition, frame limit), from the executor's own plan
    for cell in rollout_cells(spec):
        for policy in cell.policies:
            for trial in range(cell.trials):
                key = (spec.name, cell.scene, cell.condition, cell.task, policy, cell.domain,
                       str(trial))
                planned[key] = (init_index(spec, cell.domain, trial, cell.condition),
                                spec.max_frames[cell.scene][cell.task])
    assert len(planned) == count_rollouts(spec) == 16_200
    assert 0 < len(rows) <= len(planned)
    for key, row in rows.items():
        assert key in planned, f"{key} is not a rollout of the paper spec"
        start, limit = planned[key]
        assert int(row["init_index"]) == start and int(row["frames"]) <= limit, key


def _numerics(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())["numerics"]


def test_default_profiles_rollouts_are_the_paper_runs_first_trials():
    """The preview's rollouts are the paper run's first trials: the same start and limit for
    every one (the design), and column for column where both runs computed with the same
    float numerics. The committed paper run predates the CPU-independent numerics
    (MKL_CBWR=COMPATIBLE, pinned policy threads, no oneDNN; bench/numerics.py): its rows come
    from the earlier pin, so its policies' last bits, and the outcomes they decide, differ."""
    rows = _paper_rows()
    with PREVIEW.open(newline="") as f:
        preview = list(csv.DictReader(f))
    paper_numerics, preview_numerics = _numerics(PAPER), _numerics(PREVIEW.parents[1])
    same_numerics = paper_numerics == preview_numerics
    if not same_numerics:  # which pins each run recorded: the paper run the earlier one
        assert paper_numerics["env"].get("MKL_ENABLE_INSTRUCTIONS") == "AVX2"
        assert preview_numerics["env"].get("MKL_CBWR") == "COMPATIBLE"
    columns = ROLLOUT_COLUMNS if same_numerics else ("init_index",)
    spec = _paper_spec()
    shared = 0
    for row in preview:
        key = tuple(row[k] for k in ROLLOUT_KEY)
        if key not in rows:
            continue
        shared += 1
        paper = rows[key]
        assert int(row["frames"]) <= spec.max_frames[row["scene"]][row["task"]], key
        for column in columns:
            assert str(paper[column]) == row[column], \
                f"{key}: {column} is {row[column]!r} in the preview, {paper[column]!r} in the paper"
    if (PAPER / "tables" / "rollouts.csv").is_file():
        # finished: every preview rollout (720) is one of the paper run's
        assert shared == len(preview) == 720, f"{shared} of {len(preview)} preview rollouts shared"
    else:
        # the paper run starts with Duo's real cells (120 rollouts, all in the preview) and
        # clean Cup (its first 10 trials per policy are the preview's): at least 140 from the
        # first sitting
        assert shared >= 140, f"only {shared} preview rollouts are in the paper store"
