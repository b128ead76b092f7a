"""Debian Chromium for the browser tests, driven by Playwright (never `playwright install`)."""

from __future__ import annotations

from types import ModuleType

import pytest

from xaidash.dashboard.headless import CHROMIUM, FLAGS  # noqa: F401  (re-exported for the tests)


def require_browser() -> ModuleType:
    """playwright.sync_api, or skip the calling test module saying what is missing."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Chromium not found at {CHROMIUM} (apt-get install chromium); browser tests skipped",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
