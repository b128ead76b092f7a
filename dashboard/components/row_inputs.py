"""The input picker's parts for inputs shown as rows of values (a table's rows: the adapter gives their cells,
`input_cells`): the test rows as a table to pick from (one column per data column, category names, the true class,
the prediction and its probability), rows typed as comma-separated values, and rows from an uploaded CSV file. Every
row is read and checked by the adapter (`read_input`, `read_inputs`); drawing only."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.data.registry import DatasetInfo
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

ROW_INDEX, TRUE, PREDICTED, PROBABILITY = "test #", "true", "predicted", "probability"
ERROR = "error"  # a number to predict: predicted - true, in the target's units


def shown_as_rows(bundle: ModelBundle) -> bool:
    """Whether this model's inputs are shown as rows of values (its adapter gives cells for an example input)."""
    example = bundle.adapter.example(bundle.info, bundle.tokenizer)
    return adapter_of(bundle.modality).input_cells(bundle.info, example) is not None


def row_frame(info: DatasetInfo, rows: Any, index: Sequence[int]) -> pd.DataFrame:
    """Raw inputs as the adapter's table of them (rows: numbers in their columns' units, categories by name)."""
    frame = adapter_of(info.modality).preview(info, list(rows))
    frame.index = list(index)
    return frame


def with_sparklines(frame: pd.DataFrame, adapter: Any, raws: Sequence[Any]) -> dict[str, Any]:
    """Adds a 'shape' column to a table of inputs, each drawn as a small line, where the adapter draws one (a
    series); the table's column settings for it (none otherwise)."""
    lines = [adapter.sparkline(r) for r in raws]
    if not lines or lines[0] is None:
        return {}
    frame.insert(1, "shape", lines)
    return {"shape": st.column_config.LineChartColumn("shape", width="medium")}


def show_frame(frame: pd.DataFrame) -> None:
    """A table of inputs, a list-valued column (a series' values) drawn as a sparkline."""
    lines = {
        c: st.column_config.LineChartColumn(c)
        for c in frame.columns
        if len(frame) and isinstance(frame[c].iloc[0], list)
    }
    st.dataframe(frame, width="stretch", column_config=lines)


def _select(df_key: str, pick_key: str, shown: list[int], max_inputs: int) -> None:
    """The table's selection as the chosen samples (the first `max_inputs` rows selected)."""
    picked = [shown[r] for r in st.session_state[df_key].selection.rows]
    auto = st.session_state.pop(f"{pick_key}_auto", None)
    if auto is not None and list(st.session_state.get(pick_key) or []) == list(auto) and len(picked) > len(auto):
        picked = [i for i in picked if i not in auto]  # the row picked for the user: the first tick replaces it
    st.session_state[pick_key] = picked[:max_inputs]


def _show_chosen(df_key: str, positions: list[int]) -> None:
    """Tick the chosen rows in the table (a choice made in the samples list or by Random shows there too)."""
    state = st.session_state.get(df_key)
    ticked = sorted(state["selection"]["rows"]) if state is not None else None
    if ticked != sorted(positions):
        st.session_state[df_key] = {"selection": {"rows": positions, "columns": [], "cells": []}}


def row_table(
    info: DatasetInfo,
    split_rows: Any,
    idx: list[int],
    labels: np.ndarray,
    probs: np.ndarray,
    pick_key: str,
    max_inputs: int,
) -> None:
    """The filtered test rows as a table; selecting rows (the boxes at the left) picks them. A number to predict:
    the true and predicted values and the error, in the target's units, instead of classes."""
    head = _head(info, idx, labels, probs)
    table = pd.concat([head, row_frame(info, split_rows[idx], idx)], axis=1)
    chosen = list(st.session_state.get(pick_key) or [])
    st.caption(
        f"Tick rows at the left to explain them (at most {max_inputs}; ☑ = chosen: {len(chosen)}). Values are in "
        "each column's own units, categories by name; sort by a column's header."
    )
    df_key = f"{pick_key}_table"
    _show_chosen(df_key, [idx.index(i) for i in chosen if i in idx])
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        height=min(420, 38 + 35 * len(idx)),
        key=df_key,
        on_select=lambda: _select(df_key, pick_key, idx, max_inputs),
        selection_mode="multi-row",
        column_config={
            PROBABILITY: st.column_config.ProgressColumn(PROBABILITY, format="percent", min_value=0.0, max_value=1.0),
            # a number to predict: its values to a tenth, in the target's units (the header names them)
            **{c: st.column_config.NumberColumn(c, format="%.1f") for c in head.columns[1:] if info.regression},
        },
    )


