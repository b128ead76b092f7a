"""The one way every page flags a model too poor to explain (near chance, or far below its recipe)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.models.runs.quality import run_warning
from xaidash.models.runs.store import Run

ICON = ":material/warning:"


def show_run_warning(run: Run, where: Any = st) -> str | None:
    """Draw the run's poor-accuracy warning in `where` (the page, the sidebar, a column); the sentence, or None."""
    message = run_warning(run)
    if message:
        where.warning(message, icon=ICON)
    return message
