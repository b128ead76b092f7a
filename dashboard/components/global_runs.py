"""The Global view's run picker: only the runs whose model reads table rows, told apart by what the run's data set
declares (its columns), never by a data set's or model's name. A run of another kind (picked in the sidebar or
opened by a `?run=` link) gets one line saying what this page needs and where to get it."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard.nav import CLASSIFIERS, page_path
from xaidash.dashboard.state import run_label, runs_for, select_run, selected_run
from xaidash.data.registry import list_datasets
from xaidash.models.registry import recommended_model
from xaidash.models.runs.store import Run

PICKER_KEY = "global_table_run"


def reads_table_rows(run: Run) -> bool:
    """Whether the run's model reads table rows: its data set declares columns (False for a damaged run)."""
    try:
        return bool(run.info.columns)
    except Exception:  # noqa: BLE001 - an unreadable config.json: not a run this page can open
        return False


def table_runs() -> list[Run]:
    """The classifier runs of table rows, newest first."""
    return [r for r in runs_for(CLASSIFIERS) if reads_table_rows(r)]


def where_to_get_one() -> str:
    """'tabular_mlp on breast_cancer, wine or planted': the built-in table data sets and the model recommended for
    them, as the registries declare them."""
    infos = [info for info in list_datasets() if info.columns]
    names = [i.name for i in infos]
    sets = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}" if names else "a csv: table"
    models = sorted({m.name for m in map(recommended_model, infos) if m is not None})
    return f"{' or '.join(models) or 'a table model'} on {sets}"


def _picked() -> None:
    select_run(st.session_state.get(PICKER_KEY))


def pick_table_run() -> Run | None:
    """The selectbox of table runs showing the selected run when it is one; the selected run when it reads table
    rows, else None after one line saying why (and a link to Train)."""
    runs = table_runs()
    current = selected_run()
    ids = [r.id for r in runs]
    labels = {r.id: run_label(r) for r in runs}
    if runs:
        st.session_state[PICKER_KEY] = current.id if current is not None and current.id in ids else None
        st.selectbox(
            "Run of table rows",
            ids,
            format_func=lambda i: labels.get(i, i),
            key=PICKER_KEY,
            on_change=_picked,
            placeholder="Pick a run of table rows",
            help="Only the runs whose model reads table rows; picking one selects it for every page.",
        )
    if current is not None and current.id in ids:
        return current
    _needs_a_table_run(current, bool(runs))
    return None


def _needs_a_table_run(current: Run | None, others: bool) -> None:
    what = f"`{current.id}` ({run_label(current)}) does not read table rows" if current is not None else "No run yet"
    pick = " or pick one above" if others else ""
    st.info(
        f"The global view needs a model of table rows: {what}. Train one on the Train page "
        f"({where_to_get_one()}, or your own `csv:` table){pick}.",
        icon=":material/table_rows:",
    )
    st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
