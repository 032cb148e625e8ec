"""``--reuse-from``: an earlier study's rows copied after a spot check instead of run again.

One tiny study (a sample room, clean + floaters-mid, Cup, 2 simulated / 2 "real" trials,
PSNR) with the pair (visual-servo, expert) is the source; the new study changes the pair to
(visual-servo, noisy-expert). Its tables must be the bytes a fresh run of the new spec writes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.study.reuse import META_KEY, RECORD_FILE, spec_difference
from bench.study.runner import run_study
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore

SOURCE_SPEC = StudySpec(name="tiny", sample_scenes={"a": 0}, sample_gaussians=3000,
                        conditions=("clean", "floaters-mid"), tasks=("cup",), trials=2,
                        real_trials=2, max_frames=120, metrics=("psnr",),
                        policies={"cup": ("visual-servo", "expert")})
NEW_SPEC = SOURCE_SPEC.replace(policies={"cup": ("visual-servo", "noisy-expert")})
KEPT = "visual-servo"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reuse") / "source"
    run_study(SOURCE_SPEC, out, progress=False)
    return out


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The new spec run in full, without reuse: what the reusing run must reproduce."""
    out = tmp_path_factory.mktemp("reuse") / "fresh"
    run_study(NEW_SPEC, out, progress=False)
    return out


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(out: Path) -> int:
    with ResultsStore.open_read_only(out / "results.sqlite") as store:
        return store.count_rollouts()


def test_reuse_copies_the_kept_policys_rows_and_matches_a_fresh_run(source, fresh, tmp_path):
    before = _digests(source)
    out = tmp_path / "new"
    result = run_study(NEW_SPEC, out, progress=False, reuse_from=source)
    report = result.reuse
    # visual-servo: 4 simulated + 2 "real" rows in the source; one per (scene, task, policy,
    # domain) group re-run as the check (clean, trial 0), the rest copied
    assert report.copied == {("cup", KEPT, "sim"): 3, ("cup", KEPT, "real"): 1}
    assert set(report.checked) == {("tiny", "a", "clean", "cup", KEPT, d, 0)
                                   for d in ("sim", "real")}
    assert result.new_rollouts == 6 + 2  # noisy-expert's 6 rollouts + the 2 checks
    assert report.quality_rows == 2 * 8  # PSNR of 8 Test views, clean and floaters-mid
    assert _rows(out) == _rows(fresh) == 12
    # latency.csv holds wall-clock times (two fresh runs differ there too)
    names = sorted(p.name for p in (fresh / "tables").iterdir() if p.name != "latency.csv")
    assert "rollouts.csv" in names and "quality.csv" in names and "ranking.csv" in names
    for name in names:
        assert (out / "tables" / name).read_bytes() == (fresh / "tables" / name).read_bytes(), name
    assert _digests(source) == before  # the source is only read: no byte, no file added
    with ResultsStore.open_read_only(source / "results.sqlite") as store:
        spec_text = store.get_meta("spec")
    with ResultsStore.open_read_only(out / "results.sqlite") as store:
        records = json.loads(store.get_meta(META_KEY))
    assert records == [{
        "source": str(source), "spec_sha256": hashlib.sha256(spec_text.encode()).hexdigest(),
        "copied": {f"cup/{KEPT}/real": 1, f"cup/{KEPT}/sim": 3},
        "checked": [f"a/clean/cup/{KEPT}/real/0", f"a/clean/cup/{KEPT}/sim/0"],
        "quality_rows": 16, "reply_rows": 0}]
    assert json.loads((out / RECORD_FILE).read_text())["reused_from"] == records
    assert RECORD_FILE in result.tables["files"]
    # resumed with the same source: nothing left to reuse, nothing recorded twice
    again = run_study(NEW_SPEC, out, resume=True, progress=False, reuse_from=source)
    assert again.new_rollouts == 0 and again.reuse.rows == 0 and not again.reuse.checked
    with ResultsStore.open_read_only(out / "results.sqlite") as store:
        assert json.loads(store.get_meta(META_KEY)) == records


