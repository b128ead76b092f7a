"""The map cards every page draws a `MapFigure` with (a map at a readable size, its colour bar and legend, an
enlarged view) and the Explain page's out-of-distribution hint. Drawing only: the figures, scales and scores
come from explainers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from xaidash.dashboard.errors import show_error
from xaidash.dashboard.run_facts import problem_badge
from xaidash.dashboard.state import selected_run
from xaidash.explainers.figures.map_figure import MapFigure
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.figures.render import LARGE_UPSCALE
from xaidash.explainers.inspection import ood
from xaidash.explainers.modalities import adapter_of
from xaidash.models.bundle import ModelBundle

CARD_WIDTH = 224  # px: maps are this wide (>= 200 px); the row wraps to the next line instead of shrinking them
TEXT_CARD_WIDTH = 440
NAMED_CARD_WIDTH = 410  # a picture of named features (a table row's bars): two to a row, labels readable
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
    fig: MapFigure,
    *,
    key: str,
    title: str | None = None,
    caption: str | None = None,
    width: int | None = None,
    legend_note: str | None = None,
    meaning: bool = True,
    enlarge: bool = True,
    warn: bool = True,
) -> None:
    """One map in a fixed-width card, drawn from its `MapFigure`: the method's name (or `title`), the map (or the
    highlighted words), the colour bar with units, range and meaning, the caption (target class and time, or
    `caption`, followed by what the method's completeness check found), and an 'Enlarge' popover. Every page draws its maps through this. `legend_note` replaces the
    figure's note on the colour bar, `meaning=False` leaves the colours' meaning out (a page that states it once
    per row), `warn=False` the selected run's problem badge (a map of another model)."""
    label = title or fig.label
    text = fig.caption.text() if caption is None else caption
    if (
        caption is not None and fig.caption.completeness
    ):  # a page's own caption still says what the method's check found
        text = f"{text} · {fig.caption.completeness_text()}"
    legend_html = fig.colorbar_html(note=legend_note, meaning=meaning)
    card_width = width or (
        TEXT_CARD_WIDTH if fig.tokens_html is not None else NAMED_CARD_WIDTH if fig.words else CARD_WIDTH
    )
    with st.container(width=card_width, key=key):
        st.caption(f"**{label}**")
        if warn and (
            problem := selected_run_problem()
        ):  # above every map: a failed run's or NaN weights' maps are noise
            st.warning(f"{problem}: this map is not meaningful", icon=":material/warning:")
        chart = adapter_of(fig.modality).chart(
            fig.values,
            fig.background,
            signed=fig.signed,
            scale=fig.scale,
            units=fig.legend.units,
            labels=fig.words,
        )
        if chart is not None:  # an interactive chart (a series: hovering a step gives its value and attribution)
            st.altair_chart(chart, width="content")  # its own width: both panels on one time axis
        elif fig.map_png is not None:
            st.image(fig.map_png, width="stretch")
        if fig.tokens_html is not None:
            st.markdown(fig.tokens_html, unsafe_allow_html=True)
        st.markdown(legend_html, unsafe_allow_html=True)
        st.caption(text)
        large = fig.render(LARGE_UPSCALE) if enlarge else None
        if large is not None:
            with st.popover("Enlarge", icon=":material/zoom_in:", help=f"{label} at {large.width} px"):
                st.caption(f"**{label}** · {text}")
                st.image(png_bytes(large), width=min(LARGE_WIDTH, large.width))
                st.markdown(legend_html, unsafe_allow_html=True)


def error_card(label: str, error: BaseException | str | None, *, width: int = CARD_WIDTH) -> None:
    """A card in the row of maps for a method that produced none, with its error."""
    with st.container(width=width):
        st.caption(f"**{label}**")
        show_error(error if isinstance(error, BaseException) else RuntimeError(error or "no explanation"), label)


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


# What each display of a map looks like, for the control's help.
DISPLAY_HELP = {
    "overlay": "the map over a grey copy of the input (opacity grows with |value|)",
    "heatmap": "the map alone",
    "tokens": "the words highlighted",
}


def map_display_choice(container: Any, key: str, displays: Sequence[str]) -> str:
    """How maps are shown, the same control on every page that draws them: a choice among the `displays` the
    inputs' modality adapter offers, or its only one (no control)."""
    if len(displays) < 2:
        return displays[0]
    return str(
        container.radio(
            "Show maps as",
            list(displays),
            horizontal=True,
            key=key,
            help="; ".join(f"{d}: {DISPLAY_HELP.get(d, d)}" for d in displays),
        )
    )
