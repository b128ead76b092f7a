"""Calibration on the pages: the Train page's section (measure, the reliability diagram before and after temperature
scaling, ECE and T) and the session-wide "calibrated probabilities" switch the sidebar draws and the pages that show
probabilities read (`session_temperature`). The computing is models/calibration*.py's."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import current_page
from xaidash.models.calibration import CalibrationScores
from xaidash.models.calibration_run import (
    Calibration,
    calibrate,
    load_calibration,
    refusal,
    saved_temperature,
    stale_reason,
)
from xaidash.models.runs.store import Run

TOGGLE = "calibration_toggle"  # the sidebar's widget
ON = "calibration_on"  # its value, kept while a run without a temperature hides the widget
TOGGLE_LABEL = "Calibrated probabilities (temperature scaling)"
PANEL_PX = 230  # two panels side by side fit the Train page's results column at 1440 px


def calibration_toggle(run: Run) -> None:
    """The sidebar's switch for the selected classifier run: on or off where the run has a temperature saved for its
    current weights, else shown switched off and disabled with one line saying why and where to measure it."""
    t = saved_temperature(run)
    if t is None:
        st.toggle(TOGGLE_LABEL, value=False, disabled=True, key=f"{TOGGLE}_off", help=HOW_IT_WORKS)
        st.caption(uncalibrated_reason(run))
        if current_page() != "train" and refusal_or_none(run) is None:
            st.page_link(page_path("train"), label="Measure calibration on Train", icon=":material/straighten:")
        return
    on = st.toggle(
        TOGGLE_LABEL,
        value=bool(st.session_state.get(ON, False)),
        key=TOGGLE,
        help=f"show softmax(logits / T) with this run's fitted T = {t:.2f} wherever the pages show class "
        "probabilities (Explain, Side by side); the predicted class and the maps do not change",
    )
    st.session_state[ON] = bool(on)


HOW_IT_WORKS = (
    "temperature scaling: softmax(logits / T) with a T fitted on the run's held-out samples, so a probability of "
    "80% means right about 80% of the time; the pages that show class probabilities (Explain, Side by side) use it "
    "when on, the predicted class and the maps do not change"
)
WHERE = "Train page → Calibration → “Measure calibration”"


def refusal_or_none(run: Run) -> str | None:
    try:
        return refusal(run)
    except Exception as err:  # noqa: BLE001 - an unreadable run: no link to measure it
        return str(err)


def uncalibrated_reason(run: Run) -> str:
    """One line: why the run has no usable temperature, and where to measure one when it can have one."""
    try:
        why = refusal(run)
        if why:
            return f"Not available: {why}"
        cal = load_calibration(run)
    except Exception:  # noqa: BLE001 - a damaged calibration.json: measuring again writes it afresh
        return f"Off: the saved calibration cannot be read; measure it again on the {WHERE}."
    if cal is not None and stale_reason(run, cal):
        return f"Off: the saved temperature belongs to older weights; measure again on the {WHERE}."
    return f"Off until calibration is measured: {WHERE} (a few seconds)."


def probability_note(run: Run, t: float | None) -> str:
    """One line a page shows beside class probabilities: calibrated (with T) or plain softmax, and how to get
    calibrated ones with the sidebar's switch."""
    if t is not None:
        return f"Probabilities calibrated (T = {t:.2f}): the sidebar's “Calibrated probabilities” is on."
    saved = saved_temperature(run)
    if saved is not None:
        return (
            f"Probabilities: plain softmax. Calibrated ones (T = {saved:.2f}): switch on “Calibrated probabilities” "
            "in the sidebar."
        )
    if refusal_or_none(run) is not None:
        return "Probabilities: plain softmax (calibration does not apply to this run: see the sidebar)."
    return (
        "Probabilities: plain softmax, not calibrated (90% need not mean right 9 times in 10). Measure calibration "
        "on the Train page, then switch on “Calibrated probabilities” in the sidebar."
    )


