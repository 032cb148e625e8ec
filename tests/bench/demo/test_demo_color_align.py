"""Colour alignment of the simulated backgrounds (issue 33 item 5; bench/demo/color_align.py).

The spec's ``real_world.background_color`` maps the simulated domain's background Gaussians'
base colours through a per-channel polynomial (:mod:`bench.study.world_domain`); these tests
check its validation, that a spec without it keeps its stored text, that the simulated env
draws exactly the aligned bundle, and that the committed measurement
(``results/demo-color-align``, ``python -m bench.demo.color_align --out DIR``) is consistent.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.align.color import ColorFit, align_splat_colors
from bench.errors import BenchError
from bench.study.world_domain import WorldDomain

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "results" / "demo-color-align"
WORLDS = {"duo": "gt-duo", "flat": "gt-flat", "g2": "gt-g2"}
# a non-identity map: darker at the dark end, brighter at the bright end (closed form below)
FIT = {"degree": 2, "coefficients": [[0.05, 0.6, 0.3], [0.02, 0.9, 0.05], [0.0, 1.0, 0.0]]}


def test_colorfit_from_dict_round_trips_and_refuses_bad_coefficients():
    fit = ColorFit.from_dict(FIT)
    assert fit.degree == 2
    assert ColorFit.from_dict(fit.to_dict()).coefficients.tolist() == FIT["coefficients"]
    # closed form: 0.05 + 0.6 x 0.5 + 0.3 x 0.25 = 0.425 (red); blue is the identity
    assert np.allclose(fit.apply(np.array([[0.5, 0.5, 0.5]])), [[0.425, 0.4825, 0.5]])
    for bad in ({"coefficients": [[1.0, 2.0]] * 2}, {"coefficients": [[1.0]] * 3},
                {"coefficients": [[0.0, float("nan")]] * 3},
                {"degree": 3, "coefficients": FIT["coefficients"]}):
        with pytest.raises(ValueError):
            ColorFit.from_dict(bad)


def test_world_domain_validates_background_color_in_one_line():
    domain = WorldDomain(worlds=WORLDS, background_color={"flat": FIT})
    assert domain.scene_color("flat").coefficients.tolist() == FIT["coefficients"]
    assert domain.scene_color("duo") is None
    assert domain.to_json()["background_color"] == {"flat": FIT}
    for bad, needle in (({"kitchen": FIT}, "without a world"),
                        ({"flat": {"coefficients": [[1.0]]}}, "malformed"),
                        ({"flat": {}}, "malformed"), ([1, 2], "must be an object")):
        with pytest.raises(BenchError) as exc:
            WorldDomain(worlds=WORLDS, background_color=bad)
        assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_specs_without_background_color_keep_their_stored_text():
    # added after the paper run's store was written: its spec must still resume
    assert "background_color" not in WorldDomain(worlds=WORLDS).to_json()
    from bench.demo.run import DemoConfig

    spec = DemoConfig(out=Path("unused"), profile="paper").study_spec()
    assert "background_color" not in spec.to_json()["real_world"]


def test_simulated_env_draws_the_aligned_bundle():
    """A spec's colour map gives the same images as an env built on the aligned bundle."""
    from bench.demo.build import shipped_bundle
    from bench.demo.run import DemoConfig
    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env

    spec = DemoConfig(out=Path("."), profile="quick").study_spec()
    bundle = load_scene(shipped_bundle("gt-flat", "clean"))
    aligned = dataclasses.replace(
        bundle, background=align_splat_colors(bundle.background, ColorFit.from_dict(FIT)))
    with_map = spec.replace(real_world={**spec.real_world, "background_color": {"flat": FIT}})
    images = []
    for s, b in ((with_map, bundle), (spec, aligned), (spec, bundle)):
        env = make_study_env(s, scene="flat", task="cup", domain="sim", bundle=b)
        try:
            obs, _ = env.reset(seed=7000)
            images.append({k: v.copy() for k, v in obs.items() if k.endswith("_rgb")})
        finally:
            env.close()
    assert images[0].keys() == images[1].keys() and images[0]
    for key in images[0]:
        assert np.array_equal(images[0][key], images[1][key]), key
    assert any(not np.array_equal(images[0][k], images[2][k]) for k in images[0])


def test_committed_measurement_is_consistent():
    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    assert manifest["tool"] == "demo-color-align/1"
    with (COMMITTED / "wrist_psnr.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == manifest["counts"]["task_rooms"] == 9
    for r in rows:
        assert (r["reaches_22_db"] == "1") == (float(r["psnr_after"]) >= 22.0)
        assert float(r["psnr_after"]) > float(r["psnr_before"])  # every task-room gains
    assert manifest["counts"]["reaching_22_db"] == sum(r["reaches_22_db"] == "1" for r in rows)
    fits = json.loads((COMMITTED / "background_color.json").read_text())
    WorldDomain(worlds=WORLDS, background_color=fits)  # what a spec's real_world takes


def test_cli_refuses_an_unknown_room_in_one_line(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "bench.demo.color_align", "--out", str(out),
                             "--worlds", "gt-kitchen"], capture_output=True, text=True)
    assert result.returncode == 2 and not out.exists()
    assert "gt-kitchen" in result.stderr and "Traceback" not in result.stderr


