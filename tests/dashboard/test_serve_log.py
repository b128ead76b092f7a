"""`xaidash serve`'s log holds only what a user can act on: after a training through the Train page (a real server,
its job path, a training child process) it has no "missing ScriptRunContext" lines, no "use `streamlit run`" notice,
no "No runtime found" and no deprecation notice.

The cause of those lines was the training child process (multiprocessing's spawn) re-running dashboard/app.py, which
Streamlit had installed as `__main__`, in bare mode: app.py now draws nothing when imported as `__mp_main__`."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from browser import CHROMIUM, FLAGS, require_browser
from headless import serving

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a server, a browser and a (one-epoch) training

sync_api = require_browser()
NOISE = re.compile(r"missing ScriptRunContext|streamlit run|No runtime found|deprecat|will be removed", re.IGNORECASE)


def idle(page) -> None:
    page.wait_for_timeout(1500)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")


def pick_model(page, name: str) -> None:
    """The Train form's model selectbox set to `name` (the page may still be redrawing: tried again)."""
    for _ in range(3):
        idle(page)
        page.locator(".st-key-train_model").click()
        option = page.get_by_role("option", name=re.compile(f"^{name}"))
        try:
            option.first.click(timeout=20_000)
            return
        except sync_api.TimeoutError:
            page.keyboard.press("Escape")
    raise AssertionError(f"could not pick the model {name}")


def test_a_training_leaves_the_server_log_clean(tmp_path: Path):
    root, log_path = tmp_path / "runs", tmp_path / "serve.log"
    with serving(root, log_path, start_timeout_s=90, through_cli=True) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(180_000)
        try:
            page.goto(f"{url}/train")
            page.get_by_role("heading", name="Train", exact=True).wait_for()
            pick_model(page, "mlp")
            page.wait_for_timeout(2000)
            page.locator(".st-key-train_epochs input").fill("1")
            page.keyboard.press("Enter")
            page.wait_for_timeout(2000)
            page.locator(".st-key-train_start button").click()
            end = time.time() + 300
            while time.time() < end:
                summaries = list(root.glob("*/summary.json"))
                if summaries and '"completed"' in summaries[0].read_text():
                    break
                time.sleep(1)
            else:
                raise AssertionError(f"the training did not complete:\n{log_path.read_text()}")
            page.wait_for_timeout(3000)  # the page's timers see the end and redraw
        finally:
            browser.close()
    text = log_path.read_text()
    noise = [line for line in text.splitlines() if NOISE.search(line)]
    assert not noise, "\n".join(noise)
    assert "error" not in text.lower(), text
