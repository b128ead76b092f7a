"""The sidebar every page shows: the run picker and the selected run (flagged when too poor to explain), the
device, and the training job (with its place in a queue such as the quick start)."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.calibration_view import calibration_toggle
from xaidash.dashboard.components.job_status import job_line
from xaidash.dashboard.components.quality import show_run_warning
from xaidash.dashboard.components.quickstart import select_demo_run_when_done
from xaidash.dashboard.components.run_picker import run_link_notice, run_picker
from xaidash.dashboard.components.scene_facts import (
    dataset_name,
    model_name,
    scene_config,
    scene_state,
    score_text,
    task_word,
)
from xaidash.dashboard.components.scene_facts import (
    epochs_text as scene_epochs,
)
from xaidash.dashboard.components.scene_job_panel import scene_job_line
from xaidash.dashboard.errors import show_notes
from xaidash.dashboard.run_facts import epochs_text, run_kind, state_word
from xaidash.dashboard.scene_jobs import scene_job
from xaidash.dashboard.state import Slot, current_page, page_runs, slot_of
from xaidash.data.formatting import percent
from xaidash.models.device import describe_default_device
from xaidash.models.runs.scores import final_score_text, headline_text, run_target
from xaidash.models.runs.store import LANGUAGE_MARK, Run, RunKind
from xaidash.models.scenes.quality import scene_run_warning


def _job_status() -> None:
    manager = services.job_manager()
    job = manager.current()
    scenes = scene_job().snapshot()
    if scenes.state != "idle":  # the detection and segmentation job (Train's second tab), beside the classifiers'
        st.caption(scene_job_line(scenes))
        if scenes.active:
            st.progress(scenes.progress)
    if job is None:
        if scenes.state == "idle":
            st.caption("No training job yet.")
        return
    queue = manager.find_queue(job.queue_id) if job.queue_size > 1 else None
    st.caption(job_line(job, queue.name if queue is not None else ""))
    if job.active:
        st.progress(job.progress)


NO_RUN: dict[Slot, str] = {
    "classifier": "No run selected: train one on the Train page, or press the quick start on Home.",
    "language": "No language model yet: press “Get SmolLM2” on Home, or import one (`xaidash import hf:FOLDER`).",
    "any": "No run selected: train one on the Train page, or press the quick start on Home.",
    "scene": "No detector or segmenter yet: train one on the Train page (Detection and segmentation).",
}


def _language_model(run: Run) -> None:
    c = run.config()
    lm = c.get(LANGUAGE_MARK) or {}
    st.markdown(f"**{c['model']}**: generative language model")
    facts = [f"{lm['layers']} layers x {lm['heads']} heads"] if "layers" in lm and "heads" in lm else []
    n = lm.get("parameters")
    if isinstance(n, int):
        facts.append(f"{n / 1e6:.1f}M parameters" if n >= 1e5 else f"{n:,} parameters")
    st.caption(" · ".join([*facts, "imported"]))
    st.caption(f"`{run.id}`")


def _scene_model(run: Run) -> None:
    """A detector or segmenter: model on data set, its test mAP@50 or mIoU, its state when not completed."""
    section, s = scene_config(run), run.summary()
    st.markdown(f"**{model_name(run, section)}** on **{dataset_name(run, section)}**")
    state = scene_state(run, s)
    facts = [task_word(section), score_text(s)]
    if state != "completed":
        facts.append(f"{state}, epochs {scene_epochs(section, s)}")
    st.caption(" · ".join(facts))
    st.caption(f"`{run.id}`")
    warning = scene_run_warning(run, s) if state != "running" else None
    if warning:  # as classifiers' too poor to explain are flagged on every page
        st.warning(warning, icon=":material/warning:")


def _selected_run(runs: tuple[RunKind, ...]) -> None:
    run = run_picker(runs)  # switch runs in place, on every page: the runs of the kinds this page can use
    if run is None:
        st.caption(NO_RUN[slot_of(runs)])
        return
    kind = run_kind(run)
    if kind in ("language_model", "scene_model"):
        try:
            (_language_model if kind == "language_model" else _scene_model)(run)
        except Exception as e:  # noqa: BLE001 - a damaged run must not break every page
            st.warning(f"Run {run.id} is unreadable: {e}")
        return
    try:
        c, s = run.config(), run.summary()
        st.markdown(f"**{c['model']}** on **{c['dataset'] or 'no data set'}**")  # None: an unlinked imported model
        acc = s.get("test_acc")
        facts = [f"test acc {percent(acc)}" if acc is not None else f"val acc {percent(s.get('val_acc'))}"]
        if s.get("test_r2") is not None or s.get("val_r2") is not None:  # a number to predict: R² and its error
            has_test = s.get("test_r2") is not None
            facts = [final_score_text(s, run_target(c)) if has_test else f"val {headline_text(s)}"]
        state = state_word(run, s)  # 'interrupted' when the process that wrote 'running' is gone
        if state != "completed":
            facts.append(f"{state}, epochs {epochs_text(c, s)}")
        if kind == "imported":  # trained elsewhere, no accuracy measured here
            facts = ["imported: trained elsewhere"]
        st.caption(" · ".join(facts))
        st.caption(f"`{run.id}`")
        if c["dataset"]:  # a data set of the user's own: what was skipped or guessed when it was read
            show_notes(st, services.dataset_notes(c["dataset"]))
    except Exception as e:  # noqa: BLE001 - a damaged run must not break every page
        st.warning(f"Run {run.id} is unreadable: {e}")
        return
    show_run_warning(run)
    calibration_toggle(run)  # only when the run has a temperature saved for its weights


def render_sidebar() -> None:
    select_demo_run_when_done()
    run_link_notice()  # in the main area, above the page: what a `?run=` link could not do (said once, not here too)
    with st.sidebar:
        st.subheader("Run")
        _selected_run(page_runs(current_page()))
        st.subheader("Device")
        d = describe_default_device()
        st.caption(f"{d.name}" + (f" · {d.detail}" if d.detail else ""))
        st.subheader("Training")
        active = services.job_manager().busy() or scene_job().snapshot().active
        # Redraw on a timer only while a job runs: a finished job's line does not change.
        st.fragment(_job_status, run_every=1.0 if active else None)()
