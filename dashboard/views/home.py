"""Home: what xaidash does, how to start, which data sets work offline, and the runs present."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard.errors import guard
from xaidash.dashboard.state import select_run, selected_run
from xaidash.data.catalogue import datasets_table
from xaidash.data.paths import data_root
from xaidash.models.runstore import runs_root, runs_table

st.title("xaidash")
st.write(
    "Train PyTorch models and look inside them: which pixels or words drove a prediction, according to "
    "gradients (saliency, Integrated Gradients, DeepLift), class activation maps (Grad-CAM), perturbations "
    "(occlusion, LIME) and Shapley values (SHAP); and how far to trust each map (deletion and insertion "
    "curves, pointing game, completeness, sanity checks)."
)

st.subheader("Start")
c1, c2, c3 = st.columns(3)
with c1:
    st.markdown(
        "**1. Train a model, or pick a run below**  \nPick a data set and a model; training runs in the "
        "background and you can watch its curves. The built-in `shapes`, `digits` and `cues` data sets work offline."
    )
    st.page_link("views/train.py", label="Train a model", icon=":material/model_training:")
with c2:
    st.markdown(
        "**2. Explain its predictions**  \nPick test images or texts (or upload your own), choose "
        "methods, and see their maps side by side."
    )
    st.page_link("views/explain.py", label="Explain predictions", icon=":material/image_search:")
with c3:
    st.markdown(
        "**3. Compare methods**  \nScore every method on a sample of the test split: faithfulness, "
        "ground truth, agreement, and the randomisation sanity check."
    )
    st.page_link("views/compare.py", label="Compare methods", icon=":material/leaderboard:")

st.subheader("Data sets")
with guard("Listing data sets"):
    rows = datasets_table()
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    missing = [r["name"] for r in rows if r["status"] == "needs download"]
    if missing:
        st.caption(
            f"{', '.join(missing)}: not under the data root `{data_root()}` (set XAIDASH_DATA). "
            "They download on first use when the machine is online."
        )

st.subheader("Runs")
with guard("Listing runs"):
    runs = runs_table()
    if runs:
        st.dataframe(pd.DataFrame(runs), hide_index=True, width="stretch")
        st.caption(f"Stored under `{runs_root()}` (set XAIDASH_RUNS). Delete runs on the Train page.")
        chosen = selected_run()
        ids = [r["run"] for r in runs]
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        pick = c1.selectbox(
            "Work with run",
            ids,
            index=ids.index(chosen.id) if chosen is not None and chosen.id in ids else 0,
            key="home_run_pick",
        )
        c2.button(
            "Use this run",
            key="home_use",
            on_click=select_run,
            args=(pick,),
            type="primary",
            disabled=chosen is not None and chosen.id == pick,
            icon=":material/check:",
        )
    else:
        st.info(f"No runs yet under `{runs_root()}`: train one on the Train page.")
