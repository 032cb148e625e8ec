"""``bench demo --pair``: another learned pair for one task (``DemoConfig.pairs``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench.cli import main
from bench.demo import run as demo_run
from bench.demo.run import DemoConfig, config_record
from bench.errors import BenchError
from bench.policies.learned import DEMO_POLICIES
from bench.provenance import make_manifest, to_jsonable

CANDIDATE = ("bc-aux-dagger", "bc-large")  # registered, with shipped Tape weights
assert CANDIDATE != DEMO_POLICIES["tape"]



def _fake_costs(monkeypatch, *, keep_spec=False) -> list:
    """Replace the dry run's one-rollout-per-policy timing; returns what each call measured."""
    seen: list = []

    def fake_costs(spec, frames=None):  # no rollout is run
        seen.append(spec if keep_spec else dict(spec.policies))
        keys = [(d, t, p) for t in spec.tasks for d in ("sim", "real") for p in spec.policies[t]]
        if frames is not None:
            frames.update({k: 100 for k in keys})
        return {k: 2.0 for k in keys}

    monkeypatch.setattr(demo_run, "measure_rollout_costs", fake_costs)
    return seen

def test_the_spec_carries_the_pair_for_that_task_only():
    shipped = DemoConfig(out="unused", profile="paper").study_spec()
    config = DemoConfig(out="unused", profile="paper", pairs=(("tape", CANDIDATE),))
    spec = config.study_spec()
    assert spec.policies["tape"] == CANDIDATE
    assert spec.policies["cup"] == DEMO_POLICIES["cup"] == shipped.policies["cup"]
    assert spec.policies["pen"] == DEMO_POLICIES["pen"] == shipped.policies["pen"]
    spec.validate_registries()
    # everything else of the profile is unchanged
    assert dataclasses.replace(spec, policies=shipped.policies) == shipped
    # a mapping is stored in the hashable tuple form; the shipped pair given is no change
    assert DemoConfig(out="x", pairs={"tape": list(CANDIDATE)}).pairs == (("tape", CANDIDATE),)
    hash(config)
    assert DemoConfig(out="x", pairs=()).pairs is None
    same = DemoConfig(out="x", profile="paper", pairs={"cup": DEMO_POLICIES["cup"]})
    assert same.study_spec().policies == shipped.policies and same.unshipped_note() == ""
    note = config.unshipped_note()
    assert "tape bc-aux-dagger vs bc-large" in note and "committed tables do not hold" in note
    # two tasks at once, on a run with --tasks
    two = DemoConfig(out="x", tasks=("cup", "pen"), pairs=(("cup", ("bc-large", "bc-small")),
                                                         ("pen", ("bc-aux", "bc-aux-dagger-3"))))
    assert two.study_spec().policies == {"cup": ("bc-large", "bc-small"),
                                         "pen": ("bc-aux", "bc-aux-dagger-3")}


def test_config_json_and_manifest_round_trip(tmp_path):
    config = DemoConfig(out=tmp_path / "out", profile="paper", pairs=(("tape", CANDIDATE),))
    record = json.loads(json.dumps(to_jsonable(config_record(config))))  # as config.json
    assert record["pairs"] == [["tape", list(CANDIDATE)]]
    fields = {f.name: record[f.name] for f in dataclasses.fields(DemoConfig)}
    back = DemoConfig(**fields)
    assert back.pairs == config.pairs and back.study_spec().policies["tape"] == CANDIDATE
    manifest = make_manifest(tool="demo/test", params=config, seed=config.seed)
    assert manifest["params"]["pairs"] == [["tape", list(CANDIDATE)]]
    assert json.loads(json.dumps(to_jsonable(config_record(DemoConfig(out="o")))))["pairs"] \
        is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--pair", "tape"], "--pair must be TASK=POLICY_A,POLICY_B (e.g. "),
    (["--pair", "tape=bc-aux"], "--pair tape=bc-aux: give exactly two policies"),
    (["--pair", "tape=bc-aux,bc-large,bc-small"], "give exactly two policies"),
    (["--pair", "tape=bc-aux,"], "--pair must be TASK=POLICY_A,POLICY_B"),
    (["--pair", "tape=bc-aux,bc-aux"], "--pair tape=bc-aux,bc-aux: the pair names 'bc-aux' "
     "twice"),
    (["--profile", "quick", "--pair", "tape=bc-aux,bc-large"],
     "--pair tape=bc-aux,bc-large: task 'tape' is not among this run's tasks ['cup']"),
    (["--tasks", "cup,pen", "--pair", "tape=bc-aux,bc-large"], "task 'tape' is not among"),
    (["--pair", "mug=bc-aux,bc-large"], "task 'mug' is not among this run's tasks"),
    (["--pair", "tape=bc-aux-dagr,bc-large"],
     "--pair tape=bc-aux-dagr,bc-large: unknown policy 'bc-aux-dagr'; did you mean"),
    (["--pair", "tape=pkg.mod:factory,bc-large"], "unknown policy 'pkg.mod:factory'"),
    (["--pair", "tape=bc-aux-85,bc-large"],
     "--pair tape=bc-aux-85,bc-large: policy 'bc-aux-85' has no shipped weights for task "
     "'tape' (registered for cup)"),
    (["--pair", "cup=bc-aux,bc-aux-dagger-half"], "'bc-aux-dagger-half' has no shipped "
     "weights for task 'cup'"),
    (["--pair", "tape=expert,bc-large"],
     "policy 'expert' has no shipped weights (not a learned policy)"),
    (["--pair", "tape=bc-aux,bc-large", "--pair", "Tape=bc-large,bc-small"],
     "--pair gives task 'tape' twice; give one pair per task"),
])
def test_cli_refuses_bad_pairs_in_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and not any(tmp_path.iterdir())


