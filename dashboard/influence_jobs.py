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

import streamlit as st

from xaidash.data.errors import XaidashError, error_text
from xaidash.explainers.influence.api import SelfInfluenceStatus, run_self_influence
from xaidash.models.runs.store import Run

ACTIVE = ("running", "stopping")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfInfluenceJob:
    """The job as pages see it: state idle | running | stopping | completed | stopped | failed."""

    run_id: str
    method: str
    state: str
    started: float | None
    finished: float | None
    status: SelfInfluenceStatus | None  # the last progress report (None before the first)
    error: str | None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started


class BackgroundSelfInfluence:
    """`run_self_influence` for one run and method at a time; another start while it works is refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap = SelfInfluenceJob("", "", "idle", None, None, None, None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def snapshot(self) -> SelfInfluenceJob:
        with self._lock:
            return self._snap

    def start(self, run: Run, method: str) -> bool:
        """Start (or resume) the job for `run` and `method`; False when a job is already running."""
        with self._lock:
            if self._snap.active:
                return False
            self._stop = threading.Event()
            self._snap = SelfInfluenceJob(run.id, method, "running", time.time(), None, None, None)
            self._thread = threading.Thread(
                target=self._work, args=(run, method, self._stop), name="xaidash-self-influence", daemon=True
            )
            self._thread.start()
        return True

    def stop(self) -> bool:
        """Ask the running job to stop after its chunk (False when none runs)."""
        with self._lock:
            if not self._snap.active:
                return False
            self._stop.set()
            self._snap = replace(self._snap, state="stopping")
        return True

    def _progress(self, status: SelfInfluenceStatus) -> None:
        with self._lock:
            self._snap = replace(self._snap, status=status)

    def _work(self, run: Run, method: str, stop: threading.Event) -> None:
        status, error = None, None
        try:
            status = run_self_influence(run, method, progress=self._progress, stop=stop)
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            if not isinstance(e, XaidashError):
                log.error("self-influence of %s crashed:\n%s", run.id, traceback.format_exc())
            error = error_text(e, "the self-influence job")
        with self._lock:
            if error:
                state = "failed"
            elif status is not None and status.complete:
                state = "completed"
            else:
                state = "stopped"
            self._snap = replace(
                self._snap, state=state, finished=time.time(), status=status or self._snap.status, error=error
            )

    def wait(self, timeout: float | None = None) -> SelfInfluenceJob:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.snapshot()


@st.cache_resource(show_spinner=False)
def self_influence_job() -> BackgroundSelfInfluence:
    """The server's one self-influence job."""
    return BackgroundSelfInfluence()
