"""The sidebar every page shows: the selected run, the device, and the training job."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.state import pct, selected_run
from xaidash.models.device import describe_default_device
from xaidash.models.jobs import JobSnapshot


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "–"
    s = round(s)
    return f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s")


def job_line(job: JobSnapshot) -> str:
    """One line on a job: state, progress, ETA."""
    if job.active:
        if job.state == "starting":
            return f"Starting: {job.label} (loading data)…"
        stop = " · stopping…" if job.stop_requested else ""
        return (
            f"Training {job.label}: epoch {max(job.epoch, 1)}/{job.epochs}, {100 * job.progress:.0f}%, "
            f"ETA {fmt_seconds(job.eta_s)}{stop}"
        )
    if job.state == "failed":
        return f"Last job failed: {job.label}"
    acc = f", test acc {pct(job.test_acc)}" if job.test_acc is not None else ""
    return f"Last job {job.state}: {job.label}{acc}"


def _job_status() -> None:
    job = services.job_manager().current()
    if job is None:
        st.caption("No training job yet.")
        return
    st.caption(job_line(job))
    if job.active:
        st.progress(job.progress)


def render_sidebar() -> None:
    with st.sidebar:
        st.subheader("Run")
        run = selected_run()
        if run is None:
            st.caption("No run selected: train one on the Train page.")
        else:
            try:
                c, s = run.config(), run.summary()
                st.markdown(f"**{c['model']}** on **{c['dataset']}**")
                acc = s.get("test_acc")
                st.caption(f"test acc {pct(acc)}" if acc is not None else f"val acc {pct(s.get('val_acc'))}")
                st.caption(f"`{run.id}`")
            except Exception as e:  # noqa: BLE001 - a damaged run must not break every page
                st.warning(f"Run {run.id} is unreadable: {e}")
        st.subheader("Device")
        d = describe_default_device()
        st.caption(f"{d.name}" + (f" · {d.detail}" if d.detail else ""))
        st.subheader("Training")
        active = services.job_manager().busy()
        # Redraw on a timer only while a job runs: a finished job's line does not change.
        st.fragment(_job_status, run_every=1.0 if active else None)()
