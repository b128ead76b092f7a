"""The Scenes page's results: one card per (target, method) with the map over the scene, its colour bar, the
explained object outlined (the other boxes faint) and its metrics; the metrics table across methods with what each
metric means; the self-contained HTML report. Drawing only: the figures, metrics and report come from
`xaidash.explainers.scenes`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.explain_maps import CARD_WIDTH, error_card
from xaidash.data.formatting import fmt_number, seconds_text
from xaidash.explainers.scenes.api import SceneExplanation
from xaidash.explainers.scenes.figures import scene_figure
from xaidash.explainers.scenes.metrics import SCENE_METRICS, SceneMetricSpec
from xaidash.explainers.scenes.targets import SceneTargetSpec
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, Segmentation

# px: four maps to a row in the page's width, each still over 200 px (a 96 px scene drawn twice its size)
SCENE_CARD_WIDTH = min(CARD_WIDTH, 212)
ROW_PX, MAX_TABLE_PX = 35, 1200  # a data frame's row height, and the most a table takes before it scrolls


def metric_facts() -> dict[str, SceneMetricSpec]:
    return {m.id: m for m in SCENE_METRICS}


def metric_text(name: str, value: float) -> str:
    facts = metric_facts().get(name)
    return f"{facts.title if facts is not None else name} {fmt_number(value)}"


def scene_card(
    bundle: SceneBundle,
    image: object,
    e: SceneExplanation,
    prediction: Detections | Segmentation,
    key: str,
    title: str | None = None,
) -> None:
    """One map: its title (the method's name by default), the map with the explained object outlined and its colour
    bar below, the time it took and its metrics (or why there are none)."""
    label = title or _label(e.method)
    if e.error is not None or e.map is None:
        error_card(label, e.error or "no map", width=SCENE_CARD_WIDTH)
        return
    boxes = prediction if isinstance(prediction, Detections) else None
    fig = scene_figure(image, e, boxes, bundle.classes)
    with st.container(width=SCENE_CARD_WIDTH, key=key):
        st.caption(f"**{label}**")
        if fig.png is not None:
            st.image(fig.png, width="stretch")
        lo, hi = fig.value_range or (0.0, 0.0)
        st.caption(f"values {fmt_number(lo)} … {fmt_number(hi)} · {seconds_text(e.seconds)}")
        if e.metrics:
            st.caption(" · ".join(metric_text(k, v) for k, v in e.metrics.items()))
        for why, names in _by_reason(e.metric_errors).items():
            st.caption(f"{', '.join(names)}: {why}")


def _by_reason(errors: dict[str, str]) -> dict[str, list[str]]:
    """Why metrics could not be computed -> their titles: one line for the metrics that failed alike."""
    facts = metric_facts()
    out: dict[str, list[str]] = {}
    for name, why in errors.items():
        out.setdefault(why, []).append(facts[name].title if name in facts else name)
    return out


def _label(method: str) -> str:
    from xaidash.explainers.scenes.registry import SCENE_METHODS

    spec = SCENE_METHODS.find(method)
    return spec.label if spec is not None else method


def cards(
    bundle: SceneBundle,
    image: object,
    targets: Sequence[SceneTargetSpec],
    results: dict[int, list[SceneExplanation]],
    prediction: Detections | Segmentation,
    truth_words: Sequence[str],
) -> None:
    """A row of cards per target (it wraps when the methods do not fit one line)."""
    for i, target in enumerate(targets):
        said = truth_words[i]
        st.markdown(f"**{target.describe(bundle.classes)}**" + (f" · explains {said}" if said else ""))
        with st.container(horizontal=True, gap="small"):
            for e in results.get(i, []):
                scene_card(bundle, image, e, prediction, key=f"scene_card_{i}_{e.method}")


def _height(rows: int) -> int:
    return min(MAX_TABLE_PX, ROW_PX * (rows + 1) + 3)


def metrics_frame(
    bundle: SceneBundle, targets: Sequence[SceneTargetSpec], results: dict[int, list[SceneExplanation]]
) -> pd.DataFrame:
    """One row per (target, method): its metrics by their titles, and the seconds it took."""
    rows = []
    for i, target in enumerate(targets):
        for e in results.get(i, []):
            row: dict[str, object] = {"target": target.describe(bundle.classes), "method": _label(e.method)}
            for name, facts in metric_facts().items():
                row[facts.title] = e.metrics.get(name) if e.metrics else None
            row["seconds"] = e.seconds
            rows.append(row)
    return pd.DataFrame(rows)


def metrics_table(
    bundle: SceneBundle, targets: Sequence[SceneTargetSpec], results: dict[int, list[SceneExplanation]]
) -> None:
    """The metrics across methods and targets, with each metric's meaning under the table."""
    frame = metrics_frame(bundle, targets, results)
    titles = [f.title for f in metric_facts().values()]
    present = [t for t in titles if t in frame and frame[t].notna().any()]
    if not present:
        st.caption("No quality metrics: switch “Quality metrics” on above and press Explain.")
        return
    config = {
        f.title: st.column_config.NumberColumn(format="%.3f", help=f"{f.better}: {f.meaning}")
        for f in metric_facts().values()
    }
    config["seconds"] = st.column_config.NumberColumn(format="%.2f", help="time to compute the map")
    shown = frame[["target", "method", *present, "seconds"]]
    st.dataframe(shown, hide_index=True, width="stretch", height=_height(len(shown)), column_config=config)
    if len(targets) > 1:  # the methods side by side: each one's mean over the targets
        means = shown.groupby("method", sort=False)[[*present, "seconds"]].mean().reset_index()
        counts = shown.groupby("method", sort=False)[present[0]].count().to_numpy()
        means.insert(1, "targets scored", counts)
        st.caption(f"Each method's mean over the {len(targets)} targets (targets without a true object left out):")
        st.dataframe(means, hide_index=True, width="stretch", height=_height(len(means)), column_config=config)
    st.markdown("\n".join(f"- **{f.title}** ({f.better}): {f.meaning}" for f in metric_facts().values()))
