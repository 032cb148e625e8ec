"""Editors against independent brute-force loops (yawed tables), determinism, registry."""

import math

import numpy as np
import pytest

from bench.errors import BenchError
from bench.scene.bundle import KeepoutBox, TableSpec
from bench.scene.gaussians import GaussianSplats
from perturbations import (
    PERTURBATIONS,
    FloaterParams,
    HoleParams,
    WarpParams,
    floaters,
    hole,
    make_params,
    preset_names,
    tool_id,
    warp,
)

TABLE = TableSpec(center=(0.2, -0.1), size=(1.0, 0.6), yaw_deg=35.0, height=0.1)
KEEPOUTS = (KeepoutBox((0.2, -0.1, 0.2), (0.3, 0.3, 0.2)),)


def scene(n=3000, seed=0):
    """Points in a room around the table, with a dense layer on the table top."""
    rng = np.random.default_rng(seed)
    room = rng.uniform([-1.5, -1.5, -0.7], [1.5, 1.5, 1.8], (n, 3))
    top = np.column_stack([rng.uniform(-0.6, 0.6, (n // 3, 2)) + TABLE.center,
                           TABLE.height + rng.normal(0, 0.04, n // 3)])
    means = np.concatenate([room, top]).astype(np.float32)
    m = len(means)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return GaussianSplats(means, f(m, 4), f(m, 3) - 4, f(m), f(m, 3), f(m, 15, 3),
                          {"nx": np.zeros(m, np.float32)})


def table_local(x, y, table):
    """World (x, y) -> table frame, written out with scalar trigonometry."""
    yaw = math.radians(table.yaw_deg)
    dx, dy = x - table.center[0], y - table.center[1]
    return dx * math.cos(yaw) + dy * math.sin(yaw), -dx * math.sin(yaw) + dy * math.cos(yaw)


def in_footprint(x, y, table, margin):
    u, v = table_local(x, y, table)
    return abs(u) <= table.size[0] / 2 + margin and abs(v) <= table.size[1] / 2 + margin


# ---------------------------------------------------------------- hole
@pytest.mark.parametrize("angle", [54.0, 90.0, 20.0])
def test_hole_matches_brute_force(angle):
    s = scene()
    out, stats = hole(s, HoleParams(half_angle_deg=angle), None, table=TABLE)
    ax, ay, az = TABLE.center[0], TABLE.center[1], TABLE.height
    removed = []
    for i, (x, y, z) in enumerate(s.means.astype(float)):
        dx, dy, dz = x - ax, y - ay, z - az
        in_cone = dz > 0 and math.degrees(math.acos(dz / math.sqrt(dx * dx + dy * dy + dz * dz))) \
            <= angle
        foot = in_footprint(x, y, TABLE, 0.04)
        protected = foot and (abs(z - TABLE.height) <= 0.06 or z < TABLE.height)
        if in_cone and not protected:
            removed.append(i)
    assert stats.removed == len(removed) > 0
    kept = np.setdiff1d(np.arange(len(s)), removed)
    np.testing.assert_array_equal(stats.source_index, kept)
    for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        np.testing.assert_array_equal(getattr(out, name), getattr(s, name)[kept])
    np.testing.assert_array_equal(out.extra["nx"], s.extra["nx"][kept])


def test_hole_custom_apex_and_yaw_matters():
    s = scene()
    # at 90 degrees the cone meets the slab far from the apex, where the yawed footprint
    # and an unyawed one differ (at 54 degrees the cone's slab part lies well inside both)
    wide = HoleParams(half_angle_deg=90.0)
    _, yawed = hole(s, wide, None, table=TABLE)
    _, unyawed = hole(s, wide, None, table=TableSpec(TABLE.center, TABLE.size, 0.0, 0.1))
    assert not np.array_equal(yawed.source_index, unyawed.source_index)
    _, base = hole(s, HoleParams(), None, table=TABLE)
    _, high = hole(s, HoleParams(apex=(0.2, -0.1, 1.0)), None, table=TABLE)
    assert 0 < high.removed < base.removed


@pytest.mark.parametrize("angle", [0.0, -5.0, 90.5, float("nan"), 180.0])
def test_hole_angle_validation(angle):
    with pytest.raises(BenchError, match=r"half-angle must be in \(0, 90\]"):
        HoleParams(half_angle_deg=angle)


# ---------------------------------------------------------------- floaters
def test_floaters_match_brute_force():
    s = scene()
    params = FloaterParams(band=(0.15, 0.25))
    out, stats = floaters(s, params, np.random.default_rng(7), table=TABLE, keepouts=KEEPOUTS)
    n = len(s)
    assert stats.added == 32 and len(out) == n + 32 and stats.removed == stats.moved == 0
    for name in ("means", "quats", "sh_dc", "sh_rest"):  # originals unchanged and first
        np.testing.assert_array_equal(getattr(out, name)[:n], getattr(s, name))
    np.testing.assert_array_equal(stats.source_index, np.r_[np.arange(n), np.full(32, -1)])
    centres = np.array(stats.details["cluster_centres"])
    assert centres.shape == (8, 3)
    for cx, cy, cz in centres:
        assert in_footprint(cx, cy, TABLE, 0.0)
        assert 0.15 <= cz - TABLE.height <= 0.25
        box = KEEPOUTS[0]
        gap = [max(abs(p - c) - h / 2, 0)
               for p, c, h in zip((cx, cy, cz), box.center, box.size, strict=True)]
        assert math.sqrt(sum(g * g for g in gap)) >= 0.01
    new = out.subset(np.arange(n, n + 32))
    # members belong to their cluster (4 consecutive), within 6 std of the centre
    dist = np.linalg.norm(new.means.reshape(8, 4, 3) - centres[:, None], axis=2)
    assert dist.max() < 6 * 0.018 * math.sqrt(3)
    assert (new.sh_rest == 0).all()
    np.testing.assert_allclose(np.median(new.opacities()), 0.99, atol=0.005)
    np.testing.assert_allclose(np.exp(np.median(new.log_scales)), 0.0316, rtol=0.15)
    # colour = mean SH DC of the 8 nearest background Gaussians, by an explicit sort
    for j, p in enumerate(new.means.astype(float)):
        d = [sum((a - b) ** 2 for a, b in zip(p, q, strict=True)) for q in s.means.astype(float)]
        nearest = sorted(range(n), key=lambda i: d[i])[:8]
        np.testing.assert_allclose(new.sh_dc[j], s.sh_dc[nearest].mean(axis=0), atol=1e-5)


def test_floaters_determinism_both_ways():
    s = scene()
    a, _ = floaters(s, FloaterParams(), np.random.default_rng(1), table=TABLE, keepouts=KEEPOUTS)
    b, _ = floaters(s, FloaterParams(), np.random.default_rng(1), table=TABLE, keepouts=KEEPOUTS)
    c, _ = floaters(s, FloaterParams(), np.random.default_rng(2), table=TABLE, keepouts=KEEPOUTS)
    assert a.means.tobytes() == b.means.tobytes() and a.sh_dc.tobytes() == b.sh_dc.tobytes()
    assert not np.array_equal(a.means[len(s):], c.means[len(s):])


def test_floaters_impossible_placement():
    blocker = (KeepoutBox((0.2, -0.1, 0.2), (5.0, 5.0, 1.0)),)
    with pytest.raises(BenchError, match="could not place 8 floater clusters"):
        floaters(scene(), FloaterParams(), np.random.default_rng(0), table=TABLE,
                 keepouts=blocker)


# ---------------------------------------------------------------- warp
def test_warp_matches_brute_force():
    s = scene()
    out, stats = warp(s, WarpParams(), np.random.default_rng(3), table=TABLE)
    domes = stats.details["domes"]
    assert len(domes) == 30
    for d in domes:
        assert in_footprint(*d["center"], TABLE, 0.04)
        assert 0.010 <= d["height"] <= 0.030 and 0.030 <= d["radius"] <= 0.060
    moved = 0
    for i, (x, y, z) in enumerate(s.means.astype(float)):
        lift = 0.0
        if in_footprint(x, y, TABLE, 0.04) and abs(z - TABLE.height) <= 0.06:
            for d in domes:
                r = math.hypot(x - d["center"][0], y - d["center"][1])
                if r < d["radius"]:
                    lift += d["height"] * (1 - (r / d["radius"]) ** 2) ** 2
        assert out.means[i, 2] == pytest.approx(z + lift, abs=1e-6)
        moved += out.means[i, 2] != s.means[i, 2]
    assert stats.moved == moved > 0
    np.testing.assert_array_equal(out.means[:, :2], s.means[:, :2])  # only z changes
    for name in ("quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        np.testing.assert_array_equal(getattr(out, name), getattr(s, name))


def test_warp_determinism_and_validation():
    s = scene()
    a, _ = warp(s, WarpParams(), np.random.default_rng(0), table=TABLE)
    b, _ = warp(s, WarpParams(), np.random.default_rng(0), table=TABLE)
    assert a.means.tobytes() == b.means.tobytes()
    with pytest.raises(BenchError, match="warp dome radius"):
        WarpParams(radius_range=(0.0, 0.1))
    with pytest.raises(BenchError, match="warp dome count"):
        WarpParams(num_domes=0)


# ---------------------------------------------------------------- registry
def test_registry_presets():
    assert preset_names() == ["hole-54", "hole-90", "floaters-low", "floaters-mid",
                              "floaters-high", "warp"]
    assert make_params("hole-90").half_angle_deg == 90.0
    assert make_params("floaters-high").band == (0.25, 0.35)
    assert make_params("floaters-mid", num_clusters=3).num_clusters == 3
    assert tool_id("floaters-low") == "floaters/1" and tool_id("hole") == "hole/1"
    assert PERTURBATIONS.entry("hole-54").meta["kind"] == "hole"
    with pytest.raises(ValueError, match="did you mean 'hole-54'"):
        PERTURBATIONS.get("hole-45")
    with pytest.raises(ValueError, match="hole has no parameter"):
        make_params("hole", band=(0, 1))


def test_editor_modules_import_without_heavy_packages():
    import subprocess
    import sys

    code = ("import sys, perturbations, perturbations.cli; "
            "bad = [m for m in ('torch', 'mujoco', 'warp') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_neighbour_colours_fast_path_matches_reference():
    from perturbations.floaters import neighbour_colours, neighbour_colours_reference

    s = scene(n=5000)
    rng = np.random.default_rng(5)
    # clustered points (the usual case) and spread-out ones (forces the widening retries)
    for points in (rng.normal([0.2, -0.1, 0.3], 0.05, (32, 3)),
                   rng.uniform(-3, 3, (10, 3)), np.array([[10.0, 10.0, 10.0]])):
        for k in (1, 8):
            fast = neighbour_colours(s, points, k, pad=0.05)
            np.testing.assert_array_equal(fast, neighbour_colours_reference(s, points, k))
