"""The input picker's test rows for a model that predicts a number (`DatasetInfo.regression`): no classes to filter
by and nothing right or wrong, so the rows are ordered by how far the prediction is off instead, each named by its
true and predicted value in the target's units. Drawing only; the picker (inputs.py) does the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import streamlit as st

from xaidash.data.registry import RegressionTarget

ORDERS = ("test order", "largest errors first", "smallest errors first")


def regression_order(
    target: RegressionTarget, key: str, labels: np.ndarray, values: np.ndarray
) -> tuple[list[int], str]:
    """The 'Show' choice over the test rows: (their indices in that order, the choice). A forecast's rows hold a
    value per step ahead: its error is the mean over them."""
    errors = np.abs(values - labels).reshape(len(values), -1).mean(1)
    show = str(
        st.radio(
            "Show",
            ORDERS,
            horizontal=True,
            key=f"{key}_order",
            help=f"order the test rows by the absolute error of the predicted {target.name}",
        )
    )
    idx = list(range(len(values)))
    if show != ORDERS[0]:
        idx = np.argsort(-errors if show == ORDERS[1] else errors, kind="stable").tolist()
    st.caption(
        f"{len(values)} test rows; the model predicts {target.name} (a number): mean absolute error "
        f"{target.value_text(float(errors.mean()))}, largest {target.value_text(float(errors.max()))}."
    )
    return idx, show


def row_describer(target: RegressionTarget, labels: np.ndarray, values: np.ndarray) -> Callable[[int], str]:
    """'#3 true 151 → 152.3' for the samples list."""

    return lambda i: f"#{i} true {first_value_text(target, labels[i])} → {first_value_text(target, values[i])}"


def first_value_text(target: RegressionTarget, values: Any) -> str:
    """A true or predicted value in the target's units; a forecast's first step ahead, then '…'."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return target.value_text(float(flat[0])) + (" …" if len(flat) > 1 else "")
