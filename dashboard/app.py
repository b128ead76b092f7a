"""xaidash home page: what the tool does, the data sets and the runs present."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from data.cli import datasets_table
from models.cli import runs_table
from models.runstore import runs_root

st.set_page_config(page_title="xaidash", page_icon=":mag:", layout="wide")
st.title("xaidash")
st.write(
    "Train PyTorch models and look inside them: attributions (saliency, integrated gradients, Grad-CAM, "
    "occlusion, LIME, SHAP), their quality metrics, attention heads, receptive fields and embeddings."
)
st.subheader("Start")
st.markdown(
    "Train a model on the built-in, offline `shapes` data set from a terminal:\n\n"
    "```bash\nxaidash train --dataset shapes --model resnet_small --epochs 3\n```\n"
    "Runs appear below as they are written."
)

st.subheader("Data sets")
st.dataframe(pd.DataFrame(datasets_table()), hide_index=True, width="stretch")

st.subheader("Runs")
rows = runs_table()
if rows:
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
else:
    st.info(f"No runs yet under `{runs_root()}`. Train one with the command above.")
