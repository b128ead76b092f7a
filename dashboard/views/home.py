"""Home: what xaidash does, the quick start (train the demo models with one button, get the SmolLM2 language model
with another), every page, the runs, the data sets."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.quickstart import quickstart_panel, smollm2_panel
from xaidash.dashboard.components.runs_table import runs_table
from xaidash.dashboard.errors import guard
from xaidash.dashboard.nav import PAGES, page_path
from xaidash.data.catalogue import datasets_table
from xaidash.data.paths import data_root, offline
from xaidash.models.runs.store import list_runs, runs_root


def intro() -> None:
    st.title("xaidash")
    st.write(
        "Train PyTorch models and look inside them: which pixels or words drove a prediction, according to "
        "gradients (saliency, Integrated Gradients, DeepLift), class activation maps (Grad-CAM), perturbations "
        "(occlusion, LIME) and Shapley values (SHAP); and how far to trust each map (deletion and insertion "
        "curves, pointing game, completeness, sanity checks). For a generative language model: which words of a "
        "prompt produced each word of its answer, and what its layers predict along the way."
    )


def quick_start() -> None:
    st.subheader("Quick start")
    with guard("Quick start"):
        quickstart_panel()
    with guard("SmolLM2"):
        smollm2_panel()


def steps() -> None:
    """The three steps, each with a link to its page."""
    st.subheader("Or step by step")
    c1, c2, c3 = st.columns(3)
    with c1:
        st.markdown(
            "**1. Train a model, or pick a run below**  \nPick a data set and a model: the form is filled with the "
            "model's tested recipe. Training runs in the background and you can watch its curves. The built-in "
            "`shapes`, `digits` and `cues` data sets work offline."
        )
        st.page_link(page_path("train"), label="Train a model", icon=":material/model_training:")
    with c2:
        st.markdown(
            "**2. Explain its predictions**  \nPick test images or texts (or upload your own), choose "
            "methods, and see their maps side by side."
        )
        st.page_link(page_path("explain"), label="Explain predictions", icon=":material/image_search:")
    with c3:
        st.markdown(
            "**3. Compare methods**  \nScore every method on a sample of the test split: faithfulness, "
            "ground truth, agreement, and the randomisation sanity check."
        )
        st.page_link(page_path("compare"), label="Compare methods", icon=":material/leaderboard:")


def more_pages() -> None:
    """Every other page of the menu: those with a line on what they are for (the steps above link the rest)."""
    st.markdown("**More pages: bring a model, compare two, look inside**")
    more = st.columns(3)
    for i, page in enumerate(p for p in PAGES if p.blurb):
        with more[i % 3]:
            st.page_link(page_path(page.name), label=page.title, icon=page.icon)
            st.caption(page.blurb)


def runs_panel() -> None:
    with guard("Listing runs"):
        if runs_table("home_runs_table", services.job_manager().current()) is None and not list_runs():
            st.info(f"No runs yet under `{runs_root()}`: press the quick start above, or train one on the Train page.")
        else:
            st.caption(
                f"Click a row to work with that run on every page. Stored under `{runs_root()}` (set XAIDASH_RUNS); "
                "details, comparisons and deleting are on the Train page."
            )


def runs_section() -> None:
    st.subheader("Runs")
    # While a job trains, its row appears and its progress moves.
    st.fragment(runs_panel, run_every=3.0 if services.job_manager().busy() else None)()


def datasets_section() -> None:
    st.subheader("Data sets")
    with guard("Listing data sets"):
        rows = datasets_table()
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        missing = [r["name"] for r in rows if r["status"] == "needs download"]
        if missing:
            st.caption(
                f"{', '.join(missing)}: not under the data root `{data_root()}` (set XAIDASH_DATA). "
                + (
                    "Downloads are off (XAIDASH_OFFLINE or HF_HUB_OFFLINE is set): copy their files into that folder "
                    "to use them; the built-in data sets work as they are."
                    if offline()
                    else "They download on first use."
                )
            )


def main() -> None:
    intro()
    quick_start()
    steps()
    more_pages()
    runs_section()
    datasets_section()


main()
