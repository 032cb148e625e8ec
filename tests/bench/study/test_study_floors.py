"""bench.study's floor order (its package docstring): every import goes down a floor.

Module-level and function-level imports both count (read with :mod:`ast`), so a floor
order that holds means the package has no import cycle, hidden or not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import bench.study

PACKAGE = Path(bench.study.__file__).parent


def floors() -> dict[str, int]:
    """Module name -> floor number, read from the numbered list of the package docstring."""
    items = re.findall(r"^(\d+)\. (.*(?:\n   .*)*)", bench.study.__doc__, flags=re.MULTILINE)
    assert [int(n) for n, _ in items] == list(range(1, len(items) + 1)), items
    return {name: int(n) for n, text in items  # the modules: before the item's first colon
            for name in re.findall(r"``(\w+)``", text.split(":")[0])}


def study_imports(path: Path) -> set[str]:
    """bench.study modules ``path`` imports (anywhere in the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n.split(".")[2] for n in names
            if n.startswith("bench.study.") and (PACKAGE / f"{n.split('.')[2]}.py").is_file()}


def test_every_module_is_on_one_floor():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert set(floors()) == modules, sorted(modules ^ set(floors()))
    assert floors()["plan"] == 1 and floors()["cli"] == max(floors().values())


def test_every_import_goes_down_a_floor():
    floor = floors()
    climbs = [f"{module} ({floor[module]}) -> {target} ({floor[target]})"
              for module in floor
              for target in study_imports(PACKAGE / f"{module}.py") - {module}
              if floor[target] >= floor[module]]
    assert not climbs, "imports that do not go down a floor:\n" + "\n".join(sorted(climbs))
