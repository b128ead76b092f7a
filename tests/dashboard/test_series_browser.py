"""A series run's Explain page in a real browser (Chromium via Playwright): the maps are interactive charts of the
series over its attribution band, hovering a step shows its value and attribution, and nothing raises. Screenshots
at 1440 px under the test's folder (copied to $XAIDASH_SCREENS_DIR when set)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run

pytestmark = pytest.mark.browser

sync_api = require_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, serve_app):
    tmp = tmp_path_factory.mktemp("series_browser")
    root = tmp / "runs"
    run = make_run(root, "series_shapes", "series_cnn")
    with serve_app(root, tmp / "server.log") as url:
        yield url, run, tmp


def test_series_maps_are_charts_with_a_tooltip_per_step(served):
    url, run, tmp = served
    os.utime(run.path)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 3000}).new_page()
            page.goto(f"{url}/explain")
            settle(page, 240)
            body = page.inner_text("body")
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            assert "per step" in body, body[:3000]  # the legends' units: one value per time step
            charts = page.locator('[data-testid="stVegaLiteChart"]')
            assert charts.count() >= 4, body[:3000]  # the input's lines and classes, then one chart per map
            chart = charts.nth(2)  # after the input's lines and its class chart: the first map
            chart.scroll_into_view_if_needed()
            box = chart.bounding_box()
            assert box is not None
            tips = ""
            for share in (0.72, 0.76, 0.8, 0.68, 0.84, 0.64):  # down the chart to the band, whose cells tip
                page.mouse.move(box["x"] + box["width"] * 0.55, box["y"] + box["height"] * share)
                page.wait_for_timeout(600)
                tooltip = page.locator("#vg-tooltip-element")
                tips = tooltip.inner_text() if tooltip.count() and tooltip.is_visible() else ""
                if "attribution" in tips:
                    break
            assert "attribution" in tips and "value" in tips, f"no tooltip with the step's values on hover: {tips!r}"
            shot = tmp / "explain_series.png"
            page.screenshot(path=str(shot), full_page=True)
            if target := os.environ.get("XAIDASH_SCREENS_DIR"):
                Path(target).mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, Path(target) / shot.name)
        finally:
            browser.close()
