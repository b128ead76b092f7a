"""The self-influence job of the Training data page: one at a time in a thread of the server, shared by every
session, as Home's language-model import (`services.BackgroundImport`) runs: the page redraws its progress from
`snapshot()`; Stop sets an event the job checks between chunks (what it finished stays under the run, and Resume
continues from there). Plain threading, no Streamlit: a worker thread cannot write a session's state."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, replace
from typing import ClassVar

import streamlit as st

from xaidash.dashboard.background import BackgroundJob, JobClock
from xaidash.data.errors import XaidashError, error_text
from xaidash.explainers.influence.api import SelfInfluenceStatus, run_self_influence
from xaidash.models.runs.store import Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfInfluenceJob(JobClock):
    """The job as pages see it: state idle | running | stopping | completed | stopped | failed."""

    ACTIVE_STATES: ClassVar[tuple[str, ...]] = ("running", "stopping")

    run_id: str
    method: str
    state: str
    started: float | None
    finished: float | None
    status: SelfInfluenceStatus | None  # the last progress report (None before the first)
    error: str | None


class BackgroundSelfInfluence(BackgroundJob[SelfInfluenceJob]):
    """`run_self_influence` for one run and method at a time; another start while it works is refused."""

    def __init__(self) -> None:
        super().__init__(SelfInfluenceJob("", "", "idle", None, None, None, None), "xaidash-self-influence")

    def start(self, run: Run, method: str) -> bool:
        """Start (or resume) the job for `run` and `method`; False when a job is already running."""
        first = SelfInfluenceJob(run.id, method, "running", time.time(), None, None, None)
        return self.launch(first, self._work, run, method)

    def _progress(self, status: SelfInfluenceStatus) -> None:
        self.change(lambda s: replace(s, status=status))

    def _work(self, stop: threading.Event, run: Run, method: str) -> None:
        status, error = None, None
        try:
            status = run_self_influence(run, method, progress=self._progress, stop=stop)
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            if not isinstance(e, XaidashError):
                log.error("self-influence of %s crashed:\n%s", run.id, traceback.format_exc())
            error = error_text(e, "the self-influence job")
        if error:
            state = "failed"
        elif status is not None and status.complete:
            state = "completed"
        else:
            state = "stopped"
        self.change(lambda s: replace(s, state=state, finished=time.time(), status=status or s.status, error=error))


@st.cache_resource(show_spinner=False)
def self_influence_job() -> BackgroundSelfInfluence:
    """The server's one self-influence job."""
    return BackgroundSelfInfluence()
