"""A scene model's training curves: the training loss per step and the validation mAP (a detector) or mIoU (a
segmenter) after each epoch, drawn live from the job while it trains and from the run's metrics.jsonl afterwards."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.scene_facts import SCORES
from xaidash.models.runs.store import Run

LOSS_COLOUR = "#1f77b4"


def _numbers(values: Any) -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    return {str(k): float(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def stored_curves(run: Run) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(training steps {step, epoch, loss}, validation records {epoch, step, map, ...}) from the run's metrics.jsonl:
    a "step" record every few steps, an "epoch" record with its validation metrics after each epoch."""
    steps, evals = [], []
    for record in run.metrics():
        where = _numbers({k: record.get(k) for k in ("step", "epoch")})
        if record.get("kind") == "step" and isinstance(record.get("loss"), (int, float)):
            steps.append({**where, "loss": float(record["loss"])})
        elif record.get("kind") == "epoch" and _numbers(record.get("val")):
            evals.append({**where, **_numbers(record.get("val"))})
    return steps, evals


def _loss_chart(frame: pd.DataFrame, total_steps: int | None) -> alt.Chart:
    domain = [0, max(int(total_steps or 0), int(frame["step"].max()))]
    return (
        alt.Chart(frame, title="Training loss")
        .mark_line(color=LOSS_COLOUR)
        .encode(
            x=alt.X("step:Q", title="training step", scale=alt.Scale(domain=domain)),
            y=alt.Y("loss:Q", title=None, axis=alt.Axis(format=".3~g")),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("epoch:Q"), alt.Tooltip("loss:Q", format=".4f")],
        )
        .properties(height=240)
    )


def _score_chart(frame: pd.DataFrame, epochs: int | None) -> alt.Chart:
    names = {key: name for key, name, _ in SCORES}
    shown = [key for key in names if key in frame][:2]  # the headline and its neighbour (mAP@50 and mAP; mIoU ...)
    long = frame.melt(id_vars=["epoch"], value_vars=shown, var_name="key", value_name="value").dropna()
    long["score"] = long["key"].map(names)
    title = "Validation " + " and ".join(names[k] for k in shown[:2])
    domain = [0, max(int(epochs or 0), int(frame["epoch"].max()), 1)]
    return (
        alt.Chart(long, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("epoch:Q", title="epoch", scale=alt.Scale(domain=domain), axis=alt.Axis(format="d")),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".1f")),
            # The legend on the right: below the plot, Streamlit took its height from the plot's.
            color=alt.Color("score:N", title=None, sort=[names[k] for k in shown], legend=alt.Legend(orient="right")),
            tooltip=[alt.Tooltip("epoch:Q"), alt.Tooltip("score:N"), alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=240)
    )


def scene_curves(
    steps: Sequence[dict[str, Any]],
    evals: Sequence[dict[str, Any]],
    total_steps: int | None = None,
    epochs: int | None = None,
) -> None:
    """The loss and the validation scores side by side; the axes span the planned steps and epochs, so a live curve
    grows into place."""
    left, right = st.columns(2)
    points = [s for s in steps if s.get("loss") is not None]
    if points:
        left.altair_chart(_loss_chart(pd.DataFrame(points), total_steps), width="stretch")
    else:
        left.caption("No training step logged yet.")
    scored = [e for e in evals if any(key in e for key, _, _ in SCORES)]
    if scored:
        right.altair_chart(_score_chart(pd.DataFrame(scored), epochs), width="stretch")
    else:
        right.caption("The validation score is measured at the end of each epoch.")
