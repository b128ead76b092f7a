"""Train: settings form, a background job with live curves and a Stop button, and the runs table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.charts import confusion_chart, training_curves
from xaidash.dashboard.errors import USER_ERRORS, guard, show_error
from xaidash.dashboard.sidebar import fmt_seconds
from xaidash.dashboard.state import pct, run_label, select_run, selected_run
from xaidash.data.catalogue import dataset_status
from xaidash.data.paths import data_root, offline
from xaidash.data.registry import get_source, list_datasets
from xaidash.models.device import device_choices
from xaidash.models.engine import AUGMENTATIONS, OPTIMIZERS, SCHEDULES, Augment, TrainConfig
from xaidash.models.jobs import JobSnapshot
from xaidash.models.registry import models_for
from xaidash.models.runstore import Run, delete_run, list_runs, runs_root, runs_table

manager = services.job_manager()
FLASH = "train_flash"


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
infos = list_datasets()
status = {i.name: dataset_status(i) for i in infos}
c1, c2 = st.columns(2)
names = [i.name for i in infos]
dataset = c1.selectbox(
    "Data set",
    names,
    index=names.index("shapes") if "shapes" in names else 0,
    format_func=lambda n: f"{n} ({status[n]})",
    key="train_dataset",
)
info = get_source(dataset).info
c1.caption(info.description)
if status[dataset] == "needs download":
    if offline():
        c1.warning(
            f"{dataset} is not under the data root `{data_root()}` and downloads are off (offline mode): "
            "copy its files there or pick a built-in data set.",
            icon=":material/cloud_off:",
        )
    else:
        c1.info(
            f"{dataset} will be downloaded to `{data_root()}` when training starts.", icon=":material/cloud_download:"
        )
specs = sorted(models_for(info), key=lambda s: s.pretrained)  # models trained here first: quick to try
if not specs:
    c2.warning(f"No zoo model fits {dataset}.")
    spec = None
else:
    model = c2.selectbox(
        "Model",
        [s.name for s in specs],
        key="train_model",
        format_func=lambda n: n + (" (pretrained)" if next(s for s in specs if s.name == n).pretrained else ""),
    )
    spec = next(s for s in specs if s.name == model)
    c2.caption(spec.description + (f" Input: {spec.input_note}." if spec.input_note else ""))
    if note := spec.note():
        c2.warning(note, icon=":material/warning:")

if spec is not None:
    with st.form("train_form"):
        c1, c2, c3, c4 = st.columns(4)
        epochs = c1.number_input("Epochs", 1, 1000, 3, key="train_epochs")
        batch_size = c2.number_input("Batch size", 1, 8192, 128, key="train_batch")
        lr = c3.number_input(
            "Learning rate",
            1e-6,
            5.0,
            float(spec.default_lr),
            format="%.5f",
            key=f"train_lr_{spec.name}",
            help=f"{spec.name}'s default is {spec.default_lr:g}",
        )
        optimizer = c4.selectbox("Optimiser", OPTIMIZERS, key="train_opt")
        schedule = c1.selectbox(
            "Schedule",
            SCHEDULES,
            key="train_sched",
            help="learning rate over the steps: cosine decay, one-cycle warm-up and decay, or constant",
        )
        augment_choices: tuple[Augment, ...] = AUGMENTATIONS if info.modality == "image" else ("none",)
        augment = c2.selectbox(
            "Augmentation",
            augment_choices,
            key="train_aug",
            help="random shifts by up to 2 pixels and/or horizontal flips of training images",
        )
        device = c3.selectbox(
            "Device",
            device_choices(),
            key="train_device",
            help="auto: the first CUDA GPU, else Apple MPS, else the CPU",
        )
        seed = c4.number_input("Seed", 0, 2**31 - 1, 0, key="train_seed")
        with st.expander("Quick run and validation"):
            q1, q2 = st.columns(2)
            max_samples = q1.number_input(
                "Use at most this many training samples (0 = all)", 0, 10_000_000, 0, step=100, key="train_max_samples"
            )
            val_fraction = q2.slider("Validation share of the training split", 0.0, 0.5, 0.1, 0.05, key="train_val")
        submitted = st.form_submit_button("Start training", type="primary", icon=":material/play_arrow:")
    if submitted:
        cfg = TrainConfig(
            dataset=dataset,
            model=spec.name,
            epochs=int(epochs),
            batch_size=int(batch_size),
            lr=float(lr),
            optimizer=optimizer,
            schedule=schedule,
            augment=augment,
            device=device,
            seed=int(seed),
            val_fraction=float(val_fraction),
            max_train_samples=int(max_samples) or None,
        )
        try:
            job = manager.start(cfg)
        except USER_ERRORS as e:
            show_error(e, "Training not started")
        else:
            st.session_state["train_watching"] = job.id
            st.rerun()  # redraw the sidebar (drawn before this page) and start the live panel's timer


# ---- live job ---------------------------------------------------------------------------------
def finished_run(job: JobSnapshot) -> Run | None:
    if job.run_id is None:
        return None
    return next((r for r in list_runs() if r.id == job.run_id), None)


def stop_job() -> None:
    manager.stop()  # False when the job already ended: nothing to stop


def job_panel() -> None:
    job = manager.current()
    if job is None:
        st.caption("No training job in this server session yet.")
        return
    if job.active:
        st.session_state["train_watching"] = job.id
    elif st.session_state.get("train_watching") == job.id:
        # The job just ended: rerun the whole page once so the runs table and the sidebar show the new run.
        st.session_state["train_watching"] = None
        st.rerun()
    st.markdown(
        f"**{job.label}** · {job.config['epochs']} epochs · batch {job.config['batch_size']}"
        + (f" · run `{job.run_id}`" if job.run_id else "")
    )
    if job.active:
        rate = f"{job.samples_per_s:,.0f} samples/s" if job.samples_per_s else "measuring speed"
        text = (
            f"Epoch {max(job.epoch, 1)}/{job.epochs} · step {job.step}/{job.total_steps} · {rate} · "
            f"ETA {fmt_seconds(job.eta_s)} · {fmt_seconds(job.elapsed_s)} elapsed"
        )
        if job.state == "starting":
            text = "Loading the data set and building the model…"
        st.progress(job.progress, text=text)
        st.button(
            "Stop",
            icon=":material/stop:",
            key="train_stop",
            on_click=stop_job,
            disabled=job.stop_requested,
            help="stop after the current step; the run keeps its last checkpoint",
        )
        if job.stop_requested:
            st.caption("Stopping after the current step…")
    elif job.state == "completed":
        st.success(
            f"Finished in {fmt_seconds(job.elapsed_s)}: test accuracy {pct(job.test_acc)}.",
            icon=":material/check_circle:",
        )
    elif job.state == "stopped":
        st.warning(
            f"Stopped after {fmt_seconds(job.elapsed_s)}; the run keeps the weights of its last finished epoch.",
            icon=":material/stop_circle:",
        )
    else:
        st.error(f"Training failed: {job.error}", icon=":material/error:")
    chart = training_curves(job.history)
    if chart is not None:
        st.altair_chart(chart, width="content")
    elif job.active:
        st.caption("Curves appear after the first logged steps.")
    if not job.active:
        run = finished_run(job)
        if run is not None:
            run_details(run, key="job")


def run_details(run: Run, key: str) -> None:
    """Test metrics and confusion matrix of a finished run, and a button to use it."""
    s = run.summary()
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Test accuracy", pct(s.get("test_acc")))
    c2.metric("Test loss", f"{s['test_loss']:.4f}" if s.get("test_loss") is not None else "–")
    c3.metric("Validation accuracy", pct(s.get("val_acc")))
    c4.metric("Epochs", f"{s.get('epochs_done', 0)}/{s.get('epochs', '?')}")
    if s.get("confusion"):
        st.altair_chart(confusion_chart(s["confusion"], run.info.classes), width="content")
    current = st.session_state.get("xai_selected_run")
    if current == run.id:
        st.caption("This run is selected for the Explain and Compare pages.")
    else:
        st.button(
            "Use this run",
            key=f"{key}_use_{run.id}",
            on_click=select_run,
            args=(run.id,),
            type="primary",
            icon=":material/check:",
        )


st.subheader("Training job")
st.fragment(job_panel, run_every=0.5 if manager.busy() else None)()


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
    if st.session_state.get("xai_selected_run") == run_id:
        select_run(None)
    st.session_state.pop("train_confirm_delete", None)
    flash("success", f"Deleted run {run_id}.")


st.subheader("Runs")
show_flash()
with guard("Listing runs"):
    rows = runs_table()
    if not rows:
        st.info(f"No runs yet under `{runs_root()}`: start one above.")
    else:
        chosen = selected_run()
        table = pd.DataFrame(rows)
        table.insert(0, "selected", [chosen is not None and r["run"] == chosen.id for r in rows])
        st.dataframe(table, hide_index=True, width="stretch")
        runs = {r.id: r for r in list_runs()}
        ids = [r["run"] for r in rows if r["run"] in runs]
        index = ids.index(chosen.id) if chosen is not None and chosen.id in ids else 0
        # Plain ids as options: a label with changing accuracy or state would change the options under the widget.
        pick = st.selectbox("Run", ids, index=index, key="train_run_pick")
        run = runs[pick]
        st.caption(run_label(run))
        c1, c2, c3 = st.columns([2, 3, 2], vertical_alignment="bottom")
        is_selected = chosen is not None and chosen.id == pick
        c1.button(
            "Use this run" if not is_selected else "Selected",
            key="train_use",
            on_click=select_run,
            args=(pick,),
            disabled=is_selected,
            type="primary",
            icon=":material/check:",
        )
        confirm = c2.checkbox(f"Yes, delete {pick}", key="train_confirm_delete")
        c3.button(
            "Delete run",
            key="train_delete",
            on_click=delete_callback,
            args=(pick,),
            disabled=not confirm,
            icon=":material/delete:",
        )
        with st.expander("Details of this run", expanded=False):
            s = run.summary()
            if s.get("error"):
                st.error(s["error"])
            if s.get("confusion"):
                st.altair_chart(confusion_chart(s["confusion"], run.info.classes), width="content")
            chart = training_curves(run.metrics())
            if chart is not None:
                st.altair_chart(chart, width="content")
            st.json(run.config(), expanded=False)
