"""The runs table: one row per run (the one training included), and a click on a row selects that run.

The table is a controlled widget: the session's selected run decides which row is highlighted, and a
click changes the selected run for every page. A run still without weights (training, before its
first epoch ends) can be clicked; it stays pending and becomes the selected run once it has weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard.jobs import JobSnapshot
from xaidash.dashboard.run_facts import has_weights, run_row
from xaidash.dashboard.scene_jobs import live_state as scene_live_state
from xaidash.dashboard.state import RUN_KEY, SCENE_FOCUS_KEY, select_run, selected_run
from xaidash.models.runs.quality import QUALITY_HELP
from xaidash.models.runs.store import Run, list_runs, run_liveness

PENDING = "xai_pending_run"  # clicked, but no weights yet: becomes the selected run when it has them
COLUMNS = {
    "val acc": st.column_config.NumberColumn("val acc", format="%.1f%%", help="validation accuracy"),
    "test acc": st.column_config.NumberColumn("test acc", format="%.1f%%", help="test accuracy (after training)"),
    "val R²": st.column_config.NumberColumn(
        "val R²", format="%.2f", help="a number to predict: R² on the validation share (1 perfect, 0 the mean)"
    ),
    "test R²": st.column_config.NumberColumn(
        "test R²", format="%.2f", help="a number to predict: R² on the test rows (1 perfect, 0 the mean)"
    ),
    # A detector's and a segmenter's headline on the test split (narrow: beside a classifier's accuracy columns).
    "mAP@50": st.column_config.NumberColumn(
        "mAP@50", format="%.1f%%", width="small", help="a detector: mean average precision at IoU 0.5, test split"
    ),
    "mIoU": st.column_config.NumberColumn(
        "mIoU", format="%.1f%%", width="small", help="a segmenter: mean IoU of the classes, test split"
    ),
    "quality": st.column_config.TextColumn("quality", help=QUALITY_HELP),
    "epochs": st.column_config.TextColumn(
        "epochs", width=140, help="complete epochs / planned (+ steps of a partial epoch)"
    ),
    "run": st.column_config.TextColumn("run", help="the run's folder under the runs root: created at, data set, model"),
}


def _clicked_row(state: Any) -> int | None:
    """The row index a dataframe selection state points at (a dict or Streamlit's DataframeState)."""
    if not isinstance(state, Mapping):
        return None
    rows = (state.get("selection") or {}).get("rows") or []
    return int(rows[0]) if rows else None


def focused_run_id(runs: dict[str, Run]) -> str | None:
    """The run the tables highlight: a clicked run still waiting for weights, else the session's selected run.
    A pending run that now has weights becomes the selected run."""
    pending = st.session_state.get(PENDING)
    if pending in runs and has_weights(runs[pending]):
        select_run(pending)
        st.session_state.pop(PENDING, None)
        pending = None
    if pending in runs:
        return pending
    if st.session_state.get(SCENE_FOCUS_KEY) in runs:  # a scene run picked last (select_run clears it otherwise)
        return str(st.session_state[SCENE_FOCUS_KEY])
    chosen = selected_run()
    return chosen.id if chosen is not None else None


def focus_of(runs: dict[str, Run]) -> str | None:
    """The run the Runs section focuses (its details and curves), read without changing anything: what
    `focused_run_id` returns on its next call (a pending run that got its weights is selected and stays the focus)."""
    pending = st.session_state.get(PENDING)
    if pending in runs:
        return pending
    if st.session_state.get(SCENE_FOCUS_KEY) in runs:
        return str(st.session_state[SCENE_FOCUS_KEY])
    chosen = st.session_state.get(RUN_KEY)
    if chosen in runs:
        return chosen
    # what `selected_run` would pick (and remember: not here, the runs table does that in its turn)
    return next((r.id for r in runs.values() if r.usable), None)


def _focus_on(run: Run) -> bool:
    """A click on `run`: select it when it has weights (True), else keep it pending (False)."""
    if has_weights(run):
        st.session_state.pop(PENDING, None)
        changed = st.session_state.get(RUN_KEY) != run.id
        select_run(run.id)
        return changed
    st.session_state[PENDING] = run.id
    return False


def runs_table(key: str, job: JobSnapshot | None = None) -> Run | None:
    """Draw the runs table with row selection; the focused run (None when there are no runs).

    `job`: the job this server is training, so its row shows live progress."""
    runs = list_runs()
    if not runs:
        return None
    by_id = {r.id: r for r in runs}
    ids = [r.id for r in runs]
    shown, seen = st.session_state.get(f"{key}_ids") or [], st.session_state.get(f"{key}_seen")
    row = _clicked_row(st.session_state.get(key))
    clicked = shown[row] if row is not None and row < len(shown) else None
    if clicked is not None and clicked != seen and clicked in by_id:
        st.session_state[f"{key}_seen"] = clicked
        if _focus_on(by_id[clicked]):
            st.rerun()  # the sidebar, drawn before this table, must show the new run
    before = st.session_state.get(RUN_KEY)
    focus = focused_run_id(by_id)
    if st.session_state.get(RUN_KEY) != before:
        # Chosen here (a pending run got its weights, or the first finished run was picked): the sidebar,
        # drawn before this table (or outside its fragment), must show it.
        st.session_state[f"{key}_seen"] = focus
        st.rerun()
    wanted = [ids.index(focus)] if focus in ids else []
    if _clicked_row(st.session_state.get(key)) != (wanted[0] if wanted else None):
        st.session_state[key] = {"selection": {"rows": wanted, "columns": [], "cells": []}}
    rows = [run_row(r, job) for r in runs]
    for cells in rows:  # a scene run this server trains: its progress, as a classifier's job row shows its own
        cells["state"] = scene_live_state(str(cells["run"])) or cells.get("state")
    table = pd.DataFrame(rows)
    if "test R²" in table.columns:  # a regression run listed: its R² beside the classifiers' accuracies
        order = list(table.columns.drop(["val R²", "test R²"]))
        at = order.index("test acc") + 1 if "test acc" in order else len(order)
        table = table[[*order[:at], "val R²", "test R²", *order[at:]]]
        if {"val acc", "test acc"} <= set(table.columns) and table[["val acc", "test acc"]].isna().all().all():
            table = table.drop(columns=["val acc", "test acc"])  # regression runs alone: no accuracy to show
    st.dataframe(
        table,
        key=key,
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        width="stretch",
        column_config=COLUMNS,
        placeholder="–",
    )
    st.session_state[f"{key}_ids"] = ids
    st.session_state[f"{key}_seen"] = focus
    if focus is None:
        return None
    run = by_id[focus]
    if not has_weights(run) and run_liveness(run).interrupted:
        st.caption(f"`{run.id}` was interrupted before its first checkpoint: it has no weights and never will.")
    elif not has_weights(run):
        st.caption(
            f"`{run.id}` has no weights yet (a run writes them after its first epoch): it becomes the selected "
            "run for the other pages as soon as it has them."
        )
    return run
