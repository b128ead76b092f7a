"""Home mentions every page of the menu, and says nothing about downloads when they are off."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.nav import PAGES

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, offline: bool) -> AppTest:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("XAIDASH_DATA", str(tmp_path / "data"))  # empty: the downloadable sets are missing
    if offline:
        monkeypatch.setenv("XAIDASH_OFFLINE", "1")
    else:
        monkeypatch.delenv("XAIDASH_OFFLINE", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _mentioned(at: AppTest) -> str:
    links = [str(e.proto.label) for e in at.main.get("page_link")]
    words = [str(e.value) for e in (*at.main.markdown, *at.main.caption)]
    return "\n".join(links + words)


def test_home_mentions_every_page_of_the_menu(monkeypatch, tmp_path):
    titles = [p.title for p in PAGES]
    assert "Side by side" in titles and len(titles) >= 10
    at = _home(monkeypatch, tmp_path, offline=True)
    text = _mentioned(at)
    for title in titles:
        if title != "Home":
            assert title in text, title
    # The pages of Home's list (those with a blurb) are links, with their blurbs.
    links = {str(e.proto.label) for e in at.main.get("page_link")}
    assert {p.title for p in PAGES if p.blurb} <= links
    assert all(p.blurb in text for p in PAGES)


def test_no_download_promise_when_downloads_are_off(monkeypatch, tmp_path):
    at = _home(monkeypatch, tmp_path, offline=True)
    captions = [str(c.value) for c in at.main.caption]
    assert any("Downloads are off" in c for c in captions)
    assert not any("download on first use" in c.lower() for c in captions)
    online = _home(monkeypatch, tmp_path, offline=False)
    assert any("download on first use" in str(c.value) for c in online.main.caption)
