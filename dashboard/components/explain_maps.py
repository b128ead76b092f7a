"""The Explain page's map cards (a map at a readable size, its colour bar and legend, an enlarged view)
and its out-of-distribution hint. Drawing only: the maps, scales and scores come from explainers."""

from __future__ import annotations

from typing import Any

import streamlit as st
from PIL import Image

from xaidash.dashboard.run_facts import problem_badge
from xaidash.dashboard.state import selected_run
from xaidash.explainers.inspection import ood
from xaidash.models.bundle import ModelBundle

CARD_WIDTH = 224  # px: maps are this wide (>= 200 px); the row wraps to the next line instead of shrinking them
TEXT_CARD_WIDTH = 440
LARGE_WIDTH = 560


def selected_run_problem() -> str | None:
    """A few words ('training failed', 'NaN/inf weights') when the selected run's maps are noise, else None; the
    page header says it in full (state.require_bundle shows models.quality.run_warning)."""
    run = selected_run()
    if run is None:
        return None
    try:
        return problem_badge(run)
    except Exception:  # noqa: BLE001 - a damaged run is reported by the page; no badge is better than a crash
        return None


def map_card(
    label: str,
    image: Image.Image | None,
    legend_html: str,
    caption: str,
    *,
    large: Image.Image | None = None,
    tokens_html: str | None = None,
    key: str,
) -> None:
    """One method's map in a fixed-width card: its name, the map (or highlighted words), the colour bar
    with units and meaning, the caption (target class and time), and an 'Enlarge' popover."""
    with st.container(width=TEXT_CARD_WIDTH if tokens_html is not None else CARD_WIDTH, key=key):
        st.caption(f"**{label}**")
        if problem := selected_run_problem():  # above every map: a failed run's or NaN weights' maps are noise
            st.warning(f"{problem}: this map is not meaningful", icon=":material/warning:")
        if image is not None:
            st.image(image, width="stretch")
        if tokens_html is not None:
            st.markdown(tokens_html, unsafe_allow_html=True)
        st.markdown(legend_html, unsafe_allow_html=True)
        st.caption(caption)
        if large is not None:
            with st.popover("Enlarge", icon=":material/zoom_in:", help=f"{label} at {large.width} px"):
                st.caption(f"**{label}** · {caption}")
                st.image(large, width=min(LARGE_WIDTH, large.width))
                st.markdown(legend_html, unsafe_allow_html=True)


@st.cache_resource(
    show_spinner="Reading the training data's features for the out-of-distribution check…", max_entries=4
)
def _ood_reference(bundle_key: str, _bundle: ModelBundle) -> ood.OODReference:
    return ood.reference(_bundle)


def ood_scores(bundle: ModelBundle, bundle_key: str, raw: Any) -> tuple[list[ood.OODScore] | None, str | None]:
    """Each input's `OODScore` against the run's training data, or (None, why not) when there is none to compare with."""
    reason = bundle.no_dataset_reason("the out-of-distribution check")
    if reason:
        return None, reason
    try:
        return ood.score(bundle, _ood_reference(bundle_key, bundle), raw), None
    except Exception as err:  # noqa: BLE001 - a hint only: the explanations are still shown
        return None, f"Out-of-distribution check not available: {err}"


def ood_hint(score: ood.OODScore | None) -> None:
    """A warning for an input far from the training data, else one quiet line with the same figures."""
    if score is None:
        return
    if score.flagged:
        st.warning(score.summary() + " Read its explanations with care.", icon=":material/explore_off:")
    else:
        st.caption(score.summary())
