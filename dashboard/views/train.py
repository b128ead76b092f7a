"""Train: settings from the model's recipe, a background job with live curves and a Stop button, the job's run as its
folder says it is once the job has ended (with Resume and "Train N more epochs"), the runs table (a click selects a
run) and a comparison of runs. A second tab trains a detector or a segmenter on scenes (`scene_job_panel`)."""

from __future__ import annotations

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
    FolderState,
    folder_state,
    progress_text,
    queue_prefix,
    stop_training,
    stopped_message,
)
from xaidash.dashboard.components.quality import show_run_warning
from xaidash.dashboard.components.run_actions import (
    ACTIONS,
    DELETE,
    JOB,
    RUNS,
    STARTED,
    WATCHING,
    drop_flash,
    flash,
    flash_waiting,
    run_actions,
    show_flash,
    state_message,
)
from xaidash.dashboard.components.runs_table import focus_of, runs_table
from xaidash.dashboard.components.scene_job_panel import scene_run_details, scene_section
from xaidash.dashboard.components.scene_run_choice import scene_picked_last
from xaidash.dashboard.components.train_form import choose_dataset, choose_model, restore_fields, settings_form
from xaidash.dashboard.errors import USER_ERRORS, guard, show_error
from xaidash.dashboard.jobs import JobSnapshot
from xaidash.dashboard.run_facts import has_weights, planned_epochs, run_kind, settings_rows
from xaidash.dashboard.scene_jobs import scene_job
from xaidash.dashboard.state import RUN_KEY, select_run
from xaidash.data.formatting import MISSING, percent, r2_text
from xaidash.data.registry import RegressionTarget
from xaidash.models.runs.lock import RunLocked
from xaidash.models.runs.scores import run_target
from xaidash.models.runs.store import Run, delete_run, list_runs, runs_root

manager = services.job_manager()
FOLLOWING = "train_following"  # the run this session's job panel shows running elsewhere: a full rerun at its end
PANEL_TIMER = "train_panel_timer"  # the job panel's redraw interval as this page run set it (None: no timer)
DETAILS = "train_details_of"  # while a job trains: the run whose details this page run drew ('' none, None not yet)


st.title("Train")

# ---- settings ---------------------------------------------------------------------------------
# The scene tab runs only while it is open (its widgets would otherwise sit hidden beside the classifier's).
classifier_tab, scenes_tab = st.tabs(
    ["Classifier", "Detection and segmentation"],
    default="Detection and segmentation" if scene_picked_last() else None,  # e.g. a `?run=` link to a scene run
    key="train_task_tab",
    on_change="rerun",
)
with classifier_tab:
    restore_fields()
    c1, c2 = st.columns(2)
    with c1:
        info = choose_dataset()
    with c2:
        spec = choose_model(info) if info is not None else None
    if info is not None and spec is not None:
        cfg = settings_form(info, spec)
        if cfg is not None:
            try:
                job = manager.start(cfg)
            except USER_ERRORS as e:
                show_error(e, "Training not started")
            else:
                st.session_state[WATCHING] = st.session_state[STARTED] = job.id
                st.rerun()  # redraw the sidebar (drawn before this page) and start the live panel's timer
if scenes_tab.open:
    with scenes_tab, guard("Detection and segmentation"):
        scene_section()


# ---- live job ---------------------------------------------------------------------------------
def job_run(job: JobSnapshot) -> Run | None:
    if job.run_id is None:
        return None
    return next((r for r in list_runs() if r.id == job.run_id), None)


def ended_run_state(job: JobSnapshot) -> tuple[Run, FolderState] | None:
    """The ended job's run and its state as the folder has it now (None before it had a folder, or when the
    folder is gone or unreadable: the job's own record is all there is)."""
    run = job_run(job)
    if run is None:
        return None
    try:
        return run, folder_state(run)
    except USER_ERRORS:
        return None


