"""Actions on the Train page while a job trains, in a real browser (`xaidash serve` + Chromium): "Delete run" on the
run being trained is refused within seconds, under the button, while the job goes on (issue 36: the refusal used to
show only after the job had ended); a click on its row shows its details, even before it has weights; the run is kept; the message's Stop button stops the job; "Use this run" in the
job panel (a click inside a fragment, which reruns the fragment alone) selects the run for the sidebar and the Runs
tab at once; the run can then be deleted."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, click_table_row, fill_number, pick_option, require_browser, wait_idle
from inspect_runs import make_run

pytestmark = pytest.mark.browser
sync_api = require_browser()
WAIT_MS = 240_000  # a job's start or end (data, model, test evaluation, a rerun) on a loaded 2-core machine
SAY_WITHIN_S = 10.0  # the refusal must show while the job trains: seconds, not the job's remaining minutes


def new_run(root: Path, other: str):
    from xaidash.models.runs.store import list_runs

    (run,) = [r for r in list_runs(root) if r.id != other]
    return run


def start_long_job(page, url: str) -> None:
    """digits/mlp, one sample a step (about 1,300 steps an epoch) for 100 epochs: many minutes, ended by the test."""
    page.goto(f"{url}/train")
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    wait_idle(page)
    pick_option(page, "Data set", re.compile(r"^digits"))
    pick_option(page, "Model", re.compile(r"^mlp"))
    fill_number(page, "Epochs", "100")
    fill_number(page, "Batch size", "1")
    page.get_by_role("button", name="Start training").click()
    page.get_by_text(re.compile(r"^Epoch \d+/100 · step [1-9]")).first.wait_for()


def test_deleting_the_run_being_trained_is_refused_within_seconds(tmp_path: Path, serve_app):
    root = tmp_path / "runs"
    other = make_run(root, "shapes", "mlp", epochs=1)
    with serve_app(root, tmp_path / "server.log") as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        try:
            start_long_job(page, url)
            run = new_run(root, other.id)
            # A click on its row (the newest, the first) selects it: its details and Delete run show below the
            # table, which is redrawn every few seconds while the job trains.
            table = page.locator(".st-key-train_runs_table")
            details = page.get_by_text(f"Settings of {run.id}")
            for _ in range(3):  # the canvas may still be laying out on a loaded machine: click again until it selects
                click_table_row(page, table, 0)
                with contextlib.suppress(AssertionError):
                    sync_api.expect(details).to_be_visible(timeout=15_000)
                    break
            sync_api.expect(details).to_be_visible(timeout=WAIT_MS)
            progress = page.get_by_text(re.compile(r"^Epoch \d+/100 · step \d+"))
            sync_api.expect(progress.first).to_be_visible(timeout=WAIT_MS)
            # The rerun the click caused may still show the previous run's details below (stale until it ends).
            confirm = page.get_by_text("Yes, delete this run")
            sync_api.expect(confirm).to_have_count(1, timeout=WAIT_MS)
            confirm.click()
            # The enabled one: until its rerun ends, Streamlit may still show the stale disabled button beside it.
            delete = page.get_by_role("button", name="Delete run", disabled=False)
            sync_api.expect(delete).to_have_count(1, timeout=WAIT_MS)
            delete.scroll_into_view_if_needed()

            clicked = time.monotonic()
            delete.click()
            refusal = page.get_by_text(re.compile(f"^Run {re.escape(run.id)} is being trained right now: stop the job"))
            try:
                sync_api.expect(refusal).to_be_visible(timeout=SAY_WITHIN_S * 1000)
            except AssertionError as e:
                raise AssertionError(f"no refusal {SAY_WITHIN_S:.0f} s after the click while the job trains") from e
            said_after = time.monotonic() - clicked
            print(f"refusal shown {said_after:.1f} s after the click")
            assert said_after < SAY_WITHIN_S, f"the refusal took {said_after:.1f} s"
            # ... while the job still trains, and the run is kept.
            sync_api.expect(progress.first).to_be_visible()
            assert run.summary()["state"] == "running" and run.file("config.json").exists()
            stop = page.get_by_role("button", name="Stop the job")
            sync_api.expect(stop).to_be_visible()
            stop.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "refused_while_training.png"))
            page.screenshot(path="/tmp/h36train-refused-while-training.png")
            # The message stays while the job's panel redraws every second.
            page.wait_for_timeout(3_000)
            sync_api.expect(refusal).to_be_visible()

            # The way on: the message's Stop button, then Delete run.
            stop.click()
            sync_api.expect(page.get_by_text(re.compile(r"^Stopped: \d+ of 100 epochs done"))).to_be_visible(
                timeout=WAIT_MS
            )
            wait_idle(page)
            assert run.summary()["state"] == "stopped"
            sync_api.expect(refusal).to_have_count(0, timeout=WAIT_MS)  # said once: not again after the job's end

            # Another run selected: the job panel offers "Use this run"; its click shows everywhere at once.
            page.goto(f"{url}/train?run={other.id}")
            sidebar = page.get_by_test_id("stSidebar")
            sync_api.expect(sidebar.get_by_text(other.id)).to_be_visible(timeout=WAIT_MS)
            use = page.get_by_role("button", name="Use this run")
            sync_api.expect(use).to_be_visible(timeout=WAIT_MS)
            wait_idle(page)
            clicked = time.monotonic()
            use.click()
            sync_api.expect(page.get_by_text(f"Run {run.id} is selected for every page.")).to_be_visible(
                timeout=SAY_WITHIN_S * 1000
            )
            sync_api.expect(sidebar.get_by_text(run.id)).to_be_visible(timeout=SAY_WITHIN_S * 1000)
            sync_api.expect(page.get_by_text(f"Settings of {run.id}")).to_be_visible(timeout=WAIT_MS)
            print(f"'Use this run' shown {time.monotonic() - clicked:.1f} s after the click")
            wait_idle(page)
            # The rerun the click caused may still show the previous run's details below (stale until it ends).
            confirm = page.get_by_text("Yes, delete this run")
            sync_api.expect(confirm).to_have_count(1, timeout=WAIT_MS)
            confirm.click()
            # The enabled one: until its rerun ends, Streamlit may still show the stale disabled button beside it.
            delete = page.get_by_role("button", name="Delete run", disabled=False)
            sync_api.expect(delete).to_have_count(1, timeout=WAIT_MS)
            delete.click()
            sync_api.expect(page.get_by_text(f"Deleted run {run.id}.")).to_be_visible(timeout=WAIT_MS)
            assert not run.path.exists()
        except Exception:
            # what the page and the server said, in the failure's report (a CI run keeps nothing else)
            print("page text:\n", page.inner_text("[data-testid=stMain]")[-3000:])
            print("server log:\n", (tmp_path / "server.log").read_text()[-3000:])
            raise
        finally:
            page.screenshot(path=str(tmp_path / "train_busy.png"))
            browser.close()
