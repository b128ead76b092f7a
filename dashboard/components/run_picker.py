"""The run picker: every page that works on a run switches runs in place from the sidebar, which draws it once for
every page. Each option names the run's model, data set and accuracy, flagged first when it is too poor to
explain (`run_facts.picker_label`); picking one selects it for every page of its kind, as a click in Home's or
Train's runs table does. A page lists only the kinds of run it declares it can use (`nav.PageInfo.runs`): the
Generate page language models, the Attention and Embeddings pages every run, the other pages classifiers."""

from __future__ import annotations

from collections import Counter

import streamlit as st

from xaidash.dashboard.nav import CLASSIFIERS, page_for, page_info, page_path
from xaidash.dashboard.run_facts import picker_label, run_kind
from xaidash.dashboard.state import (
    ELSEWHERE_KEY,
    current_page,
    missing_run_notice,
    page_opens,
    page_runs,
    run_label,
    runs_for,
    select_run,
    selected_run,
    slot_of,
)
from xaidash.models.runs.store import Run, RunKind, list_runs

PICKER_KEY = "xai_run_picker"


def _picked() -> None:
    select_run(st.session_state.get(PICKER_KEY))


def _unique_labels(runs: list[Run]) -> dict[str, str]:
    """Run id -> its option label; runs that would read the same (same model, data, accuracy and minute) get their
    id appended: Streamlit tells options apart by their label."""
    labels = {r.id: picker_label(r) for r in runs}
    counts = Counter(labels.values())
    return {i: f"{label} · {i}" if counts[label] > 1 else label for i, label in labels.items()}


def run_picker(kinds: tuple[RunKind, ...] = CLASSIFIERS) -> Run | None:
    """The selectbox of the runs of those kinds (newest first) showing the selected one; the selected run, or None
    when none exists. A `?run=` link that named no run says so here, with the run shown instead, until the user
    picks one."""
    runs = runs_for(kinds)
    current = selected_run(slot_of(kinds))
    if runs:
        labels = _unique_labels(runs)
        # Follow selections made elsewhere (a runs table, the quick start, an import): set before the widget.
        st.session_state[PICKER_KEY] = current.id if current is not None and current.id in labels else None
        st.selectbox(
            "Run",
            list(labels),
            index=None if current is None else 0,  # 0: no clear button (the value itself comes from the state)
            format_func=lambda i: labels.get(i, i),
            key=PICKER_KEY,
            on_change=_picked,
            placeholder="Pick a run",
            label_visibility="collapsed",  # under the sidebar's "Run" heading
            help="the run every page works on: model · data set · test accuracy · created; ⚠ flags a run too poor "
            "to explain (training failed, NaN weights, accuracy near chance or far below its recipe)",
        )
    return current


def run_link_notice() -> None:
    """On the page (once: not again in the sidebar), what a `?run=` link could not do, until the user picks a run:
    the run does not exist (and which run is shown instead), or it is of a kind this page cannot use (and the page
    that opens it, linked)."""
    missing = missing_run_notice()
    if missing:
        st.warning(missing, icon=":material/link_off:")
    wanted = st.session_state.get(ELSEWHERE_KEY)
    run = next((r for r in list_runs() if r.id == wanted), None) if wanted else None
    here = current_page()
    kind = run_kind(run) if run is not None else None
    if run is None or kind is None or kind in page_opens(here):
        return
    target = page_for(kind, near=here)
    title = page_info(here).title if here else "This page"
    shown = selected_run(slot_of(page_runs(here)))
    instead = f"it shows `{shown.id}` instead" if shown is not None else "no run of its kind exists yet"
    opens = f" It opens on {target.title}." if target is not None else ""
    st.warning(
        f"The link's run `{run.id}` ({run_label(run)}) is not one {title} works on: {instead}.{opens}",
        icon=":material/swap_horiz:",
    )
    if target is not None:
        st.page_link(
            page_path(target.name),
            label=f"Open {run.id} on {target.title}",
            icon=target.icon,
            query_params={"run": run.id},
        )
