"""The Scenes page in a real browser (Chromium via Playwright) on a copy of the session's trained detector: every box
of a test scene explained by the three default methods (Integrated Gradients with fewer steps), one card per box and method with
its map, and the metrics table."""

from __future__ import annotations

import shutil

import pytest
from browser import CHROMIUM, FLAGS, fill_number, open_expander, require_browser, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=150)]
sync_api = require_browser()
WAIT_MS = 300_000


@pytest.fixture
def root(tmp_path_factory):
    from scene_runs import trained_scene_run

    run = trained_scene_run(tmp_path_factory, "detect")
    root = tmp_path_factory.mktemp("scenes_browser") / "runs"
    shutil.copytree(run.path, root / run.id)
    return root, run


def test_every_box_explained_by_three_methods(root, tmp_path, serve_app):
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.explainers.scenes.api import detection_targets
    from xaidash.models.scenes.loading import load_scene_run

    runs, run = root
    bundle = load_scene_run(run.path)
    boxes = len(detection_targets(bundle.predict([load_scene_set("scenes", "test").images[0]])[0], 0.5))
    assert boxes >= 1
    with serve_app(runs, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        try:
            page.goto(f"{url}/scenes")
            page.get_by_role("heading", name="What the model finds").wait_for()
            wait_idle(page)
            page.get_by_text("Every box", exact=True).click()
            wait_idle(page)
            open_expander(page.get_by_test_id("stExpander").filter(has_text="Integrated Gradients parameters"))
            fill_number(page, "steps", "8")
            explain = page.get_by_role("button", name=f"Explain ({3 * boxes} map{'s' if 3 * boxes > 1 else ''})")
            # the three default methods are still chosen; a loaded machine's rerun can take longer than expect's 5 s
            sync_api.expect(explain).to_be_visible(timeout=WAIT_MS)
            wait_idle(page)  # a click during a rerun can be lost
            explain.click()
            heading = page.get_by_role("heading", name="Quality against the true objects")
            sync_api.expect(heading).to_be_visible(timeout=WAIT_MS)
            wait_idle(page)
            cards = page.locator("[class*='st-key-scene_card_']")
            assert cards.count() == 3 * boxes
            assert cards.locator("img").count() == 3 * boxes  # every card drew its map, none an error
            for method in ("Eigen-CAM", "Grad-CAM", "Integrated Gradients"):
                sync_api.expect(cards.get_by_text(method, exact=True)).to_have_count(boxes)
            sync_api.expect(page.get_by_text("Pointing game", exact=False).first).to_be_visible()
            sync_api.expect(page.get_by_role("button", name="Report (.html)")).to_be_visible()
        except Exception:
            page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
            print("page text:\n", page.inner_text("body")[:3000])
            raise
        finally:
            browser.close()
