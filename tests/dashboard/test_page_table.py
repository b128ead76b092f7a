"""Pages are listed once: `dashboard/nav.py`'s `PAGES` table, which navigation and Home read and every link
takes its path from (`page_path`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xaidash.dashboard import nav

DASHBOARD = Path(nav.__file__).resolve().parent
VIEW_FILES = {p.name for p in nav.VIEWS.glob("*.py") if p.name != "__init__.py"}


def test_every_view_is_in_the_table_once_and_every_entry_exists() -> None:
    files = [p.file for p in nav.PAGES]
    assert sorted(files) == sorted(VIEW_FILES)
    for field in ("name", "file", "url_path", "title"):
        values = [getattr(p, field) for p in nav.PAGES]
        assert len(values) == len(set(values)), field
    for p in nav.PAGES:
        assert (nav.VIEWS / p.file).is_file(), p


def test_page_path_is_what_streamlit_takes() -> None:
    for p in nav.PAGES:
        path = nav.page_path(p.name)
        assert (DASHBOARD / path).resolve() == (nav.VIEWS / p.file).resolve()
    with pytest.raises(KeyError):
        nav.page_path("no_such_page")


def test_navigation_is_built_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Path, dict]] = []
    monkeypatch.setattr(nav.st, "Page", lambda page, **kw: made.append((Path(page), kw)))
    nav.build_pages()
    assert [(path.name, kw["title"], kw["icon"], kw["url_path"]) for path, kw in made] == [
        (p.file, p.title, p.icon, p.url_path) for p in nav.PAGES
    ]
    assert [kw["default"] for _, kw in made] == [True] + [False] * (len(nav.PAGES) - 1)


def test_no_page_path_is_written_out_elsewhere() -> None:
    pattern = re.compile(r"""["'][^"'\n]*views/[A-Za-z_]+\.py["']""")
    found = []
    for path in sorted(DASHBOARD.rglob("*.py")):
        if path == DASHBOARD / "nav.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(DASHBOARD)}:{i}: {line.strip()}")
    assert not found, "page paths written out by hand (use nav.page_path):\n" + "\n".join(found)
