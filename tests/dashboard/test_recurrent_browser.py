"""The Recurrent page in a real browser (Chromium via Playwright): a GRU and an LSTM run draw the series, the PCA
trajectory beside one test series per class and every gate; a CNN run is refused in one line naming the models
with a recurrent layer. Screenshots at 1440 px under the test's folder (copied to $XAIDASH_SCREENS_DIR when set)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser, settle
from inspect_runs import make_run

pytestmark = pytest.mark.browser

sync_api = require_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, serve_app):
    tmp = tmp_path_factory.mktemp("recurrent_browser")
    root = tmp / "runs"
    runs = {m: make_run(root, "series_shapes", m) for m in ("series_cnn", "series_lstm", "series_gru")}
    with serve_app(root, tmp / "server.log") as url:
        yield url, runs, tmp


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


def open_recurrent(browser, url: str, run):
    os.utime(run.path)  # the newest run is the one a new session selects
    ctx = browser.new_context(viewport={"width": 1440, "height": 3200})
    page = ctx.new_page()
    page.goto(f"{url}/recurrent")
    settle(page, 240)
    body = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
    return ctx, page, body


def save(page, name: str, folder: Path) -> None:
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if target := os.environ.get("XAIDASH_SCREENS_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


@pytest.mark.parametrize(("model", "gates"), [("series_gru", 3), ("series_lstm", 4)])
def test_recurrent_page_draws_trajectory_and_gates(browser, served, model, gates):
    url, runs, tmp = served
    ctx, page, body = open_recurrent(browser, url, runs[model])
    try:
        assert "Hidden state over time (PCA)" in body and "Gates over time" in body
        assert re.search(r"PC1 explains \d+\.\d% of their variance", body), body[:3000]
        # test #0, picked by default, is the first of its class: it and the first of the two other classes
        assert "fitted on the 384 steps of 3 series" in body, body[:3000]
        assert "recomputed h_t within" in body
        charts = page.locator('[data-testid="stVegaLiteChart"]')
        assert charts.count() == 2 + gates  # the trajectory, the series, one per gate
        save(page, f"recurrent_{model}", tmp)
    finally:
        ctx.close()


def test_recurrent_page_refuses_a_model_without_recurrent_layer(browser, served):
    url, runs, _ = served
    ctx, page, body = open_recurrent(browser, url, runs["series_cnn"])
    try:
        assert "series_cnn has no recurrent layer" in body
        assert re.search(r"Models with a recurrent layer: .*series_gru", body)
        assert page.locator('[data-testid="stVegaLiteChart"]').count() == 0
    finally:
        ctx.close()
