"""Explain's "Edit this row" panel for an input shown as a row of values (a table row): a slider per numeric column
within the training data's range (whole numbers for a whole-number column), a choice per category column (its
categories' names), and, for the edited row, the model's probabilities of every class beside the row's and the
chosen methods' maps; "Reset to the row" puts every control back. The edit is checked and predicted by
explainers.robust's `what_if` (one line when a value is refused); drawing only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
import torch

from xaidash.dashboard import services
from xaidash.dashboard.components.explain_maps import error_card, map_card
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import selected_run
from xaidash.data.registry import DatasetInfo, RegressionTarget, TableColumn
from xaidash.explainers.api import explain
from xaidash.explainers.figures.map_figure import explanation_figures
from xaidash.explainers.figures.report import ExplainReport
from xaidash.explainers.robust.table_value_counterfactual import value_change_text
from xaidash.explainers.robust.what_if import WhatIf, what_if
from xaidash.models.bundle import ModelBundle

SLIDER_STEPS = 200  # a numeric column's slider moves in this many steps across its training range
GRID = 3  # controls per line


def _key(i: int, row: np.ndarray, j: int) -> str:
    """Column j's control for input i's row: a new row (another pick) starts from its own values."""
    return f"whatif_{i}_{services.content_key(torch.as_tensor(row))[:10]}_{j}"


def _slider_range(column: TableColumn, value: float) -> tuple[float, float]:
    """The slider's ends: the training data's range, widened to the row's own value when it lies outside."""
    return min(column.low, value), max(column.high, value)


def _reset(i: int, info: DatasetInfo, row: np.ndarray) -> None:
    for j, column in enumerate(info.columns):
        v = float(row[j])
        st.session_state[_key(i, row, j)] = column.value_text(v) if column.categorical else _widget_value(column, v)


def _widget_value(column: TableColumn, value: float) -> float | int:
    return round(value) if column.integer else float(value)


def _control(column: TableColumn, key: str, value: float, container: Any) -> str | float:
    """The column's control, starting at the row's value; its value (a category's name, or a number)."""
    if column.categorical:
        names = list(column.categories)
        if key not in st.session_state:
            st.session_state[key] = column.value_text(value)
        return str(container.selectbox(column.name, names, key=key))
    low, high = _slider_range(column, value)
    if key not in st.session_state:
        st.session_state[key] = _widget_value(column, value)
    if column.integer:
        return int(container.slider(column.name, round(low), round(high), step=1, key=key))
    step = (high - low) / SLIDER_STEPS or 1.0
    return float(container.slider(column.name, float(low), float(high), step=step, key=key, format="%.4g"))


def _changes(info: DatasetInfo, row: np.ndarray, values: list[str | float]) -> dict[str, str | float]:
    """The columns whose control differs from the row's value (name -> new value)."""
    out: dict[str, str | float] = {}
    for column, old, new in zip(info.columns, row.tolist(), values, strict=True):
        if column.categorical:
            if new != column.value_text(old):
                out[column.name] = new
        elif not np.isclose(float(new), old, rtol=0, atol=1e-9 + 1e-6 * abs(column.high - column.low)):
            out[column.name] = float(new)
    return out


def _work(bkey: str, bundle: ModelBundle, row: np.ndarray, changes: dict[str, str | float], choice: Any) -> Any:
    """The edit predicted (`what_if`), and each chosen method's map of the edited row (or its error)."""
    with leased_model(bkey, bundle) as replica:
        edited = what_if(replica, torch.as_tensor(row), changes, method=None)
        maps: dict[str, Any] = {}
        for m in choice.methods:
            try:
                target = choice.target if choice.target is not None else int(np.argmax(edited.after))
                maps[m] = explain(replica, edited.row.unsqueeze(0), [target], m, **choice.params.get(m, {}))
            except Exception as err:  # noqa: BLE001 - one method's failure is its card's
                maps[m] = err
    return edited, maps


def _probabilities(edited: WhatIf, classes: tuple[str, ...]) -> None:
    st.dataframe(
        pd.DataFrame(
            {
                "class": list(classes),
                "the row": edited.before,
                "edited row": edited.after,
                "change": [f"{d:+.1%}" for d in edited.after - edited.before],
            }
        ),
        hide_index=True,
        column_config={
            "the row": st.column_config.ProgressColumn("the row", format="percent", min_value=0.0, max_value=1.0),
            "edited row": st.column_config.ProgressColumn("edited row", format="percent", min_value=0.0, max_value=1.0),
        },
        width="stretch",
    )


def _value_change(edited: WhatIf, target: RegressionTarget) -> str:
    """A number to predict: 'disease progression: 152.3 → 171.0 (+18.7)' in the target's units."""
    return value_change_text(target, float(np.ravel(edited.before)[0]), float(np.ravel(edited.after)[0]))


def _maps(edited: WhatIf, maps: dict[str, Any], choice: Any, info: DatasetInfo, i: int) -> None:
    done = {m: e for m, e in maps.items() if not isinstance(e, BaseException)}
    figures = explanation_figures(
        done,
        0,
        classes=tuple(info.classes),
        scale_mode=choice.scale_mode,
        display=choice.display,
        regression=info.regression,
    )
    with st.container(horizontal=True, gap="small"):
        for m, e in maps.items():
            if isinstance(e, BaseException):
                error_card(choice.specs[m].label, e)
            else:
                map_card(figures[m], key=f"whatif_card_{i}_{m}", enlarge=False)


def what_if_panel(report: ExplainReport, i: int, choice: Any) -> None:
    """The panel for input `i` of the Explain page's report, when it is a row of values; `choice`: the page's
    methods, parameters, target, scale and display (explain.Choice)."""
    inp = report.inputs[i]
    run = selected_run()
    if inp.values is None or run is None:
        return
    try:
        bundle = services.bundle_for(run)
    except Exception as err:  # noqa: BLE001 - the page above already said it
        show_error(err, "Model not available")
        return
    bkey, info, row = services.run_key(run), bundle.info, np.asarray(inp.values, dtype=np.float32)
    with st.expander("Edit this row", icon=":material/tune:", key=f"whatif_panel_{i}"):
        st.caption(
            "Move a column's slider (within the training data's range) or pick another category: the prediction and "
            "the maps below are for the edited row."
        )
        st.button("Reset to the row", key=f"whatif_reset_{i}", on_click=_reset, args=(i, info, row))
        cols = st.columns(GRID)
        values = [_control(c, _key(i, row, j), float(row[j]), cols[j % GRID]) for j, c in enumerate(info.columns)]
        changes = _changes(info, row, values)
        key = (bkey, services.content_key(torch.as_tensor(row)), "whatif", tuple(sorted(changes.items())))
        key = (*key, *(choice.method_key(m) for m in choice.methods))
        try:
            edited, maps = _results().get_or_compute(key, lambda: _work(bkey, bundle, row, changes, choice))[0]
        except Exception as err:  # noqa: BLE001 - a refused value is one line; the rest of Explain stays
            show_error(err, "The edited row cannot be predicted")
            return
        if info.regression is not None:  # a number: its value before and after, never a class or a percentage
            st.markdown(f"**{_value_change(edited, info.regression)}**")
        else:
            st.markdown(f"**{edited.summary(info.classes)}**")
            _probabilities(edited, tuple(info.classes))
        if maps:
            _maps(edited, maps, choice, info, i)


@st.cache_resource(show_spinner=False)
def _results() -> services.LRUCache:
    """Edited rows predicted and explained (keyed by the model's weights version, the row and the edit)."""
    return services.LRUCache(64)
