"""``bench study run`` on bad input: one-line error, exit 2, nothing written or changed."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from bench.study.runner import SPEC_FILE, open_output
from bench.study.spec import StudySpec
from bench.study.store import DB_NAME, ResultsStore

# 3000 Gaussians: enough on the table top for the run's up-front registration check
SPEC = {"name": "cli", "sample_scenes": {"a": 0}, "sample_gaussians": 3000, "tasks": ["cup"],
        "conditions": ["clean"], "trials": 1, "real_trials": 1, "metrics": ["psnr"]}


def _run(capsys, spec_path, out, *flags):
    code = main(["study", "run", "--spec", str(spec_path), "--out", str(out), "--no-progress",
                 *flags])
    err = capsys.readouterr().err.strip()
    return code, err


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not valid JSON"),
    ("[1]", "must be a JSON object"),
    (json.dumps({**SPEC, "trials": "ten"}), "'trials' must be an integer"),
    (json.dumps({**SPEC, "scenes": {"lab": "nowhere"}, "real_domain": "simulated"}),
         "not a scene bundle"),
    (json.dumps({**SPEC, "alpha": 5}), "alpha must be in"),
    (json.dumps({**SPEC, "conditions": ["clean", "hole-45"]}), "hole-54"),
])
def test_bad_spec_writes_nothing(tmp_path, capsys, text, message):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(text)
    code, err = _run(capsys, spec_path, tmp_path / "out")
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("bench study run: error:")
    assert message in err
    assert not (tmp_path / "out").exists()


@pytest.fixture()
def existing(tmp_path):
    """A study output holding SPEC (as a killed run leaves it) and the spec file."""
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    out = tmp_path / "out"
    spec = StudySpec(**{**SPEC, "tasks": tuple(SPEC["tasks"])})
    open_output(spec, out, resume=False, overwrite=False).close()
    return spec_path, out


def test_existing_out_needs_resume_or_overwrite(existing, capsys):
    spec_path, out = existing
    before = _snapshot(out)
    code, err = _run(capsys, spec_path, out)
    assert code == 2 and len(err.splitlines()) == 1
    assert "--resume" in err and "--overwrite" in err
    assert _snapshot(out) == before


def test_resume_with_changed_spec_refused(existing, tmp_path, capsys):
    spec_path, out = existing
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps({**SPEC, "trials": 2}))
    before = _snapshot(out)
    code, err = _run(capsys, changed, out, "--resume")
    assert code == 2 and len(err.splitlines()) == 1
    assert "different spec" in err
    assert _snapshot(out) == before
    with ResultsStore(out / DB_NAME) as store:
        assert json.loads(store.get_meta("spec"))["trials"] == 1
    assert json.loads((out / SPEC_FILE).read_text())["trials"] == 1


def test_out_that_is_a_file_or_not_a_study(tmp_path, capsys):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    code, err = _run(capsys, spec_path, a_file, "--overwrite")
    assert code == 2 and "is a file" in err and len(err.splitlines()) == 1
    assert a_file.read_text() == "keep"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    code, err = _run(capsys, spec_path, other, "--overwrite")
    assert code == 2 and "not a study output" in err
    assert (other / "notes.txt").read_text() == "keep"
