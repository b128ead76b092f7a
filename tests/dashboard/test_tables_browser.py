"""A table run on Explain in a real browser: a tick in the test rows' table picks that row (replacing the one picked
for the user), Integrated Gradients and occlusion draw their bars with colour bars, and moving a slider in "Edit this
row" changes the prediction shown for the edited row."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, open_expander, require_browser, settle

from xaidash.models.training.config import TrainConfig

pytestmark = pytest.mark.browser

sync_api = require_browser()

ROW_PX = 35  # the height of a header or a row in Streamlit's data grid
PICK = 3


def test_a_table_row_is_picked_explained_and_edited(tmp_path: Path, serve_app, monkeypatch):
    from xaidash.models.training.engine import train

    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    result = train(TrainConfig(dataset="planted", model="tabular_mlp", epochs=10, device="cpu", seed=0))
    assert result.ok, result.error
    run_id = Path(result.run_dir).name
    with serve_app(tmp_path / "runs", tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_context(viewport={"width": 1440, "height": 1400}).new_page()
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/explain?run={run_id}")
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            samples = page.get_by_test_id("stMultiSelect").filter(has_text="Samples").first
            assert "#0 " in samples.inner_text()

            # Tick row 3 in the grid (a canvas: its checkbox column is at the left, one row per ROW_PX).
            grid = page.get_by_test_id("stDataFrame").first
            box = grid.bounding_box()
            assert box is not None
            page.mouse.click(box["x"] + 20, box["y"] + ROW_PX * (PICK + 1) + ROW_PX / 2)
            settle(page)
            text = samples.inner_text()
            assert f"#{PICK} " in text and "#0 " not in text, text
            assert page.get_by_text(f"test #{PICK}", exact=False).first.is_visible()

            # The default methods include IG and occlusion: their bars, each with its colour bar and units.
            for label in ("Integrated Gradients", "Occlusion"):
                card = page.locator("[class*='st-key-explain_card_0_']").filter(has_text=label).first
                assert card.locator("img").count() >= 1
                assert card.locator(".xai-cbar").count() == 1
            assert page.get_by_text("logit contribution per column").first.is_visible()

            # Edit this row: x2 to the end of its range changes the prediction.
            edit = page.get_by_test_id("stExpander").filter(has_text="Edit this row").first
            open_expander(edit)
            assert page.get_by_text("nothing changed").first.is_visible()
            slider = page.get_by_test_id("stSlider").filter(has_text="x2").first.get_by_role("slider")
            slider.focus()
            page.keyboard.press("End")
            settle(page)
            line = page.get_by_text("x2:", exact=False).first.inner_text()
            assert "→" in line and "nothing changed" not in line, line
            page.screenshot(path=str(tmp_path / "tables_what_if.png"), full_page=True)
        finally:
            browser.close()
