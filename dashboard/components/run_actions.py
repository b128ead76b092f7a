"""What the Train page says about a run no job of this server is training, and the way on: Resume (finish its
planned epochs from its last checkpoint), "Train N more epochs" (its plan extended, from its last checkpoint), or
a restart for a run that kept nothing. Everything is read from the run's folder (`job_status.folder_state`), so a
run resumed from the command line shows as running there, and as finished once it is.

And what each of the page's actions did or why not (`Notice`, `flash`, `show_flash`): drawn beside the control that
acted, in the page run that follows the click, whether or not a job trains."""

from __future__ import annotations

from dataclasses import dataclass, fields

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.job_status import FolderState, stop_training
from xaidash.dashboard.errors import USER_ERRORS
from xaidash.dashboard.jobs import JobBusy
from xaidash.data.formatting import duration_text, percent, plural
from xaidash.models.runs.store import Run, runs_root
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.optimizer import lr_at

FLASH = "train_flash"
WATCHING = "train_watching"  # the job whose end this session still has to show (a full rerun)
STARTED = "train_started_job"  # the job this session started: its run is selected when it ends with weights
MORE_DEFAULT = 2
# Where the Train page draws an action's outcome: beside the control that acted, always outside the page's timed
# fragments (a fragment's next tick would wipe it within a second).
JOB, ACTIONS, DELETE, RUNS = "job", "run", "delete", "runs"


@dataclass(frozen=True)
class Notice:
    """What an action on the Train page did or why it was refused, drawn at `place` in the page run that follows
    the click, whether or not a job trains."""

    kind: str  # success | error
    message: str
    place: str  # JOB (the job panel's buttons), ACTIONS (the run's own), DELETE (under Delete run), RUNS (the table)
    offer_stop: bool = False  # the refusal asks to stop the running job: its Stop button goes beside it


def flash(kind: str, message: str, place: str, offer_stop: bool = False) -> None:
    st.session_state[FLASH] = Notice(kind, message, place, offer_stop)


def flash_waiting(place: str) -> bool:
    """A notice for `place` waits to be drawn. A click inside a fragment reruns the fragment alone, which never
    reaches the places outside it: the fragment then reruns the page (`st.rerun(scope="app")`)."""
    notice = st.session_state.get(FLASH)
    return isinstance(notice, Notice) and notice.place == place


def show_flash(place: str) -> None:
    """Draw (once) the notice for `place`, with the Stop button when it asks to stop the running job."""
    if not flash_waiting(place):
        return
    notice: Notice = st.session_state.pop(FLASH)
    if notice.kind == "success":
        st.success(notice.message, icon=":material/check_circle:")
    else:
        st.error(notice.message, icon=":material/error:")
    if notice.offer_stop and services.job_manager().busy():
        st.button(
            "Stop the job",
            key=f"train_notice_stop_{place}",
            on_click=stop_training,
            icon=":material/stop:",
            help="stop it after its current step, as the Stop button of the Training job panel does: the run keeps "
            "what it has trained so far",
        )


def drop_flash() -> None:
    """At the end of a whole page run: a notice whose place was not drawn (the run it was about is no longer
    shown) is stale; it must not turn up later beside another run."""
    st.session_state.pop(FLASH, None)


def run_config(run: Run, epochs: int | None = None) -> TrainConfig:
    """The run's own training settings (those this version knows), with `epochs` when given."""
    known = {f.name for f in fields(TrainConfig)}
    settings = {k: v for k, v in (run.config().get("train") or {}).items() if k in known}
    if epochs is not None:
        settings["epochs"] = epochs
    return TrainConfig(**settings)


def start_from_run(run_id: str, resume: bool, epochs: int | None, place: str) -> None:
    """Resume a run from its last checkpoint (to `epochs` in all when given, else to its plan), or train a new run
    with its settings; a refusal is said at `place` (another session's job may have started since the button was
    drawn: then its Stop button goes beside the message)."""
    try:
        cfg = run_config(Run(runs_root() / run_id), epochs if resume else None)
        job = services.job_manager().start(cfg, resume=run_id if resume else None)
    except USER_ERRORS as e:
        what = "resume" if resume else "restart"
        flash("error", f"Could not {what} {run_id}: {e}", place, offer_stop=isinstance(e, JobBusy))
        return
    st.session_state[WATCHING] = st.session_state[STARTED] = job.id


