"""Showing errors as messages a user can act on, never as a bare traceback."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator

import streamlit as st

from xaidash.data.errors import DatasetError
from xaidash.explainers.params import ExplainError
from xaidash.models.registry import ModelError

log = logging.getLogger(__name__)
USER_ERRORS = (DatasetError, ModelError, ExplainError)


def show_error(err: BaseException, what: str = "") -> None:
    """Known errors: their message (it says what to do). Anything else: a short message, details folded away."""
    prefix = f"{what}: " if what else ""
    if isinstance(err, USER_ERRORS):
        st.error(f"{prefix}{err}", icon=":material/error:")
        return
    log.error("dashboard error%s\n%s", f" ({what})" if what else "", traceback.format_exc())
    st.error(
        f"{prefix}unexpected {type(err).__name__}: {err}. Try other settings or reload the page; "
        "if it keeps happening, report it with the details below.",
        icon=":material/error:",
    )
    with st.expander("Details"):
        st.code("".join(traceback.format_exception(err)), language="text")


@contextlib.contextmanager
def guard(what: str = "") -> Iterator[None]:
    """Run a block; an exception becomes a message and the page goes on after the block."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - Streamlit's rerun/stop signals are BaseExceptions and pass through
        show_error(e, what)
