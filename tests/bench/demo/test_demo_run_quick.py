"""The whole quick profile, run twice with the same seed: outputs exist, agree with each other,
and every table (CSV + Markdown) and the summary are byte-identical between the runs."""

from __future__ import annotations

import csv
import json

import pytest

from bench.demo.run import STAGES, DemoConfig, run_demo
from bench.study.store import ResultsStore

#: Wall-clock measurements (per-query latency), the only tables that differ between runs.
WALL_CLOCK = {"latency.csv", "latency.md"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-quick")
    return [run_demo(DemoConfig(out=root / name, profile="quick")) for name in ("a", "b")]


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_quick_profile_is_deterministic(runs):
    a, b = runs
    tables = sorted(p.name for p in (a / "tables").iterdir() if p.name not in WALL_CLOCK)
    assert "ranking.csv" in tables and "success_rates.md" in tables
    assert tables == sorted(p.name for p in (b / "tables").iterdir() if p.name not in WALL_CLOCK)
    for name in tables:
        assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
    for name in ("summary.csv", "summary.md", "study.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    config_a, config_b = (json.loads((d / "config.json").read_text()) for d in (a, b))
    assert config_a.pop("out") != config_b.pop("out") and config_a == config_b
    with ResultsStore(a) as sa, ResultsStore(b) as sb:
        assert sa.rollouts() == sb.rollouts() and sa.rollouts()


@pytest.mark.slow
def test_quick_outputs_exist_and_agree(runs):
    demo = runs[0]
    assert [name for name, _ in STAGES] == ["study", "yubi", "summary"]
    spec = json.loads((demo / "study.json").read_text())
    conditions = [*spec["conditions"], *spec["extra_conditions"]]
    for rel in ("config.json", "manifest.json", "study.json", "results.sqlite", "summary.csv",
                "summary.md", "tables/success_rates.csv", "tables/ranking.md",
                "tables/transitions.csv", "tables/quality.csv", "tables/rollouts.csv",
                "figures/ranking_clean.png", "figures/ranking_clean.pdf", "yubi/manifest.json",
                "real_results.json"):
        assert (demo / rel).is_file(), rel
    with ResultsStore(demo) as store:
        rows = store.rollouts()
    scenes, policies = 3, 2
    sim = scenes * len(conditions) * policies * spec["trials"]
    real = scenes * policies * spec["real_trials"]
    assert len(rows) == sim + real
    assert sum(r.domain == "real" for r in rows) == real
    rates = _csv(demo / "tables" / "success_rates.csv")
    assert {r["source"] for r in rates if r["domain"] == "real"} == {"ground-truth-world"}
    for r in rates:
        stored = [x for x in rows if (x.scene, x.condition, x.policy, x.domain)
                  == (r["scene"], r["condition"], r["policy"], r["domain"])]
        assert int(r["trials"]) == len(stored)
        assert int(r["successes"]) == sum(x.success for x in stored)
    summary = _csv(demo / "summary.csv")
    assert {(s["scene"], s["condition"]) for s in summary} == {
        (s, c) for s in ("duo", "flat", "g2") for c in conditions}
    manifest = json.loads((demo / "manifest.json").read_text())
    assert manifest["tool"] == "demo/3" and manifest["params"]["profile"] == "quick"
    assert [r["condition"] for r in _csv(demo / "tables" / "ranking.csv")] == conditions
