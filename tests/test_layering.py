"""Import layering: which rooms may use which (the arrows run one way).

Read from the source with :mod:`ast` (every ``import`` statement, module level or inside
a function) and checked by importing in a fresh interpreter:

- ``protocols`` imports without torch, mujoco or warp and holds no simulator code (it
  imports nothing from ``bench.sim``; progress scoring lives in ``bench.sim.progress``);
- ``bench.sim`` imports nothing from ``bench.policies``, at module level or inside a
  function (the rollout loop's observation/action helpers live in ``bench.sim.policy_io``;
  ``bench.policies.base`` re-exports them);
- ``bench.recon``'s modules import each other without a cycle (``TrainConfig`` lives in
  ``bench.recon.config``).
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """(imported module, enclosing function or None) of every import in ``path``."""
    found: list[tuple[str, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, function))
                found.extend((f"{child.module}.{alias.name}", function) for alias in child.names)
            visit(child, function)

    visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


def _package_files(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


def _heavy_after_import(modules: list[str], watch: tuple[str, ...]) -> list[str]:
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted({{m for m in sys.modules for w in {watch!r} "
        "if m == w or m.startswith(w + '.')}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


def test_protocols_import_light_and_hold_no_sim_code():
    files = _package_files("protocols")
    modules = [_module_name(f) for f in files]
    assert "protocols.progress" not in modules  # progress scoring is bench.sim.progress
    for path in files:
        sim = [name for name, _ in _imports(path) if name.startswith("bench.sim")]
        assert not sim, f"{path.relative_to(ROOT)} imports {sim}"
    loaded = _heavy_after_import(modules, ("torch", "mujoco", "warp", "bench.sim"))
    assert not loaded, loaded


def test_sim_does_not_import_policies():
    for path in _package_files("bench.sim"):
        policies = [name for name, _ in _imports(path)
                    if name == "bench.policies" or name.startswith("bench.policies.")]
        assert not policies, f"{path.relative_to(ROOT)} imports {policies}"
    modules = [_module_name(f) for f in _package_files("bench.sim")]
    assert not _heavy_after_import(modules, ("bench.policies",))


def test_policies_base_reexports_the_sim_policy_io_helpers():
    from bench.policies import base
    from bench.sim import policy_io

    for name in policy_io.__all__:
        assert getattr(base, name) is getattr(policy_io, name), name


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def walk(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return cycles


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_recon_has_no_import_cycle():
    files = _package_files("bench.recon")
    modules = {_module_name(f) for f in files}
    graph = {
        _module_name(f): {name for name, _ in _imports(f) if name in modules} - {_module_name(f)}
        for f in files
    }
    assert "bench.recon.config" in graph["bench.recon.train"]
    assert "bench.recon.config" in graph["bench.recon.densify"]
    assert not _cycles(graph), _cycles(graph)


# --------------------------------------------------------------------------- the whole tree

#: The packages whose imports are checked (tests, benchmarks and scripts sit above them all).
TREE = ("bench", "perturbations", "metrics", "protocols")

#: The declared floor order, bottom first. A module may import modules on its own floor or
#: below, never above; the first pattern that matches a module names its floor (``X`` matches
#: the module X and everything under it; ``*cli`` matches every command module: ``cli``,
#: ``*_cli``). Commands form the top floor, so any room may keep its own ``cli`` module.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("bench", "bench.errors", "bench.marker", "bench.swap", "bench.safety",
                    "bench.provenance", "bench.geometry", "bench.tabular", "bench.registry",
                    "bench.cli_fields", "bench.progress", "bench.threads", "bench.numerics")),
    ("commands", ("*cli",)),  # matched before the rooms; checked as the top floor below
    ("scene data", ("bench.scene.cameras", "bench.scene.camera_files", "bench.scene.gaussians",
                    "bench.scene.ply", "bench.scene.formats", "bench.scene.bundle",
                    "bench.scene.transforms", "bench.scene.register", "bench.scene.sample",
                    "bench.scene")),
    ("rendering", ("bench.render",)),
    ("scene tools", ("bench.scene.preview", "bench.scene.ops", "bench.align")),
    ("editors and scores", ("perturbations", "metrics")),
    ("statistics", ("protocols",)),
    ("reconstruction", ("bench.recon",)),
    ("simulator", ("bench.sim",)),
    ("worlds", ("bench.worlds",)),
    ("policies", ("bench.policies",)),
    ("studies", ("bench.study",)),
    ("demo", ("bench.demo",)),
)
#: Floor rank: the order above, except that commands rank above every room.
RANK = {name: i for i, (name, _) in enumerate(f for f in FLOORS if f[0] != "commands")}
RANK["commands"] = len(RANK)


def _is_command(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last == "cli" or last.endswith("_cli")


def floor_of(module: str) -> str:
    """The floor a module lives on (the most specific pattern wins; commands first)."""
    if _is_command(module):
        return "commands"
    best, length = None, -1
    for name, patterns in FLOORS:
        for pattern in patterns:
            if pattern != "*cli" and (module == pattern or module.startswith(pattern + ".")) \
                    and len(pattern) > length:
                best, length = name, len(pattern)
    assert best is not None, f"{module} is on no declared floor; add it to FLOORS"
    return best


def _tree_modules() -> dict[str, Path]:
    files = {}
    for package in TREE:
        for path in _package_files(package):
            files[_module_name(path)] = path
    return files


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest module of the tree that ``name`` (a module or module.attribute) names."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def tree_graph() -> dict[str, set[str]]:
    """Module -> modules of the tree it imports (module level and inside functions; relative
    imports resolved)."""
    modules = _tree_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                names = [f"{base}.{alias.name}" for alias in node.names] or [base]
            for name in names:
                target = _resolve(name, modules)
                if target is not None and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


def test_no_import_cycle_anywhere():
    graph = tree_graph()
    assert "bench.study.runner" in graph and "bench.scene.cameras" in graph["bench.render.lod"]
    cycles = _cycles(graph)
    assert not cycles, "import cycles (module- or function-level): " + "; ".join(
        " -> ".join(c) for c in cycles[:10])


def test_no_import_climbs_the_declared_floors():
    climbs = []
    for module, targets in tree_graph().items():
        for target in targets:
            if RANK[floor_of(target)] > RANK[floor_of(module)]:
                climbs.append(f"{module} ({floor_of(module)}) -> {target} ({floor_of(target)})")
    assert not climbs, "imports that climb a floor:\n" + "\n".join(sorted(climbs))


def test_floor_check_sees_a_climb_and_a_command():
    assert floor_of("bench.study.cli") == "commands" and floor_of("protocols.plan_cli") == \
        "commands"
    assert floor_of("bench.scene.preview") == "scene tools"
    assert floor_of("bench.scene.gaussians") == "scene data"
    assert RANK[floor_of("bench.demo.run")] > RANK[floor_of("bench.policies.base")]
    assert RANK[floor_of("bench.render.lod")] > RANK[floor_of("bench.scene.gaussians")]
