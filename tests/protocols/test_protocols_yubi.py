"""`bench tables yubi`: regenerate into tmp_path, compare with the committed results/yubi/tables."""

import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "results" / "yubi" / "tables"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    import bench.cli

    out = tmp_path_factory.mktemp("yubi") / "tables"
    saved = bench.cli.CLI_MODULES
    bench.cli.CLI_MODULES = ("protocols.cli",)
    try:
        assert bench.cli.main(["tables", "yubi", "--out", str(out)]) == 0
    finally:
        bench.cli.CLI_MODULES = saved
    return out


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_same_file_set(regenerated):
    assert _files(regenerated) == _files(COMMITTED)


def test_tables_byte_identical(regenerated):
    texts = [p for p in _files(COMMITTED) if p.suffix in (".csv", ".md") or p.name == "checks.json"]
    assert len(texts) == 18  # 8 tables x (CSV + Markdown) + checks.md + checks.json
    for rel in texts:
        assert (regenerated / rel).read_bytes() == (COMMITTED / rel).read_bytes(), rel


def test_png_pixels_identical(regenerated):
    import matplotlib.image

    pngs = [p for p in _files(COMMITTED) if p.suffix == ".png"]
    assert len(pngs) == 10  # Fig. 4 + 9 disturbance panels
    for rel in pngs:
        new, old = (
            matplotlib.image.imread(regenerated / rel),
            matplotlib.image.imread(COMMITTED / rel),
        )
        assert new.shape == old.shape and np.array_equal(new, old), rel


def test_pdf_bytes_identical_on_same_matplotlib(regenerated):
    import matplotlib

    committed = json.loads((COMMITTED / "manifest.json").read_text())
    if committed["matplotlib"] != matplotlib.__version__:
        pytest.skip("committed PDFs were made with another matplotlib; pixels are compared via PNG")
    for rel in (p for p in _files(COMMITTED) if p.suffix == ".pdf"):
        data = (regenerated / rel).read_bytes()
        assert data == (COMMITTED / rel).read_bytes(), rel
        assert b"CreationDate" not in data


def test_manifest_records_inputs_and_outputs(regenerated):
    new = json.loads((regenerated / "manifest.json").read_text())
    old = json.loads((COMMITTED / "manifest.json").read_text())
    assert new["inputs"] == old["inputs"] and new["tool"] == "yubi-tables/1"
    assert set(new["outputs"]) == set(old["outputs"])
    for name, entry in new["outputs"].items():
        if not name.endswith((".png", ".pdf")):
            assert entry == old["outputs"][name], name


def test_regenerated_numbers_match_the_paper(regenerated):
    checks = json.loads((regenerated / "checks.json").read_text())
    assert all(row["match"] for row in checks["table1"])
    assert checks["clean_ranking"]["match"]
    assert checks["mae"]["byte_identical_values"] == checks["mae"]["rows"] == 30
    rel = checks["reliability"]["reliability"]
    assert rel["prediction_matches_published"] == rel["rows"] == 300
    assert rel["fit_status_matches_published"] == 300
    assert rel["labels_matching_success_rates"] == rel["labels_checked_against_success_rates"] == 60
    assert all(rel["paper_table_match"].values()) and len(rel["paper_table_match"]) == 6
    cross = checks["reliability"]["reliability_crossscore"]
    assert cross["prediction_matches_published"] == cross["rows"] == 180


def test_table1_and_reliability_content(regenerated):
    # YUBI-Real2Sim Table I and the reliability table, as printed in the paper
    assert (regenerated / "table1.csv").read_text().splitlines()[1:4] == [
        "hole_54,1,1,1,0,7,9",
        "hole_90,4,0,1,0,7,9",
        "float_low8,1,0,0,1,7,9",
    ]
    lines = (regenerated / "reliability.csv").read_text().splitlines()
    assert lines[0] == "method,Cup,Tape,Pen,Total,All-three"
    assert "NVS-SQA Test,7/15,8/15,15/15,30/45,13/15" in lines
    assert "Always reliable,8/15,12/15,15/15,35/45,6/15" in lines


def test_shipped_data_is_the_public_copy():
    data = ROOT / "results" / "yubi" / "data"
    assert (data / "SOURCE.md").is_file()
    shared = ROOT.parent / "shared" / "reference" / "yubi"
    if not shared.is_dir():
        pytest.skip("reference copy not available on this machine")
    for path in shared.rglob("*"):
        if path.is_file():
            assert (data / path.relative_to(shared)).read_bytes() == path.read_bytes(), path


def test_refuses_out_inside_data(bench_main, capsys, tmp_path):
    data = ROOT / "results" / "yubi" / "data"
    code = bench_main(["tables", "yubi", "--data", str(data), "--out", str(data), "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "would replace the input data" in err[0]
    assert (data / "mae.csv").is_file()


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("0.9,20", "1.5,20", "must lie in [0, 1]"),  # 1.5 x 20 = 30 is whole but not a rate
        ("0.9,20", "0.9,-20", "must lie in [0, 1] over at least one trial"),
        ("0.9,20", "abc,20", "column success_rate holds 'abc', not a number"),
        ("0.9,20", "0.9,twenty", "column num_trials holds 'twenty', not an integer"),
        ("0.9,20", "0.93,20", "not a whole number of successes"),
    ],
)
def test_damaged_data_one_line_error_nothing_written(bench_main, capsys, tmp_path, old, new,
                                                     fragment):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(ROOT / "results" / "yubi" / "data", data)
    duo = data / "success_rate_overall" / "Duo.csv"
    text = duo.read_text()
    assert old in text
    duo.write_text(text.replace(old, new, 1))
    code = bench_main(["tables", "yubi", "--data", str(data), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Duo.csv" in err[0] and fragment in err[0], err
    assert not (tmp_path / "out").exists()
