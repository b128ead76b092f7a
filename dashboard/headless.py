"""Debian's Chromium as this project drives it headless (tests, screenshots, soak): where it is and its flags.

Playwright's own browser downloads are never used (`playwright install` needs the internet).
"""

from __future__ import annotations

from pathlib import Path

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
