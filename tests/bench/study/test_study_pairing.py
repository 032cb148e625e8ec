"""Pairing of the rollout stage, with the simulator replaced by a recording stand-in.

What is checked: simulated trial t starts from initial condition
``sim_condition_offset + t`` in *every* condition (paired), the "real" domain
runs on the clean bundle from its own disjoint block, each episode runs in the
env of its own (scene, condition) bundle, every stored row carries that
bundle's manifest sha256, and a resumed run reruns exactly the missing rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.study.runner import ConditionBundle, run_rollouts
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore

SPEC = StudySpec(name="pairs", sample_scenes={"a": 0, "b": 1},
                 conditions=("clean", "warp", "hole-54"), tasks=("cup", "tape"), trials=3,
                 real_trials=2, sim_condition_offset=5, real_condition_offset=500,
                 obs_policy_every=0)


@pytest.fixture()
def recorder(monkeypatch):
    """Replace scene loading, env, policy and episode by stand-ins that log every call."""
    import bench.policies
    import bench.scene.bundle
    import bench.sim
    import bench.sim.rollout

    calls = []

    def run_episode(env, policy, *, init_index, episode, policy_name, **_):
        condition = init_index
        calls.append((env.scene, env.task, policy_name, condition, episode))
        record = SimpleNamespace(init_index=init_index,
                                 success=condition % 2 == 0, progress_final=0.5,
                                 progress_max=0.75, frames=condition, failure="",
                                 truncated=False, first_grasp_frame=-1, status="ok")
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


def test_trials_are_paired_across_conditions(recorder, tmp_path):
    bundles = _bundles()
    with ResultsStore(tmp_path) as store:
        ran = run_rollouts(SPEC, store, bundles, progress=False)
        rows = store.rollouts()
    # 2 scenes x 2 tasks x 2 policies x (3 conditions x 3 sim trials + 2 real trials)
    assert ran == len(rows) == len(recorder) == 2 * 2 * 2 * (3 * 3 + 2)
    for row in rows:
        if row.domain == "sim":
            assert row.init_index == 5 + row.trial
        else:
            assert (row.condition, row.init_index) == ("clean", 500 + row.trial)
        assert row.manifest_sha256 == f"{row.scene}-{row.condition}"
    # trial t of a (scene, task, policy) has one start across the three conditions
    starts = {}
    for row in rows:
        if row.domain == "sim":
            starts.setdefault((row.scene, row.task, row.policy, row.trial), set()).add(
                (row.condition, row.init_index))
    assert all(len(v) == 3 and len({i for _, i in v}) == 1 for v in starts.values())
    # each stored row ran once, in the env built on its own (scene, condition) bundle
    ran_in = sorted((Path(bundle).parent.name, Path(bundle).name, task, policy, start, episode)
                    for bundle, task, policy, start, episode in recorder)
    assert ran_in == sorted((r.scene, r.condition, r.task, r.policy, r.init_index, r.trial)
                            for r in rows)


def test_resume_reruns_exactly_the_missing_rows(recorder, tmp_path):
    bundles = _bundles()
    with ResultsStore(tmp_path) as store:
        run_rollouts(SPEC, store, bundles, progress=False)
        before = store.rollouts()
    db = sqlite3.connect(tmp_path / "results.sqlite")
    with db:
        db.execute("DELETE FROM rollouts WHERE scene = 'b' AND condition = 'warp' AND trial = 1")
    db.close()
    recorder.clear()
    with ResultsStore(tmp_path) as store:
        assert run_rollouts(SPEC, store, bundles, progress=False) == 4  # 2 tasks x 2 policies
        assert store.rollouts() == before
        assert run_rollouts(SPEC, store, bundles, progress=False) == 0
    assert {(Path(s).as_posix(), c) for s, _, _, c, _ in recorder} == {("/bundles/b/warp", 6)}
