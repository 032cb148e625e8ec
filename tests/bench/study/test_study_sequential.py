"""Sequential stopping in the study runner, with the simulator replaced by a stand-in.

pi_1 (visual-servo) always succeeds and pi_2 always fails on Cup, so every paired
trial is discordant and the mixture e-value crosses 2/alpha = 40 at the second
look (10 pairs: E+ = 2^11/11 * (1 - 2^-11) = 186; 5 pairs give 10.5 < 40). On
Tape both policies share every outcome (concordant), so the test never decides
and the pair runs to the cap.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.errors import BenchError
from bench.study.runner import ConditionBundle
from bench.study.sequential import run_sequential_rollouts
from bench.study.spec import StudySpec, spec_from_dict
from bench.study.store import ResultsStore

SPEC = StudySpec(name="seq", sample_scenes={"a": 0, "b": 1}, conditions=("clean", "warp"),
                 tasks=("cup", "tape"), trials=30, real_trials=4,
                 sequential={"min_trials": 5, "batch_size": 5, "alpha": 0.05},
                 obs_policy_every=0)  # the stand-in episode records no frames


@pytest.fixture()
def stand_in(monkeypatch):
    import bench.policies
    import bench.scene.bundle
    import bench.sim
    import bench.sim.rollout

    calls = []

    def run_episode(env, policy, *, init_index, episode, policy_name, **_):
        condition = init_index
        calls.append((env.scene, env.task, policy_name, condition))
        if env.task == "cup":
            success = policy_name == "visual-servo"
        else:
            success = condition % 3 == 0
        record = SimpleNamespace(init_index=init_index,
                                 success=success, progress_final=1.0 * success,
                                 progress_max=1.0, frames=10, failure="", truncated=False,
                                 first_grasp_frame=-1, status="ok")
        return record, [], 0.0

    monkeypatch.setattr(bench.scene.bundle, "load_scene", lambda path: str(path))
    monkeypatch.setattr(bench.sim, "make_env", lambda task, scene, **kw: SimpleNamespace(
        scene=scene, task=task, close=lambda: None))
    monkeypatch.setattr(bench.policies, "make_policy", lambda name, env, seed: name)
    monkeypatch.setattr(bench.sim.rollout, "run_episode", run_episode)
    return calls


def _bundles():
    return {(s, c): ConditionBundle(s, c, Path(f"/bundles/{s}/{c}"), Path("m.json"), f"{s}-{c}")
            for s in SPEC.scene_names for c in SPEC.all_conditions}


def test_stops_decided_pairs_together_and_reports_savings(stand_in, tmp_path):
    with ResultsStore(tmp_path) as store:
        ran = run_sequential_rollouts(SPEC, store, _bundles(), tmp_path, progress=False)
        rows = store.rollouts()
    sim = [r for r in rows if r.domain == "sim"]
    trials = {}
    for r in sim:
        trials.setdefault((r.scene, r.task, r.condition, r.policy), set()).add(r.trial)
    for scene in ("a", "b"):
        for cond in ("clean", "warp"):  # paired: the same trials in every condition
            for policy in ("visual-servo", "visual-glance"):
                assert trials[(scene, "cup", cond, policy)] == set(range(10))
                assert trials[(scene, "tape", cond, policy)] == set(range(30))
    real = [r for r in rows if r.domain == "real"]
    assert len(real) == 2 * 2 * 2 * 4  # real_trials unchanged
    assert ran == len(rows) == len(stand_in) == 2 * 2 * 2 * (10 + 30) + len(real)
    text = (tmp_path / "tables" / "sequential.csv").read_text().splitlines()
    header = text[0].split(",")
    table = [dict(zip(header, line.split(","), strict=True)) for line in text[1:]]
    cup = [r for r in table if r["task"] == "cup"]
    tape = [r for r in table if r["task"] == "tape"]
    assert {r["decision"] for r in cup} == {"visual-servo"}
    assert {r["decided_at"] for r in cup} == {"10"}
    assert {r["rollouts_saved"] for r in cup} == {"40"}  # 2 policies x (30 - 10)
    assert {r["decision"] for r in tape} == {"undecided"}
    assert {r["rollouts_saved"] for r in tape} == {"0"}
    md = (tmp_path / "tables" / "sequential.md").read_text()
    assert "Simulated rollouts run: 320 of the fixed design's 480 (saved 160, 33.3%)" in md
    for cond in ("clean", "warp"):
        for ext in ("png", "pdf"):
            assert (tmp_path / "figures" / f"sequential_{cond}.{ext}").stat().st_size > 1000


def test_resume_reproduces_and_runs_nothing_new(stand_in, tmp_path):
    with ResultsStore(tmp_path) as store:
        run_sequential_rollouts(SPEC, store, _bundles(), tmp_path, progress=False)
    first = (tmp_path / "tables" / "sequential.csv").read_bytes()
    with ResultsStore(tmp_path) as store:
        assert run_sequential_rollouts(SPEC, store, _bundles(), tmp_path, progress=False) == 0
    assert (tmp_path / "tables" / "sequential.csv").read_bytes() == first


@pytest.mark.parametrize(("sequential", "fragment"), [
    ({"max_trials": 20}, "must equal trials"),
    ({"min_trials": 50}, "exceeds trials"),
    ({"method": "bayes"}, "unknown"),
    ({"batch": 5}, "unknown sequential keys"),
    ({"alpha": 2}, "alpha must be in (0, 1)"),
    ("fast", "spec key 'sequential' must be"),
])
def test_bad_sequential_keys_are_refused(sequential, fragment):
    with pytest.raises(BenchError, match=None) as info:
        spec_from_dict({"sample_scenes": {"a": 0}, "trials": 30, "sequential": sequential})
    assert fragment in str(info.value)


def test_spec_round_trip_keeps_the_config():
    spec = spec_from_dict({"sample_scenes": {"a": 0}, "trials": 30,
                           "sequential": {"method": "sprt", "effect": 0.3}})
    assert spec.sequential.method == "sprt" and spec.sequential.looks(30)[0] == 10
    again = spec_from_dict(spec.to_json())
    assert again == spec and again.to_json()["sequential"]["effect"] == 0.3


def test_run_study_dispatches_to_the_sequential_hook_only_when_configured(monkeypatch,
                                                                          tmp_path):
    import bench.study.analysis
    import bench.study.runner as runner
    import bench.study.sequential

    calls = []
    monkeypatch.setattr(runner, "prepare_conditions", lambda *a, **k: {})
    monkeypatch.setattr(runner, "score_quality", lambda *a, **k: None)
    monkeypatch.setattr(bench.study.analysis, "analyse", lambda *a, **k: {"ranking": []})
    monkeypatch.setattr(runner, "run_rollouts", lambda *a, **k: calls.append("fixed") or 0)
    monkeypatch.setattr(bench.study.sequential, "run_sequential_rollouts",
                        lambda *a, **k: calls.append("sequential") or 0)
    fixed = SPEC.replace(sequential=None)
    runner.run_study(fixed, tmp_path / "fixed", progress=False)
    runner.run_study(SPEC, tmp_path / "seq", progress=False)
    assert calls == ["fixed", "sequential"]


def test_pairing_stops_at_the_first_missing_rollout():
    from bench.study.sequential import _paired

    outcomes = {("clean", "p", "sim"): {0: 1, 1: 0, 2: 1, 3: 1},
                ("clean", "q", "sim"): {0: 0, 1: 0, 3: 1}}  # trial 2 of q not stored
    assert _paired(outcomes, "clean", "p", "q", 10) == ([1, 0], [0, 0])
    assert _paired(outcomes, "warp", "p", "q", 10) == ([], [])


def test_run_study_keeps_the_sequential_table_in_the_staged_tables(stand_in, monkeypatch,
                                                                   tmp_path):
    # tables/ is written staged and renamed as a whole (issue 10): the sequential report
    # must be written into that staging directory, not beside it (where the rename drops it)
    import bench.study.analysis
    import bench.study.runner as runner

    monkeypatch.setattr(runner, "prepare_conditions", lambda *a, **k: _bundles())
    monkeypatch.setattr(runner, "score_quality", lambda *a, **k: None)
    monkeypatch.setattr(bench.study.analysis, "analyse", lambda *a, **k: {"ranking": []})
    runner.run_study(SPEC, tmp_path / "seq", progress=False)
    table = (tmp_path / "seq" / "tables" / "sequential.csv").read_text().splitlines()
    assert table[0].startswith("scene,task,condition,pi_1,pi_2")
    assert len(table) == 1 + 2 * 2 * 2  # scenes x tasks x conditions
