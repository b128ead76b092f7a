"""The Side by side page in a real browser (`xaidash serve` + Debian's Chromium via Playwright), at 1440 and
1024 px wide: both models' maps drawn at least 200 px wide, each with a colour bar at least as wide, and the scale
stated on every row."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run

pytestmark = pytest.mark.browser

sync_api = require_browser()

IMAGES = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img')).map(i => ({
    natural: [i.naturalWidth, i.naturalHeight], shown: [i.getBoundingClientRect().width, i.getBoundingClientRect().height]
}))"""


BARS = """() => Array.from(document.querySelectorAll('[data-testid=stMain] .xai-cbar')).map(b => ({
    width: b.getBoundingClientRect().width, text: b.innerText
}))"""


def loaded_maps(page, within_s: float = 60.0) -> tuple[list[dict], list[dict]]:
    """(the square map images of at least 300 px once four have loaded, every image): the text can be drawn before
    the images finish loading on a loaded machine (their natural size is 0 until then)."""
    deadline = time.monotonic() + within_s
    while True:
        images = page.evaluate(IMAGES)
        maps = [im for im in images if im["natural"][0] >= 300 and im["natural"][0] == im["natural"][1]]
        if len(maps) >= 4 or time.monotonic() > deadline:
            return maps, images
        page.wait_for_timeout(500)


def test_side_by_side_maps_are_readable_at_1440_and_1024(tmp_path: Path, serve_app):
    root = tmp_path / "runs"
    make_run(root, "shapes", "mlp", epochs=1)
    run = make_run(root, "shapes", "resnet_small", epochs=2)
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            for width in (1440, 1024):
                page = browser.new_page(viewport={"width": width, "height": 3000})
                page.set_default_timeout(180_000)
                page.goto(f"{url}/side-by-side?run={run.id}")
                settle(page)
                body = page.inner_text('[data-testid="stMain"]')
                shot = tmp_path / f"side_by_side_{width}.png"
                page.screenshot(path=str(shot), full_page=True)
                if os.environ.get("XAIDASH_SCREENS_DIR"):
                    Path(os.environ["XAIDASH_SCREENS_DIR"]).mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot, Path(os.environ["XAIDASH_SCREENS_DIR"]) / shot.name)
                assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
                assert "unexpected" not in body, body[:2000]
                assert "Side by side" in body and "Results" in body
                assert body.count("· scale: one scale for both models") == 2, body[-3000:]  # IG and saliency rows
                maps, images = loaded_maps(page)
                assert len(maps) == 4, images  # 1 input x 2 methods x 2 models
                assert all(im["shown"][0] >= 200 for im in maps), (width, maps)
                bars = page.evaluate(BARS)
                assert len(bars) == 4 and all(b["width"] >= 200 for b in bars), (width, bars)
                assert [round(b["width"]) for b in bars] == [round(m["shown"][0]) for m in maps], (bars, maps)
                assert all("model A" in b["text"] or "model B" in b["text"] for b in bars), bars
                page.close()
        finally:
            browser.close()
