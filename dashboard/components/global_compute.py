"""The Global view's computation: `explainers.tabular.global_report`, once per (run's weights, options), kept for
every session of this server (a rerun, another session or a return to the same settings shows it at once), on a
leased copy of the model, with a progress bar saying what is being computed.

A pair left to the page is the two most important columns: they are known only after the importances, so a first,
cheap report without SHAP gives the ranking (the same seeded shuffles, hence the same order) and the report shown is
computed with that pair."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import streamlit as st

from xaidash.dashboard import services
from xaidash.explainers.tabular.api import GlobalOptions, GlobalReport, global_report
from xaidash.models.bundle import ModelBundle

MAX_REPORTS = 16  # reports kept (each holds its ICE curves: rows x grid points per column)


@dataclass
class Computed:
    """The report, the options it was computed with (the pair filled in when the page chose it), whether the page
    chose the pair, and whether the report was reused from the cache."""

    report: GlobalReport
    options: GlobalOptions
    pair_chosen_here: bool
    reused: bool


@st.cache_resource(show_spinner=False)
def _reports() -> services.LRUCache:
    return services.LRUCache(MAX_REPORTS)


def options_key(options: GlobalOptions) -> tuple[tuple[str, Any], ...]:
    """A hashable key of every option (lists as tuples)."""
    return tuple((k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in sorted(asdict(options).items()))


def _report(
    key: str, bundle: ModelBundle, options: GlobalOptions, progress: Callable[[float, str], None]
) -> tuple[GlobalReport, bool]:
    def compute() -> GlobalReport:
        with services.lease(key, bundle) as leased:
            return global_report(leased, options, progress)

    report, reused = _reports().get_or_compute((key, options_key(options)), compute)
    return report, reused


def _ranking_options(options: GlobalOptions) -> GlobalOptions:
    """What the ranking needs: the importances (no pair, no SHAP, the default columns)."""
    return replace(options, pair=None, columns=None, shap_rows=0)


def what_is_computed(options: GlobalOptions, columns: int) -> str:
    """The spinner's line: every part the report computes."""
    shown = len(options.columns) if options.columns else min(options.top, columns)
    parts = [
        f"permutation importance of {columns} columns ({options.repeats} shuffles each)",
        f"partial dependence and ICE of {shown} columns over {options.grid_points} grid points",
        "the pair's 2-D map",
        f"a surrogate tree of depth {options.surrogate_depth} and two glassbox models",
    ]
    if options.shap_rows:
        parts.append(f"{options.shap_method} of {options.shap_rows} rows (the slowest part)")
    return "Computing " + ", ".join(parts[:-1]) + f" and {parts[-1]}…"


def computed(key: str, bundle: ModelBundle, options: GlobalOptions) -> Computed:
    """The report for `options` (the cached one when there is one); the page's progress bar while it computes.
    ExplainError (one line) for options the model refuses."""
    bar = st.empty()

    def progress(fraction: float, text: str) -> None:
        bar.progress(min(1.0, max(0.0, fraction)), text=text)

    try:
        with st.spinner(what_is_computed(options, len(bundle.info.columns))):
            chosen_here = options.pair is None and len(bundle.info.columns) >= 2
            if chosen_here:
                ranking, _ = _report(key, bundle, _ranking_options(options), progress)
                top = [c.column for c in ranking.importance.ranked()[:2]]
                options = replace(options, pair=top)
            report, reused = _report(key, bundle, options, progress)
    finally:
        bar.empty()
    return Computed(report, options, chosen_here, reused)
