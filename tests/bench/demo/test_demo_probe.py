"""The first-view probe (``bench demo probe``, issue 33 item 5).

Checked here: the config refuses unknown or repeated variants; a recipe without the
object-pose head is refused in one line; on the shipped Cup policy the head localises the
cup from the real first view far better than predicting the training mean (what the head was
trained for: docs/demo-build.md measured 0.6 cm against 16.2 cm on 30 starts); the error is
the plain Euclidean distance of the head's xy from the truth; the same call gives the same
numbers; the CLI writes its tables and refuses bad input without writing anything.
"""

import csv

import numpy as np
import pytest

from bench.demo.probe import (
    MEAN_PREDICTOR,
    PROBE_VARIANTS,
    ProbeConfig,
    head_xy,
    load_probed_network,
    screen_probe,
    summarise_probe,
)
from bench.errors import BenchError


def test_config_refuses_unknown_and_repeated_variants():
    with pytest.raises(ValueError, match="variants"):
        ProbeConfig(variants=("real", "sky"))
    with pytest.raises(ValueError, match="variants"):
        ProbeConfig(variants=("real", "real"))
    with pytest.raises(ValueError, match="trials"):
        ProbeConfig(trials=0)
    assert set(ProbeConfig().variants) <= set(PROBE_VARIANTS)


def test_recipe_without_the_pose_head_is_refused():
    with pytest.raises(BenchError, match="object-pose head"):
        load_probed_network("cup", "bc-large")
    with pytest.raises(BenchError, match="not a learned recipe"):
        load_probed_network("cup", "visual-servo")


@pytest.fixture(scope="module")
def cup_rows():  # thresholds and same-process repeats: no float golden, so no numerics gate
    return screen_probe("cup", "bc-aux-dagger", ProbeConfig(trials=3, variants=("real",
                                                                              "study")),
                        progress=False)


def test_head_localises_the_cup_from_the_real_first_view(cup_rows):
    assert [r["start"] for r in cup_rows] == [8000, 8001, 8002]
    assert [r["scene"] for r in cup_rows] == ["duo", "flat", "g2"]
    real = np.array([r["real"] for r in cup_rows])
    mean = np.array([r[MEAN_PREDICTOR] for r in cup_rows])
    assert np.all(real >= 0) and np.all(np.isfinite([r["study"] for r in cup_rows]))
    assert np.all(real < 3.0) and np.all(mean > 8.0) and np.all(real < mean / 4)


def test_error_is_the_distance_of_the_heads_xy_from_the_truth():
    from bench.demo.demos import object_pose_in_tcp
    from bench.demo.probe import probe_env
    from bench.demo.reaction import screen_spec

    net, config = load_probed_network("cup", "bc-aux-dagger")
    spec = screen_spec("cup", profile="cup", seed=0)
    env = probe_env(spec, scene="duo", task="cup", variant="real")
    try:
        obs, info = env.reset(seed=8000)
        truth = object_pose_in_tcp(info, env.unwrapped.task.actor.name)[:2]
        xy = head_xy(net, config, obs)
    finally:
        env.close()
    row = screen_probe("cup", "bc-aux-dagger", ProbeConfig(trials=1, variants=("real",)),
                       progress=False)[0]
    assert row["real"] == round(100.0 * float(np.hypot(*(xy - truth))), 3)
    assert xy.shape == (2,)


def test_same_call_same_numbers(cup_rows):
    again = screen_probe("cup", "bc-aux-dagger", ProbeConfig(trials=3, variants=("real",
                                                                               "study")),
                         progress=False)
    assert again == cup_rows
    table = summarise_probe(cup_rows, ("real", "study"))
    assert [r["variant"] for r in table] == ["real", "study", MEAN_PREDICTOR]
    assert table[0]["median_cm"] == round(float(np.median([r["real"] for r in cup_rows])), 2)


def test_cli_writes_tables_and_refuses_bad_input(tmp_path, capsys, reference_numerics):
    import bench.cli

    out = tmp_path / "probe"
    assert bench.cli.main(["demo", "probe", "--out", str(out), "--tasks", "cup", "--trials",
                           "1", "--variants", "real"]) == 0
    with open(out / "probe.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variant"] for r in rows] == ["real", MEAN_PREDICTOR]
    assert (out / "probe.md").read_text().startswith("| task | policy | first view |")
    capsys.readouterr()
    for bad in (["--variants", "sky"], ["--policies", "bc-large"]):
        target = tmp_path / f"bad{len(bad[1])}"
        code = bench.cli.main(["demo", "probe", "--out", str(target), "--tasks", "cup",
                               "--trials", "1", *bad])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert not target.exists()
