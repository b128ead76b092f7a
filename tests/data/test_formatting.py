"""Numbers as people read them (data/formatting.py): measured values in their units, scores of both tasks."""

from __future__ import annotations

import pytest

from xaidash.data.formatting import measured_text, r2_text, score_text
from xaidash.data.registry import RegressionTarget, TableColumn


@pytest.mark.parametrize(
    ("value", "text"),
    [(152.345, "152.3"), (0.0001234, "0.0001234"), (61250.3, "61,250"), (-12345.6, "-12,346"), (7.0, "7")],
)
def test_a_measured_value_reads_without_scientific_notation_up_to_large_numbers(value: float, text: str) -> None:
    assert measured_text(value) == text


def test_a_predicted_value_and_a_cell_carry_their_unit_and_separators() -> None:
    assert RegressionTarget("price", "kEUR").value_text(61250.3) == "61,250 kEUR"
    assert RegressionTarget("disease progression").value_text(152.345) == "152.3"
    assert TableColumn("area").value_text(123456.7) == "123,457"


def test_the_headline_score_is_r2_for_a_number_and_a_percentage_for_classes() -> None:
    assert score_text({"test_r2": 0.4237, "test_acc": None}, "test") == "R² 0.42"
    assert score_text({"val_acc": 0.9953}, "val") == "99.5%"
    assert score_text({}, "test") == "–" and r2_text(float("nan")) == "–"