def test_a_changed_time_limit_runs_that_cell_again(source, tmp_path):
    # the source ran cup in room "a" under 120 frames; under 90 none of its rows may be reused
    out = tmp_path / "new"
    result = run_study(NEW_SPEC.replace(max_frames={"a": {"cup": 90}}), out, progress=False,
                       reuse_from=source)
    assert result.reuse.rows == 0 and not result.reuse.checked
    assert result.new_rollouts == 12
    with ResultsStore.open_read_only(out / "results.sqlite") as store:
        assert {row.frames <= 90 for row in store.rollouts()} == {True}


@pytest.mark.parametrize(("change", "field"), [({"seed": 1}, "seed"),
                                               ({"image_size": (64, 64)}, "image_size")])
def test_a_source_with_another_setting_is_refused_naming_it(source, tmp_path, change, field):
    out = tmp_path / "new"
    with pytest.raises(BenchError, match=f"ran a spec that differs in {field}; only policies"):
        run_study(NEW_SPEC.replace(**change), out, progress=False, reuse_from=source)
    assert not out.exists()  # refused before --out is made


def test_spec_difference_allows_only_the_fields_that_select_cells():
    base = json.loads(json.dumps(SOURCE_SPEC.to_json(), sort_keys=True))

    def new(**changes):
        return json.loads(json.dumps(SOURCE_SPEC.replace(**changes).to_json(), sort_keys=True))

    assert spec_difference(base, new(trials=5, real_trials=1, metrics=("psnr", "ssim"),
                                     conditions=("clean", "hole-90", "clean-repeat"),
                                     policies={"cup": ("expert", "hold")})) == []
    assert spec_difference(base, new(name="other", seed=3)) == ["name", "seed"]
    assert spec_difference(base, new(max_frames=200)) == []  # per cell: test_a_changed_limit...
    refs = {**base, "policy_refs": {"visual-servo": "pkg.mod:factory"}}
    assert spec_difference(refs, base) == ["policy_refs"]  # a label both run, another policy
    extra = {**base, "extra_conditions": {"retrained": {"a": "scenes/a/retrained"}}}
    assert spec_difference(extra, base) == []  # a condition only one study has
    moved = {**base, "extra_conditions": {"retrained": {"a": "elsewhere/retrained"}}}
    assert spec_difference(extra, moved) == ["extra_conditions"]


@pytest.mark.parametrize(("column", "change"), [("success", "1 - success"),
                                                ("frames", "frames + 1")])
def test_a_tampered_source_fails_the_spot_check_and_nothing_is_copied(source, tmp_path, column,
                                                                      change):
    tampered = tmp_path / "tampered"
    shutil.copytree(source, tampered)
    db = sqlite3.connect(tampered / "results.sqlite")
    with db:  # the row the check re-runs for (a, cup, visual-servo, sim)
        db.execute(f"UPDATE rollouts SET {column} = {change} WHERE condition = 'clean' AND "
                   f"policy = '{KEPT}' AND domain = 'sim' AND trial = 0")
    db.close()
    out = tmp_path / "new"
    with pytest.raises(BenchError, match=f"check rollout a/clean/cup/{KEPT}/sim trial 0 differs "
                       f"from the source's in {column} .*weights or the simulator changed"):
        run_study(NEW_SPEC, out, progress=False, reuse_from=tampered)
    assert _rows(out) == 0
    with ResultsStore.open_read_only(out / "results.sqlite") as store:
        assert store.get_meta(META_KEY) is None and store.quality() == []


def _spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(NEW_SPEC.to_json()))
    return path


