"""The control condition, paired McNemar and the UNDERPOWERED verdict (issue 33 item 2).

A hand-built store: one scene ``a``, Cup, policies p1 / p2, 8 trials per cell, conditions
clean, hole-54 and the control ``clean-repeat``. Every expected number is worked out in the
comments from the counts below.
"""

from __future__ import annotations

import csv
from math import comb

import pytest

from bench.errors import BenchError
from bench.study.analysis import analyse, paired_change
from bench.study.plan import CONTROL, init_index, rollout_cells
from bench.study.sequential import _pair_spec
from bench.study.spec import StudySpec, spec_from_dict
from bench.study.store import ResultsStore, RolloutRow
from protocols.power import NO_GAP, POWERED, UNDERPOWERED, power_verdicts
from protocols.stats import mcnemar_exact_p

SPEC = StudySpec(name="ctl", sample_scenes={"a": 0},
                 conditions=("clean", "hole-54", CONTROL), tasks=("cup",),
                 policies={"cup": ("p1", "p2")}, trials=8, real_trials=8, metrics=("psnr",))

# (condition, policy) -> trials that succeed
SUCCESS = {
    ("clean", "p1"): range(0, 7), ("clean", "p2"): (),  # 7/8 vs 0/8
    ("hole-54", "p1"): (7,), ("hole-54", "p2"): (),  # 1/8 vs 0/8: worse 7, better 1 (p1)
    (CONTROL, "p1"): range(1, 8), (CONTROL, "p2"): (0,),  # 7/8 vs 1/8
}
REAL = {"p1": range(0, 6), "p2": range(0, 2)}  # 6/8 vs 2/8: p1 ranks first


def test_the_control_is_part_of_the_spec_schema():
    assert SPEC.control and SPEC.all_conditions == ["clean", "hole-54", CONTROL]
    assert SPEC.quality_conditions == ["clean", "hole-54"]  # its bundle is clean's
    assert SPEC.reliability_conditions == ["hole-54"]  # not a counterfactual
    # its own block of starts, disjoint from the paired simulated and the "real" ones
    assert [init_index(SPEC, "sim", t, CONTROL) for t in (0, 7)] == [2000, 2007]
    assert [init_index(SPEC, "sim", t, "hole-54") for t in (0, 7)] == [100, 107]
    assert init_index(SPEC, "real", 3, CONTROL) == 1003
    cells = [c for c in rollout_cells(SPEC) if c.condition == CONTROL]
    assert [(c.domain, c.trials) for c in cells] == [("sim", 8)]
    again = spec_from_dict(SPEC.to_json())
    assert again == SPEC and again.to_json()["control_condition_offset"] == 2000
    with pytest.raises(BenchError, match="control_condition_offset .* overlap.*disjoint"):
        SPEC.replace(control_condition_offset=105)
    with pytest.raises(BenchError, match="control_condition_offset .* overlap"):
        SPEC.replace(control_condition_offset=1005)
    SPEC.replace(control_condition_offset=108)  # right after the simulated block: fine
    SPEC.replace(conditions=("clean", "hole-54"), control_condition_offset=105)  # no control
    with pytest.raises(BenchError, match="list it in conditions"):
        SPEC.replace(extra_conditions={CONTROL: {"a": "somewhere"}})
    with pytest.raises(BenchError, match="reliability_variants names the control"):
        SPEC.replace(reliability_variants=(CONTROL,))


def test_a_study_without_the_control_keeps_its_stored_spec_text():
    """A run begun before the control existed resumes: the stored spec (compared as text on
    --resume) gains no control_condition_offset key unless the study has a control."""
    plain = SPEC.replace(conditions=("clean", "hole-54"))
    assert "control_condition_offset" not in plain.to_json()
    assert spec_from_dict(plain.to_json()) == plain
    moved = plain.replace(control_condition_offset=500)  # set on purpose: kept
    assert moved.to_json()["control_condition_offset"] == 500


def test_sequential_with_max_trials_equal_to_trials_runs_its_looks():
    # regression: accepted by the spec, then refused when a look's spec was made
    spec = SPEC.replace(sequential={"max_trials": 8, "min_trials": 4, "batch_size": 4})
    look = _pair_spec(spec, "a", "cup", 4)
    assert look.trials == 4 and look.sequential is None


def test_mcnemar_against_the_hand_computed_binomial():
    # b = 7 discordant one way, c = 1 the other: p = 2 sum_{k<=1} C(8,k) / 2^8 = 18/256
    assert mcnemar_exact_p(7, 1) == pytest.approx(2 * (comb(8, 0) + comb(8, 1)) / 2**8,
                                                  rel=1e-12) == pytest.approx(0.0703125)
    assert mcnemar_exact_p(1, 7) == pytest.approx(0.0703125)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert paired_change({0: 1, 1: 1, 2: 0}, {0: 0, 1: 1, 2: 1, 3: 1}) == (3, 1, 1)


