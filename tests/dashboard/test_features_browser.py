"""The Features page in a real browser (Chromium via Playwright) on a copy of the session's SmolLM2 run: set up a
small SAE in the form, Start, see the live panel, Stop, Resume it to the end, and find it in the table with its
held-out metrics and its features below; then delete it."""

from __future__ import annotations

import re
import shutil

import pytest
from browser import CHROMIUM, FLAGS, fill_number, open_expander, pick_option, require_browser, wait_idle

from xaidash.models.language.sae import store

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long(seconds=150)]
sync_api = require_browser()
WAIT_MS = 300_000


@pytest.fixture
def root(tmp_path_factory):
    from smollm2_run import smollm2_run

    run = smollm2_run(tmp_path_factory)
    root = tmp_path_factory.mktemp("features_browser") / "runs"
    shutil.copytree(run.path, root / run.id, ignore=shutil.ignore_patterns("saes"))
    return root, run.id


def test_start_stop_resume_and_browse(root, tmp_path, serve_app):
    runs, run_id = root
    with serve_app(runs, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        try:
            page.goto(f"{url}/features")
            page.get_by_text("This run has no SAE yet").wait_for()
            wait_idle(page)
            fill_number(page, "Layer (0 to 29)", "1")
            fill_number(page, "Width (features)", "64")
            fill_number(page, "k (active features per token)", "8")
            pick_option(page, "Corpus", "cues")
            fill_number(page, "Training tokens", "16384")
            open_expander(page.get_by_test_id("stExpander").filter(has_text="More: context").last)
            fill_number(page, "Held-out tokens (evaluation)", "2048")
            fill_number(page, "Batch (tokens a step)", "128")
            sync_api.expect(page.get_by_text(re.compile(r"384 steps of 128 tokens"))).to_be_visible(timeout=WAIT_MS)
            page.get_by_role("button", name="Start SAE training").click()

            sync_api.expect(page.get_by_text(re.compile(r"training, step [1-9]")).first).to_be_visible(timeout=WAIT_MS)
            page.get_by_role("button", name="Stop", exact=True).click()
            stopped = page.get_by_text(re.compile(r"^Stopped: SAE \S+ keeps what it did"))
            sync_api.expect(stopped).to_be_visible(timeout=WAIT_MS)
            (record,) = store.list_saes(runs / run_id)
            assert record.status == "stopped"
            wait_idle(page)

            page.get_by_role("button", name="Resume").click()
            trained = page.get_by_text(f"SAE {record.id} is trained: its held-out metrics are in the table below.")
            sync_api.expect(trained).to_be_visible(timeout=WAIT_MS)
            record = store.read_record(runs / run_id, record.id)
            assert record.status == "finished" and record.metrics is not None
            sync_api.expect(page.get_by_role("heading", name=f"Features of {record.id}")).to_be_visible(timeout=WAIT_MS)
            sync_api.expect(page.get_by_text("Top activating contexts").first).to_be_visible(timeout=WAIT_MS)
            wait_idle(page)

            page.get_by_text("Yes, delete this SAE").click()
            wait_idle(page)
            page.get_by_role("button", name="Delete SAE", disabled=False).click()
            sync_api.expect(page.get_by_text(f"Deleted SAE {record.id}.")).to_be_visible(timeout=WAIT_MS)
            assert store.list_saes(runs / run_id) == []
        except Exception:
            page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
            print("page text:\n", page.inner_text("body")[:3000])
            raise
        finally:
            browser.close()
