"""README's page list follows the pages registry (dashboard/nav.py `PAGES`): every page, in the sidebar's menu
order, each once; a page added to the registry fails this until README names it (issue 29: Generate, Concepts and
Training data were missing)."""

from __future__ import annotations

import re
from pathlib import Path

from xaidash.dashboard.nav import in_menu_order

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_lists_every_page_in_menu_order() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## The pages", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \*\*(.+?)\*\*:", section, re.M)
    assert listed == [p.title for p in in_menu_order()], listed
