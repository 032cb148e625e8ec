"""A killed ``bench demo --resume`` run continues where its store stopped (issue 33 item 2).

A tiny profile (Cup, clean + the control ``clean-repeat``, 2 simulated / 1 real trial, a
30-frame limit, serial) is killed after its fourth stored rollout, then resumed: the resumed
run runs only the missing rollouts, keeps the stored ones, and the control's rollouts start
from their own block of initial conditions.
"""

from __future__ import annotations

import csv

import pytest

import bench.study.rollouts as rollouts_module
from bench.demo import run as demo_run
from bench.demo.run import DemoConfig, DemoProfile, run_demo
from bench.study.plan import CONTROL
from bench.study.store import ResultsStore

TINY = DemoProfile("tiny", "resume test", tasks=("cup",), trials=2, real_trials=1, presets=(),
                   coverage=(), max_frames=30, metrics=("psnr",), workers=1, control=True)
KILL_AFTER = 4


class Killed(KeyboardInterrupt):
    """What a Ctrl-C in the middle of the rollouts raises."""


@pytest.mark.slow  # two short demo runs (30 rollouts of 30 frames): ~1 min on 2 loaded cores
def test_killed_demo_resumes_without_redoing_a_rollout(tmp_path, monkeypatch):
    import bench.study.report

    monkeypatch.setitem(demo_run.PROFILES, "tiny", TINY)
    monkeypatch.setattr(bench.study.report, "write_report_or_warn", lambda run_dir: None)
    real_commit = rollouts_module.commit_outcome
    committed = []

    def dying_commit(*args, **kwargs):
        if len(committed) == KILL_AFTER:
            raise Killed
        committed.append(args[-1].key)
        return real_commit(*args, **kwargs)

    out = tmp_path / "demo"
    config = DemoConfig(out=out, profile="tiny", resume=True)
    monkeypatch.setattr(rollouts_module, "commit_outcome", dying_commit)
    with pytest.raises(Killed):
        run_demo(config)
    with ResultsStore(out) as store:
        first = store.rollouts()
    assert len(first) == KILL_AFTER and not (out / "manifest.json").exists()

    resumed = []

    def counting_commit(*args, **kwargs):
        resumed.append(args[-1].key)
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(rollouts_module, "commit_outcome", counting_commit)
    assert run_demo(config) == out
    # 3 scenes x 2 policies x (2 conditions x 2 simulated + 1 real) = 30 rollouts
    assert len(resumed) == 30 - KILL_AFTER and not set(resumed) & set(committed)
    with ResultsStore(out) as store:
        rows = store.rollouts()
    assert len(rows) == 30 and all(r in rows for r in first)
    starts = {(r.condition, r.domain, r.trial): r.init_index for r in rows}
    spec = config.study_spec()
    assert starts[(CONTROL, "sim", 1)] == spec.control_condition_offset + 1 == 2001
    assert starts[("clean", "sim", 1)] == spec.sim_condition_offset + 1
    for name in ("manifest.json", "summary.md", "tables/transitions.csv", "yubi/manifest.json"):
        assert (out / name).is_file(), name
    with open(out / "tables" / "transitions.csv", newline="") as f:
        assert [r["condition"] for r in csv.DictReader(f)] == [CONTROL]
    with open(out / "tables" / "quality.csv", newline="") as f:  # the control is not rescored
        assert {r["condition"] for r in csv.DictReader(f)} == {"clean"}
    assert "control's" in (out / "summary.md").read_text()


def test_policy_frames_are_recorded_on_the_dual_camera_rig():
    # OBS-Policy keeps the frames a policy saw; the yubi-dual rig has no wrist_rgb (the paper
    # profile's first simulated rollout failed on an empty frame list before this was fixed)
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode
    from bench.worlds.real import REAL_DOMAIN

    env = REAL_DOMAIN.make_env("gt-duo", "cup", max_frames=12)
    try:
        obs, _ = env.reset(seed=0)
        assert "wrist_rgb" not in obs and "wrist_left_rgb" in obs
        record, frames, _ = run_episode(env, make_policy("expert", env, seed=0), init_index=0,
                                        record_frames=True)
    finally:
        env.close()
    assert len(frames) == record.policy_queries + 1  # the first view, then one per step
    assert frames[0].shape == obs["wrist_left_rgb"].shape
