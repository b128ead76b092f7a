"""The Scenes page's download: the session as one self-contained HTML page (the scene, the boxes, every map with
its colour bar and the explained object outlined, the metrics), built by `xaidash.explainers.scenes.figures` when the
button is pressed, not on every rerun."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import streamlit as st

from xaidash.dashboard.components.scene_inputs import Scene
from xaidash.explainers.scenes.api import SceneExplanation
from xaidash.explainers.scenes.figures import scene_report_html
from xaidash.explainers.scenes.targets import SceneTargetSpec
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, Segmentation


def report_html(
    bundle: SceneBundle,
    scene: Scene,
    targets: Sequence[SceneTargetSpec],
    results: dict[int, list[SceneExplanation]],
    prediction: Detections | Segmentation,
) -> str:
    """The session as one self-contained HTML page: the predictions, each target's maps, the metrics."""
    # The report groups maps by target object: every map of one target gets this rerun's object for it.
    explanations = [replace(e, target=t) for i, t in enumerate(targets) for e in results.get(i, [])]
    run = getattr(bundle.run, "id", "")
    subtitle = f"{bundle.spec.label} on {bundle.dataset or 'no data set'}" + (f" · run {run}" if run else "")
    return scene_report_html(scene.image, explanations, prediction, bundle.classes, title=scene.name, subtitle=subtitle)


def report_download(
    bundle: SceneBundle,
    scene: Scene,
    targets: Sequence[SceneTargetSpec],
    results: dict[int, list[SceneExplanation]],
    prediction: Detections | Segmentation,
) -> None:
    """The HTML report's download button (the page is made when the button is pressed)."""
    st.download_button(
        "Report (.html)",
        data=lambda: report_html(bundle, scene, targets, results, prediction),
        file_name="scene-explanations.html",
        mime="text/html",
        key="scenes_report",
        on_click="ignore",
        icon=":material/description:",
        help="the scene, the model's boxes or mask, every map with its colour bar and the explained object "
        "outlined, and the metrics, in one file that opens offline in any browser",
    )
