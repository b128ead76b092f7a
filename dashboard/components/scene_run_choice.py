"""Which detector or segmenter a page's scene view works on: the session's scene run (the one the Scenes page shows),
picked among the usable scene runs here too; and the switch that puts Compare and Side by side on scene models."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from xaidash.dashboard.components.scene_facts import scene_picker_label
from xaidash.dashboard.nav import SCENE_RUNS, page_path
from xaidash.dashboard.state import SCENE_FOCUS_KEY, runs_for, select_run, selected_run
from xaidash.models.runs.store import Run

CLASSIFIERS_VIEW, SCENES_VIEW = "Classifiers", "Detectors and segmenters"
TRAIN_HINT = (
    "No detector or segmenter yet: train one on the Train page (Detection and segmentation), or run "
    "`xaidash scenes train --data scenes --model fasterrcnn_small` (`unet_small` for a segmenter)."
)


def scene_view_chosen(page: str) -> bool:
    """The switch between the page's classifier view and its scene view (kept in the address as ?models=…), shown
    once a scene run exists; True when the scene view is chosen."""
    key = f"{page}_models"
    if not runs_for(SCENE_RUNS) and st.query_params.get(key) != SCENES_VIEW:
        return False
    choice = st.segmented_control(
        "Models",
        [CLASSIFIERS_VIEW, SCENES_VIEW],
        default=SCENES_VIEW if scene_picked_last() else CLASSIFIERS_VIEW,
        required=True,
        key=key,
        bind="query-params",
        label_visibility="collapsed",
        help="classifiers explain one label per input; detectors and segmenters one box or region at a time",
    )
    return choice == SCENES_VIEW


def scene_picked_last() -> bool:
    """Whether the run this session picked last (in a runs table, by a `?run=` link, as a training's end) is a scene
    model: the pages then open on their scene view."""
    return bool(st.session_state.get(SCENE_FOCUS_KEY))


def usable_scene_runs(keep: Callable[[Run], bool] = lambda r: True) -> list[Run]:
    """Scene runs with usable weights that `keep` accepts, newest first."""
    return [r for r in runs_for(SCENE_RUNS) if r.usable and keep(r)]


def pick_scene_run(label: str, key: str) -> Run | None:
    """The session's scene run, pickable here (a new pick is the session's for every scene page); None, with what to
    do, when there is none."""
    runs = usable_scene_runs()
    current = selected_run("scene")
    if not runs:
        st.info(TRAIN_HINT, icon=":material/info:")
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        return None
    ids = [r.id for r in runs]
    index = ids.index(current.id) if current is not None and current.id in ids else 0
    picked = st.selectbox(
        label, ids, index=index, format_func=lambda i: scene_picker_label(runs[ids.index(i)]), key=key
    )
    if current is None or picked != current.id:
        select_run(picked)
    return runs[ids.index(picked)]
