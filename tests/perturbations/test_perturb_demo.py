"""`bench demo`: every preset applied to the sample room, with manifests and a summary."""

import csv
import json

from bench.cli import main
from bench.demo.run import STAGES, DemoConfig, run_demo
from perturbations import preset_names


def test_demo_writes_every_condition_deterministically(tmp_path, capsys):
    run_demo(DemoConfig(out=tmp_path / "a", n_gaussians=2500))
    table = capsys.readouterr().out
    assert [name for name, _ in STAGES][:3] == ["sample_scene", "perturbations", "summary"]
    rows = list(csv.DictReader((tmp_path / "a" / "summary.csv").open()))
    assert [r["condition"] for r in rows] == ["clean", *preset_names()]
    for row in rows[1:]:
        manifest = json.loads((tmp_path / "a" / row["path"] / "manifest.json").read_text())
        assert manifest["entry"] == row["condition"]
        assert {k: int(row[k]) for k in ("removed", "added", "moved")} == manifest["counts"]
    assert int(rows[1]["removed"]) > 0 and int(rows[3]["added"]) == 32
    assert int(rows[-1]["moved"]) > 0
    assert "| hole-54 | hole/1 |" in table
    assert json.loads((tmp_path / "a" / "config.json").read_text())["n_gaussians"] == 2500
    # the CLI run of the same config gives identical backgrounds
    assert main(["demo", "--out", str(tmp_path / "b"), "--gaussians", "2500"]) == 0
    for row in rows:
        rel = f"{row['path']}/background.ply"
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert main(["demo", "--out", str(tmp_path / "b")]) == 2  # exists, no --overwrite
