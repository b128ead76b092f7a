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
    """Raw rows (N, F) as a table: numbers in their columns' units, a category column by its categories' names."""
    values = np.asarray(rows, dtype=np.float64).reshape(len(index), -1)
    data: dict[str, Any] = {}
    for j, column in enumerate(info.columns):
        col = values[:, j]
        data[column.name] = [column.value_text(v) for v in col] if column.categorical else col
    return pd.DataFrame(data, index=list(index))


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


def _example_line(info: DatasetInfo, row: Any) -> str:
    return ", ".join(c.value_text(float(v)) for c, v in zip(info.columns, np.asarray(row).reshape(-1), strict=True))


def typed_rows(bundle: ModelBundle, key: str, max_inputs: int, example: Any) -> list[tuple[Any, str]]:
    """Rows typed one a line as comma-separated values in column order (category names), each read by the adapter;
    (raw row, name) per row read, the others said in one line each."""
    info = bundle.info
    widget = f"{key}_rows_text"
    if widget not in st.session_state:
        st.session_state[widget] = _example_line(info, example)
    st.caption("Columns, in order: " + ", ".join(f"**{c.name}**" for c in info.columns))
    text = st.text_area(
        "Rows: one a line, values separated by commas",
        key=widget,
        height=90,
        help="numbers in each column's own units (within the training data's range); a category column by its "
        "category's name",
    )
    lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
    if not lines:
        st.warning("Type a row: one value per column, separated by commas.", icon=":material/edit_note:")
        return []
    if len(lines) > max_inputs:
        st.warning(f"{len(lines)} rows typed; the first {max_inputs} are used.")
    adapter = adapter_of(bundle.modality)
    out = []
    for j, line in enumerate(lines[:max_inputs]):
        try:
            row, _ = adapter.read_input(line, bundle)
        except ExplainError as e:
            st.error(f"Row {j + 1}: {e}", icon=":material/error:")
            continue
        out.append((row, f"typed row {j + 1}"))
    return out


def uploaded_rows(bundle: ModelBundle, key: str, max_inputs: int, types: tuple[str, ...]) -> list[tuple[Any, str]]:
    """Rows of an uploaded CSV file whose header names the data set's columns (other columns left out)."""
    f = st.file_uploader(
        "A .csv file with a header naming the columns (other columns, such as an id or the label, are left out)",
        type=list(types),
        key=f"{key}_rowsfile",
    )
    if f is None:
        st.info(f"Upload a UTF-8 .csv file with the columns {', '.join(c.name for c in bundle.info.columns)}.")
        return []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(f.name).name
        path.write_bytes(f.getvalue())
        try:
            rows = adapter_of(bundle.modality).read_inputs(str(path), bundle)
        except ExplainError as e:
            st.error(str(e), icon=":material/error:")
            return []
    if len(rows) > max_inputs:
        st.warning(f"{f.name} holds {len(rows)} rows; the first {max_inputs} are used.")
    shown = rows[:max_inputs]
    st.dataframe(
        row_frame(bundle.info, np.stack([np.asarray(r) for r, _ in shown]), range(1, len(shown) + 1)), width="stretch"
    )
    return shown
