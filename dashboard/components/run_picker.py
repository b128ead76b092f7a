"""The run picker: every page that works on a run switches runs in place from the sidebar, which draws it once for
every page. Each option names the run's model, data set and accuracy, flagged first when it is too poor to
explain (`run_facts.picker_label`); picking one selects it for every page of its kind, as a click in Home's or
Train's runs table does. A page lists only the kinds of run it declares it can use (`nav.PageInfo.runs`): the
Generate page language models, the Attention and Embeddings pages every run, the other pages classifiers."""

from __future__ import annotations

from collections import Counter

import streamlit as st

from xaidash.dashboard.nav import CLASSIFIERS
from xaidash.dashboard.run_facts import picker_label
from xaidash.dashboard.state import missing_run_notice, runs_for, select_run, selected_run, slot_of
from xaidash.models.runs.store import Run, RunKind

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
    notice = missing_run_notice(short=True)
    if notice:
        st.warning(notice, icon=":material/link_off:")
    return current
