"""No code outside the modality adapters decides anything by a modality's name (docs/ARCHITECTURE.md): it asks the
adapter (`xaidash.data.modalities.modality_of`, `xaidash.explainers.modalities.adapter_of`). Read from the source
with `ast`: a comparison (==, !=, in, not in, match) against a modality's name, a name or attribute such as
`is_text`, and a dict keyed by modality names all count; the adapters' own folders are where they belong."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("data", "models", "explainers", "dashboard")
ADAPTERS = (REPO / "data" / "modalities", REPO / "explainers" / "modalities")
NAMES = {"image", "text", "causal_lm", "prompt", "table", "series", "graph"}
FLAG_NAMES = {f"is_{n}" for n in NAMES}


def _names_in(node: ast.AST) -> set[str]:
    """Modality names written as string constants in `node` (a constant, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def branches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for every decision on a modality's name in a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            found = set().union(*(_names_in(s) for s in sides))
            if found:
                yield node.lineno, f"compares with {', '.join(sorted(found))}"
        elif isinstance(node, ast.MatchValue) and _names_in(node.value):
            yield node.value.lineno, "matches a modality name"
        elif isinstance(node, ast.Dict):
            keys = set().union(*(_names_in(k) for k in node.keys if k is not None)) if node.keys else set()
            if len(keys) >= 2:
                yield node.lineno, f"a table keyed by {', '.join(sorted(keys))}"
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in FLAG_NAMES:
                yield node.lineno, f"reads {name}"


def modality_branches() -> list[str]:
    out = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            if any(path.is_relative_to(a) for a in ADAPTERS):
                continue
            for line, what in branches(ast.parse(path.read_text(), str(path))):
                out.append(f"{path.relative_to(REPO)}:{line}: {what}")
    return out


def test_the_walk_finds_each_kind_of_branch() -> None:
    code = (
        "if bundle.modality == 'image': pass\n"
        "ok = modality in ('text', 'causal_lm')\n"
        "fns = {'image': f, 'text': g}\n"
        "match m:\n    case 'text': pass\n"
        "if is_text: pass\n"
        "same = a.modality == b.modality\n"
        "word = 'image'\n"
    )
    found = [what for _, what in sorted(branches(ast.parse(code)))]
    assert found == [
        "compares with image",
        "compares with causal_lm, text",
        "a table keyed by image, text",
        "matches a modality name",
        "reads is_text",
    ]


def test_no_code_outside_the_adapters_branches_on_a_modality_name() -> None:
    found = modality_branches()
    assert not found, f"{len(found)} decisions by a modality's name outside the adapters:\n" + "\n".join(found)
