"""Stopping a run on the Train page and taking it further there, in a real browser (`xaidash serve` + Chromium):
after Stop the job panel says what the run's folder holds and offers Resume and "Train N more epochs"; Resume
finishes its plan, N more epochs extend it; the curves are drawn once; the settings and metric cells are not cut."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, fill_number, pick_option, require_browser, wait_idle

pytestmark = pytest.mark.browser
sync_api = require_browser()
WAIT_MS = 240_000  # a run's end (its test evaluation, a rerun) on a loaded 2-core machine

# An element whose text overflows its box (an ellipsis, a cut word): its content is wider than its box.
CUT_CELLS = """(selector) => [...document.querySelectorAll(selector)]
    .filter(el => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
    .map(el => el.innerText)"""


def summary(root: Path) -> dict:
    from xaidash.models.runs.store import list_runs

    (run,) = list_runs(root)
    return {**run.summary(), "tests": [r for r in run.metrics() if r.get("kind") == "test"]}


def assert_nothing_cut(page) -> None:
    cut = page.evaluate(
        CUT_CELLS, "[data-testid=stMetricValue] div, [data-testid=stTable] td, [data-testid=stTable] th"
    )
    assert cut == [], f"cells cut at 1440 px: {cut}"


def test_a_stopped_run_resumes_and_trains_more_epochs_from_the_page(tmp_path: Path, serve_app):
    root = tmp_path / "runs"
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1600})
        page.set_default_timeout(WAIT_MS)
        try:
            page.goto(f"{url}/train")
            page.get_by_role("heading", name="Train", exact=True).wait_for()
            wait_idle(page)
            pick_option(page, "Data set", re.compile(r"^digits"))
            pick_option(page, "Model", re.compile(r"^mlp"))
            fill_number(page, "Epochs", "3")
            fill_number(page, "Batch size", "1")  # about 1,300 steps an epoch: time to press Stop before the run ends
            page.get_by_role("button", name="Start training").click()
            # a step of any epoch: under load the page may redraw seldom, and Stop in epoch 2 is as good a test
            page.get_by_text(re.compile(r"^Epoch [1-3]/3 · step [1-9]")).first.wait_for()
            page.get_by_role("button", name="Stop", exact=True).click()

            # The job panel, from the run's folder: stopped inside epoch 1, and the ways on.
            sync_api.expect(page.get_by_text(re.compile(r"^Stopped: [0-2] of 3 epochs done"))).to_be_visible(
                timeout=WAIT_MS
            )
            wait_idle(page)
            assert summary(root)["state"] == "stopped"
            resume = page.get_by_role("button", name="Resume", exact=True)
            more = page.get_by_role("button", name="Train 2 more epochs")
            sync_api.expect(resume).to_be_visible(timeout=WAIT_MS)
            sync_api.expect(more).to_be_visible()
            # the curves, once (once settled: a rerun under load may show the old copy for a while)
            sync_api.expect(page.get_by_text("Smoothing", exact=True)).to_have_count(1, timeout=WAIT_MS)
            assert_nothing_cut(page)
            page.screenshot(path="/tmp/trainpage-after-stopped.png")

            resume.click()
            sync_api.expect(page.get_by_text(re.compile(r"^Finished in .*3 of 3 epochs done"))).to_be_visible(
                timeout=WAIT_MS
            )
            wait_idle(page)
            done = summary(root)
            assert done["state"] == "completed" and done["epochs_done"] == 3 and len(done["tests"]) == 1
            # a rerun under way may still show the old copy
            sync_api.expect(page.get_by_text("Smoothing", exact=True)).to_have_count(1, timeout=WAIT_MS)

            fill_number(page, "More epochs", "1")
            page.get_by_role("button", name="Train 1 more epoch", exact=True).click()
            sync_api.expect(page.get_by_text(re.compile(r"^Finished in .*4 of 4 epochs done"))).to_be_visible(
                timeout=WAIT_MS
            )
            wait_idle(page)
            done = summary(root)
            assert done["state"] == "completed" and done["epochs_done"] == 4 and done["epochs"] == 4
            assert len(done["tests"]) == 1
            assert_nothing_cut(page)
            page.screenshot(path="/tmp/trainpage-after-extended.png")
        except Exception:
            # what the page and the server said, in the failure's report (a CI run keeps nothing else)
            print("page text:\n", page.inner_text("[data-testid=stMain]")[-3000:])
            print("server log:\n", (tmp_path / "server.log").read_text()[-3000:])
            raise
        finally:
            page.screenshot(path=str(tmp_path / "resume.png"))
            browser.close()