def test_config_refuses_malformed_pairs():
    for bad in ("tape=bc-aux,bc-large", [("tape", "bc-aux")], [("tape",)], [(1, ("a", "b"))]):
        with pytest.raises(BenchError, match="pairs must be \\(task, \\(policy_a, policy_b\\)\\)"):
            DemoConfig(out="x", pairs=bad)


def test_dry_run_with_a_pair_prints_the_estimate(tmp_path, capsys, monkeypatch):
    # the rollout costs are faked (one real rollout per policy and domain takes ~50 s here);
    # what is checked is that the estimate is of the spec with the pair
    measured = _fake_costs(monkeypatch)
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--profile", "quick", "--dry-run",
                 "--pair", "cup=bc-aux-dagger,bc-large"]) == 0
    captured = capsys.readouterr()
    assert measured == [{"cup": ("bc-aux-dagger", "bc-large")}]
    assert "[bench demo] profile quick:" in captured.out and "rollouts ~" in captured.out
    for policy in ("bc-aux-dagger", "bc-large"):
        assert f"sim/cup/{policy}" in captured.out and f"real/cup/{policy}" in captured.out
    assert "cup bc-aux-dagger vs bc-large (shipped: bc-aux vs bc-aux-85)" in captured.err
    assert not out.exists()


# ``--max-frames TASK=FRAMES``: another time limit for one task (``DemoConfig.frame_limits``)

def test_the_spec_carries_the_limit_for_that_task_in_every_scene_only():
    shipped = DemoConfig(out="unused", profile="paper").study_spec()
    config = DemoConfig(out="unused", profile="paper", frame_limits=(("tape", 350),))
    spec = config.study_spec()
    assert set(spec.max_frames) == set(shipped.max_frames) == set(spec.scene_names)
    for scene, limits in spec.max_frames.items():
        assert limits == {**shipped.max_frames[scene], "tape": 350}
        assert shipped.max_frames[scene]["tape"] != 350
    assert dataclasses.replace(spec, max_frames=shipped.max_frames) == shipped
    # a mapping is stored in the hashable tuple form; the profile's own limit is no change
    assert DemoConfig(out="x", frame_limits={"tape": 350}).frame_limits == (("tape", 350),)
    hash(config)
    assert DemoConfig(out="x", frame_limits=()).frame_limits is None
    same = DemoConfig(out="x", profile="paper", frame_limits={"tape": shipped.max_frames["duo"]
                                                               ["tape"]})
    assert same.study_spec() == shipped and same.unshipped_note() == ""
    assert config.unshipped_note() == ("time limits other than the profile's (--max-frames): "
                                       "tape 350 frames (profile's: 400); the committed tables "
                                       "do not hold these results")
    # a profile with one limit for every task (quick: 120) keeps it for the other scenes' cells
    quick = DemoConfig(out="x", profile="quick", frame_limits={"cup": 90}).study_spec()
    assert all(quick.frames_limit(s, "cup") == 90 for s in quick.scene_names)


