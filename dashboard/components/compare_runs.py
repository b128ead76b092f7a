"""Compare training runs, as TensorBoard's run overlay: curves of several runs on the same axes, their final
metrics in one table and their settings side by side, with the settings that differ highlighted.

The runs picked by default are the session's run (in any state) and its best partner
(`comparison.side_by_side.default_comparison`: a usable run of the same data set and modality, good before
unmeasured before poor, the same model spec first, then the higher accuracy; never a text run beside an image
run); a poor run is flagged wherever it is offered."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.curves import curve_controls, show_curves
from xaidash.dashboard.nav import SCENE_RUNS
from xaidash.dashboard.run_facts import final_metrics, run_kind, settings_rows
from xaidash.dashboard.state import run_label, selected_run
from xaidash.explainers.comparison.side_by_side import default_comparison, rank_partners
from xaidash.models.runs.store import Run, list_runs

KEY = "compare_runs_pick"
DIFFERS = "background-color: #fff3cd"  # a soft yellow: these settings differ between the runs


def short_labels(runs: list[Run]) -> dict[str, str]:
    """run id -> 'model on data set (MM-DD HH:MM)', unique (the chart legend and the table headers)."""
    out: dict[str, str] = {}
    for r in runs:
        try:
            c = r.config()
            label = (
                f"{c['model']} on {c['dataset']} ({time.strftime('%m-%d %H:%M', time.localtime(c.get('created', 0)))})"
            )
        except Exception:  # noqa: BLE001 - a damaged run is labelled by its id
            label = r.id
        n, base = 2, label
        while label in out.values():
            label, n = f"{base} #{n}", n + 1
        out[r.id] = label
    return out


def metrics_table(runs: list[Run], labels: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"run": labels[r.id], **final_metrics(r)} for r in runs])


def settings_side_by_side(runs: list[Run], labels: dict[str, str]) -> pd.DataFrame:
    """Rows: settings; columns: runs (in the order picked); index: the setting's name."""
    columns = {}
    for r in runs:
        try:
            columns[labels[r.id]] = dict(settings_rows(r))
        except Exception as e:  # noqa: BLE001 - an unreadable run still gets its column
            columns[labels[r.id]] = {"state": f"unreadable: {e}"}
    order = list(dict.fromkeys(k for col in columns.values() for k in col))
    return pd.DataFrame({name: [col.get(k, "–") for k in order] for name, col in columns.items()}, index=order)


def differing(table: pd.DataFrame) -> list[str]:
    """The settings whose value is not the same for every run."""
    return [str(i) for i, row in table.iterrows() if row.nunique() > 1]


def _highlight(table: pd.DataFrame, rows: list[str]) -> pd.io.formats.style.Styler:
    return table.style.apply(lambda row: [DIFFERS if row.name in rows else "" for _ in row], axis=1)


def compare_runs_section() -> None:
    # Classifiers and language models: a scene run's scores and settings are not an accuracy's (its own details and
    # curves are under Runs).
    runs = [r for r in list_runs() if run_kind(r) not in SCENE_RUNS]
    if len(runs) < 2:
        st.info("Compare runs needs at least two runs: train another one above.")
        return
    by_id = {r.id: r for r in runs}
    labels = short_labels(runs)
    ranked = rank_partners(None, runs)  # each run's quality, read once for the flags and the default pair
    flags = {r.run.id: r.flag for r in ranked}
    if KEY in st.session_state:  # runs deleted since the last visit drop out of the choice
        st.session_state[KEY] = [i for i in st.session_state[KEY] if i in by_id]
    default = [r.id for r in default_comparison(runs, selected_run(), ranked)] if KEY not in st.session_state else None
    picked_ids = st.multiselect(
        "Runs to compare",
        list(by_id),
        default=default,
        format_func=lambda i: run_label(by_id[i]) + (f" · {flags[i]}" if flags.get(i) else ""),
        key=KEY,
        help="two or more runs: their curves on the same axes, their final metrics and settings side by side (by "
        "default the selected run and its best partner: a usable run of the same data set, good before unmeasured "
        "before poor, the same model first, then the higher accuracy; ⚠ poor: near chance or far below its recipe)",
    )
    if len(picked_ids) < 2:
        alone = len(picked_ids) == 1 and default == picked_ids
        st.caption(
            "No other run of the same data set to compare with: pick one, or train another."
            if alone
            else "Pick at least two runs."
        )
        return
    picked = [by_id[i] for i in picked_ids]
    options = curve_controls("compare_curves")
    show_curves({labels[r.id]: r.metrics() for r in picked}, options, empty_note="These runs logged no curves.")
    st.markdown("**Final metrics**")
    st.dataframe(
        metrics_table(picked, labels),
        hide_index=True,
        width="stretch",
        placeholder="–",
        column_config={
            "test acc": st.column_config.NumberColumn(format="%.2f%%"),
            "val acc": st.column_config.NumberColumn(format="%.2f%%"),
            "test R²": st.column_config.NumberColumn(format="%.3f"),
            "val R²": st.column_config.NumberColumn(format="%.3f"),
            "test RMSE": st.column_config.NumberColumn(format="%.2f", help="in the target's units"),
            "test MAE": st.column_config.NumberColumn(format="%.2f", help="in the target's units"),
            "test loss": st.column_config.NumberColumn(format="%.4f"),
            "val loss": st.column_config.NumberColumn(format="%.4f"),
            "time (s)": st.column_config.NumberColumn(format="%.1f"),
            "samples/s": st.column_config.NumberColumn(format="%.0f"),
        },
    )
    table = settings_side_by_side(picked, labels)
    rows = differing(table)
    st.markdown("**Settings**" + (f" (highlighted: {len(rows)} that differ)" if rows else " (all the same)"))
    st.dataframe(
        _highlight(table, rows),
        width="stretch",
        height=35 * (len(table) + 1) + 3,
        column_config={"_index": st.column_config.TextColumn("setting", width="medium")},
    )