def test_shipped_fit_is_the_committed_measurements():
    # bench/demo/assets/background_color.json is a copy of the measurement's fit
    from bench.demo.appearance_assets import COLOR_ASSET, load_background_color

    assert COLOR_ASSET.read_bytes() == (COMMITTED / "background_color.json").read_bytes()
    fits = load_background_color()
    assert sorted(fits) == sorted(WORLDS) and all(f.degree == 2 for f in fits.values())


def test_shipped_fit_unreadable_is_refused_in_one_line(tmp_path):
    from bench.demo.appearance_assets import load_background_color

    bad = tmp_path / "background_color.json"
    bad.write_text('{"flat": {"coefficients": [[1.0]]}}')
    for path in (bad, tmp_path / "missing.json"):
        with pytest.raises(BenchError) as exc:
            load_background_color(path)
        assert "color_align" in str(exc.value) and "\n" not in str(exc.value)


def test_background_color_option_puts_the_shipped_fit_in_the_spec():
    from bench.demo import cli
    from bench.demo.appearance_assets import load_background_color
    from bench.demo.run import BACKGROUND_COLORS, DemoConfig

    assert cli.BACKGROUND_COLORS == BACKGROUND_COLORS  # argparse's choices, stdlib-only module
    shipped = {s: f.to_dict() for s, f in load_background_color().items()}
    aligned = DemoConfig(out=Path("."), profile="paper", background_color="shipped")
    plain = DemoConfig(out=Path("."), profile="paper")
    assert aligned.study_spec().to_json()["real_world"]["background_color"] == shipped
    assert aligned.resolved_profile().background_color == "shipped"
    # everything else in the spec is the profile's
    rest = {k: v for k, v in aligned.study_spec().to_json()["real_world"].items()
            if k != "background_color"}
    assert rest == plain.study_spec().to_json()["real_world"]
    assert "--background-color" in aligned.unshipped_note() and plain.unshipped_note() == ""
    assert DemoConfig(out=Path("."), background_color="none").unshipped_note() == ""
    with pytest.raises(BenchError) as exc:
        DemoConfig(out=Path("."), background_color="aligned").study_spec()
    assert "--background-color" in str(exc.value) and "shipped" in str(exc.value)


def test_wrist_pixels_without_a_fit_are_unaligned_whatever_the_profile(monkeypatch):
    """The fit is made from wrist_pixel_pairs: with no fit they must be the unaligned ones."""
    import bench.demo.run as run
    from bench.demo.build_report import wrist_pixel_pairs

    plain = wrist_pixel_pairs("gt-flat", task="cup", starts=(7000,))
    for name, profile in list(run.PROFILES.items()):
        monkeypatch.setitem(run.PROFILES, name,
                            dataclasses.replace(profile, background_color="shipped"))
    again = wrist_pixel_pairs("gt-flat", task="cup", starts=(7000,))
    fit = ColorFit.from_dict(FIT)
    mapped = wrist_pixel_pairs("gt-flat", task="cup", starts=(7000,), background_color=fit)
    assert len(plain) == len(again) == len(mapped) == 2
    for (real_a, sim_a), (real_b, sim_b), (_, sim_c) in zip(plain, again, mapped, strict=True):
        assert np.array_equal(real_a, real_b) and np.array_equal(sim_a, sim_b)
        assert not np.array_equal(sim_a, sim_c)


def test_committed_aligned_screen_keeps_every_pair():
    """results/demo-reaction-aligned: the pairs' screen (8000-8029) with the shipped colour map.

    The pair rule of docs/demo-policies.md (both react to hole-90, real gap 15-40 pp) and
    item 5's (the stronger keeps at least half its real successes simulated) hold for every
    task's pair; the real outcomes are the unaligned screen's trial for trial (the real world
    never sees the colour map).
    """
    from bench.demo.reaction import MIN_CHANGED, REAL_GAP_PP
    from bench.policies.learned import DEMO_POLICIES

    screened = ROOT / "results" / "demo-reaction-aligned"
    rows, trials = {}, {}
    for part in ("cup", "tape-pen"):
        config = json.loads((screened / part / "reaction_config.json").read_text())
        assert config["background_color"] == "shipped" and config["condition_offset"] == 8000
        with (screened / part / "reaction.csv").open(newline="") as f:
            rows.update({(r["task"], r["policy"]): r for r in csv.DictReader(f)})
        with (screened / part / "reaction_trials.csv").open(newline="") as f:
            trials.update({(r["task"], r["policy"], r["trial"]): r for r in csv.DictReader(f)})
    for task, pair in DEMO_POLICIES.items():
        strong, weak = sorted((rows[(task, p)] for p in pair), key=lambda r: -int(r["real"]))
        assert all(int(r["changed"]) >= MIN_CHANGED for r in (strong, weak)), task
        gap = 100 * (int(strong["real"]) - int(weak["real"])) / int(strong["trials"])
        assert REAL_GAP_PP[0] <= gap <= REAL_GAP_PP[1], (task, gap)
        assert 2 * int(strong["sim_clean"]) >= int(strong["real"]), task
    with (ROOT / "results" / "demo-policies" / "reaction_trials.csv").open(newline="") as f:
        unaligned = {(r["task"], r["policy"], r["trial"]): r for r in csv.DictReader(f)}
    assert all(unaligned[k]["real"] == r["real"] for k, r in trials.items())
    assert len(trials) == 30 * len(rows)
