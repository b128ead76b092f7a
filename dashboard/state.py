"""The run a session works with, kept in `st.session_state` so every page sees the same one."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import streamlit as st

from xaidash.dashboard.nav import page_path
from xaidash.dashboard.run_facts import pct
from xaidash.models.runs.store import Run, has_usable_weights, list_runs, run_liveness

if TYPE_CHECKING:
    from xaidash.models.bundle import ModelBundle

RUN_KEY = "xai_selected_run"
MISSING_KEY = "xai_missing_run"  # a `?run=` link's run that does not exist, until the user picks a run


def select_run(run_id: str | None) -> None:
    st.session_state[RUN_KEY] = run_id
    st.session_state.pop(MISSING_KEY, None)  # the user chose: the refused link is history


def selected_run() -> Run | None:
    """The run this session picked; else the newest finished run with weights (remembered); else None."""
    runs = list_runs()
    wanted = st.session_state.get(RUN_KEY)
    if wanted:
        for r in runs:
            if r.id == wanted:
                return r
    for r in runs:  # as --run latest: not failed, not training, weights present and finite
        if has_usable_weights(r):
            st.session_state[RUN_KEY] = r.id  # not select_run: a refused link's notice stays
            return r
    return None


def apply_run_link() -> None:
    """A link with `?run=<id>` (Home's quick-start results) selects that run, then the parameter is dropped
    so the page's address does not pin the run."""
    wanted = st.query_params.get("run")
    if not wanted:
        return
    del st.query_params["run"]
    if any(r.id == wanted for r in list_runs()):  # only a run listed under the runs root: never a path
        select_run(wanted)
        return
    st.session_state[MISSING_KEY] = str(wanted)
    message = missing_run_notice()
    if message:
        st.warning(message, icon=":material/link_off:")


def missing_run_notice(short: bool = False) -> str | None:
    """What to say after a `?run=` link named a run that does not exist: that, and which run is shown instead
    (None when no link was refused, or since the user picked a run). `short`: for the sidebar, under the picker
    that shows the run."""
    wanted = st.session_state.get(MISSING_KEY)
    if not wanted:
        return None
    shown = selected_run()
    name = str(wanted).replace("`", "'")
    name = name if len(name) <= 80 else name[:79] + "…"
    if short:
        return f"The link's run `{name}` does not exist: " + ("showing this run instead." if shown else "no run yet.")
    instead = f"Showing run `{shown.id}` ({run_label(shown)}) instead." if shown else "No other run to show yet."
    return f"The link asked for run `{name}`, which does not exist. {instead}"


def run_label(run: Run) -> str:
    """'resnet_small on shapes · test acc 91.0% · 2026-11-02 10:04' (or why the run is unreadable)."""
    try:
        c, s = run.config(), run.summary()
    except Exception as e:  # noqa: BLE001 - a damaged run must still be listed (and deletable)
        return f"{run.id} (unreadable: {e})"
    acc = s.get("test_acc", s.get("val_acc"))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.get("created", 0)))
    state = run_liveness(run, s).state  # 'interrupted' when the process that wrote 'running' is gone
    if "source" in c:  # imported: no accuracy measured here, maybe no data set
        return f"{c['model']} on {c.get('dataset') or 'no data set'} · imported · {when}"
    extra = "" if state == "completed" else f" · {state}"
    return f"{c['model']} on {c['dataset']} · acc {pct(acc)} · {when}{extra}"


def require_bundle(purpose: str) -> tuple[Run, ModelBundle]:
    """The selected run and its loaded model, or a message with what to do and st.stop().

    Every page that works on a model starts here, so a missing run or one that cannot be loaded
    (no weights yet, damaged files) reads the same everywhere instead of a traceback, and a model too
    poor to explain is flagged the same way everywhere.
    """
    from xaidash.dashboard import services
    from xaidash.dashboard.components.quality import show_run_warning
    from xaidash.dashboard.errors import show_error

    run = selected_run()
    if run is None:
        st.info(
            f"No run to {purpose} yet: train a model first (or select a run on the Train page).", icon=":material/info:"
        )
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        st.stop()
    try:
        with st.spinner("Loading the model…"):
            bundle = services.bundle_for(run)
    except Exception as e:  # noqa: BLE001  (shown with its cause; the app keeps running)
        show_error(e, f"Could not load run {run.id}")
        st.info("Pick another run on the Train page.")
        st.stop()
    show_run_warning(run)
    return run, bundle
