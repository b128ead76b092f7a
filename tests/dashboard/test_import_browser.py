"""Bring your own model in a real browser (Chromium via Playwright): the Import page imports a Hugging Face ViT
folder and opens it on Explain, where an uploaded image gets Grad-CAM, IG and LIME maps; the Attention page
shows its layers, heads and rollout; an imported BERT-style classifier explains typed text and shows its
attention. Screenshots go under the test's temporary folder (and $XAIDASH_SCREENS_DIR when set)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from browser import CHROMIUM, FLAGS, add_methods, require_browser, settle
from imported_models import import_external, write_hf_vit
from PIL import Image, ImageDraw

pytestmark = pytest.mark.browser

sync_api = require_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, serve_app):
    """(url, {'hf_bert': run id}, the folder of a ViT to import, temporary folder) with the app serving."""
    tmp = tmp_path_factory.mktemp("import_browser")
    root = tmp / "runs"
    bert = import_external("hf_bert", tmp / "bert", root).id
    vit = tmp / "my-vit"
    vit.mkdir()
    write_hf_vit(vit)
    with serve_app(root, tmp / "server.log") as url:
        yield url, {"hf_bert": bert}, vit, tmp


def shoot(page, folder: Path, name: str) -> None:
    """A full-page screenshot at 1440 px: Streamlit scrolls inside stMain, so the viewport takes its height."""
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": 1440, "height": min(max(900, int(height) + 40), 8000)})
    page.wait_for_timeout(800)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1440, "height": 900})
    extra = os.environ.get("XAIDASH_SCREENS_DIR")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)


def no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id("stException").first.inner_text()


def bird_png(path: Path) -> Path:
    rng = np.random.default_rng(0)
    img = Image.fromarray((rng.uniform(0.3, 0.6, (96, 96, 3)) * 255).astype(np.uint8))
    ImageDraw.Draw(img).ellipse((30, 24, 70, 64), fill=(40, 60, 200))
    img.save(path)
    return path


def method_header(page, label: str):
    return page.get_by_test_id("stCaptionContainer").filter(has_text=re.compile(f"^{re.escape(label)}$")).first


def map_captions(page):
    return page.get_by_test_id("stCaptionContainer").filter(has_text=re.compile(r"^target \w+ · [<\d.]+ s"))


def test_import_a_vit_then_explain_and_look_at_its_attention(served):
    url, _, vit, tmp = served
    shots = tmp / "screens"
    shots.mkdir(exist_ok=True)
    image = bird_png(tmp / "bird.png")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/import")
            settle(page)
            page.get_by_label("Folder or Hugging Face id").fill(str(vit))
            page.get_by_role("button", name="Import").click()
            page.get_by_text("Imported as run").wait_for()
            settle(page)
            page.get_by_role("button", name="Open on Explain").wait_for()
            no_exception(page)
            shoot(page, shots, "import_1_vit_summary")

            page.get_by_role("button", name="Open on Explain").click()
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            page.locator("input[type=file]").first.set_input_files([str(image)])
            settle(page)
            add_methods(page, ["LIME"])
            settle(page)
            map_captions(page).nth(3).wait_for(timeout=180_000)  # saliency, IG, Grad-CAM and LIME
            for label in ("Grad-CAM", "Integrated Gradients", "LIME"):
                sync_api.expect(method_header(page, label)).to_be_visible()
            settle(page)
            no_exception(page)
            shoot(page, shots, "import_2_vit_explain")

            page.get_by_role("link", name="Attention", exact=True).click()
            page.get_by_role("heading", name="Attention", exact=True).wait_for()
            settle(page)
            page.locator("input[type=file]").first.set_input_files([str(image)])
            settle(page)
            page.get_by_role("heading", name="Attention rollout").wait_for()
            no_exception(page)
            shoot(page, shots, "import_3_vit_attention")
        finally:
            browser.close()


def test_an_imported_text_classifier_explains_typed_text_and_shows_attention(served):
    url, runs, _, tmp = served
    shots = tmp / "screens"
    shots.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/explain?run={runs['hf_bert']}")
            page.get_by_role("heading", name="Explain", exact=True).wait_for()
            settle(page)
            add_methods(page, ["Attention"])  # beside the defaults: saliency, IG, LIME
            settle(page)
            map_captions(page).nth(7).wait_for(timeout=180_000)  # 4 methods x the 2 example lines
            for label in ("Integrated Gradients", "LIME", "Attention"):
                sync_api.expect(method_header(page, label)).to_be_visible()
            settle(page)
            no_exception(page)
            shoot(page, shots, "import_4_bert_explain")

            page.get_by_role("link", name="Attention", exact=True).click()
            page.get_by_role("heading", name="Attention", exact=True).wait_for()
            settle(page)
            page.get_by_role("heading", name="Head view").wait_for()
            no_exception(page)
            shoot(page, shots, "import_5_bert_attention")
        finally:
            browser.close()
