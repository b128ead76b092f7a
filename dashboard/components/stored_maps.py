"""The Explain page's stored view: one sample of a run's attribution store (opened from Compare's data-set
report, `?stored=SPLIT:INDEX`) with the maps and metrics `xaidash explain --input dataset:...` wrote, drawn
as the same `MapFigure`s as the page's computed maps (`dataset.report.stored_figures`, drawn by `map_card`) and
never recomputed; a button recomputes the sample live on the same page.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.dataset_report import (
    COMPARE_PAGE,
    STORED_PARAM,
    VIEW_KEY,
    VIEWS,
    split_size,
    store_frames,
)
from xaidash.dashboard.components.explain_maps import map_card, map_display_choice
from xaidash.dashboard.components.explain_tables import metrics_legend, metrics_table
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.row_inputs import cells_frame
from xaidash.explainers.dataset import report as R
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import MAX_TEXT_CHARS
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.scoring import METRICS
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

OPEN_SAMPLE_PARAM = "sample"  # the input picker's ?sample=test:INDEX (see components/inputs.py)


def _recompute(split: str, index: int, methods: list[str]) -> None:
    """Leave the stored view for the live page on the same sample and methods (computed anew)."""
    st.session_state["explain_methods"] = methods
    st.session_state["explain_methods_kept"] = methods
    st.query_params.pop(STORED_PARAM, None)
    st.query_params[OPEN_SAMPLE_PARAM] = f"{split}:{index}"


def _close() -> None:
    st.query_params.pop(STORED_PARAM, None)


def show_stored_sample(run: Run, bundle: ModelBundle) -> bool:
    """Draw the stored view when the address asks for one (True), else nothing (False: the live page follows).
    A request this run's store cannot answer gets a warning and the live page."""
    wanted = st.query_params.get(STORED_PARAM)
    if not wanted:
        return False
    from xaidash.explainers.dataset.store import open_store

    parsed = R.parse_stored(wanted)
    store = open_store(run.path, parsed[0]) if parsed else None
    if parsed is None or store is None:
        st.query_params.pop(STORED_PARAM, None)
        st.warning(
            f"Cannot open stored sample {wanted!r} of run `{run.id}`: "
            + ("links look like ?stored=test:INDEX." if parsed is None else "this run has no store for that split.")
        )
        return False
    split, index = parsed
    manifest, samples, metrics = store_frames(run, split)
    hit = samples[samples["index"] == index]
    if hit.empty:
        st.query_params.pop(STORED_PARAM, None)
        st.warning(f"Sample #{index} of the {split} split is not in this run's store (not explained yet).")
        return False
    row = hit.iloc[0]
    methods = [m for m in (manifest.get("methods") or []) if store.has(m, index)]
    _draw(run, bundle, store, manifest, split, index, row, methods, R.sample_metrics(metrics, index, methods))
    return True


def _banner(bundle: ModelBundle, manifest: dict[str, Any], split: str, index: int, methods: list[str]) -> None:
    """Where the maps come from, and the buttons to recompute them live, go back to the report or close."""
    st.info(
        f"**{split} #{index}: stored by `xaidash explain --input {R.input_spec(manifest, split_size(bundle, split))} --split {split}` on "
        f"{R.when(manifest.get('created'))}; not recomputed.** The maps and metrics below are the stored ones "
        f"({manifest.get('engine', 'local')} engine).",
        icon=":material/inventory_2:",
    )
    usable = {m.id for m in _usable(bundle)}
    with st.container(horizontal=True, gap="small"):
        st.button(
            "Recompute live",
            icon=":material/refresh:",
            on_click=_recompute,
            args=(split, index, [m for m in methods if m in usable]),
            disabled=split != "test",
            key="explain_stored_recompute",
            help="explain this sample again on this page with the same methods (their default parameters)"
            if split == "test"
            else "the live page picks test samples only",
        )
        st.page_link(
            COMPARE_PAGE,
            label="Back to the data-set report",
            icon=":material/leaderboard:",
            query_params={VIEW_KEY: VIEWS[1]},
        )
        st.button("Close the stored view", on_click=_close, key="explain_stored_close", type="tertiary")


def _sample_header(
    data: Any, split: str, index: int, row: Any, x: Any, displays: tuple[str, ...], bundle: ModelBundle
) -> str:
    """The sample (its picture, its text, or a row's values), its classes, loss and the methods' disagreement; the
    display the maps are drawn with (a picture's overlay or heat map, as chosen here; a text's tokens)."""
    image = x is not None
    sample = None if image else bundle.adapter.item(data, index)
    cells = None if image else adapter_of(bundle.modality).input_cells(bundle.info, sample)
    mark = " ✓" if bool(row["correct"]) else " ✗"
    display = displays[0]
    with st.container(horizontal=True, gap="medium"):
        if image:
            st.image(to_pil(x, 224), width=200)
        with st.container(width=420):
            if not image and cells is None:
                st.markdown(f"> {bundle.adapter.one_line(sample, bundle.info, MAX_TEXT_CHARS)}")
            st.markdown(
                f"**{split} #{index}** · true: **{row['label_name']}** · predicted: **{row['pred_name']}** "
                f"({float(row['prob']):.0%}){mark}"
            )
            dis = float(row["disagreement"])
            st.caption(
                f"loss {float(row['loss']):.3f} (cross-entropy of the true class)"
                + (f" · disagreement between the methods {dis:.3f} (1 − mean Spearman ρ)" if np.isfinite(dis) else "")
            )
            display = map_display_choice(st, "explain_stored_display", displays)
    if cells:  # a row of values: its values, in the columns' units
        st.dataframe(cells_frame(cells), hide_index=True, width="stretch", key="explain_stored_row")
    return display


def _draw(
    run: Run,
    bundle: ModelBundle,
    store: Any,
    manifest: dict[str, Any],
    split: str,
    index: int,
    row: Any,
    methods: list[str],
    values: dict[str, dict[str, float]],
) -> None:
    info = bundle.info
    _banner(bundle, manifest, split, index, methods)
    data = services.dataset_split(info.name, split)
    adapter = adapter_of(bundle.modality)
    x = adapter.item(data, index) if adapter.pictured else None
    with st.container(border=True):
        display = _sample_header(data, split, index, row, x, adapter.displays, bundle)
        st.caption(
            "**Colour scale:** each map on its own scale, saturating at its 99th percentile of |value|. Signed maps: "
            "red/white/blue around 0; unsigned maps: dark to bright (never red-blue)."
        )
        figures = R.stored_figures(
            store,
            index,
            methods,
            classes=info.classes,
            target=int(row["pred"]),
            seconds={m: values.get(m, {}).get("seconds") for m in methods},
            image=x,
            display=display,
        )
        with st.container(horizontal=True, gap="small"):
            for m, fig in figures.items():
                map_card(fig, key=f"explain_stored_card_{m}")
        table = {figures[m].label: v for m, v in values.items() if v and m in figures}
        if table:
            st.dataframe(metrics_table(table, METRICS), width="stretch", key="explain_stored_metrics")
            steps = manifest.get("steps")
            st.caption("Stored metrics. " + metrics_legend(bundle.modality, int(steps) if steps else CURVE_STEPS))
        params = {m: p for m, p in (manifest.get("params") or {}).items() if m in methods and p}
        if params:
            with st.expander("Details: the stored methods' parameters", icon=":material/info:"):
                st.json(params)


def _usable(bundle: ModelBundle) -> list[Any]:
    from xaidash.explainers import methods_for

    return methods_for(bundle)
