"""The Explain page's tables: metrics with arrows and the best value starred, diagnostics with counts as integers."""

from __future__ import annotations

import math

from xaidash.dashboard.components.explain_tables import BEST, diagnostics_table, fmt_number, metrics_table
from xaidash.explainers.scoring import METRICS


def test_fmt_number_prints_counts_as_integers() -> None:
    assert fmt_number(21.0) == "21" and fmt_number(3) == "3"
    assert fmt_number(0.12345) == "0.123"
    assert fmt_number(3.2e-7) == "3.20e-07"
    assert fmt_number(None) == "–" and fmt_number(math.nan) == "–" and fmt_number(math.inf) == "–"


def test_metrics_table_methods_as_rows_arrows_and_best_marked() -> None:
    values = {
        "Saliency": {"deletion_auc": 0.2, "insertion_auc": 0.9},
        "Integrated Gradients": {"deletion_auc": 0.05, "insertion_auc": 0.78, "completeness_gap": 0.01},
        "Grad-CAM": {"deletion_auc": 0.21, "insertion_auc": math.nan},
    }
    t = metrics_table(values, METRICS)
    assert list(t.index) == list(values)
    assert list(t.columns) == ["Deletion AUC ↓", "Insertion AUC ↑", "Completeness gap ↓"]
    assert t.loc["Integrated Gradients", "Deletion AUC ↓"] == f"0.050 {BEST}"
    assert t.loc["Saliency", "Insertion AUC ↑"] == f"0.900 {BEST}"
    assert t.loc["Grad-CAM", "Insertion AUC ↑"] == "–"
    assert t.loc["Saliency", "Completeness gap ↓"] == "–"
    assert BEST not in t.loc["Integrated Gradients", "Completeness gap ↓"], "one value: nothing to compare"
    assert sum(BEST in v for v in t["Deletion AUC ↓"]) == 1
    tie = metrics_table({"A": {"pointing_game": 1.0}, "B": {"pointing_game": 1.0}}, METRICS)
    assert not any(BEST in v for v in tie["Pointing game ↑"]), "a tie among all marks nothing"


def test_diagnostics_table_keeps_counts_integer_and_notes() -> None:
    t = diagnostics_table(
        {"LIME": {"segments": 21.0, "r2": 0.4567}, "Saliency": {}},
        {"Grad-CAM": ["completeness_gap: not computed (no reference)"]},
    )
    rows = {(r.method, r.item): r.value for r in t.itertuples()}
    assert rows[("LIME", "segments")] == "21" and rows[("LIME", "r2")] == "0.457"
    assert "not computed" in rows[("Grad-CAM", "note")]
