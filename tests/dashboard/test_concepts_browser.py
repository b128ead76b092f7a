"""The Concepts page in a real browser (`xaidash serve` + Debian's Chromium via Playwright) on resnet_small trained
on shapes_colour: upload red shapes and noise images as two concepts, run TCAV for `circle`, and see the chart
with red marked significant and noise marked not significant. Saves docs/screenshots/concepts-1440.png."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from concept_runs import noise_folder, red_folder, trained_colour_run

pytestmark = pytest.mark.browser

sync_api = require_browser()


def _upload_concept(page, folder: Path) -> None:
    page.get_by_role("textbox", name="Concept name").fill(folder.name)
    page.keyboard.press("Enter")
    settle(page)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(sorted(map(str, folder.glob("*.png"))))
    page.wait_for_timeout(1500)
    settle(page)
    page.get_by_role("button", name="Add concept").click()
    settle(page)


@pytest.mark.slow
@pytest.mark.long(seconds=60)
def test_concept_run_shows_the_chart_and_the_verdicts(tmp_path: Path, tmp_path_factory, serve_app):
    run = trained_colour_run(tmp_path_factory)
    root = Path(run.run_dir).parent
    red, noise = red_folder(tmp_path / "red", n=50), noise_folder(tmp_path / "noise", n=50)
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2200})
            page.set_default_timeout(180_000)
            page.goto(f"{url}/concepts?run={Path(run.run_dir).name}")
            settle(page)
            page.get_by_text("A folder of images").click()
            settle(page)
            _upload_concept(page, red)
            _upload_concept(page, noise)
            page.get_by_role("button", name="Run TCAV").click()
            page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=180_000)
            settle(page)
            body = page.inner_text('[data-testid="stMain"]')
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            assert "unexpected" not in body, body[:2000]
            assert "significant: the class uses this concept" in body, body[-3000:]
            assert "not significant: no finding" in body, body[-3000:]
            assert "How to read" in body
            chart = page.locator('[data-testid="stVegaLiteChart"]').first.bounding_box()
            assert chart is not None and chart["width"] >= 300 and chart["height"] >= 250, chart
            shot = tmp_path / "concepts-1440.png"
            page.screenshot(path=str(shot), full_page=True)
            if os.environ.get("XAIDASH_SCREENS_DIR"):
                Path(os.environ["XAIDASH_SCREENS_DIR"]).mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, Path(os.environ["XAIDASH_SCREENS_DIR"]) / shot.name)
        finally:
            browser.close()
