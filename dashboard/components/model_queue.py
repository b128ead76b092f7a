"""A page's job waiting for a copy of the model: its place in the queue on the page, and leaving it.

`services.lease` lends each job a model replica; when every replica of the run is busy with other sessions'
jobs, this shows "2 jobs ahead of yours" (updated while it waits) and stays responsive: any click on the page
(the Cancel button included) reruns the script, which leaves the queue at once instead of waiting its turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import TypeVar

import streamlit as st

from xaidash.dashboard import services
from xaidash.models.bundle import ModelBundle

T = TypeVar("T")
TICK_S = 1.0  # how often the waiting message is redrawn (each redraw lets Streamlit honour a click)


def waiting_text(ahead: int, waited_s: float) -> str:
    """What a waiting job says: its place in the queue and how long it has waited."""
    place = "yours is next" if ahead == 0 else f"{ahead} job{'s' if ahead > 1 else ''} ahead of yours"
    return (
        f"Every copy of this model is busy with other sessions' jobs: {place} "
        f"(waiting {waited_s:.0f} s). Change a setting or press Cancel to leave the queue."
    )


@contextmanager
def queued(lease: Callable[..., AbstractContextManager[T]]) -> Iterator[T]:
    """`lease(on_wait=..., cancelled=...)` (a services lease of any kind of model) with the queue shown on the page
    while the job waits."""
    note = st.empty()
    started = time.monotonic()
    place = {"ahead": 0}
    drawn = {"at": 0.0}

    def on_wait(ahead: int) -> None:
        place["ahead"] = ahead
        drawn["at"] = time.monotonic()
        note.info(waiting_text(ahead, drawn["at"] - started), icon=":material/hourglass_top:")

    def cancelled() -> bool:
        # Redrawing is what lets Streamlit stop this script when the user clicks (Cancel or anything else).
        if time.monotonic() - drawn["at"] >= TICK_S:
            on_wait(place["ahead"])
        return False

    with lease(on_wait=on_wait, cancelled=cancelled) as replica:
        note.empty()
        yield replica


@contextmanager
def leased_model(key: str, bundle: ModelBundle) -> Iterator[ModelBundle]:
    """`services.lease(key, bundle)` with the queue shown on the page while the job waits."""
    with queued(partial(services.lease, key, bundle)) as replica:
        yield replica
