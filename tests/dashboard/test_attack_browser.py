"""The attack panel in a real browser: open Explain on the trained shapes run, open "What would change the
answer", run PGD at 8/255 and see the flipped prediction with the perturbation's colour bar and the maps before and
after, then find a minimal adversarial example and a patch counterfactual. Saves a 1440 px screenshot of the panel (copied to $XAIDASH_SCREENS_DIR as attack-panel-1440.png when set)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, open_expander, require_browser, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=90)]

sync_api = require_browser()

PANEL = "What would change the answer"


def test_pgd_flips_the_prediction_in_the_panel(trained_shapes_run, tmp_path: Path, serve_app) -> None:
    run = trained_shapes_run.run
    with serve_app(run.path.parent, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/explain?run={run.id}")
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            panel = page.get_by_test_id("stExpander").filter(has_text=PANEL).first
            open_expander(panel)  # a click while it opens can press the button and release beside it: no click
            panel.get_by_role("button", name="Run attack").click()
            settle(page)
            verdict = panel.get_by_text("Prediction flipped").first
            verdict.wait_for()
            assert "→" in verdict.inner_text()
            assert panel.get_by_text("grey levels (/255)").count() >= 1, "the perturbation's colour bar and units"
            assert panel.get_by_text("Spearman ρ").count() >= 1
            panel.get_by_role("button", name="Find the minimal adversarial example").click()
            settle(page)
            found = panel.get_by_text("Minimal adversarial example:").or_(panel.get_by_text("None found within")).first
            found.wait_for()
            panel.get_by_text("Smallest patch", exact=False).first.click()  # the search a person can see
            settle(page)
            panel.get_by_role("button", name="Find the patch counterfactual").click()
            settle(page)
            patch = panel.get_by_text("Patch counterfactual:").or_(panel.get_by_text("None found within a patch"))
            patch.first.wait_for()
            # A viewport taller than the panel: Chromium paints only what is in view, so the whole panel must be.
            page.set_viewport_size({"width": 1440, "height": 4200})
            panel.scroll_into_view_if_needed()
            page.wait_for_timeout(700)
            shot = tmp_path / "attack-panel-1440.png"
            panel.screenshot(path=str(shot))
            if os.environ.get("XAIDASH_SCREENS_DIR"):
                shutil.copy(shot, Path(os.environ["XAIDASH_SCREENS_DIR"]) / shot.name)
        finally:
            browser.close()
