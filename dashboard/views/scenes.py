"""Scenes: a detector's boxes or a segmenter's regions explained one object at a time. Pick a scene (a test scene
of the run's data set, with its exact ground truth, or an image of one's own), see what the model finds, pick what
to explain (one box or every box; a class's region; a box drawn by numbers) and the methods, and get one card per
(target, method) with the map, its colour bar and the explained object outlined, the metrics against the true
object, and the HTML report.

A short flow of functions: the run and its model (cached), the scene, the prediction (cached), the targets, the
methods; Explain computes what the caches lack, and whatever the caches hold for the settings is drawn at once."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.dashboard.components.scene_cache import scene_bundle
from xaidash.dashboard.components.scene_cards import cards, metrics_table
from xaidash.dashboard.components.scene_explain import explain_all, request_key, stored_results
from xaidash.dashboard.components.scene_inputs import Scene, scene_picker
from xaidash.dashboard.components.scene_methods import MethodChoice, pick_methods
from xaidash.dashboard.components.scene_report import report_download
from xaidash.dashboard.components.scene_targets import (
    choose_targets,
    detections_view,
    predict,
    segmentation_view,
    truth_text,
)
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import selected_run
from xaidash.explainers.scenes.targets import SceneTargetSpec
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, Segmentation

Prediction = Detections | Segmentation
SHOWN_KEY = "scenes_shown"  # the last request explained in this session
TRAIN_HINT = (
    "No detector or segmenter yet: train one on the Train page (Detection and segmentation), or run "
    "`xaidash scenes train --data scenes --model fasterrcnn_small` (`unet_small` for a segmenter)."
)


def header() -> None:
    st.title("Scenes")
    st.caption(
        "A detector finds objects as boxes with a class and a score; a segmenter gives each pixel a class. Explain "
        "one object at a time: which pixels made the model find this box, or paint this region? On a test scene "
        "every map is scored against the object's true mask: does the map point at it, or at its neighbour?"
    )


def load_model() -> tuple[str, SceneBundle]:
    """The selected scene run's model, or a line saying what to do and st.stop()."""
    run = selected_run("scene")
    if run is None:
        st.info(TRAIN_HINT, icon=":material/info:")
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        st.stop()
    try:
        with st.spinner("Loading the model…"):
            return scene_bundle(run)
    except Exception as err:
        show_error(err, f"Could not load run {run.id}")
        st.stop()
        raise  # unreachable: st.stop() raises


def model_line(bundle: SceneBundle) -> None:
    what = "detector" if bundle.task == "detect" else "segmenter"
    classes = ", ".join(bundle.classes)
    size = f" · reads {bundle.image_size} x {bundle.image_size} px" if bundle.image_size else ""
    st.caption(f"**{bundle.spec.label}** ({what}) on **{bundle.dataset or 'no data set'}** · classes: {classes}{size}")


def what_is_found(bundle: SceneBundle, scene: Scene, key: str) -> tuple[Prediction, list[SceneTargetSpec]]:
    """The prediction drawn and listed; (it, what the model found as targets)."""
    st.subheader("What the model finds")
    try:
        prediction = predict(key, bundle, scene)
    except Exception as err:
        show_error(err, "Prediction failed")
        st.stop()
        raise
    if isinstance(prediction, Detections):
        return prediction, list(detections_view(bundle, scene, prediction))
    return prediction, list(segmentation_view(bundle, scene, prediction))


def explain_controls(bundle: SceneBundle, scene: Scene, found: list[SceneTargetSpec]) -> tuple[Any, ...] | None:
    """What to explain, the methods and the metrics switch; None (with one line) when there is nothing to explain."""
    st.subheader("What to explain")
    detect = bundle.task == "detect"
    targets = choose_targets(bundle, scene, found, detect)
    choice = pick_methods(bundle)
    metrics = bool(
        st.toggle(
            "Quality metrics",
            value=True,
            key="scenes_metrics",
            help="deletion and insertion of the target's score (model passes); on a test scene also each map "
            "against the explained object's true mask: pointing game, energy inside, share on other objects",
        )
    )
    if metrics and scene.truth is None:
        st.caption("An image of your own has no true objects: its maps get deletion and insertion only.")
    if not targets:
        st.caption("Nothing to explain yet: pick a box or region above, or draw one by numbers.")
        return None
    if not choice.methods:
        st.caption("Pick at least one method.")
        return None
    return targets, choice, metrics


def results(
    key: str,
    bundle: SceneBundle,
    scene: Scene,
    prediction: Prediction,
    targets: list[SceneTargetSpec],
    choice: MethodChoice,
    metrics: bool,
) -> None:
    """Explain's button and the results of the current request (computed on a click, redrawn from the cache)."""
    request = request_key(key, scene, targets, choice, metrics)
    pairs = len(targets) * len(choice.methods)
    clicked = st.button(
        f"Explain ({pairs} map{'s' if pairs > 1 else ''})",
        type="primary",
        icon=":material/play_arrow:",
        key="scenes_go",
    )
    found = stored_results(key, scene, targets, choice, metrics)
    if st.session_state.pop("scenes_cancelled", False):
        st.info("Cancelled. Maps finished before the click are kept: press Explain again for the rest.")
    elif clicked:
        cancel = st.empty()
        cancel.button(
            "Cancel",
            key="scenes_cancel",
            icon=":material/cancel:",
            on_click=lambda: st.session_state.update(scenes_cancelled=True),
            help="stop after the method being computed (methods already finished are kept)",
        )
        try:
            found = explain_all(key, bundle, scene, targets, choice, metrics)
        except Exception as err:  # noqa: BLE001 - one line; the page's controls stay usable
            show_error(err, "Explaining failed")
            return
        cancel.empty()
        st.session_state[SHOWN_KEY] = request
    if found is None:  # maps computed before (another session's too) show at once; others wait for a click
        if st.session_state.get(SHOWN_KEY):
            st.caption("The settings changed: press Explain for their maps.")
        return
    words = [truth_text(t, scene, bundle.classes) for t in targets]
    st.subheader("Maps")
    cards(bundle, scene.image, targets, found, prediction, words)
    st.subheader("Quality against the true objects")
    metrics_table(bundle, targets, found)
    report_download(bundle, scene, targets, found, prediction)


def main() -> None:
    header()
    key, bundle = load_model()
    model_line(bundle)
    st.subheader("Scene")
    scene = scene_picker(bundle)
    if scene is None:
        return
    prediction, found = what_is_found(bundle, scene, key)
    picked = explain_controls(bundle, scene, found)
    if picked is not None:
        results(key, bundle, scene, prediction, *picked)


main()