def job_panel() -> None:
    if flash_waiting(JOB):  # a click in this panel said something: drawn above it, outside this fragment
        st.rerun(scope="app")
    job = manager.current()
    if job is None:
        st.caption("No training job in this server session yet.")
        return
    if job.active:
        st.session_state[WATCHING] = job.id
        if st.session_state.get(PANEL_TIMER) != 1.0:
            # Started from inside this panel (Resume, more epochs: a click in a fragment reruns the fragment alone),
            # so the page ran without the timers that follow a job: run it whole once to set them.
            st.rerun(scope="app")
    elif st.session_state.get(WATCHING) is not None:
        # The job just ended: rerun the whole page once so the runs table and the sidebar show the new run,
        # selected when this session started it and it kept weights (its details below hold its curves).
        st.session_state[WATCHING] = None
        if st.session_state.get(STARTED) == job.id and job.state in ("completed", "stopped") and job.run_id:
            select_run(job.run_id)
        st.rerun(scope="app")
    queue = manager.find_queue(job.queue_id) if job.queue_size > 1 else None
    ended = None if job.active else ended_run_state(job)
    planned = ended[1].epochs if ended is not None else job.epochs
    epochs = f"{planned} epochs" if planned else "epochs from its recipe"
    batch = job.config.get("batch_size")
    st.markdown(
        queue_prefix(job, queue.name if queue is not None else "")
        + f"**{job.label}** · {epochs}"
        + (f" · batch {batch}" if batch else "")
        + (f" · run `{job.run_id}`" if job.run_id else "")
    )
    if job.active:
        live_job(job, queue is not None)
    elif ended is not None:
        ended_job(*ended)
    elif job.state == "stopped":
        st.warning(stopped_message(job), icon=":material/stop_circle:")
    elif job.state == "completed":  # finished, but its run folder cannot be read now (deleted, or another runs root)
        st.info(f"Finished; its run folder `{job.run_id}` is no longer in the runs folder.", icon=":material/info:")
    else:
        st.error(f"Training failed: {job.error or 'no reason recorded'}", icon=":material/error:")


def live_job(job: JobSnapshot, queued: bool) -> None:
    """The job this server trains: its progress and the Stop button (its curves: `job_curves`, on their timer)."""
    st.progress(job.progress, text=progress_text(job))
    st.button(
        "Stop",
        icon=":material/stop:",
        key="train_stop",
        on_click=stop_training,
        disabled=job.stop_requested,
        help="stop after the current step: the run keeps what it has trained so far"
        + ("; the runs still queued are cancelled" if queued else ""),
    )
    if job.stop_requested:
        st.caption("Stopping after the current step…")


def ended_job(run: Run, state: FolderState) -> None:
    """The ended job's run from its folder: running elsewhere (the command line resumed it), interrupted, stopped,
    finished; the way on; its curves unless its details below show them."""
    following = st.session_state.get(FOLLOWING)
    if state.state == "running" and following != run.id:
        st.session_state[FOLLOWING] = run.id
        st.rerun(scope="app")  # the panel's timer is set per page run: it follows the run from now on
    elif (
        state.state != "running" and following == run.id
    ):  # what ran elsewhere has ended: the runs table and the sidebar must say so too
        st.session_state.pop(FOLLOWING, None)
        st.rerun(scope="app")
    state_message(state)
    run_actions(run, state, key=JOB)
    if focus_of({r.id: r for r in list_runs()}) != run.id:  # else the Runs section below draws them, once
        show_curves({run.id: run.metrics()}, curve_controls("job_curves"), empty_note="This run logged no curves.")
    if st.session_state.get(RUN_KEY) != run.id and has_weights(run) and state.state != "running":
        st.button(
            "Use this run",
            key=f"job_use_{run.id}",
            on_click=use_run,
            args=(run.id,),
            type="primary",
            icon=":material/check:",
            help="select it for every page (its results are under Runs below)",
        )


