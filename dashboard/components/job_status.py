"""How the pages word a training job's progress: one line for the sidebar, the progress text, the end message.

Shared so the sidebar, Home and Train say the same thing about the same job.
"""

from __future__ import annotations

from xaidash.dashboard import services
from xaidash.dashboard.jobs import JobSnapshot, QueueSnapshot
from xaidash.dashboard.run_facts import kept_sentence
from xaidash.data.formatting import duration_text, percent
from xaidash.models.runs.store import resolve_run


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
