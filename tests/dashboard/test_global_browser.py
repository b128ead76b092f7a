"""The Global view in Chromium on a `tabular_mlp` fitted to `planted` in-process (a few seconds, one thread): the page
opened at `/global-view?run=RUN` draws the permutation importance chart, the ICE plots and the surrogate's fidelity
sentence, and no exception. With $XAIDASH_SCREENS_DIR set, a 1440 px screenshot of the whole page goes there."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from browser import CHROMIUM, FLAGS, require_browser, settle
from table_runs import fitted_bundle, table_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]

sync_api = require_browser()


def _shot(page, folder: Path) -> None:
    target = os.environ.get("XAIDASH_SCREENS_DIR")
    if not target:
        return
    height = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": 1440, "height": int(height) + 40})
    time.sleep(1.5)
    shot = folder / "tables-global-test.png"
    page.screenshot(path=str(shot), full_page=True)
    Path(target).mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, Path(target) / shot.name)


def test_the_global_view_shows_importance_ice_and_fidelity(tmp_path: Path, serve_app) -> None:
    torch.set_num_threads(1)
    root = tmp_path / "runs"
    run = table_run(root, fitted_bundle("planted"))
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1200})
            page.set_default_timeout(120_000)
            page.goto(f"{url}/global-view?run={run.id}")
            main = page.locator('[data-testid="stMain"]')
            main.get_by_text("The surrogate tree agrees with the network on").wait_for()
            settle(page)
            body = main.inner_text()
            assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
            assert "of held-out rows (" in body and "Which columns matter: permutation importance" in body
            charts = page.locator('[data-testid="stVegaLiteChart"]')
            assert charts.count() >= 6, charts.count()  # importance, 4 ICE, the pair (and global SHAP's)
            importance = charts.first
            box = importance.bounding_box()
            assert box is not None and box["width"] >= 600 and box["height"] >= 150, box
            assert importance.get_by_text("rise in log-loss of the true class").count() >= 1
            ice = charts.filter(has_text="ICE of").first
            ice.scroll_into_view_if_needed()
            box = ice.bounding_box()
            assert box is not None and box["width"] >= 300 and box["height"] >= 300, box
            assert ice.get_by_text("P(positive), predicted").count() >= 1
            _shot(page, tmp_path)
        finally:
            browser.close()
