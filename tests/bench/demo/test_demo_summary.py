"""The demo summary states agreement with its Wilson interval, p to two significant figures and
every predictor's count over all decisions (issue 33 item 6), in the committed runs too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.demo.run import _agreement_interval, _p2

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("k", "n", "text"), [
    # closed form: centre (k + z^2/2) / (n + z^2), half width z / (n + z^2) sqrt(k(n-k)/n + z^2/4)
    (7, 8, "0.53-0.98"), (3, 3, "0.44-1.00"), (0, 5, "0.00-0.43"), (8, 9, "0.57-0.98"),
])
def test_agreement_interval_is_wilsons(k, n, text):
    assert _agreement_interval(k, n) == text


def test_no_comparison_has_no_interval():
    assert _agreement_interval(0, 0) == "-"


@pytest.mark.parametrize(("p", "text"), [
    (2.248e-05, "2.2e-05"), (0.001018, "0.0010"), ("0.3498", "0.35"), (1, "1.0"), (0.0625, "0.062"),
    ("", "-"), (None, "-"),
])
def test_p_values_to_two_significant_figures(p, text):
    assert _p2(p) == text


def _table(text: str, title: str) -> list[list[str]]:
    block = text.split(f"**{title}")[1].split("\n\n")[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


@pytest.mark.parametrize("run", ["demo", "demo-quick"])
def test_committed_summaries_carry_the_intervals_and_the_totals(run):
    text = (ROOT / "results" / run / "summary.md").read_text()
    rows = _table(text, "Ranking agreement")
    assert rows and all(r[2] == _agreement_interval(*map(int, r[1].split("/"))) for r in rows)
    reliability = _table(text, "Scene-held-out reliability classifier")
    header = text.split("**Scene-held-out reliability classifier")[1].split("\n\n")[1]
    columns = [c.strip() for c in header.splitlines()[0].strip("|").split("|")]
    tasks = [c for c in columns[1:-1] if c in ("cup", "tape", "pen")]
    for row in reliability:
        cells = dict(zip(columns, row, strict=True))
        total = [sum(int(cells[t].split("/")[i]) for t in tasks) for i in (0, 1)]
        assert cells["every task's decisions"] == f"{total[0]}/{total[1]}", row
    for row in _table(text, "Transitions vs clean"):  # McNemar and Fisher p at two figures
        assert all(v == "-" or (re.fullmatch(r"[0-9.e+-]+", v) and v == _p2(v))
                   for v in row[4:6]), row
