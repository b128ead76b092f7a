"""The Attention, Receptive fields, Embeddings and Model pages in a real browser (Chromium via Playwright).

Serves the app on a free port over runs written by `inspect_runs.make_run`, opens each page, checks
that it rendered without an error, clicks one tile of the attention grid and one point of the
embedding map, and saves a screenshot of every page under the test's temporary folder (copied to
$XAIDASH_SCREENS_DIR when set).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser
from browser import settle as wait_settled
from inspect_runs import make_run

pytestmark = pytest.mark.browser


sync_api = require_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, serve_app):
    """(url, runs by model, folder for screenshots): the app serving four small runs."""
    tmp = tmp_path_factory.mktemp("inspect_browser")
    root = tmp / "runs"
    runs = {
        "resnet_small": make_run(root, "shapes", "resnet_small"),
        "vit_tiny": make_run(root, "shapes", "vit_tiny", epochs=1),
        "text_transformer": make_run(root, "cues", "text_transformer"),
    }
    with serve_app(root, tmp / "server.log") as url:
        yield url, runs, tmp


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


def settle(page, timeout: float = 120.0) -> None:
    """This module's pages are quick: the shared wait, with a shorter limit."""
    wait_settled(page, timeout)


def open_page(browser, url: str, run, path: str):
    """A fresh session (the newest run is the selected one) showing `path`."""
    os.utime(run.path)  # list_runs() is newest first: a new session picks this run
    ctx = browser.new_context(viewport={"width": 1400, "height": 3000})
    page = ctx.new_page()
    page.goto(f"{url}/{path}")
    settle(page)
    body = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
    assert "unexpected" not in body, body[:2000]
    return ctx, page, body


def save(page, name: str, folder: Path) -> None:
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    target = os.environ.get("XAIDASH_SCREENS_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


def chart_hits(page, chart, fractions, pattern: str):
    """Hover points of a chart (fractions of its box) until the tooltip matches `pattern`; (x, y, match) or None."""
    box = chart.bounding_box()
    for fy in fractions:
        for fx in fractions:
            x, y = box["x"] + fx * box["width"], box["y"] + fy * box["height"]
            page.mouse.move(x, y)
            time.sleep(0.1)
            tip = page.locator("#vg-tooltip-element")
            if tip.count() and tip.is_visible():
                m = re.search(pattern, tip.inner_text())
                if m:
                    return x, y, m
    return None


def test_attention_vision_grid_click(served, browser):
    url, runs, folder = served
    ctx, page, body = open_page(browser, url, runs["vit_tiny"], "attention")
    assert "4 layers x 4 heads over 65 tokens" in body and "Attention rollout" in body
    grid = page.locator('[data-testid="stVegaLiteChart"]').first
    grid.scroll_into_view_if_needed()
    hit = chart_hits(page, grid, [0.6, 0.8, 0.9], r"layer\s+3\s+head\s+2")
    assert hit, "no tile of layer 3, head 2 found under the mouse"
    page.mouse.click(hit[0], hit[1])
    settle(page)
    assert "layer 3, head 2: class-token attention over the patches" in page.inner_text("body")
    save(page, "attention_vit_tiny", folder)
    ctx.close()


def test_attention_text_head_view(served, browser):
    url, runs, folder = served
    ctx, page, body = open_page(browser, url, runs["text_transformer"], "attention")
    assert "Head view" in body and "2 layers x 4 heads" in body
    # The head view is an HTML component: hovering a token keeps only its links, a double click on a head's
    # square keeps only that head, and the model view has a tile per layer and head.
    frame_el = page.locator("iframe").first
    frame_el.scroll_into_view_if_needed()
    frame = frame_el.content_frame
    frame.locator("svg.hv text").first.wait_for()
    every = frame.locator("svg.hv line").count()
    frame.locator("svg.hv text").nth(1).hover()
    time.sleep(0.3)
    one_token = frame.locator("svg.hv line").count()
    assert 0 < one_token < every
    page.mouse.move(1, 1)
    frame.locator(".head").nth(2).dblclick()
    time.sleep(0.3)
    colours = {frame.locator("svg.hv line").nth(i).get_attribute("stroke") for i in range(3)}
    assert len(colours) == 1 and frame.locator(".head.off").count() == 3
    assert frame.locator(".mv canvas").count() == 2 * 4
    save(page, "attention_text_transformer", folder)
    ctx.close()


def test_receptive_fields_page(served, browser):
    url, runs, folder = served
    ctx, page, body = open_page(browser, url, runs["resnet_small"], "receptive-fields")
    # the last conv (layers.2.conv2, 25x25 field) is preselected; its centre unit (4, 4) sees rows/columns 4..28
    assert "Box rows 4–28, columns 4–28 of a 32x32 image" in body and "100.0% of the gradient inside the box" in body
    save(page, "receptive_fields_resnet_small", folder)
    ctx.close()


def test_embeddings_page_and_open_on_explain(served, browser):
    url, runs, folder = served
    ctx, page, body = open_page(browser, url, runs["resnet_small"], "embeddings")
    assert "PCA of penultimate" in body
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    hit = chart_hits(page, chart, [0.5, 0.45, 0.55, 0.4, 0.6, 0.35, 0.65, 0.3, 0.7], r"index\s+(\d+)")
    assert hit, "no point found under the mouse"
    assert page.locator("#vg-tooltip-element img").count() == 1  # the thumbnail in the tooltip
    index = int(hit[2].group(1))
    page.mouse.click(hit[0], hit[1])
    settle(page)
    assert f"Test sample #{index}" in page.inner_text("body")
    save(page, "embeddings_resnet_small", folder)
    page.get_by_role("button", name="Open on the Explain page").click()
    # The Explain page opens with that sample picked (the ?sample= link is used once, then dropped).
    page.wait_for_url("**/explain*", timeout=60_000)
    settle(page)
    page.get_by_text(f"test #{index}", exact=False).first.wait_for(timeout=60_000)
    assert "sample=" not in page.url
    ctx.close()


def test_model_page(served, browser):
    url, runs, folder = served
    ctx, page, body = open_page(browser, url, runs["resnet_small"], "model")
    assert "Architecture" in body and "Feature maps" in body and "First-layer filters" in body
    assert "epoch 2" in body and "val acc 60.0% · pred" in body  # each epoch's card: its title and caption
    save(page, "model_resnet_small", folder)
    ctx.close()
