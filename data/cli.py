"""`xaidash datasets`: what data sets exist and which are available offline."""

from __future__ import annotations

import argparse

from xaidash.data.paths import data_root
from xaidash.data.registry import get_source, list_datasets, list_factories


def datasets_table() -> list[dict[str, str]]:
    """One row per named data set: name, modality, classes, shape, where it comes from, available now."""
    root = data_root()
    rows = []
    for info in list_datasets():
        available = get_source(info.name).is_available(root)
        rows.append(
            {
                "name": info.name,
                "modality": info.modality,
                "classes": str(info.num_classes),
                "input": "x".join(map(str, info.input_shape)) if info.input_shape else "text",
                "ground truth": "masks" if info.has_masks else ("rationales" if info.has_rationales else ""),
                "status": "built in" if info.builtin else ("available" if available else "needs download"),
            }
        )
    return rows


def _cmd_datasets(args: argparse.Namespace) -> int:
    rows = datasets_table()
    cols = list(rows[0]) if rows else []
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in cols))
    print(f"\nData root: {data_root()} (set XAIDASH_DATA to change it)")
    print("Your own data: " + ", ".join(f"{p}:<path>" for p in list_factories()))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list data sets and whether they are available offline")
    p.set_defaults(func=_cmd_datasets)
