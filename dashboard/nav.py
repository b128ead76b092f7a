"""The app's pages, in one place: pages added later append an `st.Page` to `build_pages()`."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).resolve().parent / "views"


def build_pages() -> list[st.Page]:
    """Every page of the app, in menu order (the first is the default)."""
    return [
        st.Page(VIEWS / "home.py", title="Home", icon=":material/home:", url_path="home", default=True),
        st.Page(VIEWS / "train.py", title="Train", icon=":material/model_training:", url_path="train"),
        st.Page(VIEWS / "import_model.py", title="Import", icon=":material/upload:", url_path="import"),
        st.Page(VIEWS / "explain.py", title="Explain", icon=":material/image_search:", url_path="explain"),
        st.Page(VIEWS / "side_by_side.py", title="Side by side", icon=":material/compare:", url_path="side-by-side"),
        st.Page(VIEWS / "compare.py", title="Compare", icon=":material/leaderboard:", url_path="compare"),
        st.Page(VIEWS / "attention.py", title="Attention", icon=":material/visibility:", url_path="attention"),
        st.Page(
            VIEWS / "receptive_fields.py",
            title="Receptive fields",
            icon=":material/filter_center_focus:",
            url_path="receptive-fields",
        ),
        st.Page(VIEWS / "embeddings.py", title="Embeddings", icon=":material/scatter_plot:", url_path="embeddings"),
        st.Page(VIEWS / "model.py", title="Model", icon=":material/account_tree:", url_path="model"),
    ]
