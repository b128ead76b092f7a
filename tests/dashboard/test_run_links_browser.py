"""In Chromium (issue 29): Explain over a classifier with no saved temperature shows the sidebar's calibration switch
disabled with where to measure it, and says beside its predictions that the probabilities are plain softmax;
`/explain?run=<a language model>` says once, at the top, that the run opens on Generate, and its link opens it
there. With $XAIDASH_SCREENS_DIR set, 1440 px screenshots of both go there."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run
from tiny_lm import save_tiny_folder

from xaidash.dashboard.components.calibration_view import TOGGLE_LABEL
from xaidash.models.language.convert import import_language_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]

sync_api = require_browser()


def _shot(page, name: str, folder: Path) -> None:
    target = os.environ.get("XAIDASH_SCREENS_DIR")
    if not target:
        return
    height = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": 1440, "height": max(900, min(int(height) + 40, 4000))})
    time.sleep(1.0)
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 1000})
    Path(target).mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, Path(target) / shot.name)


def test_calibration_switch_and_a_language_model_link(tmp_path: Path, serve_app) -> None:
    root = tmp_path / "runs"
    classifier = make_run(root, "shapes", "mlp", epochs=1)
    lm = import_language_model("hf:" + str(save_tiny_folder(tmp_path / "tiny")), root=root)
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(f"{url}/explain?run={classifier.id}")
        settle(page)
        page.get_by_text("Probabilities: plain softmax").first.wait_for(timeout=120_000)
        sidebar = page.locator('[data-testid="stSidebar"]')
        switch = sidebar.locator('[data-testid="stCheckbox"]').filter(has_text=TOGGLE_LABEL).locator("input")
        assert switch.is_disabled() and not switch.is_checked()
        assert "Off until calibration is measured" in sidebar.inner_text()
        assert sidebar.get_by_role("link", name="Measure calibration on Train").count() == 1
        _shot(page, "cli-explain-calibration", tmp_path)

        page.goto(f"{url}/explain?run={lm.id}")
        settle(page)
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text("It opens on Generate.").wait_for(timeout=120_000)
        assert main.inner_text().count(f"The link's run `{lm.id}`".replace("`", "")) <= 1
        assert page.get_by_text("is not one Explain works on").count() == 1  # once: not in the sidebar too
        _shot(page, "cli-explain-lm-link", tmp_path)
        main.get_by_role("link", name=f"Open {lm.id} on Generate").click()
        page.wait_for_url("**/generate**", timeout=60_000)
        settle(page)
        assert page.get_by_text("is not one").count() == 0
        browser.close()
