"""The SAE training job of the Features page: one at a time in a thread of the server, shared by every session,
as the self-influence job (`influence_jobs`) runs. The page redraws its progress from `snapshot()`; Stop sets the
event `train_sae` checks between harvest chunks and training steps (a stopped SAE keeps a resumable state under
its run, and Resume continues it). Plain threading, no Streamlit: a worker thread cannot write a session's state."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

import streamlit as st

from xaidash.dashboard.background import BackgroundJob, JobClock
from xaidash.data.errors import XaidashError, error_text
from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.train import SaeEvent, train_sae
from xaidash.models.runs.store import Run

MAX_CURVE_POINTS = 600  # training steps kept for the live curves (thinned evenly beyond this)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SaeJob(JobClock):
    """The job as pages see it. state: idle | starting | running | stopping | finished | stopped | failed.
    `last` is the newest event; `steps` the training events kept for the curves."""

    run_id: str
    sae_id: str | None
    config: SaeConfig | None
    state: str
    started: float | None
    finished: float | None
    last: SaeEvent | None = None
    steps: tuple[SaeEvent, ...] = field(default=())
    error: str | None = None


def _thinned(steps: tuple[SaeEvent, ...]) -> tuple[SaeEvent, ...]:
    """Every other step once the curve holds MAX_CURVE_POINTS (the newest always kept)."""
    if len(steps) <= MAX_CURVE_POINTS:
        return steps
    return (*steps[:-1:2], steps[-1])


class BackgroundSae(BackgroundJob[SaeJob]):
    """`train_sae` for one language-model run at a time; another start while it works is refused."""

    def __init__(self) -> None:
        super().__init__(SaeJob("", None, None, "idle", None, None), "xaidash-sae")

    def start(self, run: Run, config: SaeConfig | None, resume: str | None = None, device: str = "auto") -> bool:
        """Start training `config` on `run` (or continue the stopped SAE `resume`); False when a job runs."""
        first = SaeJob(run.id, resume, config, "starting", time.time(), None)
        return self.launch(first, self._work, run, config, resume, device)

    def _on_event(self, event: SaeEvent) -> None:
        def update(s: SaeJob) -> SaeJob:
            steps = _thinned((*s.steps, event)) if event.phase == "train" else s.steps
            return replace(s, last=event, steps=steps, state=s.state if s.state == "stopping" else "running")

        self.change(update)

    def _on_folder(self, sae_id: str) -> None:
        self.change(lambda s: replace(s, sae_id=sae_id))

    def _work(self, stop: threading.Event, run: Run, config: SaeConfig | None, resume: str | None, device: str) -> None:
        record, error = None, None
        try:
            record = train_sae(
                run, config, self._on_event, stop, resume=resume, device=device, on_folder=self._on_folder
            )
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            if not isinstance(e, XaidashError):
                log.error("SAE training on %s crashed:\n%s", run.id, traceback.format_exc())
            error = error_text(e, "the SAE training")
        finished = record is not None and record.status == "finished"
        updates: dict[str, Any] = {
            "state": "failed" if error else ("finished" if finished else "stopped"),
            "finished": time.time(),
            "error": error,
        }
        if record is not None:
            updates.update(sae_id=record.id, config=record.config)
        self.change(lambda s: replace(s, **updates))


@st.cache_resource(show_spinner=False)
def sae_job() -> BackgroundSae:
    """The server's one SAE training job."""
    return BackgroundSae()
