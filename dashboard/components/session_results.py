"""What the Explain page's panels computed in this draw (an attack, a counterfactual, the training samples), so its
report downloads carry them too. A panel that shows a result registers how to make its part of the report
(`record_result`); the page starts each draw afresh (`start_results`) and hands the parts to the report
(`with_results`), so the report holds what the page shows, no more. Parts are made when a download is pressed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import streamlit as st

from xaidash.explainers.figures.report import ExplainReport
from xaidash.explainers.figures.report_extras import ReportExtra

KEY = "explain_session_results"
Part = Callable[[], ReportExtra]


def start_results() -> None:
    """A new draw of the page: nothing shown yet."""
    st.session_state[KEY] = {}


def record_result(i: int, kind: str, part: Part) -> None:
    """Input `i`'s result of `kind` is on the page; `part` makes its section of the report."""
    st.session_state.setdefault(KEY, {})[(i, kind)] = part


def shown_results() -> dict[tuple[int, str], Part]:
    """The parts registered in this draw, by (input, kind), in input order."""
    return dict(sorted(st.session_state.get(KEY, {}).items()))


def with_results(report: ExplainReport, parts: dict[tuple[int, str], Part]) -> ExplainReport:
    """`report` with the sections of `parts`; a part that cannot be made is said in the report's notes."""
    extras, notes = [], list(report.notes)
    for (i, kind), make in parts.items():
        try:
            extras.append(make())
        except Exception as err:  # noqa: BLE001 - the maps' report is still worth downloading
            notes.append(f"Input {i + 1}: the {kind.replace('_', ' ')} could not be added to the report ({err}).")
    return dataclasses.replace(report, extras=extras, notes=notes)


def results_sentence(parts: dict[tuple[int, str], Part]) -> str:
    """'It includes the attack and counterfactual of input 1 and the training samples of input 2.' ('' for none)."""
    if not parts:
        return ""
    by_input: dict[int, list[str]] = {}
    for i, kind in parts:
        by_input.setdefault(i, []).append(kind.replace("_", " "))
    said = [f"the {' and '.join(kinds)} of input {i + 1}" for i, kinds in by_input.items()]
    return "They include what the panels above computed: " + "; ".join(said) + "."
