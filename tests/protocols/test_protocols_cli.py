"""`bench stats` and `bench reliability`: outputs, exit codes, one-line errors."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "results" / "yubi" / "data"


def run(bench_main, capsys, *argv):
    code = bench_main(list(argv))
    out = capsys.readouterr()
    return code, out.out.strip(), out.err.strip()


def test_stats_one_liners(bench_main, capsys):
    code, out, _ = run(bench_main, capsys, "stats", "wilson", "81", "263")
    # Newcombe (1998) Table I, Wilson 81/263: 0.2553-0.3662
    assert code == 0 and "[0.255" in out and "0.366" in out
    code, out, _ = run(bench_main, capsys, "stats", "clopper-pearson", "0", "20")
    assert code == 0 and "[0.000000, 0.168" in out  # Newcombe exact 0/20: 0-0.1684
    code, out, _ = run(bench_main, capsys, "stats", "fisher", "1", "80", "9", "80")
    assert code == 0 and "p = 0.0177644" in out and "< 0.05" in out  # paper: p = 0.018
    code, out, _ = run(bench_main, capsys, "stats", "beta", "3", "10")
    assert code == 0 and "Beta(4, 8)" in out
    code, out, _ = run(
        bench_main, capsys, "stats", "mmrv", "--sim", "0.1,0.5,0.9", "--real", "0.2,0.8,0.6"
    )
    assert code == 0 and "mmrv = 0.133333" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("stats", "wilson", "30", "20"), "exceed"),
        (("stats", "wilson", "3", "-1"), ">= 0"),
        (("stats", "wilson", "three", "20"), "whole number"),
        (("stats", "fisher", "1", "80", "9", "8.5"), "whole number"),
        (("stats", "wilson", "3", "20", "--confidence", "95"), "between 0 and 1"),
        (("stats", "mmrv", "--sim", "0.1,0.2", "--real", "0.3"), "pass one value"),
        (("stats", "mmrv", "--sim", "45,20", "--real", "0.3,0.1"), "outside [0, 1]"),
        (("stats", "mmrv", "--sim", "0.4,0.2", "--real", "0.3,nan"), "outside [0, 1]"),
        (("stats",), "name a statistic"),
        (("tables",), "name the paper"),
        (("tables", "yubi", "--data", "/nonexistent/yubi", "--out", "/tmp/x"), "not found"),
    ],
)
def test_bad_input_exits_2_with_one_line(bench_main, capsys, argv, fragment):
    code, out, err = run(bench_main, capsys, *argv)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench ") and fragment in lines[0], err


def _write(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _yubi_long_format(tmp_path):
    with open(DATA / "reliability_predictions.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    scores = {(r["heldout_scene"], r["variant"], r["method"]): r["quality"] for r in rows}
    labels = {(r["target"], r["heldout_scene"], r["variant"]): r["label"] for r in rows}
    _write(
        tmp_path / "scores.csv",
        ("scene", "variant", "method", "quality"),
        [(s, v, m, q) for (s, v, m), q in scores.items()],
    )
    # task labels only: the All-three target must be derived by the command
    _write(
        tmp_path / "labels.csv",
        ("target", "scene", "variant", "label"),
        [(t, s, v, y) for (t, s, v), y in labels.items() if t != "All-three"],
    )


def test_reliability_command_reproduces_the_yubi_table(bench_main, capsys, tmp_path):
    _yubi_long_format(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = run(
        bench_main,
        capsys,
        "reliability",
        "--scores",
        str(tmp_path / "scores.csv"),
        "--labels",
        str(tmp_path / "labels.csv"),
        "--out",
        str(out),
    )
    assert code == 0, err
    expected = (
        Path(__file__).resolve().parents[2] / "results/yubi/tables/reliability.csv"
    ).read_text()
    assert (out / "reliability.csv").read_text() == expected
    assert (out / "manifest.json").is_file() and (out / "reliability_predictions.csv").is_file()
    # the note names the methods that were actually negated (LPIPS from the direction table)
    assert "lower-is-better scores negated: LPIPS Test." in (out / "reliability.md").read_text()


def test_reliability_direction_flags(bench_main, capsys, tmp_path):
    _write(
        tmp_path / "s.csv",
        ("scene", "variant", "method", "quality"),
        [
            ("A", "x", "blur", "0.1"),
            ("A", "y", "blur", "0.9"),
            ("B", "x", "blur", "0.2"),
            ("B", "y", "blur", "0.8"),
        ],
    )
    _write(
        tmp_path / "l.csv",
        ("target", "scene", "variant", "label"),
        [
            ("Cup", "A", "x", "0"),
            ("Cup", "A", "y", "1"),
            ("Cup", "B", "x", "0"),
            ("Cup", "B", "y", "1"),
        ],
    )
    args = ["reliability", "--scores", str(tmp_path / "s.csv"), "--labels", str(tmp_path / "l.csv")]
    code, _, err = run(bench_main, capsys, *args, "--out", str(tmp_path / "o1"))
    assert code == 2 and "--lower-better 'blur'" in err and not (tmp_path / "o1").exists()
    code, _, err = run(
        bench_main, capsys, *args, "--out", str(tmp_path / "o2"), "--lower-better", "blur"
    )
    assert code == 0, err
    assert (tmp_path / "o2" / "reliability.csv").read_text().splitlines()[1] == "blur,4/4,4/4"
    code, _, err = run(
        bench_main, capsys, *args, "--out", str(tmp_path / "o2"), "--lower-better", "blur"
    )
    assert code == 2 and "exists" in err  # no silent overwrite


SCORE_HEADER = ("scene", "variant", "method", "quality")


@pytest.mark.parametrize(
    ("header", "scores", "labels", "fragment"),
    [
        (SCORE_HEADER, [("A", "x", "PSNR", "abc")], [("Cup", "A", "x", "0")], "not a number"),
        (SCORE_HEADER, [("A", "x", "PSNR", "1")], [("Cup", "A", "x", "2")],
         "label must be 0 or 1"),
        (SCORE_HEADER, [("A", "x", "PSNR", "1"), ("A", "x", "PSNR", "2")],
         [("Cup", "A", "x", "0")], "duplicate"),
        (SCORE_HEADER, [("A", "x", "PSNR", "1")], [("Cup", "A", "x", "0")], "at least 2 scenes"),
        (("scene", "method", "quality"), [("A", "PSNR", "1")], [("Cup", "A", "x", "0")],
         "lacks columns ['variant']"),
    ],
)
def test_reliability_bad_files(bench_main, capsys, tmp_path, header, scores, labels, fragment):
    _write(tmp_path / "s.csv", header, scores)
    _write(tmp_path / "l.csv", ("target", "scene", "variant", "label"), labels)
    code, _, err = run(
        bench_main,
        capsys,
        "reliability",
        "--scores",
        str(tmp_path / "s.csv"),
        "--labels",
        str(tmp_path / "l.csv"),
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 2 and len(err.splitlines()) == 1 and fragment in err, err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_protocols_import_without_torch_mujoco_warp():
    code = (
        "import sys\n"
        "import protocols, protocols.cli, protocols.stats, protocols.ranking, "
        "protocols.transitions, "
        "protocols.reliability, protocols.yubi, protocols.yubi_report, "
        "protocols.figures, protocols.tablefmt, protocols.metric_directions\n"
        "heavy = [m for m in ('torch', 'mujoco', 'warp') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
