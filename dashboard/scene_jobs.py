"""The Train page's detection and segmentation job: one scene model trains at a time in a thread of the server,
shared by every session, as the SAE job (`sae_jobs`) runs. The page redraws its progress and curves from
`snapshot()`; Stop sets the event `train_scene_model` checks each step (a stopped run keeps a resumable checkpoint,
and Resume continues it to its planned epochs). Plain threading, no Streamlit: a worker thread cannot write a
session's state."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import streamlit as st

from xaidash.dashboard.background import BackgroundJob, JobClock
from xaidash.data.errors import XaidashError, error_text
from xaidash.models.runs.store import Run
from xaidash.models.scenes.train import SceneEvent, SceneTrainSettings, train_scene_model

MAX_CURVE_POINTS = 600  # training steps kept for the live loss curve (thinned evenly beyond this)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SceneJob(JobClock):
    """The job as pages see it. state: idle | starting | running | stopping | finished | stopped | failed.
    `label`: model on data set; `steps`: {step, epoch, loss} per training step kept for the curve; `evals`: the
    validation metrics after each epoch ({epoch, step, map, map_50, ...} or {epoch, step, miou, ...})."""

    label: str
    settings: SceneTrainSettings | None
    state: str
    started: float | None
    finished: float | None
    run_id: str | None = None
    resumed: bool = False
    last: SceneEvent | None = None
    first_step: tuple[int, float] | None = None  # (step, elapsed) of this job's first step: the pace counts from it
    steps: tuple[dict[str, float], ...] = field(default=())
    evals: tuple[dict[str, float], ...] = field(default=())
    error: str | None = None

    @property
    def progress(self) -> float:
        """The share of the run's planned steps done (0 before the first)."""
        return min(1.0, self.last.progress) if self.last is not None else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace of this job's steps so far, validations included (None until it has a pace)."""
        e, first = self.last, self.first_step
        if e is None or first is None or e.step <= first[0]:
            return None
        pace = (e.elapsed - first[1]) / (e.step - first[0])
        return max(0.0, (e.total_steps - e.step) * pace)


def _thinned(steps: tuple[dict[str, float], ...]) -> tuple[dict[str, float], ...]:
    """Every other step once the curve holds MAX_CURVE_POINTS (the newest always kept)."""
    if len(steps) <= MAX_CURVE_POINTS:
        return steps
    return (*steps[:-1:2], steps[-1])


def _numbers(values: Any) -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    return {str(k): float(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def event_record(event: SceneEvent) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """(a training step's point for the loss curve, an epoch's validation metrics), either None."""
    step, epoch = float(event.step), float(event.epoch)
    if event.phase == "step" and event.loss is not None:
        return {"step": step, "epoch": epoch, "loss": float(event.loss)}, None
    if event.phase == "epoch" and event.metrics:
        return None, {"step": step, "epoch": epoch, **_numbers(event.metrics)}
    return None, None


def settings_label(settings: SceneTrainSettings) -> str:
    return f"{settings.model} on {settings.dataset}"


class BackgroundScene(BackgroundJob[SceneJob]):
    """`train_scene_model` for one run at a time; another start while it works is refused."""

    def __init__(self) -> None:
        super().__init__(SceneJob("", None, "idle", None, None), "xaidash-scenes")

    def start(self, settings: SceneTrainSettings, resume: Run | None = None, root: Path | None = None) -> bool:
        """Train `settings` (or continue the stopped or interrupted run `resume`); False when a job runs."""
        first = SceneJob(
            settings_label(settings),
            settings,
            "starting",
            time.time(),
            None,
            run_id=resume.id if resume is not None else None,
            resumed=resume is not None,
        )
        return self.launch(first, self._work, settings, resume, root)

    def _on_event(self, event: SceneEvent) -> None:
        point, metrics = event_record(event)

        def update(s: SceneJob) -> SceneJob:
            first = s.first_step or ((event.step, event.elapsed) if event.phase == "step" else None)
            return replace(
                s,
                last=event,
                first_step=first,
                steps=_thinned((*s.steps, point)) if point is not None else s.steps,
                evals=(*s.evals, metrics) if metrics is not None else s.evals,
                run_id=event.run_id or s.run_id,
                state=s.state if s.state == "stopping" else "running",
            )

        self.change(update)

    def _work(self, stop: threading.Event, settings: SceneTrainSettings, resume: Run | None, root: Path | None) -> None:
        run, error = None, None
        try:
            run = train_scene_model(
                settings, root=root, on_event=self._on_event, should_stop=stop.is_set, resume=resume
            )
        except Exception as e:  # noqa: BLE001 - the thread must end in a state the page can show
            if not isinstance(e, XaidashError):
                log.error("Scene training %s crashed:\n%s", settings_label(settings), traceback.format_exc())
            error = error_text(e, "the training")
        status = str(run.summary().get("state")) if run is not None else "failed"
        updates: dict[str, Any] = {
            "state": "failed" if error else ("finished" if status == "completed" else "stopped"),
            "finished": time.time(),
            "error": error,
        }
        if run is not None:
            updates["run_id"] = run.id
        self.change(lambda s: replace(s, **updates))


@st.cache_resource(show_spinner=False)
def scene_job() -> BackgroundScene:
    """The server's one scene training job."""
    return BackgroundScene()


def live_state(run_id: str) -> str | None:
    """The runs table's state cell of `run_id` while this server's scene job trains it ('running · 45%'), else
    None."""
    job = scene_job().snapshot()
    if not job.active or job.run_id != run_id:
        return None
    return f"running · {100 * job.progress:.0f}%" + (" · stopping" if job.state == "stopping" else "")
