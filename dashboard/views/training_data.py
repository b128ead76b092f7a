"""Training data: self-influence over the selected run's whole training split, ranked ("possible label errors":
the samples the model found most surprising first), computed as a streamed, resumable background job
(`dashboard/influence_jobs.py`) with progress and ETA; flag a sample as mislabelled and download the ranking or the
flagged list. The computing is `explainers/influence`; this page only starts, reads and draws it."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard.components.influence_panel import method_select
from xaidash.dashboard.components.influence_table import downloads, ranked_table
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.influence_jobs import SelfInfluenceJob, self_influence_job
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import run_label, selected_run
from xaidash.data.formatting import duration_text
from xaidash.explainers.influence.api import SelfInfluenceStatus, self_influence_status, self_influence_table
from xaidash.explainers.influence.registry import InfluenceMethodSpec, influence_methods_for
from xaidash.models.runs.store import Run

HOW_TO_READ = (
    "**How to read this.** A sample's self-influence is how much training on it lowered its own loss, summed over the "
    "run's checkpoints: a sample the model could only fit by memorising it (an odd drawing, an ambiguous sentence, or a "
    "wrong label) scores high. So the top of the ranking is where label errors gather; look at those first, and flag "
    "the ones whose label is wrong. **What it does not prove:** a high score says the sample is unusual for the "
    "model, not that its label is wrong (rare but correct samples rank high too), and a low score does not clear a "
    "sample. The scores depend on the checkpoints kept; compare samples within one run and method, not across runs."
)


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else duration_text(seconds)


def status_line(status: SelfInfluenceStatus | None) -> str:
    """Not computed / partial n of N / complete, with the time it took."""
    if status is None:
        return "Not computed yet."
    if status.complete:
        return f"Complete: {status.total:,} training samples, computed in {_duration(status.seconds)}."
    share = status.done / status.total if status.total else 0.0
    return (
        f"Partial: {status.done:,} of {status.total:,} training samples ({share:.0%}), {_duration(status.seconds)} "
        "so far. Resume continues where it stopped."
    )


def progress_text(job: SelfInfluenceJob) -> str:
    s = job.status
    if s is None:
        return "Starting: loading the checkpoints and the training data…"
    eta = f"about {duration_text(s.eta_s)} left" if s.eta_s is not None else "time left: measuring the pace"
    stopping = " · stopping after this chunk…" if job.state == "stopping" else ""
    return f"{s.done:,} of {s.total:,} training samples · {eta} · {duration_text(job.elapsed_s)} elapsed{stopping}"


def stop_job() -> None:
    """The Stop buttons' callback: the job stops after its chunk (what it finished is kept)."""
    self_influence_job().stop()  # False when it had already ended: nothing to do


def _job_progress() -> None:
    """Redrawn every second while the job runs; a full rerun when it ends (the table and status then change)."""
    job = self_influence_job().snapshot()
    if not job.active:
        st.rerun(scope="app")
    s = job.status
    st.progress(min(1.0, s.done / s.total) if s and s.total else 0.0, text=progress_text(job))
    st.button("Stop", key="self_influence_stop", icon=":material/stop:", on_click=stop_job)


def pick_method(run: Run) -> InfluenceMethodSpec:
    """The method selectbox; stops with what applies when nothing does (imported runs, runs without checkpoints)."""
    try:
        pairs = influence_methods_for(run)
    except Exception as e:  # noqa: BLE001 - a damaged run: its message
        show_error(e, f"Run {run.id}")
        st.stop()
    # Only the methods that rank the training set by self-influence (declared by each spec); the others are named.
    pairs = [
        (m, why if m.self_influence else why or "ranks no self-influence (it finds similar samples)")
        for m, why in pairs
    ]
    usable = sorted((m for m, why in pairs if why is None), key=lambda m: (m.featured is None, m.featured or 0))
    reasons = [f"{m.label}: {str(why).rstrip('.')}" for m, why in pairs if why is not None]
    if not usable:
        st.info(
            "Self-influence cannot be computed for this run. " + "; ".join(reasons) + ". Train a model here "
            "(several epochs keep several checkpoints) to rank its training data.",
            icon=":material/info:",
        )
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        st.stop()
    chosen = method_select(usable, f"self_influence_method_{run.id}")
    if reasons:
        st.caption("Not available for this run: " + "; ".join(reasons) + ".")
    return chosen


def job_controls(run: Run, method: str, status: SelfInfluenceStatus | None) -> None:
    """The status, and Start/Resume (or the progress and Stop while a job runs)."""
    job = self_influence_job()
    snap = job.snapshot()
    mine = snap.run_id == run.id and snap.method == method
    if snap.active and mine:
        st.fragment(_job_progress, run_every=1.0)()
        return
    st.markdown(f"**Status:** {status_line(status)}")
    if mine and snap.state == "failed":
        st.error(f"The last job failed: {snap.error}", icon=":material/error:")
    if snap.active:
        st.info(
            f"A self-influence job is running for run `{snap.run_id}` ({progress_text(snap)}); one runs at a time: "
            "wait for it or stop it.",
            icon=":material/hourglass_top:",
        )
        st.button("Stop it", key="self_influence_stop_other", icon=":material/stop:", on_click=stop_job)
        return
    if status is not None and status.complete:
        return
    label = "Resume" if status is not None else "Start"
    if st.button(label, key="self_influence_start", icon=":material/play_arrow:", type="primary"):
        if not job.start(run, method):
            st.warning("Another self-influence job started meanwhile: wait for it.")
        st.rerun()


def main() -> None:
    st.title("Training data")
    st.caption(
        "The training samples the model found hardest to learn, ranked: where mislabelled samples gather. Flag them "
        "and download the list."
    )
    run = selected_run()
    if run is None:
        st.info("No run yet: train a model first (or select a run on the Train page).", icon=":material/info:")
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        st.stop()
    st.caption(f"Run `{run.id}`: {run_label(run)}.")
    spec = pick_method(run)
    try:
        status = self_influence_status(run, spec.id)
        table = self_influence_table(run, spec.id)
    except Exception as e:  # noqa: BLE001 - damaged files under the run: their message
        show_error(e, "Self-influence")
        st.stop()
    with st.container(border=True):
        st.caption(
            f"{spec.label}: each training sample's influence on its own loss, summed over the run's checkpoints. "
            f"Scores in {spec.units}; computed in the background, chunk by chunk, and kept under the run."
        )
        job_controls(run, spec.id, status)
    if table is None or table.empty:
        st.caption(HOW_TO_READ)
        return
    st.subheader("Possible label errors" + ("" if status is None or status.complete else " (so far)"))
    st.caption(HOW_TO_READ)
    ranked_table(run, spec.id, table, spec.units)
    downloads(run, spec.id)


main()