def state_message(state: FolderState) -> None:
    """One line on the run's state, as its folder has it."""
    if state.state == "running":
        who = f"process {state.owner_pid}" if state.owner_pid else "another process"
        st.info(f"Running elsewhere ({who}): {state.progress()}. This panel follows it.", icon=":material/autorenew:")
    elif state.state == "completed":
        # train_seconds is the last session's: a resumed or extended run's earlier sessions are not in it.
        took = (
            f" in {duration_text(state.train_seconds)} (its last training session)"
            if state.train_seconds is not None
            else ""
        )
        st.success(
            f"Finished{took}: {state.score or 'test accuracy ' + percent(state.test_acc)} ({state.progress()}).",
            icon=":material/check_circle:",
        )
    elif state.state == "stopped":
        st.warning(f"Stopped: {state.progress()}. Kept: {state.kept}.", icon=":material/stop_circle:")
    elif state.state == "interrupted":
        st.warning(f"Interrupted: {state.advice}", icon=":material/report:")
    elif state.state == "failed":
        st.error(f"Training failed: {state.error or 'no reason recorded'}", icon=":material/error:")


@st.cache_data(max_entries=64, show_spinner=False)
def schedule_note(
    run_id: str, config_stamp: str, done: int, partial: int, per_epoch: int, planned: int, to: int
) -> str:
    """What the learning rate does when run `run_id` goes on to `to` epochs (the schedule is planned over the
    epochs in all, and the run goes on at the step it reached: `training.session.restore_checkpoint`)."""
    settings = run_config(Run(runs_root() / run_id), to).settings()
    step = done * per_epoch + partial
    if settings.schedule == "constant":
        return f"The learning rate stays at {settings.lr:.2g} (constant schedule)."
    now = lr_at(settings, per_epoch * to, step)
    if to == planned:
        return f"Its {settings.schedule} schedule goes on where it was (learning rate {now:.2g})."
    was = lr_at(settings, per_epoch * planned, step)
    return (
        f"Its {settings.schedule} schedule is planned again over {to} epochs and goes on at step {step:,} of "
        f"{per_epoch * to:,}, where the learning rate is {now:.2g} ({was:.2g} on its plan of {planned} epochs); "
        "it then follows the longer schedule to its end."
    )


def _note(run: Run, state: FolderState, to: int) -> str:
    if not state.steps_per_epoch or not state.epochs:
        return ""
    stamp = str(run.file("config.json").stat().st_mtime_ns) if run.file("config.json").exists() else ""
    return schedule_note(run.id, stamp, state.epochs_done, state.partial_steps, state.steps_per_epoch, state.epochs, to)


def run_actions(run: Run, state: FolderState, key: str) -> None:
    """Resume and "Train N more epochs" for a run no process trains (stopped, finished, interrupted with a
    checkpoint); "Restart with its settings" for one interrupted before its first checkpoint. `key` (JOB or
    ACTIONS) is also where their refusals are drawn (`show_flash`)."""
    busy = services.job_manager().busy()
    wait = " (a job is training now: wait for it or stop it)" if busy else ""
    if state.state == "interrupted" and not state.has_weights:
        st.button(
            "Restart with its settings",
            key=f"{key}_restart_{run.id}",
            on_click=start_from_run,
            args=(run.id, False, None, key),
            disabled=busy,
            icon=":material/replay:",
            help="train a new run with the same settings (delete this one below)" + wait,
        )
        return
    if not state.extendable:
        return
    c1, c2, c3 = st.columns([2, 2, 3], vertical_alignment="bottom")
    if state.resumable:
        c1.button(
            "Resume",
            key=f"{key}_resume_{run.id}",
            on_click=start_from_run,
            args=(run.id, True, state.epochs, key),
            disabled=busy,
            type="primary",
            icon=":material/play_arrow:",
            help=f"continue from its last checkpoint to its {plural(state.epochs or 0, 'planned epoch')}" + wait,
        )
    more = int(c2.number_input("More epochs", 1, 1000, MORE_DEFAULT, step=1, key=f"{key}_more_{run.id}"))
    to = max(state.epochs or 0, state.epochs_done) + more
    c3.button(
        f"Train {plural(more, 'more epoch')}",
        key=f"{key}_extend_{run.id}",
        on_click=start_from_run,
        args=(run.id, True, to, key),
        disabled=busy,
        type="secondary" if state.resumable else "primary",
        icon=":material/fast_forward:",
        help=f"continue from its last checkpoint to {to} epochs in all, with its own settings" + wait,
    )
    resume = f"Resume trains to its {state.epochs} epochs. " if state.resumable else ""
    st.caption(
        f"{resume}{plural(more, 'more epoch')}: from its last checkpoint to {to} in all. {_note(run, state, to)}"
    )
