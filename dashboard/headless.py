"""Debian's Chromium as this project drives it headless (tests, screenshots, soak): where it is and its flags.

Playwright's own browser downloads are never used (`playwright install` needs the internet).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def wait_drawn(page: Any, timeout_s: float, quiet_checks: int = 3, interval_s: float = 1.0) -> None:
    """On a Playwright page of the app: until the title is drawn and Streamlit's 'running' status widget has
    been absent for `quiet_checks` checks in a row, `interval_s` apart (at most `timeout_s` seconds)."""
    page.wait_for_selector("h1", timeout=timeout_s * 1000)
    deadline, quiet = time.time() + timeout_s, 0
    while time.time() < deadline and quiet < quiet_checks:
        quiet = quiet + 1 if page.locator("[data-testid='stStatusWidget']").count() == 0 else 0
        time.sleep(interval_s)
