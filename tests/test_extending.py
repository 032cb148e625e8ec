"""docs/extending.md, exercised: each recipe's plugin, installed from the doc's own code blocks.

A plugin is "installed" the way pip leaves it: its module and a ``<name>-0.1.dist-info/``
(METADATA + entry_points.txt, from the recipe's pyproject.toml block) in a folder on
``sys.path``, where ``importlib.metadata`` finds it. Each test gives the registries a fresh
plugin state (restored afterwards), so the plugins of one test never leak into another.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from bench.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"


def doc_blocks() -> tuple[dict[str, str], dict[str, dict]]:
    """The recipes' modules (name -> source) and pyproject.toml files (project name -> data)."""
    modules, projects = {}, {}
    for lang, body in re.findall(r"^```(\w+)\n(.*?)^```", DOC.read_text(encoding="utf-8"),
                                 re.S | re.M):
        first = body.split("\n", 1)[0]
        if lang == "python" and re.fullmatch(r"# \w+\.py", first):
            modules[first[2:-3]] = body
        elif lang == "toml":
            data = tomllib.loads(body)
            projects[data["project"]["name"]] = data
    return modules, projects


def fresh(monkeypatch, *registries) -> None:
    """Give registries an unread plugin group and a copy of their entries (both restored)."""
    for registry in registries:
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_plugins_loaded", False)
        monkeypatch.setattr(registry, "plugin_errors", {})


