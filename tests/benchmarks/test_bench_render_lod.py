"""benchmarks/bench_render_lod.py --doc: the generated speed doc has the printed tables."""

from __future__ import annotations


def test_bench_render_lod_doc_matches_printed_tables(tmp_path, capsys, load_benchmark):
    bench = load_benchmark("bench_render_lod")
    doc = tmp_path / "speed" / "render-lod.md"
    bench.main(["--gaussians", "3000", "--sizes", "32", "--frames", "1", "--diagnose",
                "--points", "1e-6:none", "2:0.05", "--doc", str(doc), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    text = doc.read_text()
    assert text.startswith("# Level of detail at scan size")
    assert "benchmarks/bench_render_lod.py --gaussians 3000 --sizes 32" in text
    rows = [line for line in text.splitlines() if line.startswith("| 32x32 | fisheye |")]
    assert len(rows) == 2 and all(r in printed for r in rows)
    exact_point = rows[0].split(" | ")
    assert exact_point[2:4] == ["1e-06", "none"] and exact_point[8] == "inf"  # bit-identical
    assert float(rows[1].split(" | ")[8]) < 99  # a coarse cut differs from the exact image
    assert "exact vs seed 1" in text and (tmp_path / "render_lod.csv").exists()
