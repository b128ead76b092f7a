"""An SAE's training curves: reconstruction error, explained variance, L0 and dead features per step (SAELens's
train log), drawn live from the job while it trains and from the SAE's `events.jsonl` afterwards."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.models.language.sae import store

# (field of SaeEvent, title, axis format)
CURVES = (
    ("mse", "Reconstruction MSE", ".3~g"),
    ("explained_variance", "Explained variance", ".2f"),
    ("l0", "L0 (features a token)", ".3~g"),
    ("dead", "Dead features", "d"),
)


def stored_steps(folder: Path) -> list[dict[str, Any]]:
    """The training events an SAE's folder logged (one JSON line a step; a torn last line is skipped)."""
    path = folder / store.EVENTS
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return steps


def _chart(frame: pd.DataFrame, field: str, title: str, fmt: str) -> alt.Chart:
    return (
        alt.Chart(frame, title=title)
        .mark_line(color="#1f77b4")
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y(f"{field}:Q", title=None, axis=alt.Axis(format=fmt)),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip(f"{field}:Q", format=fmt)],
        )
        .properties(height=170)
    )


def sae_curves(steps: Sequence[dict[str, Any]], total_steps: int | None = None) -> None:
    """Four small charts side by side (x up to `total_steps` when known, so a live curve grows into place): MSE on
    the activations as SAELens scales them, explained variance of each batch, L0, features not fired lately."""
    rows = [s for s in steps if s.get("step") is not None]
    if not rows:
        st.caption("No training step logged yet.")
        return
    frame = pd.DataFrame(rows)
    if total_steps and total_steps > 0:
        frame = pd.concat([frame, pd.DataFrame([{"step": total_steps}])], ignore_index=True)
    for column, (field, title, fmt) in zip(st.columns(len(CURVES)), CURVES, strict=True):
        if field in frame:
            column.altair_chart(_chart(frame, field, title, fmt), width="stretch")
