"""Background training jobs: one training at a time, shared by every dashboard session.

Plain Python (a thread, a lock, a stop event), no Streamlit: a worker thread cannot write a
browser session's state (Streamlit drops writes made outside a script run), so the worker
updates a `Job` object that every page reads through `snapshot()`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from xaidash.data.errors import DatasetError
from xaidash.data.registry import get_source
from xaidash.models.device import pick_device
from xaidash.models.engine import TrainConfig, TrainEvent, TrainResult, train
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runstore import resolve_run

log = logging.getLogger(__name__)

ACTIVE_STATES = ("starting", "running")
TrainFn = Callable[..., TrainResult]


class JobBusy(ModelError):
    """A training job is already running; the message names it and says what to do."""


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job's state for readers (pages never see a half-updated job)."""

    id: int
    config: dict[str, Any]
    state: str  # starting | running | completed | stopped | failed
    run_id: str | None
    epoch: int
    epochs: int
    step: int
    total_steps: int
    eta_s: float | None
    samples_per_s: float | None
    elapsed_s: float
    history: tuple[dict[str, Any], ...]  # one record per logged step and per epoch
    error: str | None
    test_acc: float | None
    test_loss: float | None
    started: float
    finished: float | None
    stop_requested: bool

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def label(self) -> str:
        return f"{self.config.get('model', '?')} on {self.config.get('dataset', '?')}"


class Job:
    """One training run in a background thread; `on_event` is the engine callback."""

    def __init__(self, job_id: int, cfg: TrainConfig):
        self.id = job_id
        self.cfg = cfg
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = "starting"
        self._run_id: str | None = None
        self._last: TrainEvent | None = None
        self._history: list[dict[str, Any]] = []
        self._error: str | None = None
        self._test: tuple[float | None, float | None] = (None, None)
        self._started = time.time()
        self._finished: float | None = None

    def on_event(self, event: TrainEvent) -> None:
        with self._lock:
            self._run_id = event.run_id
            if event.kind in ("start", "step", "epoch"):
                self._state = "running"
                self._last = event
            if event.kind in ("step", "epoch"):
                record = {
                    k: v for k, v in asdict(event).items() if v is not None and k not in ("run_id", "message", "state")
                }
                self._history.append(record)

    def _finish(self, state: str, error: str | None, result: TrainResult | None = None) -> None:
        with self._lock:
            self._state = state
            self._error = error
            if result is not None:
                self._run_id = result.run.id
                self._test = (result.test_acc, result.test_loss)
            self._finished = time.time()

    def run(self, train_fn: TrainFn) -> None:
        """The thread body: train, then record how it ended. Never raises."""
        try:
            result = train_fn(self.cfg, callbacks=[self.on_event], stop=self.stop_event)
        except (ModelError, DatasetError) as e:
            self._mark_run_failed(str(e))
            self._finish("failed", str(e))
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            log.error("training job %s crashed:\n%s", self.id, traceback.format_exc())
            message = f"Training crashed: {type(e).__name__}: {e}"
            self._mark_run_failed(message)
            self._finish("failed", message)
        else:
            self._finish(result.state, result.error, result)

    def _mark_run_failed(self, message: str) -> None:
        """A crash after the run folder was written: say so in its summary instead of leaving it 'running'."""
        if self._run_id is None:
            return
        with contextlib.suppress(Exception):  # the folder may be gone; the job still reports the error
            resolve_run(self._run_id).update_summary(state="failed", error=message)

    def snapshot(self) -> JobSnapshot:
        with self._lock:
            e = self._last
            return JobSnapshot(
                id=self.id,
                config=asdict(self.cfg),
                state=self._state,
                run_id=self._run_id,
                epoch=e.epoch if e else 0,
                epochs=e.epochs if e else self.cfg.epochs,
                step=e.step if e else 0,
                total_steps=e.total_steps if e else 0,
                eta_s=e.eta_s if e and self._state == "running" else None,
                samples_per_s=e.samples_per_s if e else None,
                elapsed_s=(self._finished or time.time()) - self._started,
                history=tuple(self._history),
                error=self._error,
                test_acc=self._test[0],
                test_loss=self._test[1],
                started=self._started,
                finished=self._finished,
                stop_requested=self.stop_event.is_set(),
            )


def check_config(cfg: TrainConfig) -> None:
    """Refuse settings the engine would refuse, before a thread or a run folder exists."""
    cfg.validate()
    spec = get_spec(cfg.model)
    spec.check_fits(get_source(cfg.dataset).info)
    pick_device(cfg.device)


@dataclass
class JobManager:
    """Starts at most one training at a time; keeps the last `keep` jobs for display."""

    train_fn: TrainFn = train
    keep: int = 20
    _jobs: list[Job] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1

    def start(self, cfg: TrainConfig) -> JobSnapshot:
        """Launch `cfg` in a background thread; JobBusy while another job runs, ModelError/DatasetError for bad settings."""
        check_config(cfg)
        with self._lock:
            running = self._active_job()
            if running is not None:
                s = running.snapshot()
                raise JobBusy(
                    f"A training job is already running ({s.label}, {100 * s.progress:.0f}% done"
                    + (f", run {s.run_id}" if s.run_id else "")
                    + "). Wait for it to finish or stop it, then start again."
                )
            job = Job(self._next_id, cfg)
            self._next_id += 1
            self._jobs.append(job)
            del self._jobs[: -self.keep]
            job.thread = threading.Thread(
                target=job.run, args=(self.train_fn,), name=f"xaidash-train-{job.id}", daemon=True
            )
            job.thread.start()
            return job.snapshot()

    def _active_job(self) -> Job | None:
        for job in self._jobs:
            if job.snapshot().active:
                return job
        return None

    def busy(self) -> bool:
        with self._lock:
            return self._active_job() is not None

    def stop(self) -> bool:
        """Ask the running job to stop after its current step (it keeps its last checkpoint). False when none runs."""
        with self._lock:
            job = self._active_job()
        if job is None:
            return False
        job.stop_event.set()
        return True

    def current(self) -> JobSnapshot | None:
        """The most recent job (running or finished), or None."""
        with self._lock:
            return self._jobs[-1].snapshot() if self._jobs else None

    def jobs(self) -> list[JobSnapshot]:
        with self._lock:
            return [j.snapshot() for j in self._jobs]

    def wait(self, timeout: float | None = None) -> JobSnapshot | None:
        """Block until the most recent job's thread ends (or `timeout` seconds pass); its snapshot."""
        with self._lock:
            job = self._jobs[-1] if self._jobs else None
        if job is None:
            return None
        if job.thread is not None:
            job.thread.join(timeout)
        return job.snapshot()
