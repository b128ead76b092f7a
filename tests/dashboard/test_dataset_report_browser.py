"""The data-set report in a real browser (`xaidash serve` + Debian's Chromium via Playwright): Compare's
"Whole data set" view of a run with an attribution store opens with its charts, the sample table sorts, and a
click on a row opens that sample on Explain with its stored maps (colour bars, not recomputed)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from dataset_stores import HIGHEST_LOSS, write_store
from inspect_runs import make_run

pytestmark = pytest.mark.browser

sync_api = require_browser()
ROW_PX, HEADER_PX, MARKER_PX = 35, 35, 15  # Streamlit's data grid: row and header height, row-marker column

MAPS = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img')).map(i => ({
    natural: i.naturalWidth, shown: i.getBoundingClientRect().width
}))"""


def keep(path: Path) -> None:
    if os.environ.get("XAIDASH_SCREENS_DIR"):
        Path(os.environ["XAIDASH_SCREENS_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["XAIDASH_SCREENS_DIR"]) / path.name)


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the select box labelled `label` (a combo box: open it, click the option; again when a
    redraw closed the list before the click)."""
    box = page.get_by_test_id("stSelectbox").filter(has_text=label).first
    for _ in range(3):
        box.get_by_role("button", name="Open").click()
        with contextlib.suppress(sync_api.Error):
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
    settle(page)
    assert box.locator("input").input_value() == option


def test_report_sorts_and_a_row_click_opens_the_stored_maps(tmp_path: Path, serve_app):
    root = tmp_path / "runs"
    run = make_run(root, "shapes", "mlp", epochs=1)
    write_store(run, n=40, methods=("saliency", "ig"), chunk=20)
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1400})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/compare?run={run.id}&compare_view=Whole+data+set")
            page.get_by_role("heading", name="Metrics over all samples").wait_for()
            settle(page)
            body = page.inner_text('[data-testid="stMain"]')
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            assert "Samples explained of 40" in body and "40 of 40" in body and "Per class" in body
            # the per-class heatmap, and a box plot and a histogram for deletion and insertion AUC
            # (charts are drawn by the browser after the script has finished: retried for a loaded machine)
            charts = page.locator('[data-testid="stVegaLiteChart"]')
            sync_api.expect(charts).to_have_count(1 + 2 * 2, timeout=60_000)

            pick(page, "Sort by", "highest loss")
            table = page.locator('[class*="st-key-dsr_table_test_highest-loss_"]')
            table.wait_for()
            table.scroll_into_view_if_needed()
            shot = tmp_path / "dataset_report.png"
            page.screenshot(path=str(shot), full_page=True)
            keep(shot)
            # The grid is a canvas that may still be laying out when the script is idle: click until it listens.
            for _ in range(3):
                box = table.bounding_box()
                assert box is not None
                page.mouse.click(box["x"] + MARKER_PX, box["y"] + HEADER_PX + ROW_PX / 2)  # the first row
                with contextlib.suppress(AssertionError):
                    sync_api.expect(page.get_by_text("not recomputed", exact=False)).to_be_visible(timeout=15_000)
                    break
            sync_api.expect(page.get_by_text("not recomputed", exact=False)).to_be_visible(timeout=30_000)
            settle(page)
            assert re.search(rf"[?&]stored=test(:|%3A){HIGHEST_LOSS}\b", page.url), page.url
            body = page.inner_text('[data-testid="stMain"]')
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            assert page.get_by_role("heading", name="Explain", exact=True).count() == 1
            assert f"test #{HIGHEST_LOSS}: stored by xaidash explain --input dataset:0:40 --split test" in body
            images = page.evaluate(MAPS)
            assert len(images) == 3 and all(m["shown"] >= 200 for m in images), images  # the input, saliency, IG
            bars = page.locator("[data-testid=stMain] .xai-cbar")
            assert bars.count() == 2 and "logit contribution per pixel" in bars.nth(1).inner_text()
            assert "Recompute live" in body and "Back to the data-set report" in body
            shot = tmp_path / "explain_stored.png"
            page.screenshot(path=str(shot), full_page=True)
            keep(shot)
        finally:
            page.screenshot(path=str(tmp_path / "last.png"), full_page=True)
            browser.close()
