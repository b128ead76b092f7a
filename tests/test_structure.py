"""The code's shape, read from the source with `ast` (nothing is imported): no import cycles, imports only
downwards through the layers (docs/ARCHITECTURE.md), no function over 80 lines and no module over 600 lines in
any of the four layers, and the dashboard's Chromium driver (a development tool) kept out of the installed packages.

Every import counts: those at the top of a module, inside function bodies and inside `if TYPE_CHECKING:`
blocks. `from xaidash.models.runs import store` is an import of the submodule `store`; an import of a package
is an import of its `__init__`.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("data", "models", "explainers", "dashboard")  # each may import those before it, never those after
# Ray is optional: the local engine hands chunks to the Ray engine, whose actors run the local engine's chunk code.
ALLOWED_CYCLES = [{"xaidash.explainers.dataset.explain", "xaidash.explainers.dataset.ray_engine"}]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("xaidash", *parts))


def _sources() -> dict[str, Path]:
    """Every module of the four layers, by its installed name."""
    return {_module_name(py): py for layer in LAYERS for py in sorted((REPO / layer).rglob("*.py"))}


def _parents(module: str, known: set[str]) -> list[str]:
    """The packages of ours that Python runs (their `__init__`) before it can import `module`."""
    parts = module.split(".")
    return [p for p in (".".join(parts[:k]) for k in range(2, len(parts))) if p in known]


def _imported(module: str, path: Path, tree: ast.AST, known: set[str]) -> Iterator[tuple[str, int]]:
    """(module of ours, line) for every import in `tree`, wherever it stands: the module imported and every
    package of ours above it (importing `a.b.c` runs `a/b/__init__.py` first)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if alias.name in known]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    targets.append(submodule)
                elif base in known:
                    targets.append(base)
        for target in targets:
            for imported in (*_parents(target, known), target):
                if not package.startswith(imported):  # a module's own packages are already running
                    yield imported, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: first line}, for our modules only."""
    sources = _sources()
    known = set(sources)
    graph: dict[str, dict[str, int]] = {}
    for module, path in sources.items():
        edges: dict[str, int] = {}
        for target, line in _imported(module, path, ast.parse(path.read_text(), str(path)), known):
            if target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def _components(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                out.append(component)
    return out


def _cycle_in(component: set[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """One cycle through a component, as 'module:line -> ...' steps, to say where it goes round."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        step = sorted(t for t in graph[path[-1]] if t in component)
        if start in step and len(path) > 1:
            path.append(start)
            break
        nxt = next((t for t in step if t not in seen), step[0])  # every member has a successor inside
        path.append(nxt)
        if nxt in seen:
            path = path[path.index(nxt) :]
            break
        seen.add(nxt)
    return [f"{a} (line {graph[a][b]}) -> {b}" for a, b in itertools.pairwise(path)]


def test_there_are_no_import_cycles() -> None:
    graph = _graph()
    cycles = [c for c in _components(graph) if len(c) > 1 and c not in ALLOWED_CYCLES]
    report = "\n\n".join(
        f"{len(c)} modules import each other: {', '.join(sorted(c))}\n  " + "\n  ".join(_cycle_in(c, graph))
        for c in cycles
    )
    assert not cycles, "import cycles:\n" + report


def test_the_graph_sees_imports_in_functions_and_type_checking_blocks() -> None:
    """The walk itself: a lazy import and a TYPE_CHECKING import are edges, a submodule import names it."""
    code = (
        "from typing import TYPE_CHECKING\n"
        "from xaidash.models.runs import store\n"
        "if TYPE_CHECKING:\n    from xaidash.models.bundle import ModelBundle\n"
        "def f():\n    import xaidash.data\n    from xaidash.models.registry import get_spec\n"
    )
    known = {"xaidash.data", "xaidash.models.runs", "xaidash.models.runs.store", "xaidash.models.bundle"}
    known |= {"xaidash.models.registry"}
    known |= {"xaidash.models"}
    found = {m for m, _ in _imported("xaidash.models.x", REPO / "models/x.py", ast.parse(code), known)}
    # the package of the module itself (xaidash.models) is not an edge; xaidash.models.runs, above store, is
    assert found == {
        "xaidash.models.runs",
        "xaidash.models.runs.store",
        "xaidash.models.bundle",
        "xaidash.data",
        "xaidash.models.registry",
    }
    ring = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert [c for c in _components(ring) if len(c) > 1] == [{"a", "b", "c"}]
    assert _cycle_in({"a", "b", "c"}, ring) == ["a (line 1) -> b", "b (line 1) -> c", "c (line 1) -> a"]


def test_imports_go_down_the_layers_only() -> None:
    def layer(module: str) -> int:
        return LAYERS.index(module.split(".")[1])

    graph = _graph()
    wrong = [
        f"{module} (line {line}) imports {target}"
        for module, edges in sorted(graph.items())
        for target, line in sorted(edges.items())
        if layer(target) > layer(module)
    ]
    assert not wrong, "imports against the layer order data <- models <- explainers <- dashboard:\n" + "\n".join(wrong)


def _function_lengths(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(name, lines) of every function, its decorators included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, (node.end_lineno or node.lineno) - first + 1


def test_no_function_is_longer_than_80_lines() -> None:
    long = [
        f"{path.relative_to(REPO)}:{name}:{length}"
        for path in _sources().values()
        for name, length in _function_lengths(ast.parse(path.read_text(), str(path)))
        if length > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_no_module_is_longer_than_600_lines() -> None:
    big = [
        f"{path.relative_to(REPO)}: {n} lines"
        for path in _sources().values()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not big, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(big)


def test_the_chromium_driver_is_not_installed_with_the_package() -> None:
    assert (REPO / "scripts" / "headless.py").is_file()
    for layer in LAYERS:
        found = sorted(p.relative_to(REPO) for p in (REPO / layer).rglob("headless.py"))
        assert not found, f"the dashboard's Chromium driver is a development tool, not part of xaidash: {found}"