def session_temperature(run_dir: Path | str | None) -> float | None:
    """The temperature a page applies to the probabilities of the model of run folder `run_dir`: its saved, fresh T
    when the sidebar's switch is on, else None (plain softmax)."""
    if not st.session_state.get(ON) or run_dir is None:
        return None
    return saved_temperature(Path(run_dir))


def temperature_caption(t: float | None, probability_maps: bool = True) -> None:
    """What a page says under probabilities it scaled."""
    if t is None:
        return
    st.caption(
        f"Probabilities calibrated, T = {t:.2f} (temperature scaling, fitted on this run's held-out samples: "
        "softmax(logits / T)); the predicted class is unchanged. The maps are computed on the model itself: a logit "
        "map would only be scaled by 1/T"
        + (
            ", and probability maps (LIME, word deletion) use the uncalibrated probabilities."
            if probability_maps
            else "."
        )
    )


# ---- the Train page's section ------------------------------------------------------------------------------------


def bins_frame(scores: CalibrationScores, series: str) -> pd.DataFrame:
    """The non-empty bins of one set of probabilities as rows for the chart."""
    rows = [
        {
            "series": series,
            "lower": b.lower,
            "upper": b.upper,
            "bin": f"({b.lower:.2f}, {b.upper:.2f}]",
            "confidence": b.confidence,
            "accuracy": b.accuracy,
            "gap": b.accuracy - b.confidence,
            "count": b.count,
        }
        for b in scores.bins
        if b.count and b.accuracy is not None and b.confidence is not None
    ]
    return pd.DataFrame(rows)


def _panel(df: pd.DataFrame, title: str, colour: alt.Color) -> alt.LayerChart | alt.FacetChart:
    axis_x = alt.X("lower:Q", scale=alt.Scale(domain=[0, 1]), title="confidence (top class probability)")
    bars = (
        alt.Chart(df)
        .mark_bar(opacity=0.8, stroke="white", strokeWidth=0.5)
        .encode(
            x=axis_x,
            x2="upper:Q",
            y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title="accuracy (share correct)"),
            y2=alt.datum(0),
            color=colour,
            tooltip=[
                alt.Tooltip("bin:N", title="confidence bin"),
                alt.Tooltip("count:Q", title="samples"),
                alt.Tooltip("confidence:Q", title="mean confidence", format=".3f"),
                alt.Tooltip("accuracy:Q", format=".3f"),
                alt.Tooltip("gap:Q", title="accuracy - confidence", format="+.3f"),
            ],
        )
    )
    counts = (
        alt.Chart(df)
        .mark_text(dy=-6, fontSize=9, color="#444")
        .encode(x=alt.X("mid:Q"), y="accuracy:Q", text="count:Q")
        .transform_calculate(mid="(datum.lower + datum.upper) / 2")
    )
    means = (
        alt.Chart(df)
        .mark_tick(color="black", thickness=2, size=16, orient="horizontal")
        .encode(x=alt.X("mid:Q"), y=alt.Y("confidence:Q"))
        .transform_calculate(mid="(datum.lower + datum.upper) / 2")
    )
    diagonal = (
        alt.Chart(pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]}))
        .mark_line(strokeDash=[4, 4], color="grey")
        .encode(x="x:Q", y="y:Q")
    )
    return alt.layer(bars, diagonal, counts, means).properties(title=title, width=PANEL_PX, height=PANEL_PX)


def reliability_chart(cal: Calibration) -> alt.HConcatChart:
    """Before and after temperature scaling side by side: bars of accuracy per confidence bin (number of test
    samples above each), the dashed diagonal of perfect calibration, a black tick at each bin's mean confidence."""
    before_name, after_name = "before: softmax(logits)", f"after: softmax(logits / {cal.temperature:.2f})"
    colour = alt.Color(
        "series:N",
        scale=alt.Scale(domain=[before_name, after_name], range=["#d62728", "#1f77b4"]),
        title="probabilities",
    )
    before = _panel(bins_frame(cal.before, before_name), f"Before: ECE {cal.before.ece:.3f}", colour)
    after = _panel(
        bins_frame(cal.after, after_name), f"After (T = {cal.temperature:.2f}): ECE {cal.after.ece:.3f}", colour
    )
    return alt.hconcat(before, after).configure_legend(orient="bottom", labelLimit=400)


