"""The Train page's Detection and segmentation tab in a real browser (Chromium via Playwright): set up a small
segmenter, Start, see the live panel, Stop, Resume it to the end, and find it selected under Runs with its test
mIoU, its curves and the sidebar's line on the job."""

from __future__ import annotations

import json
import re

import pytest
from browser import CHROMIUM, FLAGS, fill_number, open_expander, pick_option, require_browser, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=180)]
sync_api = require_browser()
WAIT_MS = 300_000


def test_start_stop_resume_and_the_run_under_runs(tmp_path, serve_app):
    runs = tmp_path / "runs"
    runs.mkdir()
    with serve_app(runs, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        try:
            page.goto(f"{url}/train")
            wait_idle(page)
            page.get_by_role("tab", name="Detection and segmentation").click()
            wait_idle(page)
            pick_option(page, "Detector or segmenter", re.compile(r"^U-Net"))
            fill_number(page, "Scene epochs", "1")
            fill_number(page, "Scene batch size", "4")
            open_expander(page.get_by_test_id("stExpander").filter(has_text="More: training images").last)
            fill_number(page, "Training images (0: the whole train split)", "200")
            sync_api.expect(page.get_by_text("1 epochs of 200 images", exact=False)).to_be_visible(timeout=WAIT_MS)
            page.get_by_role("button", name="Start training the segmenter").click()

            sync_api.expect(page.get_by_text(re.compile(r"Epoch 1/1 · step [1-9]")).first).to_be_visible(
                timeout=WAIT_MS
            )
            sync_api.expect(page.get_by_text(re.compile(r"^training unet_small on scenes: epoch 1/1"))).to_be_visible(
                timeout=WAIT_MS
            )
            page.get_by_role("button", name="Stop", exact=True).click()
            sync_api.expect(page.get_by_text(re.compile(r"^Stopped: run \S+ keeps what it trained"))).to_be_visible(
                timeout=WAIT_MS
            )
            (run,) = [d for d in runs.iterdir() if d.is_dir()]
            assert json.loads((run / "summary.json").read_text())["state"] == "stopped"
            wait_idle(page)

            page.get_by_role("button", name="Resume").click()
            trained = page.get_by_text("unet_small on scenes is trained: its scores and curves are under Runs below.")
            sync_api.expect(trained).to_be_visible(timeout=WAIT_MS)
            wait_idle(page)
            summary = json.loads((run / "summary.json").read_text())
            assert summary["state"] == "completed"
            sync_api.expect(page.get_by_text(f"Settings of {run.name}")).to_be_visible(timeout=WAIT_MS)
            miou = page.get_by_test_id("stMetric").filter(has=page.get_by_text("mIoU", exact=True))
            sync_api.expect(miou).to_contain_text(f"{summary['test_metrics']['miou']:.3f}", timeout=WAIT_MS)
            sync_api.expect(page.get_by_text("last scene job finished: unet_small on scenes")).to_be_visible(
                timeout=WAIT_MS
            )
            assert "Traceback" not in page.content()
        finally:
            browser.close()
