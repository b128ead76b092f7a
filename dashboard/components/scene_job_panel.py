"""The Train page's detection and segmentation part: the server's scene training job (its progress bar with the time
left, Stop, the live loss and validation curves, redrawn while it runs; the page reruns whole when it ends and
selects the run it trained), the form for a new one, and a scene run's details under Runs (its scores, per-class
table, settings, curves, Resume)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.scene_curves import scene_curves, stored_curves
from xaidash.dashboard.components.scene_facts import (
    SCORES,
    epochs_text,
    headline,
    planned,
    scene_config,
    scene_settings_rows,
    scene_state,
    test_scores,
    val_scores,
)
from xaidash.dashboard.components.scene_train_form import resume_settings, scene_form
from xaidash.dashboard.nav import PAGES, page_path
from xaidash.dashboard.scene_jobs import SceneJob, scene_job
from xaidash.dashboard.state import select_run
from xaidash.data.formatting import duration_text
from xaidash.models.runs.store import Run, list_runs
from xaidash.models.scenes.quality import scene_run_warning

SEEN_KEY = "scene_job_seen_active"  # this session saw the job active: select its run and say how it ended, once
NOTICE_KEY = "scene_job_notice"  # (kind, message) said above the form after a click that reruns the page
EXPLAIN_PAGE = "scenes"  # the page that explains a scene run (when it is registered)


def stop_job() -> None:
    """Stop's callback: the run stops after its step, resumable."""
    scene_job().stop()  # False when it had already ended: nothing to do


def progress_text(job: SceneJob) -> str:
    """'Epoch 2/8 · step 130 of 1,000 · loss 0.412 · about 3m left · 45s elapsed', or what it does between steps
    (loading, validating after an epoch, scoring the test split)."""
    e = job.last
    per_epoch = e.total_steps // e.epochs if e is not None and e.epochs else 0
    if e is None or e.phase == "start":
        head = "Reading the checkpoint and the scenes…" if job.resumed else "Loading the scenes, building the model…"
    elif e.phase == "step" and per_epoch and e.step % per_epoch == 0:
        head = f"Epoch {e.epoch}/{e.epochs} trained · measuring it on the validation split…"
    elif e.phase == "epoch" and e.step >= e.total_steps:
        head = f"{e.epochs} epochs trained · scoring the test split…"
    else:
        left = f"about {duration_text(job.eta_s)} left" if job.eta_s is not None else "measuring the pace"
        loss = f" · loss {e.loss:.3f}" if e.phase == "step" and e.loss is not None else ""
        head = f"Epoch {max(e.epoch, 1)}/{e.epochs} · step {e.step:,} of {e.total_steps:,}{loss} · {left}"
    stopping = " · stopping after this step…" if job.state == "stopping" else ""
    return f"{head} · {duration_text(job.elapsed_s)} elapsed{stopping}"


def scene_job_line(job: SceneJob) -> str:
    """The sidebar's line on the scene job: 'training fasterrcnn_small on scenes: epoch 2/6, 31%, about 4m left',
    or how it ended."""
    if job.active:
        e = job.last
        if e is None or e.phase == "start":
            return f"starting {job.label} (loading the scenes)…"
        left = f", about {duration_text(job.eta_s)} left" if job.eta_s is not None else ""
        stop = " · stopping…" if job.state == "stopping" else ""
        return f"training {job.label}: epoch {max(e.epoch, 1)}/{e.epochs}, {100 * job.progress:.0f}%{left}{stop}"
    if job.state == "failed":
        return f"last scene job failed: {job.label}"
    score = ""
    if job.last is not None and job.last.phase == "end" and job.last.metrics:
        top = headline(dict(job.last.metrics))
        score = f", test {top[0]} {top[1]:.2f}" if top else ""
    return f"last scene job {job.state}: {job.label}{score}"


def _live() -> None:
    job = scene_job().snapshot()
    if not job.active:
        st.rerun(scope="app")  # it ended: the page selects its run and shows it under Runs
    run = f" · run `{job.run_id}`" if job.run_id else ""
    st.markdown(f"**{job.label}**{' (resumed)' if job.resumed else ''}{run}")
    st.progress(job.progress, text=progress_text(job))
    st.button(
        "Stop",
        key="scene_stop",
        icon=":material/stop:",
        on_click=stop_job,
        disabled=job.state == "stopping",
        help="stop after the current step: the run keeps a checkpoint, and Resume continues it",
    )


def _live_curves() -> None:
    job = scene_job().snapshot()
    e = job.last
    scene_curves(job.steps, job.evals, e.total_steps if e else None, e.epochs if e else None)


