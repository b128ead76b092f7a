"""The Explain gallery in a real browser (issue 21; AppTest cannot see an expander's open state): a click on a
tile picks that sample (replacing the one picked for the user, so #0 does not stay selected), marks it, and the
gallery stays open through the reruns picks cause until the user closes it, and then stays closed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run

pytestmark = pytest.mark.browser

sync_api = require_browser()


def gallery_state(page) -> tuple[bool, list[str]]:
    """(is the gallery open, the chosen tiles' labels)."""
    gallery = page.get_by_test_id("stExpander").filter(has_text="Gallery").first
    is_open = gallery.locator("details").get_attribute("open") is not None
    chosen = [b.inner_text() for b in gallery.get_by_role("button", name=re.compile("^☑")).all()]
    return is_open, chosen


def tile(page, index: int):
    return page.get_by_test_id("stExpander").get_by_role("button", name=re.compile(rf"^[☐☑] #{index} "))


def test_gallery_picks_show_and_the_gallery_stays_open(tmp_path: Path, serve_app):
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=1)
    with serve_app(tmp_path / "runs", tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/explain?run={run.id}")
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            is_open, chosen = gallery_state(page)
            assert is_open and [c.split()[:2] for c in chosen] == [["☑", "#0"]]

            tile(page, 3).click()
            settle(page)
            is_open, chosen = gallery_state(page)
            assert is_open, "a pick closed the gallery"
            assert [c.split()[1] for c in chosen] == ["#3"], chosen  # #0, picked for the user, gave way
            page.screenshot(path=str(tmp_path / "gallery_pick.png"))

            tile(page, 5).click()
            settle(page)
            is_open, chosen = gallery_state(page)
            assert is_open and [c.split()[1] for c in chosen] == ["#3", "#5"], chosen
            samples = page.get_by_test_id("stMultiSelect").filter(has_text="Samples").first.inner_text()
            assert "#3" in samples and "#5" in samples and "#0" not in samples

            page.get_by_test_id("stExpander").filter(has_text="Gallery").first.locator("summary").click()
            page.get_by_role("button", name="Random").click()  # a rerun: the closed gallery stays closed
            settle(page)
            assert not gallery_state(page)[0]
        finally:
            browser.close()
