"""Train: settings from the model's recipe, a background job with live curves and a Stop button that says
what the run kept, the runs table (a click selects a run) and a comparison of runs."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.calibration_view import calibration_section
from xaidash.dashboard.components.charts import (
    CONFUSION_HEATMAP_MAX,
    confusion_chart,
    confusion_image,
    per_class_table,
    top_confusions,
    top_confusions_chart,
)
from xaidash.dashboard.components.compare_runs import compare_runs_section
from xaidash.dashboard.components.curves import curve_controls, show_curves
from xaidash.dashboard.components.job_status import (
    progress_text,
    queue_prefix,
    stop_training,
    stopped_message,
)
from xaidash.dashboard.components.quality import show_run_warning
from xaidash.dashboard.components.runs_table import runs_table
from xaidash.dashboard.components.train_form import choose_dataset, choose_model, restore_fields, settings_form
from xaidash.dashboard.errors import USER_ERRORS, guard, show_error
from xaidash.dashboard.jobs import JobSnapshot
from xaidash.dashboard.run_facts import epochs_text, has_weights, settings_rows
from xaidash.dashboard.state import RUN_KEY, select_run
from xaidash.data.formatting import duration_text, percent
from xaidash.models.runs.store import Run, delete_run, list_runs, run_liveness, runs_root
from xaidash.models.training.config import TrainConfig

manager = services.job_manager()
FLASH = "train_flash"
WATCHING = "train_watching"  # the job whose end this session still has to show (a full rerun)
STARTED = "train_started_job"  # the job this session started: its run is selected when it completes


def flash(kind: str, message: str) -> None:
    st.session_state[FLASH] = (kind, message)


def show_flash() -> None:
    kind, message = st.session_state.pop(FLASH, (None, None))
    if kind == "success":
        st.success(message, icon=":material/check_circle:")
    elif kind == "error":
        st.error(message, icon=":material/error:")


st.title("Train")

# ---- settings ---------------------------------------------------------------------------------
restore_fields()
c1, c2 = st.columns(2)
with c1:
    info = choose_dataset()
with c2:
    spec = choose_model(info)
if spec is not None:
    cfg = settings_form(info, spec)
    if cfg is not None:
        try:
            job = manager.start(cfg)
        except USER_ERRORS as e:
            show_error(e, "Training not started")
        else:
            st.session_state[WATCHING] = st.session_state[STARTED] = job.id
            st.rerun()  # redraw the sidebar (drawn before this page) and start the live panel's timer


# ---- live job ---------------------------------------------------------------------------------
def job_run(job: JobSnapshot) -> Run | None:
    if job.run_id is None:
        return None
    return next((r for r in list_runs() if r.id == job.run_id), None)


def job_panel() -> None:
    job = manager.current()
    if job is None:
        st.caption("No training job in this server session yet.")
        return
    if job.active:
        st.session_state[WATCHING] = job.id
    elif st.session_state.get(WATCHING) is not None:
        # The job just ended: rerun the whole page once so the runs table and the sidebar show the new run,
        # selected when this session started it and it completed.
        st.session_state[WATCHING] = None
        if st.session_state.get(STARTED) == job.id and job.state == "completed" and job.run_id:
            select_run(job.run_id)
        st.rerun(scope="app")
    queue = manager.find_queue(job.queue_id) if job.queue_size > 1 else None
    epochs = f"{job.epochs} epochs" if job.epochs else "epochs from its recipe"
    batch = job.config.get("batch_size")
    st.markdown(
        queue_prefix(job, queue.name if queue is not None else "")
        + f"**{job.label}** · {epochs}"
        + (f" · batch {batch}" if batch else "")
        + (f" · run `{job.run_id}`" if job.run_id else "")
    )
    if job.active:
        st.progress(job.progress, text=progress_text(job))
        st.button(
            "Stop",
            icon=":material/stop:",
            key="train_stop",
            on_click=stop_training,
            disabled=job.stop_requested,
            help="stop after the current step: the run keeps what it has trained so far"
            + ("; the runs still queued are cancelled" if queue is not None else ""),
        )
        if job.stop_requested:
            st.caption("Stopping after the current step…")
    elif job.state == "completed":
        st.success(
            f"Finished in {duration_text(job.elapsed_s)}: test accuracy {percent(job.test_acc)}.",
            icon=":material/check_circle:",
        )
    elif job.state == "stopped":
        st.warning(stopped_message(job), icon=":material/stop_circle:")
    else:
        st.error(f"Training failed: {job.error}", icon=":material/error:")
    if not job.active:
        job_curves()
    run = job_run(job) if not job.active else None
    if run is not None and st.session_state.get(RUN_KEY) != run.id and has_weights(run):
        st.button(
            "Use this run",
            key=f"job_use_{run.id}",
            on_click=select_run,
            args=(run.id,),
            type="primary",
            icon=":material/check:",
            help="select it for every page (its results are under Runs below)",
        )


def run_results(run: Run) -> None:
    """Test metrics and confusion matrix of a finished run."""
    c, s = run.config(), run.summary()
    show_run_warning(run)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Test accuracy", percent(s.get("test_acc")))
    m2.metric("Test loss", f"{s['test_loss']:.4f}" if s.get("test_loss") is not None else "–")
    m3.metric("Validation accuracy", percent(s.get("val_acc")))
    m4.metric("Epochs", epochs_text(c, s), help="complete epochs / planned (+ steps of a partial epoch)")
    matrix = run.confusion(s)
    if matrix is not None:
        confusion_view(run.id, matrix, run.info.classes)
    calibration_section(run)


def confusion_view(run_id: str, matrix: np.ndarray, classes: tuple[str, ...] | list[str]) -> None:
    """A few classes: the heatmap with counts. Many: the top confusions, a searchable per-class table, and the whole
    matrix as an image on request (a 1,000-class heatmap cannot be read, nor drawn in seconds)."""
    if len(matrix) <= CONFUSION_HEATMAP_MAX:
        st.altair_chart(confusion_chart(matrix, classes), width="content")
        return
    st.markdown(f"**Confusion matrix (test split)**: {len(matrix):,} classes")
    top = top_confusions(matrix, classes, k=20)
    if len(top):
        st.altair_chart(top_confusions_chart(top), width="stretch")
    else:
        st.caption("No confusions: every test sample was classified correctly.")
    query = st.text_input("Find a class", key=f"confusion_find_{run_id}", placeholder="class name contains…")
    table = per_class_table(matrix, classes)
    if query:
        table = table[table["class"].str.contains(query, case=False, regex=False)]
    st.dataframe(
        table.sort_values("recall"),
        hide_index=True,
        width="stretch",
        height=280,
        column_config={
            "recall": st.column_config.NumberColumn("recall", format="%.1f%%"),
            "precision": st.column_config.NumberColumn("precision", format="%.1f%%"),
        },
    )
    if st.toggle("Show the full matrix", key=f"confusion_full_{run_id}", help="one pixel per cell, as an image"):
        st.image(confusion_image(matrix), width="content")
        st.caption("Rows: true class; columns: predicted; darker = a larger share of the true class, in class order.")


def job_curves() -> None:
    job = manager.current()
    if job is not None:
        show_curves({job.label: job.history}, curve_controls("job_curves"))


st.subheader("Training job")
# While a job trains: its progress line every second, its curves every few (redrawing charts costs the
# browser and the server CPU time that a small machine's trainer needs).
st.fragment(job_panel, run_every=1.0 if manager.busy() else None)()
if manager.busy():
    st.fragment(job_curves, run_every=4.0)()


# ---- runs ---------------------------------------------------------------------------------------
def delete_callback(run_id: str) -> None:
    job = manager.current()
    if job is not None and job.active and job.run_id == run_id:
        flash("error", f"Run {run_id} is being trained right now: stop the job first, then delete it.")
        return
    try:
        delete_run(run_id)
    except Exception as e:  # noqa: BLE001 - shown as a message after the rerun
        flash("error", f"Could not delete {run_id}: {e}")
        return
    if st.session_state.get(RUN_KEY) == run_id:
        select_run(None)
    st.session_state.pop("train_confirm_delete", None)
    flash("success", f"Deleted run {run_id}.")


def start_from_run(run_id: str, resume: bool) -> None:
    """Resume an interrupted run from its last checkpoint, or train a new run with its settings."""
    try:
        config = Run(runs_root() / run_id).config()
        known = {f.name for f in fields(TrainConfig)}
        settings = {k: v for k, v in (config.get("train") or {}).items() if k in known}
        job = manager.start(TrainConfig(**settings), resume=run_id if resume else None)
    except USER_ERRORS as e:
        flash("error", f"Could not {'resume' if resume else 'restart'} {run_id}: {e}")
        return
    st.session_state[WATCHING] = st.session_state[STARTED] = job.id


def interrupted_actions(run: Run, advice: str, resumable: bool) -> None:
    """An interrupted run: what it has, and the way on (resume from its checkpoint, or restart / delete)."""
    st.warning(f"Interrupted: {advice}", icon=":material/report:")
    busy = manager.busy()
    label, key, icon, why = (
        ("Resume", "resume", ":material/play_arrow:", "continue from its last checkpoint with its own settings")
        if resumable
        else ("Restart with its settings", "restart", ":material/replay:", "train a new run with the same settings")
    )
    st.button(
        label,
        key=f"train_{key}_{run.id}",
        on_click=start_from_run,
        args=(run.id, resumable),
        disabled=busy,
        icon=icon,
        type="primary" if resumable else "secondary",
        help=why + ("" if resumable else " (delete this one below)") + (" (a job is training now)" if busy else ""),
    )


def run_details(run: Run) -> None:
    """The focused run: its settings as a table, its curves, its results, and deleting it."""
    s = run.summary()
    if s.get("error"):
        st.error(s["error"])
    live = run_liveness(run, s)
    if live.interrupted:
        interrupted_actions(run, live.advice, live.resumable)
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**Settings of `{run.id}`**")
        table = pd.DataFrame(settings_rows(run), columns=["setting", "value"])
        st.dataframe(table, hide_index=True, width="stretch", height=35 * (len(table) + 1) + 3)
        d1, d2 = st.columns([3, 2], vertical_alignment="bottom")
        confirm = d1.checkbox("Yes, delete this run", key="train_confirm_delete", help=f"delete {run.id} and its files")
        d2.button(
            "Delete run",
            key="train_delete",
            on_click=delete_callback,
            args=(run.id,),
            disabled=not confirm,
            icon=":material/delete:",
        )
    with right:
        if live.state in ("completed", "stopped") or (live.interrupted and s.get("val_acc") is not None):
            run_results(run)
    show_curves({run.id: run.metrics()}, curve_controls("run_curves"), empty_note="This run logged no curves.")


def runs_panel() -> None:
    show_flash()
    with guard("Listing runs"):
        job = manager.current()
        run = runs_table("train_runs_table", job)
        if run is None and not list_runs():
            st.info(f"No runs yet under `{runs_root()}`: start one above, or press the quick start on Home.")
            return
        st.caption("Click a row to select that run for every page.")
        if run is not None:
            run_details(run)


def runs_table_panel() -> None:
    """While a job trains: the runs table alone, redrawn every few seconds (the job's row shows its progress)."""
    with guard("Listing runs"):
        runs_table("train_runs_table", manager.current())
        st.caption("Click a row to select that run for every page.")


runs_tab, compare_tab = st.tabs(["Runs", "Compare runs"], key="train_tabs")
with runs_tab:
    if manager.busy():
        # The focused run's details (settings, charts) stay out of the timer, drawn once per page run (a click
        # on a row reruns the page): redrawing them every few seconds cost the trainer CPU on a small machine.
        st.fragment(runs_table_panel, run_every=5.0)()
        focused = next((r for r in list_runs() if r.id == st.session_state.get(RUN_KEY)), None)
        if focused is not None:
            with guard("Showing the run"):
                run_details(focused)
    else:
        runs_panel()
with compare_tab, guard("Comparing runs"):
    compare_runs_section()
