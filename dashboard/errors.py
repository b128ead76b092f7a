"""Showing errors as messages a user can act on, never as a traceback, a source path or an exception's class."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import streamlit as st

from xaidash.data.errors import DatasetError, error_text
from xaidash.explainers.params import ExplainError
from xaidash.models.registry import ModelError

log = logging.getLogger(__name__)
USER_ERRORS = (DatasetError, ModelError, ExplainError)
MAX_NOTES = 8  # a data set's notes shown in its warning box (one per skipped file can run long)


def show_error(err: BaseException, what: str = "") -> None:
    """Known errors: their message (it says what to do). Anything else: the same message in plain words (data/errors.py
    `error_text`), its traceback in the server's log for developers, never on the page."""
    prefix = f"{what}: " if what else ""
    if not isinstance(err, USER_ERRORS):
        log.error("dashboard error%s\n%s", f" ({what})" if what else "", "".join(traceback.format_exception(err)))
    then = "try other settings or reload the page; if it keeps happening, report it (the server's log has the details)"
    st.error(f"{prefix}{error_text(err, then=then)}", icon=":material/error:")


def show_notes(where: Any, notes: Sequence[str]) -> None:
    """A data set's notes (data/notes.py: files skipped, links left out, an encoding guessed, values filled) in one
    warning box, a line each; nothing when there are none."""
    if not notes:
        return
    lines = list(notes[:MAX_NOTES])
    if len(notes) > MAX_NOTES:
        lines.append(f"… and {len(notes) - MAX_NOTES:,} more: `xaidash datasets --check NAME` lists them all.")
    where.warning("\n\n".join(lines), icon=":material/warning:")


@contextlib.contextmanager
def guard(what: str = "") -> Iterator[None]:
    """Run a block; an exception becomes a message and the page goes on after the block."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - Streamlit's rerun/stop signals are BaseExceptions and pass through
        show_error(e, what)
