"""The background-swap screen of issue 33 item 5 (bench/demo/background_swap.py)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.demo.background_swap import (
    CONTROL,
    SWAP_VARIANTS,
    TOP_ABOVE,
    TOP_BELOW,
    TOP_MARGIN,
    SwapConfig,
    summarise_swaps,
    swap_env,
    table_top_mask,
)

COMMITTED = Path(__file__).resolve().parents[3] / "results" / "demo-swap"


def test_table_top_mask_follows_the_tables_footprint_and_yaw():
    # a 1.0 x 0.6 m top turned by 90 degrees: its long side lies along world y
    world = SimpleNamespace(table_size=(1.0, 0.6), table_yaw_deg=90.0)
    half_long, half_short = 0.5 + TOP_MARGIN, 0.3 + TOP_MARGIN
    points = np.array([
        [0.0, 0.0, 0.0],                        # centre of the top
        [0.0, half_long - 1e-3, 0.0],           # inside along the long side (world y)
        [half_long - 1e-3, 0.0, 0.0],           # as far along world x: off the short side
        [half_short - 1e-3, 0.0, 0.0],          # just inside the short side
        [0.0, 0.0, TOP_ABOVE + 1e-3],           # above the slab
        [0.0, 0.0, -TOP_BELOW + 1e-3],          # inside, near the slab's bottom
        [0.0, 0.0, -TOP_BELOW - 1e-3],          # below the slab (the legs, the floor)
    ])
    assert table_top_mask(points, world).tolist() == [True, True, False, True, False, True,
                                                      False]


def test_summary_counts_paired_changes_against_the_control():
    pairs = [(0, 1), (0, 1), (0, 1), (1, 1), (0, 0)]
    rows = [{"task": "tape", "policy": "p", "trial": t, CONTROL: c, "opaque-top": c,
             "gt-table": g, "gt-table-plain": g, "gt-room": 1, "fitted-lights": c}
            for t, (c, g) in enumerate(pairs)]
    table = {r["variant"]: r for r in summarise_swaps(rows, SWAP_VARIANTS)}
    assert table[CONTROL]["successes"] == 1 and table[CONTROL]["mcnemar_p"] == 1.0
    gt = table["gt-table"]
    # 3 gained, 0 lost: exact McNemar = 2 x (1/2)^3 = 0.25 (closed form)
    assert (gt["successes"], gt["gained"], gt["lost"], gt["mcnemar_p"]) == (4, 3, 0, 0.25)
    assert table["gt-room"]["gained"] == 4


@pytest.mark.parametrize("variants", [("gt-table",), ("reconstruction", "gt-floor"), ()])
def test_config_refuses_variants_without_the_control_first(variants):
    with pytest.raises(ValueError, match="must start with 'reconstruction'"):
        SwapConfig(variants=variants)


def test_cli_refuses_bad_variants_in_one_line(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "demo", "swap", "--out", str(out),
                           "--variants", "gt-table,reconstruction"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "must start with 'reconstruction'" in proc.stderr
    assert not out.exists()


def test_gt_table_draws_only_the_table_top_and_drops_its_gaussians():
    import mujoco

    from bench.demo.run import DemoConfig
    from bench.scene.bundle import load_scene
    from bench.worlds.rooms import get_world

    spec = DemoConfig(out=Path("."), tasks=("cup",)).study_spec()
    world = get_world("gt-flat")
    full = load_scene(spec.scenes["flat"]).background
    on_top = table_top_mask(full.means, world)
    assert 50 < on_top.sum() < 0.1 * len(on_top)
    drawn, textured = {}, {}
    for variant in SWAP_VARIANTS:
        env = swap_env(spec, scene="flat", task="cup", variant=variant)
        try:
            base = env.unwrapped
            model = base.world.model
            names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) or ""
                     for i in range(model.ngeom)]
            drawn[variant] = sum(n.startswith("gt_") and model.geom_group[i] < 4
                                 for i, n in enumerate(names))
            if variant == "gt-room":
                total = sum(1 for n in names if n.startswith("gt_"))
            if variant in ("gt-table", "gt-table-plain"):
                top = next(i for i, n in enumerate(names)
                           if n.startswith("gt_") and model.geom_group[i] < 4)
                material = model.geom_matid[top]
                textured[variant] = bool((model.mat_texid[material] >= 0).any())
                if variant == "gt-table-plain":  # the table's base colour, opaque
                    assert np.allclose(model.geom_rgba[top], [*world.table_colour, 1.0])
                kept = base.scene.background
                assert len(kept.means) == len(full.means) - int(on_top.sum())
                assert not table_top_mask(kept.means, world).any()
            if variant == "opaque-top":  # the same Gaussians, only the top's opacity raised
                kept = base.scene.background
                assert np.array_equal(kept.means, full.means)
                assert np.array_equal(kept.sh_dc, full.sh_dc)
                assert np.array_equal(kept.opacity_logits[~on_top], full.opacity_logits[~on_top])
                assert (kept.opacities()[on_top] > 0.99).all()
                assert (full.opacities()[on_top] < 0.99).mean() > 0.5  # it was not opaque before
            # the room's lights are in every variant but the fitted one, so the meshes are lit
            # alike; fitted-lights has no room at all, only the task world's and fitted lights
            assert model.nlight > 1
        finally:
            env.close()
    assert total > 10
    assert drawn == {"reconstruction": 0, "opaque-top": 0, "gt-table": 1, "gt-table-plain": 1,
                     "gt-room": total, "fitted-lights": 0}
    assert textured == {"gt-table": True, "gt-table-plain": False}


def test_committed_swap_table_is_its_trials_summarised():
    rows = [{**r, **{k: int(r[k]) for k in ("trial", "start", *SWAP_VARIANTS)}}
            for r in csv.DictReader(open(COMMITTED / "swap_trials.csv"))]
    with open(COMMITTED / "swap.csv") as handle:
        committed = list(csv.DictReader(handle))
    assert [{k: str(v) for k, v in r.items()} for r in summarise_swaps(rows, SWAP_VARIANTS)] \
        == committed
    assert all(r["start"] >= 8000 for r in rows)