def test_the_limit_with_a_pair_on_the_paper_profile(tmp_path):
    shipped = DemoConfig(out="unused", profile="paper").study_spec()
    config = DemoConfig(out=tmp_path / "out", profile="paper", pairs={"tape": CANDIDATE},
                        frame_limits={"tape": 350})
    spec = config.study_spec()
    assert spec.policies["tape"] == CANDIDATE
    assert {s: v["tape"] for s, v in spec.max_frames.items()} == \
        dict.fromkeys(spec.scene_names, 350)
    assert dataclasses.replace(spec, policies=shipped.policies,
                               max_frames=shipped.max_frames) == shipped
    note = config.unshipped_note()  # one note: the pair, then the limit
    assert note.startswith("policy pairs other than the shipped ones (--pair): tape "
                           "bc-aux-dagger vs bc-large")
    assert "; time limits other than the profile's (--max-frames): tape 350 frames " \
        "(profile's: 400); the committed tables do not hold these results" in note
    record = json.loads(json.dumps(to_jsonable(config_record(config))))  # as config.json
    assert record["frame_limits"] == [["tape", 350]]
    assert record["resolved_profile"]["max_frames"] == {"cup": 150, "tape": 350, "pen": 700}
    back = DemoConfig(**{f.name: record[f.name] for f in dataclasses.fields(DemoConfig)})
    assert back.frame_limits == config.frame_limits and back.study_spec() == spec
    manifest = make_manifest(tool="demo/test", params=config, seed=config.seed)
    assert manifest["params"]["frame_limits"] == [["tape", 350]]
    assert json.loads(json.dumps(to_jsonable(config_record(DemoConfig(out="o")))))[
        "frame_limits"] is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-frames", "tape"], "--max-frames must be TASK=FRAMES, FRAMES a whole number of "
     "10 Hz frames (e.g. tape=350), got 'tape'"),
    (["--max-frames", "=350"], "--max-frames must be TASK=FRAMES"),
    (["--max-frames", "tape=3.5"], "--max-frames must be TASK=FRAMES"),
    (["--max-frames", "tape=lots"], "--max-frames must be TASK=FRAMES"),
    (["--max-frames", "tape=0"], "--max-frames tape=0 must be >= 1, got 0"),
    (["--max-frames", "tape=-5"], "--max-frames tape=-5 must be >= 1"),
    (["--max-frames", "tape=40000"], "exceeds the cap of 36,000 frames"),
    (["--profile", "quick", "--max-frames", "tape=350"],
     "--max-frames tape=350: task 'tape' is not among this run's tasks ['cup']"),
    (["--tasks", "cup,pen", "--max-frames", "tape=350"], "task 'tape' is not among"),
    (["--max-frames", "mug=350"], "task 'mug' is not among this run's tasks"),
    (["--max-frames", "tape=350", "--max-frames", "Tape=400"],
     "--max-frames gives task 'tape' twice; give one limit per task"),
    (["--time-limits", "yubi", "--max-frames", "tape=350"],
     "--max-frames and --time-limits yubi contradict"),
])
def test_cli_refuses_bad_limits_in_one_line(tmp_path, capsys, argv, message):
    test_cli_refuses_bad_pairs_in_one_line(tmp_path, capsys, argv, message)


def test_config_refuses_malformed_limits():
    for bad in ("tape=350", [("tape",)], [(1, 350)], [("tape", [350])], {"tape": None}):
        with pytest.raises(BenchError, match="frame_limits must be \\(task, frames\\) items"):
            DemoConfig(out="x", frame_limits=bad)
    for bad, message in (({"tape": 3.5}, "must be a whole number, got 3.5"),
                         ({"tape": True}, "must be a whole number, got True"),
                         ({"tape": "350"}, "must be a whole number, got '350'")):
        with pytest.raises(BenchError, match=message):
            DemoConfig(out="x", frame_limits=bad).study_spec()


def test_dry_run_with_a_limit_says_so_on_stderr(tmp_path, capsys, monkeypatch):
    specs = _fake_costs(monkeypatch, keep_spec=True)
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--profile", "quick", "--dry-run",
                 "--max-frames", "cup=90"]) == 0
    limits = [spec.max_frames for spec in specs]
    err = capsys.readouterr().err
    assert limits == [{s: {"cup": 90} for s in limits[0]}] and len(limits[0]) == 3
    assert "[bench demo] time limits other than the profile's (--max-frames): cup 90 frames " \
        "(profile's: 120); the committed tables do not hold these results" in err
    assert not out.exists()
