"""The reaction screen of issue 33 item 4 (bench/demo/reaction.py)."""

from __future__ import annotations

import json

import pytest

from bench.demo.reaction import (
    MIN_CHANGED,
    REACTION_CONDITION_OFFSET,
    REAL_GAP_PP,
    ReactionConfig,
    screen_policy,
    summarise,
    write_reaction,
)


def _row(policy, trial, real, clean, preset, task="cup"):
    return {"task": task, "policy": policy, "scene": "duo", "trial": trial,
            "start": REACTION_CONDITION_OFFSET + trial, "real": real, "sim_clean": clean,
            "sim_preset": preset}


def test_summary_counts_paired_changes_and_mcnemar():
    rows = [_row("a", 0, 1, 1, 0), _row("a", 1, 1, 1, 0), _row("a", 2, 1, 1, 0),
            _row("a", 3, 0, 0, 0), _row("b", 0, 1, 1, 1), _row("b", 1, 0, 0, 1)]
    a, b = summarise(rows)
    assert (a["real"], a["sim_clean"], a["sim_preset"]) == (3, 3, 0)
    assert (a["worse"], a["better"], a["changed"]) == (3, 0, 3)
    # exact binomial on the 3 discordant pairs, two-sided: 2 * (1/2)^3 (closed form)
    assert a["mcnemar_p"] == 0.25 and a["reacts"]
    assert (b["worse"], b["better"], b["changed"], b["reacts"]) == (0, 1, 1, 1 >= MIN_CHANGED)
    assert b["mcnemar_p"] == 1.0


def test_held_out_block_is_disjoint_from_every_other_use_of_starts():
    from bench.demo.evaluation import EVAL_CONDITION_OFFSET
    from bench.demo.time_limits import TimeLimitConfig
    from bench.policies.bc_recipes import DaggerConfig

    dagger = DaggerConfig()
    reach = REACTION_CONDITION_OFFSET + 1000
    assert reach <= EVAL_CONDITION_OFFSET  # 8000-8999 vs the evaluation's 9000+
    assert dagger.condition_offset + 5 * dagger.episodes <= REACTION_CONDITION_OFFSET
    limits = TimeLimitConfig()
    assert limits.condition_offset + 3 * limits.starts_per_scene <= REACTION_CONDITION_OFFSET
    with pytest.raises(ValueError):
        ReactionConfig(trials=0)


@pytest.mark.slow  # three rollouts in the study's own envs (~20 s)
def test_screen_runs_the_study_envs_and_writes_its_tables(tmp_path):
    config = ReactionConfig(trials=1)
    rows = screen_policy("cup", "bc-large", config, progress=False)
    assert [r["start"] for r in rows] == [REACTION_CONDITION_OFFSET]
    assert set(rows[0]) >= {"real", "sim_clean", "sim_preset"}
    table = write_reaction(tmp_path, rows, config)
    assert table[0]["trials"] == 1
    assert (tmp_path / "reaction.md").read_text().startswith("| task | policy | real |")
    saved = json.loads((tmp_path / "reaction_config.json").read_text())
    assert saved["preset"] == "hole-90" and saved["condition_offset"] == REACTION_CONDITION_OFFSET


def test_committed_screen_table_is_its_trials_summarised():
    # results/demo-policies/reaction.csv is what summarise() makes of the committed trial rows
    import csv
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "results" / "demo-policies"
    with open(root / "reaction_trials.csv") as handle:
        rows = [{**r, **{k: int(r[k]) for k in ("trial", "start", "real", "sim_clean",
                                                  "sim_preset")}}
                for r in csv.DictReader(handle)]
    assert all(r["start"] >= REACTION_CONDITION_OFFSET for r in rows)
    with open(root / "reaction.csv") as handle:
        committed = list(csv.DictReader(handle))
    assert [{k: str(v) for k, v in r.items()} for r in summarise(rows)] == committed


@pytest.mark.parametrize("task", ["cup", "tape", "pen"])
def test_committed_pair_both_react_with_a_real_gap_in_the_band(task):
    """Issue 33 item 4 on the committed screen (held-out starts 8000+): the task's demo pair
    both change >= MIN_CHANGED paired outcomes under hole-90 and differ in real success by
    REAL_GAP_PP."""
    import csv
    from pathlib import Path

    from bench.policies.learned import DEMO_POLICIES

    root = Path(__file__).resolve().parents[3] / "results" / "demo-policies"
    with open(root / "reaction.csv") as handle:
        table = {(r["task"], r["policy"]): r for r in csv.DictReader(handle)}
    pair = [table[task, name] for name in DEMO_POLICIES[task]]
    assert all(int(r["changed"]) >= MIN_CHANGED and r["reacts"] == "True" for r in pair)
    rates = [100.0 * int(r["real"]) / int(r["trials"]) for r in pair]
    assert REAL_GAP_PP[0] <= abs(rates[0] - rates[1]) <= REAL_GAP_PP[1]


@pytest.mark.parametrize(("flag", "value"), [("--tasks", "rope"), ("--policies", "bc-huge"),
                                             ("--preset", "hole-99"), ("--trials", "0")])
def test_reaction_cli_refuses_bad_options_in_one_line(tmp_path, flag, value):
    import subprocess
    import sys

    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "bench.cli", "demo", "reaction",
                             "--out", str(out), flag, value], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and not out.exists()
    assert len(result.stderr.strip().splitlines()) == 1
    assert (flag.lstrip("-").replace("-", "_") in result.stderr
            or flag in result.stderr or "trials" in result.stderr), result.stderr


@pytest.mark.parametrize("task", ["cup", "tape", "pen"])
def test_committed_pair_gap_confirmed_on_the_evaluation_starts(task):
    """The pairs' confirmation (docs/demo-policies.md): on the evaluation starts 9000+ the
    demo pair's real success rates also differ by REAL_GAP_PP (``eval_pairs.csv``)."""
    import csv
    from pathlib import Path

    from bench.policies.learned import DEMO_POLICIES

    root = Path(__file__).resolve().parents[3] / "results" / "demo-policies"
    with open(root / "eval_pairs.csv") as handle:
        row = {r["task"]: r for r in csv.DictReader(handle)}[task]
    assert (row["policy_1"], row["policy_2"]) == tuple(DEMO_POLICIES[task])
    gap = 100.0 * abs(int(row["successes_1"]) - int(row["successes_2"])) / int(row["trials"])
    assert REAL_GAP_PP[0] <= gap <= REAL_GAP_PP[1]
