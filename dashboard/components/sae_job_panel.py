"""The Features page's panel of the server's SAE training job: its phase, a progress bar with the time left, Stop,
and the live curves, redrawn every second while it runs; the page reruns whole when it ends (the list of SAEs and
the browser then show the new one)."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard.components.sae_curves import sae_curves
from xaidash.dashboard.sae_jobs import SaeJob, sae_job
from xaidash.data.formatting import duration_text
from xaidash.models.language.sae.train import SaeEvent

SEEN_KEY = "sae_job_seen_active"  # this session saw the job active: announce its end once


def stop_job() -> None:
    """Stop's callback: the job ends after its harvest chunk or training step, resumable."""
    sae_job().stop()  # False when it had already ended: nothing to do


def _fraction(e: SaeEvent | None) -> float:
    if e is None:
        return 0.0
    if e.phase == "harvest":
        return min(1.0, e.tokens_seen / e.tokens_total) if e.tokens_total else 0.0
    return min(1.0, e.step / e.total_steps) if e.total_steps else 0.0


def _eta(e: SaeEvent) -> str:
    rate = e.step / e.elapsed if e.elapsed > 0 else 0.0
    return f"about {duration_text((e.total_steps - e.step) / rate)} left" if rate > 0 else "measuring the pace"


def progress_text(job: SaeJob) -> str:
    """Where the job is: loading, harvesting (tokens), training (steps, time left), evaluating."""
    e = job.last
    name = f"SAE {job.sae_id}" if job.sae_id else "SAE"
    if e is None:
        head = f"{name}: loading the model and reading the corpus…"
    elif e.phase == "harvest":
        head = f"{name}: harvesting activations, {e.tokens_seen:,} of {e.tokens_total:,} tokens"
    elif e.phase == "train":
        head = f"{name}: training, step {e.step:,} of {e.total_steps:,} · {_eta(e)}"
    elif e.phase == "evaluate":
        head = f"{name}: evaluating on the held-out tokens (loss with the SAE spliced in)…"
    else:
        head = f"{name}: {e.phase}"
    stopping = " · stopping after this step…" if job.state == "stopping" else ""
    return f"{head} · {duration_text(job.elapsed_s)} elapsed{stopping}"


def _live() -> None:
    job = sae_job().snapshot()
    if not job.active:
        st.rerun(scope="app")
    st.progress(_fraction(job.last), text=progress_text(job))
    st.button("Stop", key="sae_stop", icon=":material/stop:", on_click=stop_job, disabled=job.state == "stopping")
    total = job.config.total_steps if job.config else None
    sae_curves([e.to_json() for e in job.steps], total)


def ended_here(run_id: str) -> str | None:
    """Once, in the session that watched the server's SAE job on `run_id` end: its outcome as a message, and the
    SAE it trained (the page then shows that one); else None."""
    job = sae_job().snapshot()
    if job.active or job.run_id != run_id or not st.session_state.pop(SEEN_KEY, False):
        return None
    if job.state == "finished":
        st.success(
            f"SAE {job.sae_id} is trained: its held-out metrics are in the table below.", icon=":material/check:"
        )
    elif job.state == "stopped":
        st.info(f"Stopped: SAE {job.sae_id or ''} keeps what it did; Resume continues it.", icon=":material/pause:")
    elif job.state == "failed":
        st.error(f"The SAE training failed: {job.error}", icon=":material/error:")
    return job.sae_id


def job_panel(run_id: str) -> bool:
    """The live panel when the server's SAE job trains on `run_id` (True), a line when it trains on another run
    (True: Start is off), else nothing (False)."""
    job = sae_job().snapshot()
    if job.active and job.run_id == run_id:
        st.session_state[SEEN_KEY] = True
        st.subheader("Training an SAE")
        st.fragment(_live, run_every=1.0)()
        return True
    if job.active:
        st.info(
            f"An SAE is training on run `{job.run_id}` ({progress_text(job)}); one trains at a time on this server.",
            icon=":material/hourglass_top:",
        )
        st.button("Stop it", key="sae_stop_other", icon=":material/stop:", on_click=stop_job)
        return True
    return False
