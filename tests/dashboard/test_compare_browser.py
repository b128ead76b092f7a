"""Compare in a real browser at 1440 px (issue 29): its metrics table fits the window (no sideways scroll) and the
sanity check's maps are shown at their own size, so their colour bars' text stays at its drawn 13 px (stretched to
the column, a 160 px drawing put about 24 px text under each map)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run

from xaidash.explainers.comparison.compare import SANITY_FONT_PX

pytestmark = pytest.mark.browser

sync_api = require_browser()

TABLE = """() => {
    const box = document.querySelector('[data-testid=stMain] [data-testid=stDataFrame]');  // the first: the metrics
    const scroller = box && box.querySelector('.dvn-scroller');
    return scroller ? {scroll: scroller.scrollWidth, client: scroller.clientWidth} : null;
}"""

IMAGES = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img')).map(i => ({
    natural: i.naturalWidth, shown: i.getBoundingClientRect().width, caption: i.closest('[data-testid=stImage]')
        .parentElement.innerText
}))"""


def test_compare_table_fits_and_sanity_bars_keep_their_font_at_1440(tmp_path: Path, serve_app):
    run = make_run(tmp_path / "runs", "shapes", "resnet_small", epochs=1)
    with serve_app(tmp_path / "runs", tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 3000})
            page.set_default_timeout(240_000)
            page.goto(f"{url}/compare?run={run.id}")
            settle(page)
            for name, value in (("How many", "2"), ("Sanity check steps", "1")):
                field = page.get_by_role("spinbutton", name=name, exact=True)
                field.fill(value)
                field.press("Enter")
                settle(page)
            page.get_by_role("button", name="Compare", exact=True).click()
            page.wait_for_selector("[data-testid=stMain] [data-testid=stDataFrame]", timeout=240_000)
            settle(page)
            page.screenshot(path=str(tmp_path / "compare-1440.png"))  # the controls, the estimate, the metrics
            page.get_by_role("heading", name="Sanity check").scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "compare-sanity-1440.png"))
            if os.environ.get("XAIDASH_SCREENS_DIR"):
                Path(os.environ["XAIDASH_SCREENS_DIR"]).mkdir(parents=True, exist_ok=True)
                for name in ("compare-1440.png", "compare-sanity-1440.png"):
                    shutil.copy(tmp_path / name, Path(os.environ["XAIDASH_SCREENS_DIR"]) / name)
            body = page.inner_text('[data-testid="stMain"]')
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            table = page.evaluate(TABLE)
            assert table is not None and table["scroll"] <= table["client"], table
            sanity = [im for im in page.evaluate(IMAGES) if "trained" in im["caption"] or "up to" in im["caption"]]
            assert sanity, body[-3000:]
            for im in sanity:  # never enlarged: the bar's text is drawn at SANITY_FONT_PX and shown at most that big
                assert im["shown"] <= im["natural"] + 0.5, sanity
                assert SANITY_FONT_PX * im["shown"] / im["natural"] <= 14, sanity
        finally:
            browser.close()
