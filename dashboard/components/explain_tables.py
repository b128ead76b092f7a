"""The Explain page's tables: one quality-metrics table per input (methods as rows, metrics as columns,
which way is better in the header, the best value starred) and the diagnostics of the details panel.

Plain pandas, no Streamlit: the page draws what these return.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from xaidash.data.formatting import fmt_number
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.scoring import curves_legend

BEST = "★"
ARROWS = {"higher is better": "↑", "lower is better": "↓"}


def metric_header(title: str, better: str) -> str:
    arrow = ARROWS.get(better, "")
    return f"{title} {arrow}".strip()


def metrics_legend(modality: str, steps: int = CURVE_STEPS, regression: bool = False) -> str:
    """The line under a metrics table: the arrows and star, and what the deletion / insertion curves remove,
    worded for the run's `modality` (pixels for images, words for text: `scoring.unit_words`)."""
    return f"↑ higher is better, ↓ lower is better, {BEST} best of these methods for this input. " + curves_legend(
        modality, steps, regression
    )


def metrics_table(
    values: Mapping[str, Mapping[str, float | None]],
    titles: Mapping[str, tuple[str, str]],
) -> pd.DataFrame:
    """values: method label -> {metric: value} for one input; titles: metric -> (title, 'higher/lower is better').

    A frame of strings, methods as rows in the given order, one column per metric any method has (in
    `titles`' order) headed '<title> ↑' or '↓'; the best finite value of a column is starred when two or
    more methods have one and not all tie; a metric a method lacks is '–'."""
    metrics = [k for k in titles if any(k in v for v in values.values())]
    rows: dict[str, dict[str, str]] = {m: {} for m in values}
    for k in metrics:
        title, better = titles[k]
        col = {m: v.get(k) for m, v in values.items()}
        finite = {m: float(x) for m, x in col.items() if x is not None and math.isfinite(float(x))}
        best: set[str] = set()
        if len(finite) >= 2 and better in ARROWS:
            target = max(finite.values()) if better == "higher is better" else min(finite.values())
            best = {m for m, x in finite.items() if x == target}
            if len(best) == len(finite):  # a tie among all: nothing stands out
                best = set()
        for m, x in col.items():
            text = fmt_number(x)
            rows[m][metric_header(title, better)] = f"{text} {BEST}" if m in best else text
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=[metric_header(*titles[k]) for k in metrics])
    frame.index.name = "method"
    return frame


def diagnostics_table(
    diagnostics: Mapping[str, Mapping[str, float]], notes: Mapping[str, Sequence[str]]
) -> pd.DataFrame:
    """One row per (method, item): each method's diagnostics for one input (counts as integers) and
    notes such as metrics that could not be computed."""
    rows = [
        {"method": m, "item": name, "value": fmt_number(v)}
        for m, diag in diagnostics.items()
        for name, v in diag.items()
    ]
    rows += [{"method": m, "item": "note", "value": text} for m, texts in notes.items() for text in texts]
    return pd.DataFrame(rows, columns=["method", "item", "value"])