def use_run(run_id: str) -> None:
    """The "Use this run" button: select it, and say so above the panel (the page reruns: the sidebar shows it too)."""
    select_run(run_id)
    flash("success", f"Run {run_id} is selected for every page.", JOB)


def run_results(run: Run) -> None:
    """Test metrics and confusion matrix of a finished run."""
    c, s = run.config(), run.summary()
    show_run_warning(run)
    target = run_target(c)
    done, planned, partial = int(s.get("epochs_done") or 0), planned_epochs(c, s), int(s.get("partial_steps") or 0)
    if target is not None:
        regression_results(s, target, f"{done}/{planned}" if planned else str(done))
    else:
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("Test accuracy", percent(s.get("test_acc")))
        m2.metric("Test loss", f"{s['test_loss']:.4f}" if s.get("test_loss") is not None else "–")
        m3.metric("Validation accuracy", percent(s.get("val_acc")))
        # The steps of a stopped epoch go in a line below: in a quarter of the column "1/6 (+21/43 steps)" was cut.
        m4.metric("Epochs", f"{done}/{planned}" if planned else str(done), help="complete epochs / planned")
    if partial:
        st.caption(
            f"Plus {partial} of {s.get('steps_per_epoch', '?')} steps of epoch {done + 1}: the weights are from the "
            "stop inside it."
        )
    matrix = run.confusion(s)
    if matrix is not None:
        confusion_view(run.id, matrix, run.info.classes)
    calibration_section(run)


def regression_results(s: dict, target: RegressionTarget, epochs: str) -> None:
    """A number to predict: R² on the test rows and the validation share, and the test errors in its units (no
    accuracy, no confusion matrix: it has no classes)."""
    m1, m2, m3, m4, m5 = st.columns(5)
    m1.metric("Test R²", r2_text(s.get("test_r2")).removeprefix("R² "), help="1: perfect; 0: predicting the mean")
    unit = f" ({target.unit})" if target.unit else ""
    for place, name, key in ((m2, "RMSE", "test_rmse"), (m3, "MAE", "test_mae")):
        value = s.get(key)
        place.metric(
            f"Test {name}{unit}",
            MISSING if value is None else f"{value:.4g}",
            help=f"{'root mean squared' if name == 'RMSE' else 'mean absolute'} error of the predicted "
            f"{target.name} on the test rows, in its units",
        )
    m4.metric("Validation R²", r2_text(s.get("val_r2")).removeprefix("R² "))
    m5.metric("Epochs", epochs, help="complete epochs / planned")
    st.caption(
        f"This model predicts a number ({target.name}, {target.value_text(target.low)} to "
        f"{target.value_text(target.high)} in training): no accuracy or confusion matrix; its errors are in the "
        "target's units."
    )


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


# The classifiers' job panel; left out under the scene tab while this server has no classifier job (its "no job
# yet" read as if the scene model training above were not a job).
if not scenes_tab.open or manager.current() is not None:
    st.subheader("Training job")
    show_flash(JOB)
    # While a job trains: its progress line every second, its curves every few (redrawing charts costs the
    # browser and the server CPU time that a small machine's trainer needs).
    # A run of this panel's job that another process trains (the command line resumed it): every few seconds.
    st.session_state[PANEL_TIMER] = 1.0 if manager.busy() else 3.0 if st.session_state.get(FOLLOWING) else None
    st.fragment(job_panel, run_every=st.session_state[PANEL_TIMER])()
    if manager.busy():
        st.fragment(job_curves, run_every=4.0)()


