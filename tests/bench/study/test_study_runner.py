"""End-to-end study runner on two tiny sample rooms: outputs, resume, determinism, CLI."""

from __future__ import annotations

import json
import sqlite3

import pytest

from bench.errors import BenchError
from bench.study.runner import run_study
from bench.study.spec import StudySpec
from bench.study.store import ResultsStore

SPEC = StudySpec(name="tiny", sample_scenes={"a": 0, "b": 1}, sample_gaussians=3000,
                 conditions=("clean", "floaters-mid"), tasks=("cup",), trials=1, real_trials=1,
                 max_frames=120, metrics=("psnr", "ssim"))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "out"
    result = run_study(SPEC, out, progress=False)
    return out, result


def test_outputs_and_store(study):
    out, result = study
    # 2 scenes x (2 conditions x 2 policies x 1 trial sim + 2 policies x 1 trial real)
    assert result.new_rollouts == 12
    with ResultsStore(out) as store:
        rows = store.rollouts()
        assert len(rows) == 12
        assert {r.domain for r in rows} == {"sim", "real"}
        assert {r.init_index for r in rows if r.domain == "real"} == {1000}
        assert {r.init_index for r in rows if r.domain == "sim"} == {100}
        shas = {(c["scene"], c["condition"]): c["manifest_sha256"] for c in store.conditions()}
        assert all(r.manifest_sha256 == shas[(r.scene, r.condition)] for r in rows)
        quality = store.quality()
    # FR metrics on 8 test views per scene and condition
    assert len(quality) == 2 * 2 * 2 * 8
    assert json.loads((out / "study.json").read_text())["name"] == "tiny"
    for stem in ("success_rates", "ranking", "transitions", "quality", "rollouts"):
        assert (out / "tables" / f"{stem}.csv").is_file()
    assert (out / "figures" / "ranking_clean.png").is_file()
    assert (out / "figures" / "ranking_floaters-mid.pdf").is_file()
    assert (out / "captures" / "a" / "test" / "manifest.json").is_file()
    psnr_clean = [q["value"] for q in quality
                  if q["condition"] == "clean" and q["metric"] == "psnr"]
    assert all(35 < v < 45 for v in psnr_clean)  # 1% sensor noise -> ~40 dB, finite


def test_resume_skips_done_and_reruns_missing(study, tmp_path):
    import shutil

    out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    with pytest.raises(BenchError, match="--resume"):
        run_study(SPEC, copy, progress=False)
    assert run_study(SPEC, copy, resume=True, progress=False).new_rollouts == 0
    db = sqlite3.connect(copy / "results.sqlite")
    with db:
        db.execute("DELETE FROM rollouts WHERE scene = 'b' AND domain = 'sim'")
    db.close()
    assert run_study(SPEC, copy, resume=True, progress=False).new_rollouts == 4
    # the rerun rows are identical to the first run's (deterministic rollouts)
    assert (copy / "tables" / "rollouts.csv").read_bytes() == \
        (out / "tables" / "rollouts.csv").read_bytes()
    # the refusal names the field that changed
    with pytest.raises(BenchError, match=r"different spec \(it differs in trials\)"):
        run_study(SPEC.replace(trials=2), copy, resume=True, progress=False)


def test_resume_refuses_rows_of_other_reference_numerics(study, tmp_path, monkeypatch):
    """A store's rows come from one float environment: a resume under other reference
    numerics (here MKL's branch changed, as between bench versions) is refused, the store
    left as it was; a store recorded under native numerics promises nothing and resumes."""
    import shutil

    from bench import numerics

    if not numerics.reference_numerics_active()[0]:
        pytest.skip("the test process runs without the reference numerics")
    out, _ = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    with ResultsStore(copy) as store:
        recorded = json.loads(store.get_meta("numerics"))
    assert recorded == {"mode": "reference", "env": numerics.REFERENCE_ENV}
    before = (copy / "results.sqlite").read_bytes()
    monkeypatch.setitem(numerics.REFERENCE_ENV, "MKL_CBWR", "AVX2")
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    with pytest.raises(BenchError, match=r"holds rows computed under other reference numerics "
                       r"\(MKL_CBWR differ\).*choose a new --out"):
        run_study(SPEC, copy, resume=True, progress=False)
    assert (copy / "results.sqlite").read_bytes() == before
    # a store written before the record existed is judged by its manifest's record
    with ResultsStore(copy) as store:
        store._db.execute("DELETE FROM meta WHERE key = 'numerics'")
    (copy / "manifest.json").write_text(json.dumps({"numerics": recorded}))
    with pytest.raises(BenchError, match="other reference numerics"):
        run_study(SPEC, copy, resume=True, progress=False)
    (copy / "manifest.json").write_text(json.dumps({"numerics": {"mode": "native"}}))
    assert run_study(SPEC, copy, resume=True, progress=False).new_rollouts == 0
    with ResultsStore(copy) as store:  # recorded now: the numerics this resume ran under
        assert json.loads(store.get_meta("numerics"))["env"]["MKL_CBWR"] == "AVX2"


def test_cli_run_and_export(study, tmp_path, capsys):
    from bench.cli import main

    out, _ = study
    assert main(["study", "export", "--results", str(out), "--out", str(tmp_path / "csv")]) == 0
    assert (tmp_path / "csv" / "rollouts.csv").read_bytes() == \
        (out / "tables" / "rollouts.csv").read_bytes()
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC.to_json()))
    assert main(["study", "run", "--spec", str(spec_path), "--out", str(out),
                 "--resume", "--no-progress"]) == 0
    assert "0 new rollouts" in capsys.readouterr().out