def _ended(job: SceneJob) -> None:
    """Once, in the session that watched the job end: select its run and say how it ended."""
    if not st.session_state.pop(SEEN_KEY, False):
        return
    if job.run_id and job.state in ("finished", "stopped"):
        select_run(job.run_id)  # the Runs section below then shows it, and the Scenes page explains it
    if job.state == "finished":
        st.success(f"{job.label} is trained: its scores and curves are under Runs below.", icon=":material/check:")
    elif job.state == "stopped":
        st.info(
            f"Stopped: run `{job.run_id}` keeps what it trained; Resume (under Runs below) continues it.",
            icon=":material/pause:",
        )
    elif job.state == "failed":
        st.error(f"The training failed: {job.error}", icon=":material/error:")


def show_notice() -> None:
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        getattr(st, notice[0])(notice[1])


def scene_section() -> None:
    """The live job (when one trains), how the last one ended (once), and the form (Start off while one trains)."""
    show_notice()
    job = scene_job().snapshot()
    if job.active:
        st.session_state[SEEN_KEY] = True
        st.fragment(_live, run_every=1.0)()
        # The curves every few seconds: redrawing charts costs the CPU a small machine's trainer needs.
        st.fragment(_live_curves, run_every=3.0)()
        st.divider()
    else:
        _ended(job)
    scene_form(busy=job.active)


def resume(run_id: str) -> None:
    """Resume's callback: continue the stopped or interrupted run to its planned epochs."""
    run = next((r for r in list_runs() if r.id == run_id), None)
    if run is None:
        st.session_state[NOTICE_KEY] = ("error", f"Run {run_id} is no longer in the runs folder.")
    elif not scene_job().start(resume_settings(run), resume=run):
        st.session_state[NOTICE_KEY] = ("warning", "A scene model is training on this server: stop it first.")
    else:
        st.session_state[NOTICE_KEY] = (
            "info",
            f"Resuming run {run_id}: its progress is in the Detection and segmentation tab above.",
        )


def _state_line(run: Run, state: str, summary: dict) -> None:
    job = scene_job().snapshot()
    section = scene_config(run)
    if job.active and job.run_id == run.id:
        st.info("Training now: its progress and live curves are in the Detection and segmentation tab above.")
        return
    if state == "running":
        st.info("Another process is training this run (the command line): its curves grow as it writes them.")
    elif state in ("stopped", "interrupted"):
        word = "Stopped" if state == "stopped" else "Interrupted (its process is gone)"
        kept = summary.get("kept") or f"{epochs_text(section, summary)} epochs done"
        st.info(f"{word}: {kept}. Resume continues it to its {planned(section, summary) or 'planned'} epochs.")
        st.button(
            "Resume",
            key=f"scene_resume_{run.id}",
            icon=":material/play_arrow:",
            on_click=resume,
            args=(run.id,),
            disabled=job.active,
            help="one scene model trains at a time on this server" if job.active else "from its last checkpoint",
        )
    elif state == "failed":
        st.error(f"Training failed: {summary.get('error') or 'no reason recorded'}")


def _scores(summary: dict) -> None:
    scores, split = test_scores(summary), "Test split"
    if not scores:
        done = int(summary.get("epochs_done") or 0)
        scores, split = val_scores(summary), f"Validation split, after epoch {done}"
    shown = [(key, name, meaning) for key, name, meaning in SCORES if key in scores]
    if not shown:
        st.caption("No score measured yet: a run is scored on the validation split after each epoch.")
        return
    st.markdown(f"**{split}**")
    for column, (key, name, meaning) in zip(st.columns(len(shown)), shown, strict=True):
        column.metric(name, f"{scores[key]:.3f}", help=meaning)
    per_class = {k.split("/", 1)[1]: v for k, v in scores.items() if "/" in k}
    if per_class:
        what = "AP" if any(k.startswith("ap/") for k in scores) else "IoU"
        table = pd.DataFrame({"class": list(per_class), what: list(per_class.values())})
        st.dataframe(
            table,
            hide_index=True,
            width="content",
            column_config={what: st.column_config.NumberColumn(what, format="%.3f")},
        )


def scene_run_details(run: Run) -> None:
    """A scene run under Runs: its state and Resume, its scores and per-class table, its settings, its curves, and
    the page that explains it."""
    summary = run.summary()
    state = scene_state(run, summary)
    _state_line(run, state, summary)
    warning = scene_run_warning(run, summary) if state != "running" else None
    if warning:
        st.warning(warning, icon=":material/warning:")
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**Settings of `{run.id}`**")
        st.table(pd.DataFrame(scene_settings_rows(run), columns=["setting", "value"]), hide_index=True)
    with right:
        _scores(summary)
        if PAGES.find(EXPLAIN_PAGE) is not None and headline(test_scores(summary) or val_scores(summary)):
            st.page_link(
                page_path(EXPLAIN_PAGE),
                label="Explain its boxes and regions on the Scenes page",
                icon=":material/center_focus_strong:",
                query_params={"run": run.id},
            )
    steps, evals = stored_curves(run)
    epochs = planned(scene_config(run), summary)
    per_epoch = summary.get("steps_per_epoch")
    scene_curves(steps, evals, epochs * int(per_epoch) if epochs and per_epoch else None, epochs)
