import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from bench.errors import BenchError
from perturbations.coverage import (
    COVERAGE_PLANS,
    CoveragePlan,
    make_plan,
    removal_count,
    round_half_up,
)


def ids(n):
    return [f"f{i:04d}" for i in range(n)]


# Kept counts of the YUBI paper (PAPERS.md, Coverage): 134/192 Duo, 105/150 Flat, 153/219 G2.
@pytest.mark.parametrize("n,kept", [(192, 134), (150, 105), (219, 153)])
@pytest.mark.parametrize("mode", ["contiguous", "random"])
def test_paper_kept_counts(n, kept, mode):
    plan = make_plan(ids(n), mode, fraction=0.30, seed=0)
    assert len(plan.kept) == kept
    assert len(plan.removed) == n - kept
    assert plan.views == "forward"


def test_round_half_up_differs_from_bankers_rounding():
    # Python's round() is banker's rounding: half-way cases go to the even neighbour.
    assert round(2.5) == 2 and round(0.5) == 0
    assert round_half_up(Fraction(5, 2)) == 3
    assert round_half_up(Fraction(1, 2)) == 1
    assert round_half_up(Fraction(3, 2)) == 2
    assert round_half_up(Fraction(249, 100)) == 2
    assert round_half_up(7) == 7


@pytest.mark.parametrize(
    "n,fraction,expected",
    [
        (10, 0.25, 3),  # 2.5 -> 3 (round() gives 2)
        (2, 0.25, 1),  # 0.5 -> 1 (round() gives 0)
        (30, 0.05, 2),  # 1.5 -> 2
        (50, 0.05, 3),  # 2.5 -> 3 (round() gives 2)
        (150, 0.3, 45),  # 45 exactly
        (50, 0.29, 15),  # float 0.29 * 50 == 14.499999999999998; exact decimal 14.5 -> 15
        (10, 0.0, 0),
    ],
)
def test_removal_count_half_way_cases(n, fraction, expected):
    assert removal_count(n, fraction) == expected


def test_plan_is_deterministic_and_seed_dependent():
    a = make_plan(ids(192), "random", seed=3)
    b = make_plan(ids(192), "random", seed=3)
    c = make_plan(ids(192), "random", seed=4)
    assert a.kept == b.kept and a.removed == b.removed
    assert a.removed != c.removed
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_contiguous_removes_one_consecutive_interval_at_a_seeded_position():
    frames = ids(150)
    starts = set()
    for seed in range(20):
        plan = make_plan(frames, "contiguous", fraction=0.3, seed=seed)
        positions = [frames.index(f) for f in plan.removed]
        assert positions == list(range(positions[0], positions[0] + 45))
        # same draw as the documented rule: start = default_rng(seed).integers(0, N - n + 1)
        assert positions[0] == int(np.random.default_rng(seed).integers(0, 150 - 45 + 1))
        starts.add(positions[0])
    assert len(starts) > 5


def test_order_is_preserved_and_lists_partition_frames():
    frames = [f"t{i}" for i in (5, 1, 9, 3, 7, 2, 8)]  # ids are labels; the list order is time
    plan = make_plan(frames, "random", fraction=0.3, seed=1)
    assert set(plan.kept) | set(plan.removed) == set(frames)
    assert list(plan.kept) == [f for f in frames if f in plan.kept]
    assert list(plan.removed) == [f for f in frames if f in plan.removed]


def test_full_and_central_keep_every_frame():
    full = make_plan(ids(12), "full")
    central = make_plan(ids(12), "central-pinhole")
    assert full.kept == tuple(ids(12)) and full.removed == () and full.views == "all"
    assert central.kept == tuple(ids(12)) and central.views == "forward"
    assert full.fraction is None


@pytest.mark.parametrize("fraction", [1.0, -0.1, 1.5, float("nan")])
def test_fraction_outside_unit_interval_is_refused(fraction):
    with pytest.raises(BenchError, match=r"\[0, 1\)"):
        make_plan(ids(10), "random", fraction=fraction)


def test_bad_inputs():
    with pytest.raises(BenchError, match="no frames"):
        make_plan([], "random")
    with pytest.raises(BenchError, match="more than once"):
        make_plan(["a", "b", "a"], "random")
    with pytest.raises(ValueError, match="did you mean 'random'"):
        make_plan(ids(5), "randm")
    with pytest.raises(BenchError, match="seed"):
        make_plan(ids(5), "random", seed=-1)


def test_save_load_round_trip_and_missing_frames(tmp_path):
    plan = make_plan(ids(40), "contiguous", fraction=0.3, seed=2)
    path = tmp_path / "plan.json"
    plan.save(path)
    loaded = CoveragePlan.load(path)
    assert loaded.kept == plan.kept and loaded.removed == plan.removed and loaded.seed == 2
    loaded.save(tmp_path / "again.json")
    assert path.read_bytes() == (tmp_path / "again.json").read_bytes()
    manifest = json.loads(path.read_text())
    assert manifest["tool"] == "coverage/1"
    assert manifest["counts"] == {"frames": 40, "kept": 28, "removed": 12}
    with pytest.raises(BenchError, match="references frame 'f0039'"):
        loaded.check_against(ids(39))
    dropped, first = dict(manifest), manifest["kept"][0]
    dropped["kept"] = manifest["kept"][1:]
    path.write_text(json.dumps(dropped))
    with pytest.raises(BenchError, match=f"partition.*{first!r} is neither kept nor removed"):
        CoveragePlan.load(path)
    alien = dict(manifest, kept=[*manifest["kept"], "zzz"])
    path.write_text(json.dumps(alien))
    with pytest.raises(BenchError, match="'zzz' is not in its frame list.*bench coverage plan"):
        CoveragePlan.load(path)
    both = dict(manifest, kept=sorted([*manifest["kept"], manifest["removed"][0]]))
    path.write_text(json.dumps(both))
    with pytest.raises(BenchError, match="is both kept and removed"):
        CoveragePlan.load(path)


def test_registry_lists_the_four_modes_with_metadata():
    assert COVERAGE_PLANS.names() == ["full", "central-pinhole", "contiguous", "random"]
    assert COVERAGE_PLANS.entry("random").meta["uses_fraction"] is True


def test_imports_without_heavy_dependencies():
    code = (
        "import sys, perturbations.coverage\n"
        "bad = [m for m in ('torch', 'mujoco', 'warp') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