@pytest.fixture
def install(tmp_path, monkeypatch):
    """install(dist, modules={name: source}, entry_points={group: {name: value}})."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    imported: list[str] = []

    def install_(dist: str, *, modules: dict[str, str],
                 entry_points: dict[str, dict[str, str]]) -> None:
        for name, source in modules.items():
            (site / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
            imported.append(name)
        info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n",
                                       encoding="utf-8")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
            for group, points in entry_points.items()), encoding="utf-8")

    yield install_
    for name in imported:
        sys.modules.pop(name, None)


def install_recipe(install, dist: str) -> dict[str, dict[str, str]]:
    """Install the plugin of docs/extending.md whose pyproject names ``dist``."""
    modules, projects = doc_blocks()
    points = projects[dist]["project"]["entry-points"]
    needed = {value.split(":")[0] for group in points.values() for value in group.values()}
    install(dist, modules={m: modules[m] for m in needed}, entry_points=points)
    return points


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_doc_has_four_recipes_with_plugin_groups():
    from bench.registry import PLUGIN_GROUPS

    modules, projects = doc_blocks()
    groups = {g for data in projects.values() for g in data["project"]["entry-points"]}
    assert groups == set(PLUGIN_GROUPS.values()) == {
        "splatbench.editors", "splatbench.metrics", "splatbench.policies",
        "splatbench.executors"}
    assert len(modules) == 4
    assert "extending.md" in (ROOT / "docs" / "developing.md").read_text(encoding="utf-8")


def test_registries_read_their_group_lazily():
    from bench.policies.base import POLICIES
    from bench.registry import PLUGIN_GROUPS, Registry
    from bench.study.executors import EXECUTORS
    from metrics.registry import SCORERS
    from perturbations.registry import PERTURBATIONS

    for registry in (PERTURBATIONS, SCORERS, POLICIES, EXECUTORS):
        assert registry.group == PLUGIN_GROUPS[registry.kind], registry.kind
    lazy = Registry("thing", group="splatbench.tests-nothing")
    lazy.register("a", object())
    assert not lazy._plugins_loaded and lazy.entry("a")  # a hit reads no group
    assert lazy.names() == ["a"] and lazy._plugins_loaded


# --------------------------------------------------------------------------- editors


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    from bench.scene.bundle import save_scene
    from bench.scene.sample import make_sample_scene

    path = tmp_path_factory.mktemp("scene") / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=1500), path)
    return path


def test_editor_recipe_as_an_installed_plugin(install, monkeypatch, scene_dir, tmp_path, capsys):
    from perturbations.registry import PERTURBATIONS, editor_names, resolve_edit

    fresh(monkeypatch, PERTURBATIONS)
    install_recipe(install, "splatbench-jitter")
    assert "jitter" not in [e.name for e in PERTURBATIONS.registered()]  # not read yet
    assert editor_names() == ["hole", "floaters", "warp", "jitter"]
    entry = PERTURBATIONS.entry("jitter-strong")
    assert entry.meta["copies_sh_rest"] is True and entry.meta["preset"] == {"sigma": 0.02}

    with pytest.raises(SystemExit):
        main(["perturb", "--help"])
    text = capsys.readouterr().out
    assert "jitter (--kind jitter):" in text
    assert re.search(r"--sigma SIGMA\s+std of the position noise, metres \[default 0.005\]",
                     text)
    assert "--preset {hole-54,hole-90,floaters-low,floaters-mid,floaters-high,warp," \
           "jitter-strong}" in " ".join(text.split())

    out = tmp_path / "j"
    code, _, err = run(["perturb", "--kind", "jitter", "--sigma", "0.01", "--seed", "1",
                        "--scene", scene_dir, "--out", out], capsys)
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "jitter/1" and manifest["entry"] == "jitter"
    assert manifest["params"] == {"sigma": 0.01} and manifest["overrides"] == {"sigma": 0.01}
    assert manifest["counts"]["moved"] == 1500
    # the CLI's result is the library's (the lean loader gives the plain path's bytes)
    from bench.scene.bundle import load_scene
    from perturbations.apply import apply_perturbation, save_perturbed

    plain = apply_perturbation(load_scene(scene_dir), resolve_edit("jitter", sigma=0.01),
                               seed=1)
    save_perturbed(plain, tmp_path / "plain")
    for name in ("background.ply", "scene.json"):
        assert (out / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name

    code, _, err = run(["perturb", "--preset", "jitter-strong", "--scene", scene_dir,
                        "--out", tmp_path / "s"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["params"] == \
        {"sigma": 0.02}
    # its flag is refused with another editor and with a preset, like a built-in one's
    code, _, err = run(["perturb", "--kind", "hole", "--sigma", "0.01", "--scene", scene_dir,
                        "--out", tmp_path / "x"], capsys)
    assert code == 2 and "--sigma applies to jitter, not hole; remove it" in err
    code, _, err = run(["perturb", "--preset", "jitter-strong", "--sigma", "0.01", "--scene",
                        scene_dir, "--out", tmp_path / "x"], capsys)
    assert code == 2 and "would change the study condition --preset jitter-strong" in err


BROKEN = '''
    from dataclasses import dataclass, field

    from perturbations.registry import register_editor


    @dataclass(frozen=True)
    class Params:
        margin: float = field(default=1.0, metadata={"help": "something else"})


    @dataclass(frozen=True)
    class Plain:
        size: float = field(default=1.0, metadata={"help": "size"})


    def edit(splats, params, rng, *, table, keepouts=()):
        raise AssertionError("never run")


    def half():  # registers one editor, then fails
        register_editor("half", edit, Plain, version=1, description="x", copies_sh_rest=True)
        raise RuntimeError("second step failed")


    def clash():  # --margin means something else for hole and warp
        register_editor("clash", edit, Params, version=1, description="x", copies_sh_rest=True)


    def taken():
        register_editor("hole", edit, Plain, version=1, description="x", copies_sh_rest=True)


    def undeclared():  # copies_sh_rest is required
        register_editor("undeclared", edit, Plain, version=1, description="x")
'''


def test_a_broken_plugin_is_one_line_and_skipped(install, monkeypatch, scene_dir, tmp_path,
                                                 capsys, caplog):
    from perturbations.registry import PERTURBATIONS, editor_names

    fresh(monkeypatch, PERTURBATIONS)
    install("splatbench-broken", modules={"splatbench_broken": BROKEN}, entry_points={
        "splatbench.editors": {"missing": "splatbench_nowhere:register",
                               "half": "splatbench_broken:half",
                               "clash": "splatbench_broken:clash",
                               "taken": "splatbench_broken:taken",
                               "undeclared": "splatbench_broken:undeclared"}})
    with caplog.at_level(logging.WARNING, logger="splatbench.plugins"):
        assert editor_names() == ["hole", "floaters", "warp"]  # nothing half-registered
    messages = {r.getMessage() for r in caplog.records if r.name == "splatbench.plugins"}
    assert len(messages) == 5 and all("\n" not in m for m in messages)
    assert all(" from distribution splatbench-broken 0.1 failed to load and is skipped: " in m
               and m.startswith("splatbench.editors plugin '") for m in messages)
    text = " | ".join(sorted(messages))
    assert "'missing' (splatbench_nowhere:register)" in text and "ModuleNotFoundError" in text
    assert "RuntimeError: second step failed" in text
    assert "flag --margin is editor 'hole''s with another meaning" in text
    assert "perturbation 'hole' is already registered" in text
    assert "copies_sh_rest" in text
    # the bench works on; asking for the broken entry says why it is missing
    code, _, err = run(["perturb", "--preset", "hole-54", "--scene", scene_dir,
                        "--out", tmp_path / "o"], capsys)
    assert code == 0, err
    with pytest.raises(ValueError, match="plugin 'half'.*second step failed"):
        PERTURBATIONS.entry("half")


# --------------------------------------------------------------------------- metrics


def test_metric_recipe_as_an_installed_plugin(install, monkeypatch, tmp_path, capsys):
    from metrics.registry import SCORERS, directions, scorer_info
    from protocols.metric_directions import is_lower_better

    fresh(monkeypatch, SCORERS)
    install_recipe(install, "splatbench-mae")
    assert is_lower_better("MAE Test") is True  # the direction declared at registration
    assert directions() == {"psnr": False, "ssim": False, "lpips": True, "nvs-sqa": False,
                            "mae": True, "crossscore": False}
    assert scorer_info("mae").mode == "FR"
    code, out, _ = run(["score", "--list-metrics"], capsys)
    assert code == 0 and re.search(r"^mae\s+FR\s+lower\s+image\s+mae/1$", out, re.M)

    data = ROOT / "tests" / "metrics" / "data" / "calibration"
    code, _, err = run(["score", "--pred", data / "dist", "--gt", data / "ref", "--metrics",
                        "psnr,mae", "--out", tmp_path / "s.csv", "--no-progress"], capsys)
    assert code == 0, err
    import csv

    import numpy as np

    from metrics.images import read_folder

    with open(tmp_path / "s.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["metric"] == "mae"]
    names, pred = read_folder(data / "dist")
    _, ref = read_folder(data / "ref")
    expected = np.abs(pred / 255.0 - ref / 255.0).mean(axis=(1, 2, 3))
    assert [r["frame"] for r in rows] == names
    assert np.allclose([float(r["value"]) for r in rows], expected)


def test_directions_are_declared_at_registration():
    from metrics.registry import SCORERS, directions, register_direction, register_scorer
    from protocols.metric_directions import LOWER_BETTER, is_lower_better

    assert LOWER_BETTER == directions()
    assert {e.name: e.meta["lower_better"] for e in SCORERS.registered()} == {
        "psnr": False, "ssim": False, "lpips": True, "nvs-sqa": False}
    assert is_lower_better("CrossScore") is False and is_lower_better("LPIPS OBS-Probe")
    with pytest.raises(TypeError, match="lower_better must be True or False"):
        register_scorer(object, name="x", mode="FR", lower_better=None, input_range=(0, 1),
                        unit="image", version="x/1", arg_order="pred, ref", description="x")
    with pytest.raises(ValueError, match="already has a direction"):
        register_direction("lpips", lower_better=False)
    with pytest.raises(ValueError, match="unknown direction for metric 'nope'"):
        is_lower_better("nope")


# --------------------------------------------------------------------------- policies


def test_policy_recipe_as_an_installed_plugin(install, monkeypatch, scene_dir, tmp_path,
                                              capsys):
    from bench.policies.base import POLICIES
    from bench.policies.entry import validate_ref

    fresh(monkeypatch, POLICIES)
    install_recipe(install, "splatbench-still")
    validate_ref("still")
    assert POLICIES.names()[-1] == "still"
    out = tmp_path / "r"
    code, _, err = run(["rollout", "--scene", scene_dir, "--task", "cup", "--policy", "still",
                        "--obs-mode", "state", "--episodes", "1", "--max-frames", "20",
                        "--out", out], capsys)
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["policy"] == "still"
    assert config["policy_meta"] == {"privileged": False,
                                     "description": "stand still, gripper half open"}
    episodes = json.loads((out / "episodes.json").read_text())["episodes"]
    assert episodes[0]["status"] == "ok" and episodes[0]["policy"] == "still"


# --------------------------------------------------------------------------- executors

#: The tables that are a function of the results (tests/bench/study/test_study_executors.py).
TABLES = ("rollouts.csv", "success_rates.csv", "ranking.csv", "transitions.csv",
          "quality.csv", "conditions.csv", "errors.csv")


def test_executor_recipe_as_an_installed_plugin(install, monkeypatch, tmp_path, capsys):
    from bench.study.executors import EXECUTORS, ExecutorConfig
    from bench.study.spec import StudySpec

    fresh(monkeypatch, EXECUTORS)
    install_recipe(install, "splatbench-inline")
    assert EXECUTORS.names() == ["serial", "process", "ray", "inline"]
    spec = StudySpec(name="tiny", sample_scenes={"a": 0}, sample_gaussians=1000,
                     conditions=("clean",), tasks=("cup",), trials=1, real_trials=1,
                     max_frames=20, metrics=("psnr",))
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_json()))
    study = ["study", "run", "--spec", spec_file, "--no-progress", "--out"]
    # its own config check, and the common ones, before anything is written
    code, _, err = run([*study, tmp_path / "x", "--executor", "inline", "--workers", "2"],
                       capsys)
    assert code == 2 and "--executor inline runs one chunk at a time; drop --workers" in err
    code, _, err = run([*study, tmp_path / "x", "--executor", "inline", "--address", "auto"],
                       capsys)
    assert code == 2 and "--address is for --executor ray; drop it or use ray" in err
    assert not (tmp_path / "x").exists()
    assert ExecutorConfig.from_dict("inline").kind == "inline"

    code, out, err = run([*study, tmp_path / "inline", "--executor", "inline"], capsys)
    assert code == 0, err
    assert "(4 new rollouts)" in out
    code, _, err = run([*study, tmp_path / "serial"], capsys)
    assert code == 0, err
    for name in TABLES:  # the same rows whichever executor ran them
        assert (tmp_path / "inline" / "tables" / name).read_bytes() == \
            (tmp_path / "serial" / "tables" / name).read_bytes(), name


def test_executor_config_checks_are_each_executors(monkeypatch):
    from bench.errors import BenchError
    from bench.study.executors import EXECUTORS, ExecutorConfig, check_executor, check_ray

    assert EXECUTORS.entry("ray").meta["options"] == ("address",)
    assert EXECUTORS.entry("ray").meta["preflight"] is check_ray
    assert all(EXECUTORS.entry(n).meta["options"] == () and EXECUTORS.entry(n).meta["preflight"]
               is None for n in ("serial", "process"))
    for kind in ("serial", "process"):
        with pytest.raises(BenchError, match="--address is for --executor ray; drop it or use ray"):
            ExecutorConfig(kind=kind, address="auto")
        check_executor(ExecutorConfig(kind=kind))  # no preflight
    seen = []
    monkeypatch.setitem(EXECUTORS.entry("ray").meta, "preflight", seen.append)
    config = ExecutorConfig(kind="ray", address="localhost")
    check_executor(config)
    assert seen == [config]
