"""How the pages word a training job's progress: one line for the sidebar, the progress text, the end message;
and a run's state as its folder says it is (`folder_state`), which Train's job panel draws once the job has ended.

Shared so the sidebar, Home and Train say the same thing about the same job.
"""

from __future__ import annotations

from dataclasses import dataclass

from xaidash.dashboard import services
from xaidash.dashboard.jobs import JobSnapshot, QueueSnapshot
from xaidash.dashboard.run_facts import kept_sentence
from xaidash.data.formatting import duration_text, percent, r2_text
from xaidash.models.runs.progress import run_progress
from xaidash.models.runs.scores import final_score_text, run_target
from xaidash.models.runs.store import Run, resolve_run


def stop_training() -> None:
    """The Stop buttons' callback: the current run stops after its step, queued runs are cancelled."""
    services.job_manager().stop()  # False when it had already ended: nothing to do


def queue_prefix(job: JobSnapshot, queue_name: str = "") -> str:
    """'Quick start, run 2 of 3: ' for a job of a queue of several, else ''."""
    if job.queue_size <= 1:
        return ""
    return f"{queue_name or 'Queue'}, run {job.queue_position} of {job.queue_size}: "


def progress_text(job: JobSnapshot) -> str:
    """The progress bar's text while a job trains: where it is, how fast, how long to go."""
    if job.state == "starting":
        return f"{job.label}: loading the data set and building the model…"
    rate = f"{job.samples_per_s:,.0f} samples/s" if job.samples_per_s else "measuring speed"
    epochs = f"/{job.epochs}" if job.epochs else ""
    return (
        f"Epoch {max(job.epoch, 1)}{epochs} · step {job.step}/{job.total_steps} · {rate} · "
        f"ETA {duration_text(job.eta_s)} · {duration_text(job.elapsed_s)} elapsed"
    )


def queue_progress_text(queue: QueueSnapshot) -> str:
    """The queue's bar text: 'Run 2 of 3 · step 480 of 1,015 (47%) · about 1m 20s left · 1m 10s elapsed'
    (steps of every run, planned before the first trains; the time left as `QueueSnapshot.eta_s` estimates it)."""
    head = f"Run {queue.position} of {queue.size}"
    if not queue.total_steps:
        return f"{head} · counting the steps of the {queue.size} runs… · {duration_text(queue.elapsed_s)} elapsed"
    eta = queue.eta_s
    left = f"about {duration_text(eta)} left" if eta is not None else "time left: measuring the pace"
    return (
        f"{head} · step {queue.steps_done:,} of {queue.total_steps:,} ({100 * queue.progress:.0f}%) · {left} · "
        f"{duration_text(queue.elapsed_s)} elapsed"
    )


def job_line(job: JobSnapshot, queue_name: str = "") -> str:
    """One line on a job: state, progress, ETA (the sidebar's)."""
    prefix = queue_prefix(job, queue_name)
    if job.active:
        if job.state == "starting":
            return f"{prefix}starting {job.label} (loading data)…"
        stop = " · stopping…" if job.stop_requested else ""
        epochs = f"/{job.epochs}" if job.epochs else ""
        return (
            f"{prefix}training {job.label}: epoch {max(job.epoch, 1)}{epochs}, {100 * job.progress:.0f}%, "
            f"ETA {duration_text(job.eta_s)}{stop}"
        )
    if job.state == "failed":
        return f"{prefix}last job failed: {job.label}"
    acc = f", test acc {percent(job.test_acc)}" if job.test_acc is not None else ""
    if job.test_r2 is not None:  # a number to predict
        acc = f", test {r2_text(job.test_r2)}"
    return f"{prefix}last job {job.state}: {job.label}{acc}"


def kept_by(job: JobSnapshot) -> str:
    """What a stopped job's run holds, from its summary (the job's own view when the run cannot be read)."""
    if job.run_id is not None:
        try:
            return kept_sentence(resolve_run(job.run_id).summary())
        except Exception:  # noqa: BLE001 - the run may have been deleted meanwhile; fall back to the job's view
            pass
    return "nothing yet" if job.step == 0 else f"weights after step {job.step}"


def stopped_message(job: JobSnapshot) -> str:
    return f"Stopped after {duration_text(job.elapsed_s)}. Kept: {kept_by(job)}."


@dataclass(frozen=True)
class FolderState:
    """A run as its folder says it is now, whoever trains it (this server, the command line, another machine):
    summary.json checked against the run's lock."""

    state: str  # running | interrupted | stopped | completed | failed (| imported, ?)
    owner_pid: int | None  # the live process writing it, while one does
    epochs_done: int
    epochs: int | None  # planned
    partial_steps: int
    steps_per_epoch: int | None
    kept: str
    has_weights: bool
    test_acc: float | None
    train_seconds: float | None
    error: str | None
    advice: str  # an interrupted run's way on ('' otherwise)
    score: str = ""  # its test score in words: 'test accuracy 97.0%', or 'test R² 0.42 · RMSE 59.81 · MAE ...'

    @property
    def epochs_left(self) -> bool:
        return self.epochs is None or self.epochs_done < self.epochs

    @property
    def resumable(self) -> bool:
        """Stopped or interrupted with weights and epochs of its plan left: Resume finishes its plan."""
        return self.state in ("stopped", "interrupted") and self.has_weights and self.epochs_left

    @property
    def extendable(self) -> bool:
        """Holds weights and no process writes it: it can train more epochs from its last checkpoint."""
        return self.state in ("completed", "stopped", "interrupted") and self.has_weights

    def progress(self) -> str:
        """'epoch 3 of 6 done' or 'epoch 1 of 6 done, 21 of 43 steps of epoch 2'."""
        planned = f" of {self.epochs}" if self.epochs else ""
        text = f"{self.epochs_done}{planned} epochs done"
        if self.partial_steps:
            text += f", {self.partial_steps} of {self.steps_per_epoch or '?'} steps of epoch {self.epochs_done + 1}"
        return text


def folder_state(run: Run) -> FolderState:
    """The run's state from its folder (summary.json, its training state and its lock), never from what this page
    remembers: the run store's `run_progress`, with the summary's results beside it."""
    summary = run.summary()
    progress = run_progress(run)  # reads the lock and the training state once; the summary for results only
    return FolderState(
        state=progress.state,
        owner_pid=progress.owner_pid,
        epochs_done=progress.epochs_done,
        epochs=progress.epochs_planned,
        partial_steps=progress.partial_steps,
        steps_per_epoch=progress.steps_per_epoch,
        kept=kept_sentence(summary) if progress.state != "interrupted" else progress.kept,
        has_weights=progress.has_weights,
        test_acc=summary.get("test_acc"),
        train_seconds=summary.get("train_seconds"),
        error=summary.get("error"),
        advice=progress.advice,
        score=_score(run, summary),
    )


def _score(run: Run, summary: dict) -> str:
    """'test accuracy 97.0%' or, for a number to predict, R² and the errors in the target's units."""
    target = run_target(run.config())
    return f"test accuracy {percent(summary.get('test_acc'))}" if target is None else final_score_text(summary, target)
