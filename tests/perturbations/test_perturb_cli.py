"""`bench perturb` end to end: outputs, manifest, determinism, registration, every bad input."""

import json
import shutil

import numpy as np
import pytest

from bench.cli import main
from bench.provenance import sha256_file
from bench.scene.bundle import save_scene
from bench.scene.ply import read_ply, write_ply
from bench.scene.sample import make_sample_scene

N = 3000


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("scene") / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=N), path)
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def perturb(scene, out, *extra):
    return ["perturb", "--scene", scene, "--out", out, *extra]


def test_hole_preset_outputs_and_manifest(scene_dir, tmp_path, capsys):
    out = tmp_path / "h"
    code, _, err = run(perturb(scene_dir, out, "--preset", "hole-54"), capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [".splatbench-output", "background.ply",
                                                     "cameras", "manifest.json", "scene.json"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tool"] == "hole/1" and manifest["entry"] == "hole-54"
    assert manifest["params"]["half_angle_deg"] == 54.0 and manifest["seed"] == 0
    assert manifest["inputs"]["background"]["sha256"] == sha256_file(scene_dir / "background.ply")
    assert manifest["outputs"]["background"]["sha256"] == sha256_file(out / "background.ply")
    assert manifest["bench_version"]
    removed = manifest["counts"]["removed"]
    assert removed > 0 and manifest["counts"] == {"removed": removed, "added": 0, "moved": 0}
    assert len(read_ply(out / "background.ply")) == N - removed
    before = json.loads((scene_dir / "scene.json").read_text())
    after = json.loads((out / "scene.json").read_text())
    assert after["world_from_splat"] == before["world_from_splat"]  # stays registered
    assert after["table"] == before["table"] and after["cameras"] == before["cameras"]
    assert (out / "cameras" / "test.json").read_bytes() == \
        (scene_dir / "cameras" / "test.json").read_bytes()


def test_untouched_gaussians_are_bit_exact_under_registration(scene_dir, tmp_path, capsys):
    # the sample's world_from_splat has scale 2.5 and a rotation: kept rows must not drift
    source = read_ply(scene_dir / "background.ply")
    assert run(perturb(scene_dir, tmp_path / "h", "--kind", "hole", "--angle", "90"),
               capsys)[0] == 0
    kept = read_ply(tmp_path / "h" / "background.ply")
    rows = {source.means[i].tobytes(): i for i in range(len(source))}
    index = np.array([rows[m.tobytes()] for m in kept.means])
    for name in ("quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert getattr(kept, name).tobytes() == getattr(source, name)[index].tobytes(), name
    assert run(perturb(scene_dir, tmp_path / "w", "--preset", "warp"), capsys)[0] == 0
    warped = read_ply(tmp_path / "w" / "background.ply")
    moved = (warped.means != source.means).any(axis=1)
    manifest = json.loads((tmp_path / "w" / "manifest.json").read_text())
    assert moved.sum() == manifest["counts"]["moved"] > 0
    for name in ("quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert getattr(warped, name).tobytes() == getattr(source, name).tobytes(), name


def test_same_seed_same_bytes_different_seed_different_floaters(scene_dir, tmp_path, capsys):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        args = perturb(scene_dir, tmp_path / name, "--kind", "floaters", "--band", "mid",
                       "--seed", seed)
        assert run(args, capsys)[0] == 0
    a, b, c = ((tmp_path / n / "background.ply").read_bytes() for n in "abc")
    assert a == b and a != c
    assert (tmp_path / "a" / "manifest.json").read_bytes() == \
        (tmp_path / "b" / "manifest.json").read_bytes()
    floats = read_ply(tmp_path / "a" / "background.ply")
    assert len(floats) == N + 32


def test_custom_parameters_reach_the_editor(scene_dir, tmp_path, capsys):
    args = perturb(scene_dir, tmp_path / "f", "--kind", "floaters", "--clusters", "3",
                   "--per-cluster", "5", "--band-range", "0.3", "0.4")
    assert run(args, capsys)[0] == 0
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text())
    assert manifest["counts"]["added"] == 15 and manifest["params"]["band"] == [0.3, 0.4]
    assert manifest["overrides"] == {"num_clusters": 3, "per_cluster": 5, "band": [0.3, 0.4]}


def test_overwrite(scene_dir, tmp_path, capsys):
    out = tmp_path / "o"
    assert run(perturb(scene_dir, out, "--preset", "warp"), capsys)[0] == 0
    code, _, err = run(perturb(scene_dir, out, "--preset", "hole-90"), capsys)
    assert code == 2 and "exists; pass --overwrite" in err
    assert json.loads((out / "manifest.json").read_text())["tool"] == "warp/1"
    assert run(perturb(scene_dir, out, "--preset", "hole-90", "--overwrite"), capsys)[0] == 0
    assert json.loads((out / "manifest.json").read_text())["tool"] == "hole/1"


def test_table_outside_scene_warns_but_runs(scene_dir, tmp_path, capsys):
    far = tmp_path / "far"
    shutil.copytree(scene_dir, far)
    data = json.loads((far / "scene.json").read_text())
    data["table"]["center"] = [9.0, 0.0]
    (far / "scene.json").write_text(json.dumps(data))
    code, _, err = run(perturb(far, tmp_path / "o", "--preset", "hole-54"), capsys)
    assert code == 0, err
    warned = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warned) == 1  # one line, no source location
    assert warned[0].startswith("bench perturb: warning: scene 'sample-room-seed0': table")
    assert "outside the background bounds" in warned[0]


# ---------------------------------------------------------------- bad input
def corrupt(scene_dir, tmp_path, mutate_ply=None, mutate_json=None):
    bad = tmp_path / "bad"
    shutil.copytree(scene_dir, bad)
    if mutate_ply is not None:
        path = bad / "background.ply"
        result = mutate_ply(path.read_bytes(), path)
        if result is not None:
            path.write_bytes(result)
    if mutate_json is not None:
        data = json.loads((bad / "scene.json").read_text())
        mutate_json(data)
        (bad / "scene.json").write_text(json.dumps(data))
    return bad


def with_nan(_raw, path):
    splats = read_ply(path)
    splats.means[[5, 9], 1] = np.nan
    splats.log_scales[9, 0] = np.inf
    splats.sh_dc[20, 2] = -np.inf
    write_ply(path, splats)


def drop_property(name):
    return lambda raw, _p: raw.replace(f"property float {name}\n".encode(), b"", 1)


def unlink(_raw, path):
    path.unlink()


BAD_CASES = {
    "missing PLY": (dict(mutate_ply=unlink), [], "not found"),
    "truncated PLY": (dict(mutate_ply=lambda raw, _p: raw[: len(raw) // 2]), [],
                      "truncated PLY"),
    "wrong header": (dict(mutate_ply=lambda raw, _p: b"PLY!" + raw[4:]), [], "not a PLY file"),
    "missing property": (dict(mutate_ply=drop_property("rot_2")), [],
                         "missing required vertex properties rot_2"),
    "SH rest count": (dict(mutate_ply=drop_property("f_rest_44")), [],
                      "44 f_rest_* properties; expected 0, 9, 24 or 45"),
    "NaN": (dict(mutate_ply=with_nan), [], "3 of 3000 Gaussians have NaN/Inf values"),
    "non-orthonormal": (dict(mutate_json=lambda d: d["world_from_splat"][0].__setitem__(0, 9.0)),
                        [], "not orthonormal"),
    "empty footprint": (dict(mutate_json=lambda d: d["table"].__setitem__("size", [0.0, 0.8])),
                        [], "table footprint is empty"),
    "no table": (dict(mutate_json=lambda d: d.pop("table")), [], "has no table spec"),
    "angle zero": ({}, ["--angle", "0"], "half-angle must be in (0, 90]"),
    "angle 91": ({}, ["--angle", "91"], "half-angle must be in (0, 90]"),
    "missing scene": ({}, ["--scene-missing"], "not found"),
    "flag of another editor": ({}, ["--band", "low"], "--band applies to floaters, not hole"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_one_line_exit_2_nothing_written(scene_dir, tmp_path, capsys, case):
    mutate, extra, message = BAD_CASES[case]
    scene = corrupt(scene_dir, tmp_path, **mutate) if mutate else scene_dir
    if extra == ["--scene-missing"]:
        scene, extra = tmp_path / "nowhere", []
    out_parent = tmp_path / "outputs"
    out_parent.mkdir()
    code, stdout, err = run(perturb(scene, out_parent / "o", "--kind", "hole", *extra), capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench perturb: error: "), err
    assert message in lines[0]
    assert "Traceback" not in err and stdout == ""
    assert list(out_parent.iterdir()) == []  # no output dir, no temp leftovers


def test_drop_nonfinite_flag(scene_dir, tmp_path, capsys):
    bad = corrupt(scene_dir, tmp_path, mutate_ply=with_nan)
    code, _, err = run(perturb(bad, tmp_path / "o", "--preset", "warp", "--drop-nonfinite"),
                       capsys)
    assert code == 0, err
    assert len(read_ply(tmp_path / "o" / "background.ply")) == N - 3
    # with_nan corrupts 3 rows: the drop is announced and recorded apart from the edit counts
    assert "warning: " in err and "dropped 3 Gaussians with NaN/Inf" in err
    counts = json.loads((tmp_path / "o" / "manifest.json").read_text())["counts"]
    assert counts["dropped_nonfinite"] == 3 and counts["removed"] == 0


def test_help_states_units(capsys):
    with pytest.raises(SystemExit):
        main(["perturb", "--help"])
    text = capsys.readouterr().out
    for phrase in ("degrees", "metres", "--drop-nonfinite", "--overwrite", "--preset"):
        assert phrase in text


def test_editor_flags_are_the_parameter_dataclass_fields():
    # the flags are built from HoleParams/FloaterParams/WarpParams: each names a field of its
    # editor's dataclass, takes as many values as the field, and a run without editor flags
    # resolves to the dataclass defaults
    import argparse
    import dataclasses

    from perturbations import FloaterParams, HoleParams, WarpParams, make_params
    from perturbations.cli import add_parser, collect_overrides
    from perturbations.registry import editor_flags

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    sub = parser._subparsers._group_actions[0].choices["perturb"]
    actions = {a.dest: a for a in sub._actions}
    types = {"hole": HoleParams, "floaters": FloaterParams, "warp": WarpParams}
    # the flags generated from the editors' registrations are the ones once written by hand,
    # in the order they are checked (dest -> editors, field)
    assert {f.dest: (f.editors, f.field) for f in editor_flags()} == {
        "angle": (("hole",), "half_angle_deg"), "apex": (("hole",), "apex"),
        "band": (("floaters",), "band"), "band_range": (("floaters",), "band"),
        "clusters": (("floaters",), "num_clusters"), "per_cluster": (("floaters",), "per_cluster"),
        "clearance": (("floaters",), "clearance"), "cluster_std": (("floaters",), "cluster_std"),
        "floater_scale": (("floaters",), "scale"),
        "scale_log_std": (("floaters",), "scale_log_std"), "opacity": (("floaters",), "opacity"),
        "opacity_logit_std": (("floaters",), "opacity_logit_std"),
        "neighbours": (("floaters",), "neighbours"), "domes": (("warp",), "num_domes"),
        "dome_height": (("warp",), "height_range"), "dome_radius": (("warp",), "radius_range"),
        "margin": (("hole", "warp"), "margin"), "slab": (("hole", "warp"), "slab")}
    assert [f.dest for f in editor_flags()][-3:] == ["dome_radius", "margin", "slab"]
    for flag in editor_flags():
        dest, editors, field = flag.dest, flag.editors, flag.field
        assert actions[dest].default is None, dest  # an override only when given
        for editor in editors:
            default = {f.name: f.default for f in dataclasses.fields(types[editor])}[field]
            if dest != "band":
                width = len(default) if isinstance(default, tuple) else None
                assert actions[dest].nargs == (3 if dest == "apex" else width), dest
    for kind, params_type in types.items():
        args = sub.parse_args(["--kind", kind, "--scene", "s", "--out", "o"])
        assert make_params(kind, **collect_overrides(args, kind)) == params_type()
    assert actions["preset"].choices == ["hole-54", "hole-90", "floaters-low", "floaters-mid",
                                         "floaters-high", "warp"]


@pytest.mark.parametrize("preset", ["hole-54", "hole-90", "floaters-low", "floaters-mid",
                                    "floaters-high", "warp"])
def test_every_preset_writes_a_consistent_bundle_byte_identically(scene_dir, tmp_path, capsys,
                                                                   preset):
    for name in ("a", "b"):
        code, _, err = run(perturb(scene_dir, tmp_path / name, "--preset", preset, "--seed", 5),
                           capsys)
        assert code == 0, err
    a, b = tmp_path / "a", tmp_path / "b"
    for file in ("background.ply", "scene.json", "manifest.json"):
        assert (a / file).read_bytes() == (b / file).read_bytes(), file
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["entry"] == preset and manifest["seed"] == 5 and manifest["overrides"] == {}
    counts = manifest["counts"]
    assert len(read_ply(a / "background.ply")) == N - counts["removed"] + counts["added"]
    # each preset does what its name says (8 clusters x 4 floaters by default)
    kind = preset.split("-")[0]
    assert manifest["tool"] == f"{kind}/1"
    expected = {"hole": ("removed", lambda v: v > 0), "floaters": ("added", lambda v: v == 32),
                "warp": ("moved", lambda v: v > 0)}[kind]
    assert expected[1](counts[expected[0]]), counts
    assert sum(counts.values()) == counts[expected[0]]  # the other counts are zero


@pytest.mark.parametrize("flags", [["--preset", "hole-54", "--angle", "70"],
                                   ["--preset", "floaters-low", "--band", "high"],
                                   ["--preset", "warp", "--domes", "5"]])
def test_preset_parameters_cannot_be_overridden(scene_dir, tmp_path, capsys, flags):
    # the manifest records the preset name: a changed parameter would be mislabelled
    code, stdout, err = run(perturb(scene_dir, tmp_path / "o", *flags), capsys)
    assert code == 2 and stdout == "" and not (tmp_path / "o").exists()
    assert err.count("\n") == 1 and f"would change the study condition {flags[0]} {flags[1]}" in err