def _head(info: DatasetInfo, idx: list[int], labels: np.ndarray, probs: np.ndarray) -> pd.DataFrame:
    """The table's first columns: index, true and predicted class with its probability, or value and error."""
    target = info.regression
    if target is not None:
        unit = f" ({target.unit})" if target.unit else ""
        true, pred = labels[idx].astype(np.float64), probs[idx, 0].astype(np.float64)
        return pd.DataFrame(
            {ROW_INDEX: idx, TRUE + unit: true, PREDICTED + unit: pred, ERROR + unit: pred - true}, index=idx
        )
    preds = probs.argmax(1)
    return pd.DataFrame(
        {
            ROW_INDEX: idx,
            TRUE: [info.classes[int(labels[i])] for i in idx],
            PREDICTED: [info.classes[int(preds[i])] for i in idx],
            PROBABILITY: [float(probs[i, preds[i]]) for i in idx],
        },
        index=idx,
    )


def cells_frame(cells: Sequence[str]) -> pd.DataFrame:
    """An input's cells ('column = value') as a one-row table, a column per cell."""
    parts = [cell.partition(" = ") for cell in cells]
    return pd.DataFrame([{name: value for name, _, value in parts}])


def typed_rows(bundle: ModelBundle, key: str, max_inputs: int, example: Any) -> list[tuple[Any, str]]:
    """Rows typed one a line as comma-separated values in column order (category names), each read by the adapter;
    (raw row, name) per row read, the others said in one line each."""
    adapter = adapter_of(bundle.modality)
    guide = adapter.typing_guide(bundle.info, example)
    assert guide is not None  # the adapter offers the 'values' source only with a guide
    widget = f"{key}_rows_text"
    if widget not in st.session_state:
        st.session_state[widget] = guide.example
    st.caption(guide.caption)
    text = st.text_area(guide.label, key=widget, height=90, help=guide.help)
    lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
    if not lines:
        st.warning(guide.empty, icon=":material/edit_note:")
        return []
    if len(lines) > max_inputs:
        st.warning(f"{len(lines)} inputs typed; the first {max_inputs} are used.")
    out = []
    for j, line in enumerate(lines[:max_inputs]):
        try:
            row, _ = adapter.read_input(line, bundle)
        except ExplainError as e:
            st.error(f"{adapter.sample.capitalize()} {j + 1}: {e}", icon=":material/error:")
            continue
        out.append((row, f"typed {adapter.sample} {j + 1}"))
    return out


def uploaded_rows(bundle: ModelBundle, key: str, max_inputs: int, types: tuple[str, ...]) -> list[tuple[Any, str]]:
    """Rows of an uploaded CSV file whose header names the data set's columns (other columns left out)."""
    adapter = adapter_of(bundle.modality)
    example = adapter.example(bundle.info, bundle.tokenizer)[0]
    guide = adapter.typing_guide(bundle.info, example)
    assert guide is not None  # the adapter offers the 'rows file' source only with a guide
    f = st.file_uploader(guide.file_label, type=list(types), key=f"{key}_rowsfile")
    if f is None:
        st.info(guide.file_hint)
        return []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(f.name).name
        path.write_bytes(f.getvalue())
        try:
            rows = adapter.read_inputs(str(path), bundle)
        except ExplainError as e:
            st.error(str(e), icon=":material/error:")
            return []
    if len(rows) > max_inputs:
        st.warning(f"{f.name} holds {len(rows)} inputs; the first {max_inputs} are used.")
    shown = rows[:max_inputs]
    show_frame(row_frame(bundle.info, [r for r, _ in shown], range(1, len(shown) + 1)))
    return shown
