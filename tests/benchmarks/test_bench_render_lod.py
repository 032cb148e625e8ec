"""benchmarks/bench_render_lod.py --doc: the generated speed doc has the printed tables."""

from __future__ import annotations


def test_bench_render_lod_doc_matches_printed_tables(tmp_path, capsys, load_benchmark):
    bench = load_benchmark("bench_render_lod")
    doc = tmp_path / "speed" / "render-lod.md"
    bench.main(["--gaussians", "3000", "--sizes", "32", "--frames", "1", "--diagnose",
                "--points", "1e-6:none", "2:0.05:0", "--doc", str(doc), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    text = doc.read_text()
    assert text.startswith("# Level of detail at scan size")
    assert "benchmarks/bench_render_lod.py --gaussians 3000 --sizes 32" in text
    rows = [line for line in text.splitlines() if line.startswith("| 32x32 | fisheye |")]
    assert len(rows) == 2 and all(r in printed for r in rows)
    exact_point = rows[0].split(" | ")
    # pixel_size, colour tolerance, merged SH degree; PSNR in column 9
    assert exact_point[2:5] == ["1e-06", "none", "all"] and exact_point[9] == "inf"  # exact
    coarse = rows[1].split(" | ")
    assert coarse[2:5] == ["2", "0.05", "0"] and float(coarse[9]) < 99  # a coarse cut differs
    assert "exact vs seed 1" in text and (tmp_path / "render_lod.csv").exists()
