"""The Global view's settings, in one form (a change is computed when Compute is pressed, not on every click): the
class (none for a model that predicts a number: its one output), the columns for partial dependence and ICE (none: the most important), the pair for the 2-D map (none: the
two most important), the rows used, the grid, the surrogate tree's depth; in More settings the shuffles, what the
importance measures (the scores that apply to what the model predicts), the grid's spacing and the rows global SHAP explains. The defaults are `GlobalOptions`'s, which
`xaidash global` uses too."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from xaidash.data.registry import TableColumn
from xaidash.explainers.tabular.api import DEFAULT_ROWS, DEFAULT_TOP, GlobalOptions, scorings
from xaidash.explainers.tabular.grids import DEFAULT_POINTS, GRID_KINDS
from xaidash.explainers.tabular.importance import DEFAULT_REPEATS, UNITS
from xaidash.explainers.tabular.request import target_index
from xaidash.explainers.tabular.shap_global import DEFAULT_SHAP_ROWS
from xaidash.explainers.tabular.surrogate import DEFAULT_DEPTH, MAX_DEPTH
from xaidash.models.bundle import ModelBundle

MAX_GRID = 200  # grid points per column offered (the default is 50)
TRUTH_MARK = " ★"  # after a column known to set the label (a generated table's truth columns)


def column_label(name: str, truth: Sequence[str]) -> str:
    return f"{name}{TRUTH_MARK}" if name in truth else name


def _grid_kind_label(kind: str) -> str:
    return {"even": "even over the training range", "quantile": "the rows' quantiles"}.get(kind, kind)


def _more_settings(bundle: ModelBundle, key: str, held_out: int) -> dict[str, object]:
    # the scores that apply to what the model predicts (classes: accuracy or log-loss; a number: R²), the default last
    applies = scorings(bundle)
    with st.expander("More settings"):
        c1, c2 = st.columns(2)
        repeats = c1.number_input(
            "Shuffles per column", 1, 100, DEFAULT_REPEATS, key=f"global_repeats_{key}", help="permutation importance"
        )
        scoring = c2.selectbox(
            "Importance measures",
            applies,
            index=len(applies) - 1,
            format_func=lambda s: UNITS[s],
            key=f"global_scoring_{key}",
        )
        c3, c4 = st.columns(2)
        grid_kind = c3.selectbox(
            "Grid", GRID_KINDS, format_func=_grid_kind_label, key=f"global_grid_kind_{key}", help="numeric columns"
        )
        shap_rows = c4.number_input(
            "Rows for global SHAP (0: none)",
            0,
            held_out,
            min(DEFAULT_SHAP_ROWS, held_out),
            key=f"global_shap_rows_{key}",
            help="KernelSHAP explains each of these rows (a seeded pick of the rows used): the slowest part.",
        )
    return {"repeats": int(repeats), "scoring": scoring, "grid_kind": grid_kind, "shap_rows": int(shap_rows)}


def global_controls(bundle: ModelBundle, key: str, held_out: int) -> GlobalOptions:
    """The form; the options it holds (its defaults until Compute is first pressed). `held_out`: the test split's
    rows, the most that can be used."""
    columns: tuple[TableColumn, ...] = tuple(bundle.info.columns)
    names = [c.name for c in columns]
    truth = tuple(bundle.info.truth_columns)
    classes = list(bundle.info.classes)
    with st.form(f"global_form_{key}", border=True):
        c1, c2, c3 = st.columns([1, 2, 2])
        if bundle.regression is not None:  # one output: nothing to pick
            target = classes[0]
            c1.markdown(f"**Target:** the predicted {target}")
            c1.caption("Partial dependence, ICE and SHAP show the predicted value, in its units.")
        else:
            target = c1.selectbox(
                "Class",
                classes,
                index=target_index(bundle, None),
                key=f"global_target_{key}",
                help="Partial dependence, ICE and SHAP show the predicted probability of this class.",
            )
        chosen = c2.multiselect(
            "Columns for partial dependence and ICE",
            names,
            key=f"global_columns_{key}",
            format_func=lambda n: column_label(n, truth),
            placeholder=f"the {DEFAULT_TOP} most important",
        )
        pair = c3.multiselect(
            "Pair for the 2-D partial dependence",
            names,
            max_selections=2,
            key=f"global_pair_{key}",
            format_func=lambda n: column_label(n, truth),
            placeholder="the two most important",
        )
        c4, c5, c6 = st.columns(3)
        rows = c4.number_input(
            "Rows used (held-out)",
            1,
            held_out,
            min(DEFAULT_ROWS, held_out),
            key=f"global_rows_{key}",
            help=f"A seeded pick of the test split's {held_out:,} rows: swept by partial dependence, shuffled by "
            "permutation importance.",
        )
        grid = c5.slider("Grid points per column", 2, MAX_GRID, DEFAULT_POINTS, key=f"global_grid_{key}")
        depth = c6.slider(
            "Surrogate tree depth",
            1,
            MAX_DEPTH,
            DEFAULT_DEPTH,
            key=f"global_depth_{key}",
            help="deeper: harder to read",
        )
        more = _more_settings(bundle, key, held_out)
        st.form_submit_button("Compute", type="primary", icon=":material/play_arrow:")
    return GlobalOptions(
        columns=list(chosen) or None,
        pair=list(pair) if len(pair) == 2 else None,
        target=str(target),
        rows=int(rows),
        grid_points=int(grid),
        surrogate_depth=int(depth),
        **more,  # type: ignore[arg-type]
    )
