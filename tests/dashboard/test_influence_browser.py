"""Training-data attribution in a real browser: open Explain on a copy of the trained shapes run, open "Training
samples behind this prediction", compute, see both galleries, click a supporting sample and see Explain open it as
"train #N"; then run the self-influence job on the Training data page and see the ranked table. Saves 1440 px
screenshots of the panel and the page in the test's folder (the manual's, docs/screenshots/influence-panel-1440.png
and training-data-1440.png, show a run trained with label noise, where the galleries and the ranking say more)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, open_expander, require_browser, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=120)]

sync_api = require_browser()

PANEL = "Training samples behind this prediction"


def test_galleries_link_to_training_samples_and_the_ranking(trained_shapes_run, tmp_path: Path, serve_app) -> None:
    src = trained_shapes_run.run.path
    root = tmp_path / "runs"
    shutil.copytree(
        src, root / src.name, ignore=shutil.ignore_patterns(".lock", "influence")
    )  # the shared run is read-only
    run_id = src.name
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        page.set_default_timeout(180_000)
        try:
            page.goto(f"{url}/explain?run={run_id}")
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            panel = page.get_by_test_id("stExpander").filter(has_text=PANEL).first
            open_expander(panel)  # a click while it opens can press the button and release beside it: no click
            panel.get_by_role("button", name="Find training samples").click()  # the first query computes the features
            panel.get_by_text("Supporting", exact=True).wait_for()
            settle(page)
            assert panel.get_by_text("Opposing", exact=True).count() == 1
            links = panel.get_by_role("link", name=re.compile(r"^train #\d+$"))
            assert links.count() >= 2
            assert panel.locator("img").count() >= 2, "thumbnails of the training samples"
            assert panel.get_by_text(re.compile("checkpoints: epochs 1, 2")).count() == 1
            page.set_viewport_size({"width": 1440, "height": 1600})
            panel.scroll_into_view_if_needed()
            page.wait_for_timeout(700)
            shot = tmp_path / "influence-panel-1440.png"
            panel.screenshot(path=str(shot))

            found = re.search(r"train #(\d+)", links.first.inner_text())
            assert found, links.first.inner_text()
            links.first.click()
            page.get_by_text(re.compile(rf"^Training sample #{found.group(1)} of ")).first.wait_for()
            settle(page)
            assert page.get_by_text(re.compile(rf"^{found.group(0)} · true: ")).count() >= 1

            page.goto(f"{url}/training-data?run={run_id}")
            page.get_by_role("heading", name="Training data", exact=True).wait_for()
            settle(page)
            page.get_by_role("button", name="Start").click()
            page.get_by_role("heading", name="Possible label errors").wait_for(timeout=240_000)
            settle(page)
            page.get_by_text(re.compile(r"Complete: 5,700 training samples")).first.wait_for()
            assert page.get_by_test_id("stDataFrame").count() >= 1
            assert page.get_by_role("button", name=re.compile(r"^Ranking \(CSV\)")).count() == 1
            page.set_viewport_size({"width": 1440, "height": 1500})
            page.wait_for_timeout(1500)
            shot = tmp_path / "training-data-1440.png"
            page.screenshot(path=str(shot), full_page=True)
        except Exception:
            page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)  # what the page showed
            raise
        finally:
            browser.close()
