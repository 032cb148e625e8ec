"""Deterministic CSV and Markdown table writers (same rows -> same bytes)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

from bench.provenance import atomic_write_bytes

Cell = str | int | float | bool | None


def format_cell(value: Cell, *, digits: int = 6) -> str:
    """Text of one cell: ints as is, floats rounded to ``digits`` decimals, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Cell]], *, digits: int = 6) -> str:
    """CSV with Unix line endings and minimal quoting."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {row!r} has {len(row)} cells but the header has {len(header)}")
        writer.writerow([format_cell(v, digits=digits) for v in row])
    return buffer.getvalue()


def markdown_text(
    header: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    title: str | None = None,
    notes: Sequence[str] = (),
    digits: int = 4,
) -> str:
    """A GitHub Markdown table, optionally with a title line and notes below."""
    lines = [f"**{title}**", ""] if title else []
    cells = [[format_cell(v, digits=digits).replace("|", "\\|") for v in row] for row in rows]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in cells)
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines) + "\n"


def write_table(
    out_dir: Path,
    stem: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    title: str,
    notes: Sequence[str] = (),
    csv_digits: int = 6,
    md_header: Sequence[str] | None = None,
    md_rows: Sequence[Sequence[Cell]] | None = None,
) -> list[Path]:
    """Write ``stem.csv`` and ``stem.md`` atomically; returns both paths.

    The Markdown rendering may use friendlier ``md_header``/``md_rows`` (same content).
    """
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    atomic_write_bytes(csv_path, csv_text(header, rows, digits=csv_digits).encode("utf-8"))
    md = markdown_text(
        md_header or header, md_rows if md_rows is not None else rows, title=title, notes=notes
    )
    atomic_write_bytes(md_path, md.encode("utf-8"))
    return [csv_path, md_path]
