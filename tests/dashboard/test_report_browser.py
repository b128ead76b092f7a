"""The HTML explain report (explainers/figures/html_report.py) in Debian's Chromium, opened from a file with the
network cut off: every input, map and colour bar is drawn (natural size and a box on the page), no request leaves
the file, hostile names stay text, and a full-page screenshot at 1440 px is kept (XAIDASH_SCREENS_DIR)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser
from inspect_runs import make_run

from xaidash.data.registry import load_split
from xaidash.explainers import get_method
from xaidash.explainers.figures.report import ExplainReport, MethodResult, MethodSetting, ReportSettings, session_report
from xaidash.explainers.inspection import ood
from xaidash.explainers.scoring import explain_and_score
from xaidash.models.runs.store import load_bundle

pytestmark = pytest.mark.browser

sync_api = require_browser()

IMAGES = """() => Array.from(document.images).map(i => {
    const r = i.getBoundingClientRect();
    return {cls: i.className, natural: [i.naturalWidth, i.naturalHeight], box: [r.width, r.height], src: i.src.slice(0, 22)};
})"""
BOXES = """(sel) => Array.from(document.querySelectorAll(sel)).map(b => {
    const r = b.getBoundingClientRect(); return [r.width, r.height, b.innerText.length];
})"""


def keep(path: Path) -> None:
    if os.environ.get("XAIDASH_SCREENS_DIR"):
        Path(os.environ["XAIDASH_SCREENS_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["XAIDASH_SCREENS_DIR"]) / path.name)


def _report(
    root: Path, dataset: str, model: str, methods: dict[str, dict], inputs: list[tuple[str, int]]
) -> ExplainReport:
    run = make_run(root, dataset, model, epochs=1)
    bundle = load_bundle(run, device="cpu")
    split = load_split(dataset, "test")
    raws = [bundle.adapter.item(split, i) for _, i in inputs]
    batch = bundle.adapter.batch(raws)
    results = []
    for m, params in methods.items():
        s = explain_and_score(bundle, batch, m, params, None, with_metrics=True, steps=8)
        results.append(MethodResult(m, s.explanation, s.metrics, s.metric_errors))
    assert all(r.explanation is not None for r in results)
    scores = ood.score(bundle, ood.reference(bundle, n=200), batch)
    return session_report(
        bundle,
        run.id,
        [(name, raw, int(split.labels[i])) for (name, i), raw in zip(inputs, raws, strict=True)],
        bundle.predict_proba(batch).numpy(),
        results,
        ReportSettings(
            [
                MethodSetting(r.method, get_method(r.method, bundle.modality).label, r.explanation.params)
                for r in results
            ],
            display="overlay" if bundle.modality == "image" else "tokens",
            metrics=True,
            steps=8,
        ),
        ood=scores,
        source="browser test",
    )


def _open(browser, html: Path, width: int):
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.goto(html.as_uri())
    page.wait_for_load_state("load")
    return context, page, requests


def test_image_report_opens_offline_with_every_map_and_colour_bar(tmp_path: Path) -> None:
    methods = {"saliency": {}, "ig": {"steps": 16}, "gradcam": {}, "occlusion": {}}
    report = _report(
        tmp_path / "runs", "shapes", "resnet_small", methods, [("<script>alert(1)</script>", 2), ("test #7", 7)]
    )
    html = tmp_path / "report.html"
    html.write_text(report.to_html(), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            context, page, requests = _open(browser, html, 1440)
            assert page.evaluate("() => document.querySelectorAll('script').length") == 0
            assert "<script>alert(1)</script>" in page.inner_text("body")  # the hostile name, shown as text
            images = page.evaluate(IMAGES)
            maps = [i for i in images if i["cls"] == "map"]
            inputs = [i for i in images if i["cls"] == "input-img"]
            assert len(maps) == 2 * len(methods) and len(inputs) == 2, images
            for im in images:
                assert im["src"].startswith("data:image/png"), im
                assert im["natural"][0] > 0 and im["natural"][1] > 0 and im["box"][0] > 0 and im["box"][1] > 0, im
            # each map PNG carries its colour bar below the map (at least 320 px wide), drawn at full width
            assert all(m["natural"][0] >= 320 and m["natural"][1] > 224 and m["box"][0] >= 300 for m in maps), maps
            legends = page.evaluate(BOXES, ".card .legend")
            assert len(legends) == len(maps) and all(w > 0 and h > 0 and n > 20 for w, h, n in legends), legends
            assert page.locator("table.metrics").count() == 2 and page.get_by_text("Deletion AUC ↓").count() == 2
            shot = tmp_path / "report-1440.png"
            page.screenshot(path=str(shot), full_page=True)
            keep(shot)
            assert all(u.startswith(("file:", "data:")) for u in requests), requests  # nothing left the file
            context.close()
        finally:
            browser.close()


def test_text_report_shows_words_and_colour_bars_offline(tmp_path: Path) -> None:
    report = _report(tmp_path / "runs", "cues", "text_cnn", {"saliency": {}, "ig": {"steps": 8}}, [("test #1", 1)])
    html = tmp_path / "text.html"
    html.write_text(report.to_html(), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            context, page, requests = _open(browser, html, 1024)
            bars = page.evaluate(BOXES, ".card .xai-cbar")
            words = page.evaluate(BOXES, ".card .xai-tokens")
            assert len(bars) == 2 and len(words) == 2
            assert all(w > 100 and h > 10 for w, h, _ in bars + words), (bars, words)
            assert all(u.startswith(("file:", "data:")) for u in requests), requests
            context.close()
        finally:
            browser.close()
