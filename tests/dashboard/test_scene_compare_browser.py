"""Compare and Side by side on detectors in a real browser (Chromium via Playwright): the switch opened from the
address, Compare's metrics table, charts and agreement over two test scenes; Side by side's pair of maps per method
for the first true object, model A's beside model B's (or the line saying B has no box of it)."""

from __future__ import annotations

import shutil

import pytest
from browser import CHROMIUM, FLAGS, fill_number, pick_option, require_browser, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=240)]
sync_api = require_browser()
WAIT_MS = 300_000


@pytest.fixture
def root(tmp_path_factory):
    from scene_runs import tiny_scene_run, trained_scene_run

    run = trained_scene_run(tmp_path_factory, "detect")
    root = tmp_path_factory.mktemp("scene_compare_browser") / "runs"
    shutil.copytree(run.path, root / run.id)
    return root, run, tiny_scene_run("detect", root)


def compare_two_scenes(page, url: str, trained) -> None:
    from xaidash.dashboard.components.scene_facts import scene_picker_label

    page.goto(f"{url}/compare?compare_models=Detectors+and+segmenters")
    page.get_by_text("Each method explains every true object").wait_for()
    wait_idle(page)
    pick_option(page, "Model", scene_picker_label(trained))  # the tiny run is newer: the page opened on it
    fill_number(page, "Test scenes", "2")
    go = page.get_by_role("button", name="Compare (3 methods on 2 scenes)")
    sync_api.expect(go).to_be_visible(timeout=WAIT_MS)
    wait_idle(page)
    go.click()
    sync_api.expect(page.get_by_role("heading", name="Agreement")).to_be_visible(timeout=WAIT_MS)
    wait_idle(page)
    sync_api.expect(page.get_by_role("heading", name="Metrics")).to_be_visible()
    assert page.locator("[data-testid='stVegaLiteChart']").count() >= 3  # a chart per metric, and the agreement
    sync_api.expect(page.get_by_role("button", name="comparison.json")).to_be_visible()


def side_by_side_first_object(page, url: str, trained) -> None:
    from xaidash.dashboard.components.scene_facts import scene_picker_label

    page.goto(f"{url}/side-by-side?side_by_side_models=Detectors+and+segmenters")  # a new session: the newest run
    page.get_by_role("heading", name="What each model finds").wait_for()
    wait_idle(page)
    pick_option(page, "Model A", scene_picker_label(trained))
    go = page.get_by_role("button", name="Explain both")
    go.click()
    sync_api.expect(page.get_by_role("heading", name="Quality against the true objects")).to_be_visible(timeout=WAIT_MS)
    wait_idle(page)
    pairs = page.locator("[class*='st-key-sbs_pair_0_']")
    assert pairs.count() == 3  # the three default methods, each a pair for the first object
    cards = page.locator("[class*='st-key-sbs_card_a_0_']")
    assert cards.count() == 3 and cards.locator("img").count() == 3  # model A's maps
    own_b = page.locator("[class*='st-key-sbs_card_b_0_']").count()
    assert own_b == 3 or pairs.get_by_text("Model B: no box of this object, so no map.").count() == 3
    sync_api.expect(page.get_by_role("button", name="Report (.html)")).to_be_visible()


def test_compare_and_side_by_side_on_detectors(root, tmp_path, serve_app):
    runs, run, _ = root
    with serve_app(runs, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        try:
            compare_two_scenes(page, url, run)
            side_by_side_first_object(page, url, run)
        except Exception:
            page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
            print("page text:\n", page.inner_text("body")[:3000])
            raise
        finally:
            browser.close()
