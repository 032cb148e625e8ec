"""The README stays a front page: short, two newcomer commands, every link alive.

Issue 31 item 6: at most 180 lines (what it is, the two commands, a study in ten lines, the
findings, links); everything else lives in docs/. The CI entry point must run the README's test
command (DEVELOPERS' rule), so both are checked here against the files themselves.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 180


def test_readme_is_short():
    assert len(README.splitlines()) <= MAX_LINES, (
        f"README.md has {len(README.splitlines())} lines; move detail into docs/ "
        f"(at most {MAX_LINES})")


def test_quick_start_holds_exactly_the_two_commands_and_ci_runs_the_test_one():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = quick.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, flags=re.M), "CI must call the README's test command"


def test_every_relative_link_resolves():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links its manuals"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
