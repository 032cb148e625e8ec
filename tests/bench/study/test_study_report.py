"""``bench study report``: the HTML page of a tiny study, built and loaded in headless Chromium.

The browser check needs Debian's ``chromium`` (``make test`` installs it with apt-get when
it is missing and apt-get exists); without it that test skips and says why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from bench.study.runner import run_study
from bench.study.spec import StudySpec

SPEC = StudySpec(name="tiny-report", sample_scenes={"a": 0}, sample_gaussians=2000,
                 conditions=("clean", "floaters-mid"), tasks=("cup",), trials=1, real_trials=1,
                 max_frames=60, metrics=("psnr",))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from bench.cli import main

    root = tmp_path_factory.mktemp("report")
    run = root / "run"
    run_study(SPEC, run, progress=False)
    assert main(["study", "report", str(run), "--out", str(root / "page")]) == 0
    return run, root / "page"


def test_report_files_and_manifest(report):
    run, page = report
    html = (page / "index.html").read_text()
    for heading in ("Design", "Success rates", "Ranking agreement", "Significance transitions",
                    "Quality against the Test views", "Reliability predictors",
                    "Paired rollouts", "Provenance"):
        assert heading in html, heading
    assert "http://" not in html and "https://" not in html  # nothing from the network
    srcs = re.findall(r'src="([^"]+)"', html)
    assert srcs and all((page / s).is_file() for s in srcs)
    assert (page / "img" / "success_cup.pdf").is_file()
    assert any(s.endswith(".gif") for s in srcs) and any("_floaters-mid.png" in s for s in srcs)
    manifest = json.loads((page / "manifest.json").read_text())
    assert manifest["tool"] == "study-report/1"
    assert set(manifest["inputs"]) >= {"results.sqlite", "study.json", "tables/ranking.csv"}
    assert manifest["counts"]["rollouts_rerun"] == 4  # 2 pairs (a policy each): clean + cond
    assert "index.html" in manifest["outputs"]
    # the re-run rollouts reproduce the stored outcomes (deterministic rollouts)
    assert "differs from the store" not in html


def test_study_run_writes_the_report_unless_told_not_to(report, tmp_path):
    from bench.cli import main

    run, _ = report
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC.to_json()))
    base = ["study", "run", "--spec", str(spec), "--out", str(run), "--resume", "--no-progress"]
    assert main([*base, "--no-report"]) == 0
    assert not (run / "report").exists()
    assert main(base) == 0  # nothing new to run; the report is written at the end
    assert json.loads((run / "report" / "manifest.json").read_text())["tool"] == \
        "study-report/1"


def test_report_refuses_a_non_study(tmp_path, capsys):
    from bench.cli import main

    assert main(["study", "report", str(tmp_path), "--out", str(tmp_path / "r")]) != 0
    assert "not a finished study output" in capsys.readouterr().err


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium on PATH: `make test` installs Debian's chromium with apt-get "
                "(apt-get install -y chromium); the browser check of the report needs it")


def test_report_loads_in_headless_chromium(report, tmp_path):
    _, page = report
    browser = _chromium()
    url = (page / "index.html").resolve().as_uri()
    common = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
              f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    dom = subprocess.run([*common, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    assert 'data-images-ok="true"' in body.group(0), body.group(0)
    count = int(re.search(r'data-images="(\d+)"', body.group(0)).group(1))
    assert count >= 4
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line
               or "Uncaught" in line]
    assert not console, console
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1280,4000", url],
                   capture_output=True, text=True, timeout=120, check=True)
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float32)
    assert pixels.shape[:2] == (4000, 1280)
    assert pixels.std() > 20.0  # not a blank page
