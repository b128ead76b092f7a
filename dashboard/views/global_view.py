"""Global view: what a model of table rows does over the whole table. Which columns it relies on (permutation
importance with intervals), how its answer moves with one column (partial dependence and ICE) or two (a 2-D map),
global SHAP with its dependence plots, a surrogate tree you can read with its fidelity, and glassbox models beside
the network. One call computes it all (`explainers.tabular.global_report`, as `xaidash global` does), cached per run
and settings; this page picks, draws and downloads. A model that predicts a number (`GlobalReport.task` 'values') reads
in the target's units throughout: its predicted value on the axes, R² as its score and importance, values at the
surrogate's leaves, the glassboxes' test R²."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.global_charts import (
    MAX_BARS,
    ice_chart,
    importance_chart,
    pair_chart,
    shap_bars_chart,
    shap_dependence_chart,
)
from xaidash.dashboard.components.global_compute import Computed, computed
from xaidash.dashboard.components.global_controls import TRUTH_MARK, global_controls
from xaidash.dashboard.components.global_runs import pick_table_run
from xaidash.dashboard.components.global_sections import downloads, glassbox_section, surrogate_section
from xaidash.dashboard.components.inputs import stop_without_dataset
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.formatting import measured_text
from xaidash.explainers.tabular.api import GlobalReport
from xaidash.explainers.tabular.importance import NAMES
from xaidash.models.bundle import ModelBundle

CENTRED = "centred"
PLAIN = "plain"


def header() -> None:
    st.title("Global view")
    st.caption(
        "What the model does over the whole table, not for one row: which columns it relies on, how its answer "
        "moves when one column or two change, and whether a model you can read would have done as well. Computed "
        "on the held-out (test) rows; the surrogate and the glassbox models are fitted on the training rows."
    )


def in_pairs(items: Sequence[Any], draw: Callable[[Any], object]) -> None:
    """Draw the items two to a row."""
    for start in range(0, len(items), 2):
        for column, item in zip(st.columns(2), items[start : start + 2], strict=False):
            with column:
                draw(item)


def predicts_values(report: GlobalReport) -> bool:
    """Whether the report is of a model that predicts a number (read in its units) rather than classes."""
    return report.task == "values"


def what_is_shown(report: GlobalReport) -> str:
    """'the predicted probability of class 'malignant'', or 'the predicted disease progression' (a number)."""
    return (
        f"the {report.value_axis}"
        if predicts_values(report)
        else f"the predicted probability of class {report.target!r}"
    )


def summary_line(done: Computed, held_out: int) -> None:
    r = done.report
    took = sum(r.seconds.values())
    kept = " (kept from an earlier computation with these settings)" if done.reused else ""
    if predicts_values(r):
        what, score = f"predicting {r.target}", f"Test {r.score_name} of the network: {r.network_score:.3f}."
    else:
        what, score = f"class {r.target!r}", f"Test accuracy of the network: {100 * r.network_accuracy:.1f}%."
    st.caption(
        f"{r.model} on {r.dataset}: {r.rows:,} of {held_out:,} held-out rows, {what}, on {r.device}, "
        f"computed in {took:.1f} s{kept}. {score}"
    )


def importance_section(report: GlobalReport, truth: Sequence[str]) -> None:
    st.subheader("Which columns matter: permutation importance")
    st.altair_chart(importance_chart(report.importance, truth), width="stretch")
    imp = report.importance
    shown = (
        f"The {MAX_BARS} most important of {len(imp.columns)} columns (every one in global.json). "
        if len(imp.columns) > MAX_BARS
        else ""
    )
    truth_of = "values" if predicts_values(report) else "labels"
    st.caption(
        f"{shown}Each column's values shuffled among the {imp.rows:,} rows, {imp.repeats} times: the bar is how much worse "
        f"the model scores on the true {truth_of} ({imp.units}; baseline {NAMES[imp.scoring]} {imp.baseline:.3f}), the "
        "whisker "
        "the 95% interval over the shuffles. Correlated columns share the credit: shuffling one leaves its twins to "
        "carry the same information, so each may look unimportant although together they matter."
    )


def dependence_section(report: GlobalReport, key: str) -> None:
    st.subheader("How the answer moves with one column: partial dependence and ICE")
    kind = st.segmented_control(
        "Curves",
        [PLAIN, CENTRED],
        default=PLAIN,
        key=f"global_centred_{key}",
        format_func=lambda k: "ICE as predicted" if k == PLAIN else "centred ICE (each starts at 0)",
        help="Centred: every curve minus its value at the grid's first point, so curves that differ only in level "
        "collapse and the rows the column affects differently stand out.",
    )
    centred, values = kind == CENTRED, predicts_values(report)
    in_pairs(report.dependence, lambda d: st.altair_chart(ice_chart(d, centred, values), width="stretch"))
    st.caption(
        f"Each thin line is one row (ICE: individual conditional expectation): {what_is_shown(report)} as the "
        "column is set to each grid value, everything else in the row held; its "
        "colour is the row's own value of the column. The black line is their mean, the partial dependence. The "
        "ticks along the bottom are the rows' own values: where there are none, the curves show the model outside "
        "its data. A flat black line over fanning curves is the sign of an interaction: see the pair below."
    )


def _map_range(report: GlobalReport, low: float, high: float) -> str:
    """'0.120 to 0.870', or in the target's units '98.4 to 231.7 mmol/L' (a number to predict)."""
    if not predicts_values(report):
        return f"{low:.3f} to {high:.3f}"
    unit = f" {report.target_unit}" if report.target_unit else ""
    return f"{measured_text(low)} to {measured_text(high)}{unit}"