def _rows():
    def row(cond, policy, domain, trial, success):
        return RolloutRow(study="ctl", scene="a", condition=cond, task="cup", policy=policy,
                          domain=domain, trial=trial,
                          init_index=init_index(SPEC, domain, trial, cond), success=success,
                          progress_final=1.0, progress_max=1.0, frames=10, failure="",
                          truncated=False, first_grasp_frame=-1, manifest_sha256="0" * 64)

    for (cond, policy), wins in SUCCESS.items():
        for trial in range(8):
            yield row(cond, policy, "sim", trial, trial in wins)
    for policy, wins in REAL.items():
        for trial in range(8):
            yield row("clean", policy, "real", trial, trial in wins)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("control")
    with ResultsStore(out) as store:
        for r in _rows():
            store.add_rollout(r)
        analyse(SPEC, store, out / "tables")
    return out / "tables"


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_transitions_show_the_control_and_mcnemar(tables):
    rows = {r["condition"]: r for r in _csv(tables / "transitions.csv")}
    assert list(rows) == ["hole-54", CONTROL]
    # Fisher 7/8 vs 0/8: 2 x C(8,7) C(8,0) / C(16,7) = 16/11440 = 0.0014 (significant);
    # 1/8 vs 0/8 is not (p = 1): hole-54 loses the significance; the control's 7/8 vs 1/8
    # (2 x (C(8,7)C(8,1) + 1) / C(16,8) = 130/12870 = 0.010) keeps it: no transition
    hole, control = rows["hole-54"], rows[CONTROL]
    assert (hole["sig_lost"], hole["sig_gained"], hole["transitions"]) == ("1", "0", "1")
    assert (control["transitions"], hole["control_transitions"],
            control["control_transitions"]) == ("0", "0", "0")
    # hole-54 on the shared starts: p1 worse on trials 0-6, better on 7; p2 never changes
    assert (hole["worse"], hole["better"]) == ("7", "1")
    assert hole["mcnemar_p"] == "0.07031"  # 4 significant figures
    # Fisher of the pooled counts beside it: clean 7/16 vs hole-54 1/16
    from scipy.stats import fisher_exact

    assert float(hole["fisher_p"]) == pytest.approx(
        fisher_exact([[7, 9], [1, 15]]).pvalue, rel=1e-3)
    # the control against clean by trial index: p1 trial 0 worse and 7 better, p2 trial 0
    # better: b = 1, c = 2, p = min(1, 2 (C(3,0) + C(3,1)) / 2^3) = 1
    assert (control["worse"], control["better"]) == ("1", "2")
    assert float(control["mcnemar_p"]) == 1.0
    paired = {(r["condition"], r["policy"]): r for r in _csv(tables / "paired.csv")}
    p1 = paired[("hole-54", "p1")]
    assert (p1["clean_successes"], p1["successes"], p1["paired_trials"]) == ("7", "1", "8")
    assert float(p1["mcnemar_p"]) == pytest.approx(0.0703125, rel=1e-3)
    assert paired[(CONTROL, "p1")]["starts"] == "disjoint (control)"
    assert paired[("hole-54", "p2")]["mcnemar_p"] == "1"
    md = (tables / "transitions.md").read_text()
    assert "control_transitions" in md and CONTROL in md


def _plan_trials(tmp_path, p1: float, p2: float) -> str:
    """``fisher_trials`` of ``bench plan trials --p1 P1 --p2 P2`` (the command itself)."""
    from bench.cli import main

    out = tmp_path / f"plan_{p1:g}_{p2:g}"
    assert main(["plan", "trials", "--p1", repr(p1), "--p2", repr(p2), "--max-trials", "200",
                 "--out", str(out)]) == 0
    return _csv(out / "trials.csv")[0]["fisher_trials"]


def test_underpowered_verdict_agrees_with_bench_plan_trials(tables, tmp_path):
    rows = {r["condition"]: r for r in _csv(tables / "comparisons.csv")}
    assert set(rows) == {"clean", "hole-54", CONTROL}
    for cond, row in rows.items():
        k1, n1, k2, n2 = (int(row[c]) for c in ("sim_k1", "sim_n1", "sim_k2", "sim_n2"))
        needed = int(_plan_trials(tmp_path, k1 / n1, k2 / n2))  # 0: above --max-trials
        expected = UNDERPOWERED if needed == 0 or needed > n1 else POWERED
        assert row["verdict"] == expected, (cond, needed)
        assert row["trials_needed"] == (str(needed) if expected == POWERED else f">{n1}")
    # 7/8 vs 0/8 is detectable with 8 trials; 1/8 vs 0/8 is not
    assert (rows["clean"]["verdict"], rows["hole-54"]["verdict"]) == (POWERED, UNDERPOWERED)
    transitions = {r["condition"]: r for r in _csv(tables / "transitions.csv")}
    assert transitions["hole-54"]["underpowered"] == "1"


def test_power_verdicts_constructed_cases(tmp_path):
    # 5/10 vs 0/10 (p = 0.033, the smallest significant 10-trial split) needs more than 10
    # trials for 80 % power; 9/10 vs 1/10 does not; equal rates have no gap
    five, nine, tie = power_verdicts([(5, 10, 0, 10), (9, 10, 1, 10), (3, 10, 3, 10)])
    assert five.verdict == UNDERPOWERED and five.trials_needed == 0 and five.power < 0.8
    assert nine.verdict == POWERED and 0 < nine.trials_needed <= 10 and nine.power >= 0.8
    assert tie.verdict == NO_GAP
    assert int(_plan_trials(tmp_path, 0.5, 0.0)) > 10
    assert int(_plan_trials(tmp_path, 0.9, 0.1)) == nine.trials_needed
    with pytest.raises(ValueError, match="not successes"):
        power_verdicts([(3, 2, 0, 2)])
