"""Default method choices come from the registry (`MethodSpec.featured`), never from tuples of method ids in the
pages, their components, the comparisons or the benchmarks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from xaidash.explainers import featured_methods, get_method, list_methods

ROOT = Path(__file__).resolve().parents[2]
# Where defaults used to be written out by hand; the method modules themselves declare the ranks.
SCANNED = ("dashboard", "bench", "explainers/comparison", "explainers/dataset")


@pytest.mark.parametrize("modality", ["image", "text"])
def test_every_modality_has_featured_methods_in_rank_order(modality: str) -> None:
    ids = featured_methods(modality)
    assert len(ids) >= 2
    ranks = [get_method(i, modality).featured for i in ids]
    assert all(r is not None for r in ranks)
    assert ranks == sorted(ranks)  # type: ignore[type-var]
    not_featured = {m.id for m in list_methods(modality) if m.featured is None}
    assert not_featured.isdisjoint(ids)


def test_among_and_limit() -> None:
    top = featured_methods("image")
    assert featured_methods("image", limit=2) == top[:2]
    assert featured_methods("image", among=top[1:]) == top[1:]
    assert featured_methods("image", among=["no_such_method"]) == []
    assert featured_methods("image", among=reversed(top), limit=3) == top[:3]  # rank order, not the given order


def test_ranks_are_unique_per_modality() -> None:
    for modality in ("image", "text"):
        ranks = [m.featured for m in list_methods(modality) if m.featured is not None]
        assert len(ranks) == len(set(ranks)), modality


def _literal_id_groups(path: Path, ids: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 2:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and set(values) <= ids:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {values}")
    return out


def test_no_hand_written_tuples_of_method_ids() -> None:
    ids = {m.id for m in list_methods()}
    files = [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]
    assert files
    found = [hit for p in files for hit in _literal_id_groups(p, ids)]
    assert not found, "method ids written out by hand (declare `featured` on the MethodSpec instead):\n" + "\n".join(
        found
    )
