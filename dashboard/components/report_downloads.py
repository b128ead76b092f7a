"""The downloads of an explain report (explainers/figures/report.py), the same on Explain, Compare and Side by
side: everything as one zip (the files `xaidash explain --out` writes, byte for byte), the self-contained HTML
report and report.json. The files are made when a button is pressed, not on every rerun."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from xaidash.explainers.figures.report import ExplainReport


def report_downloads(
    report: ExplainReport | Callable[[], ExplainReport], key: str, name: str = "explanations", includes: str = ""
) -> None:
    """Three download buttons in a row: zip, HTML and JSON of `report` (or of what `report()` builds, called once
    per download), file names `<name>.zip/.html/.json`; `includes`: a sentence on what the report holds beyond the
    maps (the attacks, counterfactuals and training samples the Explain page computed)."""
    made: list[ExplainReport] = []

    def get() -> ExplainReport:
        if not made:
            made.append(report if isinstance(report, ExplainReport) else report())
        return made[0]

    st.caption(
        "Downloads: the report as one page that opens offline in any browser (.html), everything in one zip "
        "(report.json, the inputs, every map with its colour bar as PNG, the attributions), or report.json alone."
        + (f" {includes}" if includes else "")
    )
    row = st.container(horizontal=True, vertical_alignment="top")
    row.download_button(
        "Download all (.zip)",
        data=lambda: get().to_zip(),
        file_name=f"{name}.zip",
        mime="application/zip",
        key=f"{key}_dl_all",
        on_click="ignore",
        type="primary",
        icon=":material/download:",
        help="report.json, the inputs, every map with its colour bar (PNG) and the attributions (.npy), "
        "the same files as `xaidash explain --out`",
    )
    row.download_button(
        "Report (.html)",
        data=lambda: get().to_html(),
        file_name=f"{name}.html",
        mime="text/html",
        key=f"{key}_dl_html",
        on_click="ignore",
        icon=":material/description:",
        help="inputs, predictions, every map with its colour bar, the metrics, the settings and the run, in one "
        "self-contained file",
    )
    row.download_button(
        "Report (.json)",
        data=lambda: get().to_json(),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"{key}_dl_json",
        on_click="ignore",
        icon=":material/data_object:",
        help="report.json alone (docs/report-format.md)",
    )