# ---- runs ---------------------------------------------------------------------------------------
def delete_callback(run_id: str) -> None:
    """Delete the run, or say why not under the button (the run is kept), in the page run that follows."""
    job = manager.current()
    scenes = scene_job().snapshot()
    if (job is not None and job.active and job.run_id == run_id) or (scenes.active and scenes.run_id == run_id):
        flash(
            "error",
            f"Run {run_id} is being trained right now: stop the job first, then delete it (stopping keeps what it "
            "has trained so far).",
            DELETE,
            offer_stop=True,
        )
        return
    try:
        delete_run(run_id)
    except RunLocked as e:  # another process trains it: the message names it and says what to do
        flash("error", str(e), DELETE)
        return
    except Exception as e:  # noqa: BLE001 - shown as a message after the rerun
        flash("error", f"Could not delete {run_id}: {e}", DELETE)
        return
    if st.session_state.get(RUN_KEY) == run_id:
        select_run(None)
    st.session_state.pop("train_confirm_delete", None)
    flash("success", f"Deleted run {run_id}.", RUNS)


def in_job_panel(run: Run) -> JobSnapshot | None:
    """This server's job of `run` (the job panel above shows it, live or ended), if it is the current one."""
    job = manager.current()
    return job if job is not None and job.run_id == run.id else None


def run_details(run: Run) -> None:
    """The focused run: its state and way on (unless the job panel above shows them), its settings as a table, its
    results, its curves (unless the job panel draws them live), and deleting it."""
    if run_kind(run) == "scene_model":  # a detector or segmenter: its scores, settings, curves and Resume
        scene_run_details(run)
        delete_controls(run)
        return
    s = run.summary()
    state = folder_state(run)
    job = in_job_panel(run)
    if job is None:
        if state.state in ("interrupted", "running"):
            state_message(state)
        elif s.get("error"):
            st.error(s["error"])
        run_actions(run, state, key=ACTIONS)
    show_flash(ACTIONS)
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**Settings of `{run.id}`**")
        # A static table: its cells wrap (a data grid cut "weights after 21 of 43 steps o…" at 1440 px).
        table = pd.DataFrame(settings_rows(run), columns=["setting", "value"])
        st.table(table, hide_index=True)
        delete_controls(run)
    with right:
        measured = s.get("val_acc") is not None or s.get("val_r2") is not None
        if state.state in ("completed", "stopped") or (state.state == "interrupted" and measured):
            run_results(run)
    if job is not None and job.active:
        st.caption("Its curves are drawn live in the Training job panel above.")
    else:
        show_curves({run.id: run.metrics()}, curve_controls("run_curves"), empty_note="This run logged no curves.")


def delete_controls(run: Run) -> None:
    """Confirm, then Delete run (refused, with the reason under the button, while it trains)."""
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
    show_flash(DELETE)


def runs_panel() -> None:
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
    drawn = st.session_state.get(DETAILS)
    if drawn is not None and drawn != (focus_of({r.id: r for r in list_runs()}) or ""):
        # A click here (on a run still without weights: it stays pending, no rerun) changed the focus: the
        # details below are drawn outside this fragment.
        st.rerun(scope="app")


runs_tab, compare_tab = st.tabs(["Runs", "Compare runs"], key="train_tabs")
with runs_tab:
    show_flash(RUNS)
    if manager.busy() or scene_job().snapshot().active:  # either job's run row shows its progress on the timer
        st.session_state[DETAILS] = None  # not drawn yet in this page run: the table's fragment must not compare
        # The focused run's details (settings, charts) stay out of the timer, drawn once per page run (a click
        # on a row reruns the page): redrawing them every few seconds cost the trainer CPU on a small machine.
        st.fragment(runs_table_panel, run_every=5.0)()
        # The run the table focuses, as when no job trains: a clicked run without weights yet (the one training)
        # included, so its details, and Delete run, show.
        listed = {r.id: r for r in list_runs()}
        focused = listed.get(focus_of(listed) or "")
        st.session_state[DETAILS] = focused.id if focused is not None else ""
        if focused is not None:
            with guard("Showing the run"):
                run_details(focused)
    else:
        runs_panel()
with compare_tab, guard("Comparing runs"):
    compare_runs_section()
drop_flash()  # the page ran to its end: a notice not drawn by now was about a run no longer shown
