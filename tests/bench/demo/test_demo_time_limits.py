"""The paper profile's time limits come from the committed measurement, by the stated rule."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from bench.demo.run import PAPER_MAX_FRAMES, PROFILES
from bench.demo.time_limits import TOOL, chosen_limits, summarise

MEASURED = Path(__file__).resolve().parents[3] / "results" / "demo-time-limits"


def _row(task, policy, domain, success, frames):
    return {"task": task, "scene": "duo", "domain": domain, "policy": policy, "start": 7000,
            "success": success, "frames": frames, "status": "ok"}


def test_rule_on_constructed_rows():
    rows = [_row("cup", "a", "real", 1, 74), _row("cup", "b", "sim", 1, 184),
            _row("cup", "b", "sim", 0, 600), _row("pen", "a", "real", 1, 560),
            _row("tape", "a", "real", 0, 600)]
    limits = chosen_limits(rows, max_frames=600)
    # cup: ceil(1.5 x 184 / 50) x 50 = ceil(5.52) x 50 = 300; pen: 1.5 x 560 = 840 -> 850,
    # and 560 >= 0.9 x 600 is flagged; tape: no success -> the 50-frame floor
    assert limits == {"cup": {"limit": 300, "latest_success": 184, "censored": False},
                      "pen": {"limit": 850, "latest_success": 560, "censored": True},
                      "tape": {"limit": 50, "latest_success": 0, "censored": False}}
    summary = {(s["task"], s["policy"], s["domain"]): s for s in summarise(rows)}
    assert summary[("cup", "b", "sim")]["successes"] == 1
    assert summary[("cup", "b", "sim")]["rollouts"] == 2
    assert summary[("tape", "a", "real")]["max"] == ""


def test_paper_limits_are_the_committed_measurements():
    with open(MEASURED / "success_frames.csv", newline="") as f:
        rows = [{**r, "success": int(r["success"]), "frames": int(r["frames"])}
                for r in csv.DictReader(f)]
    manifest = json.loads((MEASURED / "manifest.json").read_text())
    assert manifest["tool"] == TOOL and manifest["counts"]["rollouts"] == len(rows) == 216
    limits = chosen_limits(rows, max_frames=manifest["params"]["max_frames"])
    assert {t: v["limit"] for t, v in limits.items()} == PAPER_MAX_FRAMES
    assert not any(v["censored"] for v in limits.values())
    assert json.loads((MEASURED / "limits.json").read_text())["limits"] == limits
    # every policy's successes end inside its task's limit, in both domains
    for r in rows:
        if r["success"]:
            assert r["frames"] <= PAPER_MAX_FRAMES[r["task"]]
    assert PROFILES["paper"].max_frames == PAPER_MAX_FRAMES
    # measured on the pairs the paper profile runs (a re-chosen pair needs a new measurement)
    from bench.policies.learned import DEMO_POLICIES

    measured = {t: {r["policy"] for r in rows if r["task"] == t} for t in PAPER_MAX_FRAMES}
    assert measured == {t: {"expert", *DEMO_POLICIES[t]} for t in PAPER_MAX_FRAMES}
