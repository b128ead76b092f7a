"""The counterfactual of Explain's "What would change the answer" panel for a row of a model that predicts a number
(`bundle.regression`): the range of values to reach, typed as a person says it (empty: past the training median,
shown with its value), the columns kept fixed and the most columns to change; on a button, the fewest changed columns
found (explainers/robust/table_value_counterfactual.py), each before → after in its units, and the prediction before
→ after in the target's units. A range that cannot be read, or one the row is already in, is one line. The result
goes into the session's report (`counterfactual_extra`). Drawing only: the search is explainers.robust's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st
import torch

from xaidash.dashboard import services
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.session_results import record_result
from xaidash.dashboard.errors import show_error
from xaidash.explainers.figures.report import ExplainReport
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.result import ColumnChange
from xaidash.explainers.robust.searches import SearchStep
from xaidash.explainers.robust.table_counterfactual import DEFAULT_CHANGES
from xaidash.explainers.robust.table_value_counterfactual import (
    RANGE_HELP,
    ValueCounterfactual,
    ValueRange,
    default_range,
    parse_range,
    table_value_counterfactual,
    target_median,
    value_change_text,
)
from xaidash.explainers.session_extras import counterfactual_extra
from xaidash.models.bundle import ModelBundle


def _default(bkey: str, bundle: ModelBundle, before: float, cache: services.LRUCache) -> tuple[float, ValueRange]:
    """The training median of the target and the default range for a row predicted `before`, once per model and
    value (both read the training split's labels)."""
    median, _ = cache.get_or_compute((bkey, "target median"), lambda: target_median(bundle))
    default, _ = cache.get_or_compute((bkey, "default range", before), lambda: default_range(bundle, before))
    return float(median), default


def _goal(typed: str) -> ValueRange | None:
    """The typed range (None when empty: the default); ExplainError in one line when it cannot be read."""
    return parse_range(typed) if typed.strip() else None


def _run(
    bkey: str, bundle: ModelBundle, raw: Any, goal: ValueRange | None, fixed: list[str], changes: int
) -> ValueCounterfactual:
    """The search with a progress bar of its model runs."""
    bar = st.progress(0.0, text="Looking for a counterfactual…")

    def progress(step: SearchStep) -> None:
        bar.progress(step.fraction, text=f"Looking for a counterfactual: {step.text()}")

    try:
        with leased_model(bkey, bundle) as replica:
            return table_value_counterfactual(replica, raw, goal, fixed=fixed, max_changes=changes, progress=progress)
    finally:
        bar.empty()


def changes_frame(changes: Sequence[ColumnChange]) -> pd.DataFrame:
    """A table counterfactual's changed columns, the row's value and the changed one in their units (either kind)."""
    return pd.DataFrame(
        {
            "column": [c.column for c in changes],
            "the row": [c.old_text for c in changes],
            "→ changed to": [c.new_text for c in changes],
        }
    )


def _shown(cf: ValueCounterfactual) -> None:
    """The found change: each changed column before → after in its units, the prediction before → after."""
    assert cf.after is not None
    st.success(cf.summary(), icon=":material/check_circle:")
    st.markdown(f"**Predicted {value_change_text(cf.target, cf.before, cf.after)}**")
    st.dataframe(changes_frame(cf.changes), hide_index=True)
    if cf.fixed:
        st.caption("Kept as they were: " + ", ".join(cf.fixed) + ".")


def value_counterfactual_section(
    bkey: str, bundle: ModelBundle, raw: Any, report: ExplainReport, i: int, key: str, cache: services.LRUCache
) -> None:
    """The panel's counterfactual for input `i` of a model that predicts a number (`cache`: the panel's results)."""
    target = bundle.regression
    assert target is not None
    said = report.inputs[i].predictions["A"][0].value
    before = float(said) if said is not None else float(bundle.predict_proba(torch.as_tensor(raw)[None])[0, 0])
    median, default = _default(bkey, bundle, before, cache)
    st.markdown(
        f"**Counterfactual**: the fewest changed columns, each within the training data's range, that bring the "
        f"predicted {target.name} ({target.value_text(before)} for this row) into a range you give."
    )
    c1, c2 = st.columns([2, 1])
    typed = str(
        c1.text_input(
            f"Range of {target.name} to reach",
            key=f"{key}_cf_range",
            placeholder=f"{default.text(target)} (the default: past the training median)",
            help=(
                f"Type {RANGE_HELP}, in the target's units. Empty: past the training median of {target.name} "
                f"({target.value_text(median)}) to the other side: {default.text(target)} for this row."
            ),
        )
    )
    changes = int(c2.number_input("Budget: most changed columns", 1, 10, DEFAULT_CHANGES, key=f"{key}_cf_cols"))
    fixed = st.multiselect(
        "Keep fixed",
        [c.name for c in bundle.info.columns],
        key=f"{key}_cf_fixed",
        help="columns the search leaves as they are (what cannot be changed, such as an age or a sex)",
    )
    try:
        goal = _goal(typed)
    except ExplainError as err:
        st.error(str(err), icon=":material/error:")
        return
    cache_key = (bkey, services.content_key(raw), "value counterfactual", goal, tuple(fixed), changes)
    if st.button("Find the counterfactual", key=f"{key}_cf_run", icon=":material/alt_route:"):
        try:
            cache.get_or_compute(cache_key, lambda: _run(bkey, bundle, raw, goal, list(fixed), changes))
        except Exception as err:  # noqa: BLE001 - said on the page in one line
            show_error(err, "No counterfactual")
            return
    cf = cache.get(cache_key)
    if cf is None:
        return
    record_result(i, "counterfactual", lambda: counterfactual_extra(i, cf))  # into the session's report
    if not cf.found:
        st.warning(cf.summary(), icon=":material/block:")
        if cf.note:
            st.caption(f"{cf.note[:1].upper()}{cf.note[1:]}.")
        return
    _shown(cf)