def pair_section(done: Computed) -> None:
    report, pair = done.report, done.report.pair
    if pair is None:
        return
    st.subheader("Two columns together: 2-D partial dependence")
    left, right = st.columns([3, 2])
    left.altair_chart(pair_chart(pair, predicts_values(report)), width="stretch")
    why = "the two most important columns (pick another pair above)" if done.pair_chosen_here else "the pair you chose"
    right.caption(
        f"The mean of {what_is_shown(report)} over the rows with {pair.columns[0]} and "
        f"{pair.columns[1]} both set to each pair of grid values ({len(pair.grid_a)} x {len(pair.grid_b)}): {why}. "
        f"The map ranges from {_map_range(report, float(pair.pdp.min()), float(pair.pdp.max()))}. Where one column's "
        "partial dependence is flat but the map is not, the two act together (an interaction)."
    )


def shap_section(report: GlobalReport, truth: Sequence[str]) -> None:
    st.subheader("Global SHAP")
    shap = report.shap
    if shap is None:
        st.caption("Off: set Rows for global SHAP above 0 under More settings to compute it.")
        return
    st.altair_chart(shap_bars_chart(shap, truth), width="stretch")
    explained = f"the predicted {shap.target}" if predicts_values(report) else f"class {shap.target!r}"
    st.caption(
        f"{shap.method} explained {shap.rows} rows (a seeded pick of the rows used) for {explained}, in "
        f"{shap.seconds:.1f} s: each row's attribution of each column is its {shap.units}. The bars are the mean "
        "|attribution| per column. Below, each chosen column's attribution against its value, coloured by the "
        "column that interacts with it most strongly (shap's approximate_interactions): a vertical spread "
        "ordered by colour means the two act together."
    )
    values = predicts_values(report)
    in_pairs(shap.dependence, lambda d: st.altair_chart(shap_dependence_chart(shap, d, values), width="stretch"))


def truth_note(truth: Sequence[str]) -> None:
    if truth:
        st.caption(
            f"This table was generated with a known truth: {', '.join(truth)} set the label. They are marked "
            f"{TRUTH_MARK.strip()} in the choices and in red in the bar charts, so you can check what each method "
            "finds."
        )


def compute(key: str, bundle: ModelBundle, held_out: int, run_id: str) -> Computed:
    options = global_controls(bundle, run_id, held_out)
    if len(st.session_state.get(f"global_pair_{run_id}") or ()) == 1:
        st.caption("One column picked for the pair: pick a second one (until then the two most important are shown).")
    try:
        return computed(key, bundle, options)
    except Exception as e:  # one message (show_error folds unexpected ones), never a traceback
        show_error(e, "Global view")
        st.stop()
        raise  # unreachable: st.stop() raises


def main() -> None:
    header()
    if pick_table_run() is None:
        st.stop()
    run, bundle = require_bundle("see globally")
    stop_without_dataset(bundle, "the global view (it sweeps the data set's rows)")
    key = services.run_key(run)
    held_out = len(services.dataset_split(bundle.info.name, "test"))
    truth = tuple(bundle.info.truth_columns)
    truth_note(truth)
    done = compute(key, bundle, held_out, run.id)
    report = done.report
    summary_line(done, held_out)
    importance_section(report, truth)
    dependence_section(report, run.id)
    pair_section(done)
    shap_section(report, truth)
    st.subheader("A model you can read of the network: surrogate tree")
    surrogate_section(report)
    st.subheader("How much does the network gain over a model you can read?")
    glassbox_section(report)
    downloads(report, done.options, run.id, run.id)


main()
