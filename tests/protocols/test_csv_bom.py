"""Issue 30 item 3: every CSV the bench reads may start with a UTF-8 byte-order mark.

Excel's "CSV UTF-8" (and Numbers, LibreOffice on request) writes ``EF BB BF`` first.
Regression: ``bench reliability`` refused such a scores CSV ("lacks columns ['scene']")
that ``real_results`` accepted. Every user-facing CSV reader now opens its file through
:mod:`bench.tabular`; each command below gives the same outputs with and without the mark.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
YUBI = ROOT / "results" / "yubi" / "data"
YUBI_INPUTS = ROOT / "results" / "yubi" / "predictor_inputs"
DEMO_TABLES = ROOT / "results" / "demo" / "tables"
BOM = b"\xef\xbb\xbf"
PILOT = ("scene,task,policy,successes,trials\nlab,cup,a,9,10\nlab,cup,b,3,10\n"
         "lab,pen,a,5,10\nlab,pen,b,5,10\n")


@pytest.fixture
def bench_main(monkeypatch):
    import bench.cli

    monkeypatch.setattr(bench.cli, "CLI_MODULES", ("protocols.cli", "protocols.plan_cli"))
    return bench.cli.main


def _add_bom(path: Path) -> None:
    data = path.read_bytes()
    assert not data.startswith(BOM)
    path.write_bytes(BOM + data)


def _copy_tree_with_bom(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for csv_file in sorted(target.rglob("*.csv")):
        _add_bom(csv_file)
    return target


def _outputs(out: Path) -> dict[str, bytes]:
    """Every file the command wrote but its manifest (which hashes the inputs' bytes)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def _run(main, capsys, argv: list) -> None:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 0, err


# ------------------------------------------------------------------ the helper
def test_helper_drops_the_mark_and_only_the_mark(tmp_path):
    from bench.tabular import CSV_ENCODING, open_csv_text, read_csv_frame

    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text("scene,quality\nA,1\n", encoding="utf-8")
    marked.write_bytes(BOM + plain.read_bytes())
    assert CSV_ENCODING == "utf-8-sig"
    for path in (plain, marked):
        with open_csv_text(path) as handle:
            assert handle.read() == "scene,quality\nA,1\n"
        assert list(read_csv_frame(path, dtype=str).columns) == ["scene", "quality"]
    (tmp_path / "latin.csv").write_bytes("scene\ncaf\xe9\n".encode("latin-1"))
    with open_csv_text(tmp_path / "latin.csv") as handle, pytest.raises(UnicodeDecodeError):
        handle.read()


# ------------------------------------------------------------------ bench reliability
def test_reliability_accepts_bom_scores_with_identical_results(bench_main, capsys, tmp_path):
    """Was: ``lacks columns ['scene']`` for a scores CSV saved by Excel as CSV UTF-8."""
    plain = tmp_path / "plain"
    shutil.copytree(YUBI_INPUTS, plain)
    marked = _copy_tree_with_bom(YUBI_INPUTS, tmp_path / "marked")
    for source in (plain, marked):
        _run(bench_main, capsys, ["reliability", "--scores", source / "scores.csv",
                                  "--labels", source / "labels.csv", "--out", source / "out"])
    assert _outputs(marked / "out") == _outputs(plain / "out")
    assert (marked / "out" / "reliability.csv").read_bytes() == (
        ROOT / "results/yubi/tables/reliability.csv").read_bytes()


def test_bom_missing_column_named_without_the_mark(bench_main, capsys, tmp_path):
    (tmp_path / "s.csv").write_bytes(BOM + b"scene,method,quality\nA,PSNR,1\n")
    (tmp_path / "l.csv").write_bytes(BOM + b"target,scene,variant,label\nCup,A,x,0\n")
    code = bench_main(["reliability", "--scores", str(tmp_path / "s.csv"), "--labels",
                       str(tmp_path / "l.csv"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "lacks columns ['variant']" in err and "\ufeff" not in err, err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ every CSV-reading command
def _reliability_scores_only(tmp_path: Path, bom: bool) -> list:
    shutil.copytree(YUBI_INPUTS, tmp_path)
    if bom:
        _add_bom(tmp_path / "scores.csv")
    return ["reliability", "--scores", tmp_path / "scores.csv", "--labels",
            tmp_path / "labels.csv", "--method", "threshold,rank"]


def _reliability_labels_only(tmp_path: Path, bom: bool) -> list:
    shutil.copytree(YUBI_INPUTS, tmp_path)
    if bom:
        _add_bom(tmp_path / "labels.csv")
    return ["reliability", "--scores", tmp_path / "scores.csv", "--labels",
            tmp_path / "labels.csv"]


def _plan_pilot(tmp_path: Path, bom: bool) -> list:
    tmp_path.mkdir()
    (tmp_path / "pilot.csv").write_bytes((BOM if bom else b"") + PILOT.encode())
    return ["plan", "trials", "--pilot", tmp_path / "pilot.csv", "--max-trials", "40"]


def _inputs_from_study(tmp_path: Path, bom: bool) -> list:
    tables = tmp_path / "tables"
    tables.mkdir(parents=True)
    for name in ("quality.csv", "reliability_labels.csv"):
        data = (DEMO_TABLES / name).read_bytes()
        (tables / name).write_bytes((BOM if bom else b"") + data)
    return ["reliability-inputs", "--study-tables", tables]


def _inputs_from_yubi(tmp_path: Path, bom: bool) -> list:
    data = _copy_tree_with_bom(YUBI, tmp_path / "data") if bom else shutil.copytree(
        YUBI, tmp_path / "data")
    return ["reliability-inputs", "--yubi", data]


def _tables_yubi(tmp_path: Path, bom: bool) -> list:
    data = _copy_tree_with_bom(YUBI, tmp_path / "data") if bom else shutil.copytree(
        YUBI, tmp_path / "data")
    return ["tables", "yubi", "--data", data]


COMMANDS = {
    "reliability --scores": _reliability_scores_only,
    "reliability --labels": _reliability_labels_only,
    "plan trials --pilot": _plan_pilot,
    "reliability-inputs --study-tables": _inputs_from_study,
    "reliability-inputs --yubi": _inputs_from_yubi,
    "tables yubi --data": _tables_yubi,
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_csv_reading_command_accepts_a_bom(command, bench_main, capsys, tmp_path):
    outputs = {}
    for bom in (False, True):
        work = tmp_path / ("marked" if bom else "plain")
        argv = COMMANDS[command](work, bom)
        _run(bench_main, capsys, [*argv, "--out", work / "out"])
        outputs[bom] = _outputs(work / "out")
    assert outputs[True] == outputs[False] and outputs[True]


# ------------------------------------------------------------------ a study's real_results
REAL_LAYOUTS = {
    "per-trial": "scene,task,policy,trial,success\n" + "".join(
        f"duo,cup,{p},{t},{int(t < k)}\n" for p, k in (("visual-servo", 3), ("visual-glance", 1))
        for t in range(4)),
    "per-cell": "Scene,Task,Policy,Successes,Trials\nduo,cup,visual-servo,3,4\n"
                "duo,cup,visual-glance,1,4\n",
}


@pytest.mark.parametrize("layout", ["per-trial", "per-cell", "yubi"])
def test_real_results_accept_a_bom(layout, tmp_path):
    from bench.study.real_results import read_real_results
    from bench.study.spec import StudySpec

    counts = {}
    for bom in (False, True):
        if layout == "yubi":
            target = tmp_path / f"data{int(bom)}"
            (_copy_tree_with_bom if bom else shutil.copytree)(YUBI, target)
        else:
            target = tmp_path / f"real{int(bom)}.csv"
            target.write_bytes((BOM if bom else b"") + REAL_LAYOUTS[layout].encode())
        spec = StudySpec(sample_scenes={"duo": 0}, tasks=("cup",), real_results=str(target))
        real = read_real_results(spec)
        assert real.layout == layout
        counts[bom] = real.counts
    assert counts[True] == counts[False] and counts[True]


# ------------------------------------------------------------------ no reader bypasses the helper
def _csv_reads_bypassing_the_helper(path: Path) -> list[str]:
    """``pd.read_csv`` calls and ``csv.reader``/``DictReader`` fed from a plain ``open``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "read_csv" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in ("pd", "pandas"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} pd.read_csv")
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call) and isinstance(item.context_expr.func,
                                                                       ast.Name)
                and item.context_expr.func.id == "open" for item in node.items):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                        and inner.func.attr in ("reader", "DictReader") \
                        and isinstance(inner.func.value, ast.Name) and inner.func.value.id == "csv":
                    found.append(f"{path.relative_to(ROOT)}:{inner.lineno} csv.{inner.func.attr}")
    return found


def test_every_csv_reader_opens_through_bench_tabular():
    files = [p for package in ("bench", "metrics", "protocols", "perturbations")
             for p in sorted((ROOT / package).rglob("*.py")) if p.name != "tabular.py"]
    bypass = [hit for path in files for hit in _csv_reads_bypassing_the_helper(path)]
    assert not bypass, f"read these through bench.tabular (BOM-tolerant): {bypass}"
