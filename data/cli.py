"""`xaidash datasets`: what data sets exist and which are available offline; `--check NAME` reads one (your own
`csv:` or `imagefolder:` data) and says what it holds and every note about it (files skipped, an encoding guessed)."""

from __future__ import annotations

import argparse

from xaidash.data.catalogue import datasets_table
from xaidash.data.paths import data_root
from xaidash.data.registry import get_source, own_data_forms


def _check(name: str) -> int:
    """Read a data set as training would; its notes reach stderr as `warning: ...` lines (data/notes.py)."""
    source = get_source(name)
    print(source.info.description)
    notes = getattr(source, "notes", ())
    print(f"{len(notes)} note(s)" + (": see the warning lines above." if notes else "."))
    return 0


def _cmd_datasets(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args.check)
    rows = datasets_table()
    cols = list(rows[0]) if rows else []
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in cols))
    print(f"\nData root: {data_root()} (set XAIDASH_DATA to change it)")
    print("Your own data: " + ", ".join(own_data_forms()))
    print("  a table of your own: csv:<path>?target=<column>[&id=..&categorical=..&numeric=..&drop=..&missing=..]")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list data sets and whether they are available offline")
    p.add_argument(
        "--check",
        metavar="NAME",
        help="read one data set (e.g. csv:/data/people.csv?target=label) and print what it holds and its notes",
    )
    p.set_defaults(func=_cmd_datasets)