HOW_TO_READ = (
    "**How to read it:** each bar is a bin of test samples grouped by the model's confidence (its top class's "
    "probability, 15 equal bins); the bar's height is how many of them it got right, the number above it how many "
    "samples it holds, the black tick the bin's mean confidence. A calibrated model's bars reach the dashed diagonal: "
    "bars below it are overconfident (says 90 %, right 70 % of the time), above it underconfident. ECE is the "
    "sample-weighted mean gap between bar and tick (0 is perfect); MCE the largest gap of a bin. Temperature scaling "
    "divides every logit by one number T (T > 1 softens overconfident probabilities, T < 1 sharpens underconfident "
    "ones): the predicted class, the accuracy and the maps stay the same; only the probabilities change."
)


def _measure(run: Run) -> None:
    try:
        with st.spinner("Measuring calibration: the model's logits on the validation and test splits…"):
            bundle = services.bundle_for(run)
            with leased_model(services.run_key(run), bundle) as replica:
                calibrate(run, replica)
    except Exception as err:  # noqa: BLE001 - shown as a message; the page goes on
        show_error(err, "Calibration failed")


def _results(cal: Calibration) -> None:
    b, a = cal.before, cal.after
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Temperature T", f"{cal.temperature:.2f}", help="softmax(logits / T); 1 changes nothing")
    c2.metric("ECE", f"{a.ece:.3f}", delta=f"{a.ece - b.ece:+.3f}", delta_color="inverse", help=f"before: {b.ece:.3f}")
    c3.metric(
        "NLL (nats)", f"{a.nll:.3f}", delta=f"{a.nll - b.nll:+.3f}", delta_color="inverse", help=f"before: {b.nll:.3f}"
    )
    c4.metric("MCE", f"{a.mce:.3f}", delta=f"{a.mce - b.mce:+.3f}", delta_color="inverse", help=f"before: {b.mce:.3f}")
    st.caption(
        f"{cal.note} Before → after: ECE {b.ece:.4f} → {a.ece:.4f}, MCE {b.mce:.3f} → {a.mce:.3f}, NLL {b.nll:.4f} → "
        f"{a.nll:.4f}, Brier {b.brier:.4f} → {a.brier:.4f}; accuracy {a.accuracy:.2%} either way. Fitted {cal.created}."
    )
    if a.ece > b.ece:
        st.caption(
            "Scaling made the test ECE worse here: the model was already about as calibrated as one temperature can "
            "make it, and T fitted on few samples can overshoot. Leave the sidebar's switch off for this run."
        )
    st.altair_chart(reliability_chart(cal), width="content")
    st.caption(HOW_TO_READ)


def calibration_section(run: Run) -> None:
    """The Train page's "Calibration" section of a finished run."""
    st.markdown("**Calibration**")
    try:
        why = refusal(run)
        if why:
            st.caption(why)
            return
        cal = load_calibration(run)
        stale = stale_reason(run, cal) if cal is not None else None
    except Exception as err:  # noqa: BLE001 - a damaged file is shown as a message; Measure writes it again
        show_error(err, "Calibration")
        cal, stale = None, None
    key = f"calibration_measure_{run.id}"
    if stale:
        st.warning(stale, icon=":material/update:")
    if cal is None or stale:
        st.caption(
            "How far the model's probabilities are from how often it is right, before and after temperature scaling "
            "(a few seconds: the model runs on the validation and test splits)."
        )
    label = "Measure calibration" if cal is None else "Measure again"
    if st.button(label, key=key, icon=":material/straighten:", type="primary" if cal is None or stale else "secondary"):
        _measure(run)
        try:
            cal = load_calibration(run)
            stale = stale_reason(run, cal) if cal is not None else None
        except Exception:  # noqa: BLE001 - _measure has said what went wrong
            cal = None
    if cal is not None and not stale:
        _results(cal)