@pytest.mark.parametrize(("case", "message"), [
    ("missing", "is not a directory"),
    ("plain", "is not a study output (no study.json)"),
    ("no-store", "holds no results.sqlite"),
    ("out", "is --out itself"),
])
def test_cli_refuses_a_bad_source_in_one_line(source, tmp_path, capsys, case, message):
    from bench.cli import main

    out = tmp_path / "out"
    reuse = tmp_path / "src"
    if case == "plain":
        reuse.mkdir()
        (reuse / "notes.txt").write_text("not a study")
    elif case == "no-store":
        reuse.mkdir()
        (reuse / "study.json").write_text("{}")
    elif case == "out":
        shutil.copytree(source, out)
        reuse = out
    before = _digests(out) if out.exists() else None
    assert main(["study", "run", "--spec", str(_spec_file(tmp_path)), "--out", str(out),
                 "--reuse-from", str(reuse), "--no-progress", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert (_digests(out) if out.exists() else None) == before  # nothing written


def test_cli_dry_run_counts_the_rows_it_would_reuse(source, tmp_path, capsys):
    from bench.cli import main

    out = tmp_path / "out"
    assert main(["study", "run", "--spec", str(_spec_file(tmp_path)), "--out", str(out),
                 "--reuse-from", str(source), "--dry-run"]) == 0
    assert f"--reuse-from {source}: 6 of the 12 planned rollouts are stored there" in \
        capsys.readouterr().out
    assert not out.exists()


def test_demo_lists_and_checks_reuse_from(tmp_path, capsys):
    from bench.cli import main

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--reuse-from DIR" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["demo", "--profile", "quick", "--out", str(out),
                 "--reuse-from", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a directory" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_changed_simulated_colour_map_reruns_only_that_scenes_simulated_rows(tmp_path):
    """real_world.background_color changes only the simulated domain of its scene.

    The source and the new study differ in Flat's colour map: Flat's simulated rows run
    again, its real rows, the other rooms' rows and the quality rows are reused (checked).
    """
    from pathlib import Path as P

    from bench.demo.run import DemoConfig

    base = DemoConfig(out=P("."), profile="quick").study_spec()
    worlds = {"duo": "gt-duo", "flat": "gt-flat"}
    spec = base.replace(conditions=("clean",), extra_conditions={}, trials=1, real_trials=1,
                        max_frames=20, scenes={s: base.scenes[s] for s in worlds},
                        captures={s: base.captures[s] for s in worlds},
                        real_world={**base.real_world, "worlds": worlds,
                                    "mesh_lights": {s: base.real_world["mesh_lights"][s]
                                                    for s in worlds}})
    fit = {"degree": 2, "coefficients": [[0.05, 0.6, 0.3], [0.02, 0.9, 0.05], [0.0, 1.0, 0.0]]}
    aligned = spec.replace(real_world={**spec.real_world, "background_color": {"flat": fit}})
    old = json.loads(json.dumps(spec.to_json(), sort_keys=True))
    assert spec_difference(old, json.loads(json.dumps(aligned.to_json(), sort_keys=True))) == []
    other = aligned.replace(real_world={**aligned.real_world, "shadows": True})
    assert spec_difference(old, json.loads(json.dumps(other.to_json()))) == ["real_world"]
    from bench.study.reuse import sim_rerun_scenes

    assert sim_rerun_scenes(old, aligned) == {"flat"} and sim_rerun_scenes(old, spec) == set()

    source = tmp_path / "source"
    run_study(spec, source, progress=False)
    result = run_study(aligned, tmp_path / "new", progress=False, reuse_from=source)
    pair = spec.policies["cup"]
    checked = {(k[1], k[5]) for k in result.reuse.checked}
    assert checked == {("duo", "sim"), ("duo", "real"), ("flat", "real")}
    assert result.new_rollouts == 3 * len(pair) + len(pair)  # checks + flat's sim rows
    assert result.reuse.quality_rows > 0
    with ResultsStore.open_read_only(source / "results.sqlite") as a, \
            ResultsStore.open_read_only(tmp_path / "new" / "results.sqlite") as b:
        rows_a = {r.key: r for r in a.rollouts()}
        rows_b = {r.key: r for r in b.rollouts()}
    assert rows_a.keys() == rows_b.keys()
    for key, row in rows_b.items():
        if not (key[1] == "flat" and key[5] == "sim"):
            assert row == rows_a[key], key
