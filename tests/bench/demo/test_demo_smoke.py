"""Smoke test of the main job with the tiniest settings: outputs exist and agree with each other."""

from __future__ import annotations

import csv
import json

import pytest

from bench.demo.run import STAGES, DemoConfig, run_demo
from bench.study.store import ResultsStore


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    config = DemoConfig(out=out, n_gaussians=2000, presets=("floaters-mid",), tasks=("cup",),
                        trials=1, real_trials=1, max_frames=100, metrics=("psnr",))
    run_demo(config)
    return out


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_stages_and_outputs_exist(demo):
    assert [name for name, _ in STAGES] == ["study", "yubi", "summary"]
    for rel in ("config.json", "manifest.json", "study.json", "results.sqlite", "summary.csv",
                "summary.md", "tables/success_rates.csv", "tables/success_rates.md",
                "tables/ranking.csv", "tables/ranking.md", "tables/transitions.csv",
                "tables/quality.csv", "tables/rollouts.csv", "figures/ranking_clean.png",
                "figures/ranking_clean.pdf", "yubi/manifest.json", "scenes/duo/clean/scene.json",
                "scenes/g2/floaters-mid/manifest.json"):
        assert (demo / rel).is_file(), rel


def test_outputs_are_consistent(demo):
    with ResultsStore(demo) as store:
        rows = store.rollouts()
    # 3 scenes x (2 conditions x 2 policies sim + 2 policies real) x 1 trial
    assert len(rows) == 18
    rates = _csv(demo / "tables" / "success_rates.csv")
    assert len(rates) == 3 * 3 * 2  # scene x (real, clean, floaters-mid) x policy
    for r in rates:
        stored = [x for x in rows if (x.scene, x.condition, x.policy, x.domain)
                  == (r["scene"], r["condition"], r["policy"], r["domain"])]
        assert int(r["trials"]) == len(stored)
        assert int(r["successes"]) == sum(x.success for x in stored)
    assert len(_csv(demo / "tables" / "rollouts.csv")) == 18
    summary = _csv(demo / "summary.csv")
    assert {(s["scene"], s["condition"]) for s in summary} == {
        (s, c) for s in ("duo", "flat", "g2") for c in ("clean", "floaters-mid")}
    manifest = json.loads((demo / "manifest.json").read_text())
    assert manifest["tool"] == "demo/2"
    assert "tables/ranking.csv" in manifest["outputs"]
    ranking = _csv(demo / "tables" / "ranking.csv")
    assert [r["condition"] for r in ranking] == ["clean", "floaters-mid"]
