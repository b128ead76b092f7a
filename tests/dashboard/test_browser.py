"""End to end in a real browser: `xaidash serve` on a free port, driven through Debian's Chromium by Playwright.

Trains a `shapes` model with the Start button, uploads PNGs on the Explain page (one of them
corrupt), checks that five methods' maps appear side by side, runs a small comparison, and saves
screenshots under the test's temporary folder (and copies them to $XAIDASH_SCREENS_DIR when set).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from browser import CHROMIUM, FLAGS, add_methods, pick_option, require_browser, wait_idle
from PIL import Image, ImageDraw

pytestmark = pytest.mark.browser

METHODS = ["Saliency", "Integrated Gradients", "Grad-CAM", "Input x Gradient", "DeepLift"]

sync_api = require_browser()


@pytest.fixture
def server(tmp_path: Path, serve_app):
    with serve_app(tmp_path / "runs", tmp_path / "server.log") as url:
        yield url


def shape_png(path: Path, corrupt: bool = False) -> Path:
    """A 64x64 noisy background with a red circle, like the shapes data set (any size works)."""
    rng = np.random.default_rng(0)
    img = Image.fromarray((rng.uniform(0.2, 0.5, (64, 64, 3)) * 255).astype(np.uint8))
    ImageDraw.Draw(img).ellipse((18, 14, 48, 44), fill=(220, 30, 40))
    img.save(path)
    if corrupt:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    return path


class Shots:
    def __init__(self, page, folder: Path):
        self.page, self.folder = page, folder
        folder.mkdir(parents=True, exist_ok=True)
        self.extra = Path(os.environ["XAIDASH_SCREENS_DIR"]) if os.environ.get("XAIDASH_SCREENS_DIR") else None

    def __call__(self, name: str, height: int = 1000) -> Path:
        # Streamlit scrolls inside its own container, so a tall viewport captures the whole page.
        self.page.set_viewport_size({"width": 1400, "height": height})
        self.page.wait_for_timeout(700)
        path = self.folder / f"{name}.png"
        self.page.screenshot(path=str(path))
        if self.extra is not None:
            self.extra.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, self.extra / path.name)
        return path


@pytest.mark.long(seconds=60)
def test_train_then_explain_five_methods_in_the_browser(server: str, tmp_path: Path):
    good = shape_png(tmp_path / "circle.png")
    broken = shape_png(tmp_path / "broken.png", corrupt=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        shots = Shots(page, tmp_path / "screens")
        try:
            page.goto(server)
            page.get_by_role("heading", name="xaidash").wait_for()
            page.get_by_text("Data sets").first.wait_for()
            shots("main_1_home")

            # ---- train a shapes model with the Start button
            page.get_by_role("link", name="Train", exact=True).click()
            page.get_by_role("heading", name="Train", exact=True).wait_for()
            pick_option(page, "Model", re.compile(r"^resnet_small"))  # "(recommended)" when it is
            wait_idle(page)
            for label, value in (("Epochs", "1"), ("Batch size", "32")):
                field = page.get_by_role("spinbutton", name=label)
                field.fill(value)
                field.press("Tab")
                wait_idle(page)
            page.get_by_text("More: label smoothing, sample cap, validation, seed").click()
            cap = page.get_by_role("spinbutton", name="Use at most this many training samples (0 = all)")
            cap.fill("200")
            cap.press("Tab")
            wait_idle(page)
            page.get_by_role("button", name="Start training").click()
            with contextlib.suppress(sync_api.TimeoutError):  # catch the live progress and curves if the run lets us
                page.get_by_text(re.compile(r"^Epoch 1/1 · step [1-9]")).first.wait_for(timeout=60_000)
            shots("main_2_training_live", height=1500)
            page.get_by_text("Finished in").wait_for(timeout=240_000)
            wait_idle(page)
            shots("main_3_trained", height=2000)
            use = page.get_by_role("button", name="Use this run")
            if use.count():
                use.first.click()
                wait_idle(page)

            # ---- explain an uploaded PNG with five methods
            page.get_by_role("link", name="Explain", exact=True).click()
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            wait_idle(page)
            page.get_by_text("Upload images").click()
            wait_idle(page)
            add_methods(page, [m for m in METHODS if m not in ("Saliency", "Integrated Gradients", "Grad-CAM")])
            wait_idle(page)
            page.locator("input[type=file]").first.set_input_files([str(good), str(broken)])
            page.get_by_text("broken.png is corrupt or truncated").wait_for()
            page.get_by_text("Downloads").wait_for()
            wait_idle(page)
            results = page.get_by_test_id("stCaptionContainer").filter(has_text=re.compile(r"^target \w+ · [<\d.]+ s"))
            sync_api.expect(results).to_have_count(len(METHODS), timeout=120_000)  # retried while the page reruns
            for label in METHODS:
                header = page.get_by_test_id("stCaptionContainer").filter(has_text=re.compile(f"^{re.escape(label)}$"))
                sync_api.expect(header.first).to_be_visible()
            wait_idle(page)
            # The five maps are at least 200 px wide, in rows that wrap (at most four a row at 1400 px).
            images = page.get_by_test_id("stImage").locator("img")
            boxes = [images.nth(i).bounding_box() for i in range(images.count())]
            maps = [b for b in boxes if b and b["width"] > 150 and b["height"] > 150]
            rows: dict[int, int] = {}
            for b in maps:
                rows[round(b["y"] / 10)] = rows.get(round(b["y"] / 10), 0) + 1
            assert all(b["width"] >= 200 for b in maps), maps
            assert 2 <= max(rows.values()) <= 4 and sum(rows.values()) >= len(METHODS), boxes
            shots("main_4_explain_upload", height=2600)
            # The JSON report (docs/report-format.md) downloads with one entry per map and the predictions.
            with page.expect_download() as download:
                page.get_by_role("button", name="Report (.json)").click()
            report = json.loads(Path(download.value.path()).read_text())
            assert report["format_version"] == 1
            ids = [m["id"] for m in report["settings"]["methods"]]  # the featured defaults first, then the added
            assert sorted(ids[:3]) == ["gradcam", "ig", "saliency"] and ids[3:] == ["inputxgrad", "deeplift"], ids
            assert report["inputs"][0]["predictions"]["A"] and all(e["seconds"] >= 0 for e in report["explanations"])

            # ---- a small comparison
            page.get_by_role("link", name="Compare", exact=True).click()
            page.get_by_role("heading", name="Compare", exact=True).wait_for()
            wait_idle(page)
            page.get_by_label("How many").fill("3")
            page.get_by_label("How many").press("Enter")
            wait_idle(page)
            page.get_by_role("button", name="Compare", exact=True).click()
            page.get_by_role("heading", name="Sanity check").wait_for(timeout=240_000)
            wait_idle(page)
            assert page.get_by_text("Deletion AUC").count() >= 1
            shots("main_5_compare", height=3200)
        except Exception:
            shots("main_failure", height=2000)
            raise
        finally:
            browser.close()
    assert (tmp_path / "screens" / "main_4_explain_upload.png").stat().st_size > 10_000
