"""Debian Chromium for the browser tests, driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import re
import time
from types import ModuleType
from typing import Any

import pytest
from headless import CHROMIUM, FLAGS  # noqa: F401  (re-exported for the tests)


def require_browser() -> ModuleType:
    """playwright.sync_api, or skip the calling test module saying what is missing."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Chromium not found at {CHROMIUM} (apt-get install chromium); browser tests skipped",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


def settle(page: Any, timeout: float = 180.0) -> None:
    """Until the app's script has finished running and stays finished for a moment (Streamlit marks it on
    stApp's data-test-script-state); AssertionError after `timeout` seconds."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
    deadline = time.time() + timeout
    quiet = 0
    while time.time() < deadline:
        state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        quiet = quiet + 1 if state == "notRunning" else 0
        if quiet >= 4:
            return
        time.sleep(0.4)
    raise AssertionError(f"page still running after {timeout} s")


def open_expander(expander: Any, timeout: float = 30.0) -> None:
    """Open a Streamlit expander (a `stExpander` locator) and wait until it has finished opening.

    Streamlit animates the expander's height for about half a second and its content slides about 100 px down
    meanwhile. A click on a widget inside during that time can press on the widget and release on the line above it,
    which the browser counts as no click at all; under load the press and the release are far enough apart for that
    (the influence browser test's "Find training samples" was pressed, never clicked, and the server never heard of
    it). AssertionError after `timeout` seconds."""
    expander.locator("summary").click()
    details = expander.locator("details")
    deadline = time.time() + timeout
    clicked = time.time()
    quiet = 0
    while time.time() < deadline:
        if time.time() - clicked > 5 and not details.evaluate("d => d.open"):
            expander.locator("summary").click()  # a click during a rerun's redraw is lost on a loaded machine
            clicked = time.time()
        opened = details.evaluate("d => d.open && !d.style.height && d.getAnimations().length === 0")
        quiet = quiet + 1 if opened else 0
        if quiet >= 2:
            return
        time.sleep(0.1)
    raise AssertionError(f"the expander did not finish opening in {timeout} s")


def wait_idle(page: Any, timeout: float = 240_000) -> None:
    """Until Streamlit says the script is not running (its 'Running…' status widget is gone); `timeout` in ms, long
    enough for a job's start or end on a loaded 2-core machine."""
    page.wait_for_timeout(500)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)
    page.wait_for_timeout(300)


def pick_option(page: Any, label: str, option: str | re.Pattern[str]) -> None:
    """Choose `option` (a whole name, or a pattern) in the select box labelled `label`, then wait for the rerun."""
    page.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    if isinstance(option, str):
        page.get_by_role("option", name=option, exact=True).click()
    else:
        page.get_by_role("option", name=option).click()
    wait_idle(page)


def fill_number(page: Any, label: str, value: str) -> None:
    """Type `value` into the number field labelled `label` and apply it (Tab), then wait for the rerun."""
    field = page.get_by_role("spinbutton", name=label, exact=True)
    field.fill(value)
    field.press("Tab")
    wait_idle(page)


def _wait_options_settled(page: Any, deadline: float) -> None:
    """Until the open list's options have kept their names for 0.6 s (a loaded machine redraws it in steps)."""
    options = page.get_by_role("option")
    last, steady = None, 0
    while steady < 3 and time.time() < deadline:
        names = tuple(options.all_inner_texts())
        steady = steady + 1 if names == last else 0
        last = names
        time.sleep(0.2)


def add_methods(page: Any, labels: list[str], box_label: str = "Methods") -> None:
    """Add each of `labels` to the multiselect labelled `box_label`: type it, click its exact option, and check that
    exactly that one chip was added, then close the list.

    Streamlit 1.67 heads the list with a bulk entry ("Select all", or "Select N matches" once you type) and filters
    fuzzily as you type, so Enter or a click during the redraw can select every method: wait for the typed filter to
    apply (no "Select all" entry), and count the chips."""
    box = page.get_by_test_id("stMultiSelect").filter(has_text=box_label).first
    chips = box.locator('[data-tag], [data-baseweb="tag"]')  # Streamlit 1.67, and before
    for label in labels:
        before = chips.count()
        box.locator("input").click()
        box.locator("input").fill(label)
        select_all = page.get_by_role("option", name="Select all", exact=True)
        deadline = time.time() + 30
        while select_all.count() and time.time() < deadline:
            time.sleep(0.1)
        _wait_options_settled(page, deadline)  # a click while the list still redraws can land on the bulk entry
        page.get_by_role("option", name=label, exact=True).click()
        deadline = time.time() + 30
        while chips.count() == before and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # a bulk selection would draw its other chips by now
        added = chips.all_inner_texts()[before:]
        assert chips.count() == before + 1, f"adding {label!r} gave {chips.count() - before} chips: {added}"
    page.keyboard.press("Escape")


ROW_PX, HEADER_PX, MARKER_PX = 35, 35, 15  # Streamlit's data grid: row and header height, row-marker column


def click_table_row(page: Any, table: Any, row: int) -> None:
    """Click a data row's marker cell: the grid is a canvas, so by position (row 0 is the first data row). The table
    is scrolled into view first: a click outside the viewport lands nowhere (Train's runs table sits below its tabs
    and, during a job, the live panel)."""
    table.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = table.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + MARKER_PX, box["y"] + HEADER_PX + ROW_PX * row + ROW_PX / 2)
