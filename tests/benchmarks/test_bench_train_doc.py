"""benchmarks/bench_train.py --doc: the generated speed doc has the printed table's columns."""

from __future__ import annotations


def _table_rows(text: str, header: list[str]) -> list[list[str]]:
    lines = text.splitlines()
    start = lines.index("| " + " | ".join(header) + " |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append(line.strip("| ").split(" | "))
    return rows


def test_bench_train_doc_matches_printed_table(tmp_path, capsys, load_benchmark):
    bench_train = load_benchmark("bench_train")
    doc = tmp_path / "speed" / "train.md"
    bench_train.main(["--sizes", "32", "--gaussians", "300", "--threads", "1", "--iters", "1",
                      "--torch-iters", "1", "--rounds", "1", "--doc", str(doc),
                      "--note", "a test run"])
    printed = capsys.readouterr().out
    text = doc.read_text()
    assert text.startswith("# CPU trainer speed: Warp vs torch rasterizer\n")
    assert "benchmarks/bench_train.py --sizes 32 --gaussians 300" in text
    rows = _table_rows(text, bench_train.GRID_HEADER)
    assert [r[:3] for r in rows] == [["32x32", "300", "1"]]
    assert "| " + " | ".join(rows[0]) + " |" in printed  # the same cells as printed
    warp, torch_, speedup = float(rows[0][3]), float(rows[0][4]), rows[0][5]
    assert warp > 0 and torch_ > 0 and speedup.endswith("x")
    # speed-up is computed from the unrounded rates: agrees with the shown ones to rounding
    assert abs(float(speedup[:-1]) - warp / torch_) <= 0.05 + 0.01 * warp / torch_
    assert text.rstrip().endswith("- a test run")


def test_bench_train_doc_after_interrupt_lists_unmeasured_cells(tmp_path, monkeypatch,
                                                                 load_benchmark):
    bench_train = load_benchmark("bench_train")
    real, calls = bench_train.measure, []

    def measure_then_interrupt(*args, **kwargs):
        calls.append(args[:3])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bench_train, "measure", measure_then_interrupt)
    doc = tmp_path / "train.md"
    bench_train.main(["--sizes", "32", "--gaussians", "300", "400", "--threads", "1",
                      "--iters", "1", "--torch-iters", "1", "--rounds", "1", "--recon",
                      "--doc", str(doc)])
    text = doc.read_text()
    assert [r[:3] for r in _table_rows(text, bench_train.GRID_HEADER)] == [["32x32", "300", "1"]]
    assert "Interrupted (Ctrl-C) after 1 of 2 cells; not measured: 32x32 / 400 / 1 thread(s)." \
        in text
    assert "Whole reconstruction" not in text  # --recon is skipped after an interrupt
