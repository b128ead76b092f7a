"""Global SHAP's summary: mean |attribution| per column, and each dependence plot coloured by the column that truly
interacts with it (exact Shapley values of f = x0 * x1 + x2 with independent, centred columns)."""

from __future__ import annotations

import numpy as np

from xaidash.data.registry import TableColumn
from xaidash.explainers.tabular.shap_global import strongest_interaction, summarise

COLUMNS = (
    TableColumn("x0"),
    TableColumn("x1"),
    TableColumn("x2"),
    TableColumn("noise"),
    TableColumn("colour", kind="categorical", categories=("red", "blue")),
)


def _exact() -> tuple[np.ndarray, np.ndarray]:
    """Rows and the exact Shapley values of x0 * x1 + x2 against the all-zero baseline (the columns' means)."""
    rng = np.random.default_rng(0)
    n = 400
    data = np.column_stack(
        [rng.normal(0, 1, n), rng.uniform(-2, 2, n), rng.normal(0, 1, n), rng.normal(0, 1, n), rng.integers(0, 2, n)]
    )
    values = np.zeros_like(data)
    values[:, 0] = values[:, 1] = 0.5 * data[:, 0] * data[:, 1]  # the product's credit is split evenly
    values[:, 2] = data[:, 2]
    return values, data


def test_the_interacting_column_colours_the_dependence() -> None:
    values, data = _exact()
    assert strongest_interaction(values, data, 0) == 1
    assert strongest_interaction(values, data, 1) == 0
    got = summarise(values, data, COLUMNS, [0, 1, 2], method="shap_kernel", target="yes")
    d0 = got.dependence[0]
    assert (d0.column, d0.colour_by) == ("x0", "x1")
    np.testing.assert_array_equal(d0.values, values[:, 0])
    np.testing.assert_array_equal(d0.colour_data, data[:, 1])
    assert got.dependence[1].colour_by == "x0"


def test_mean_abs_and_ranking() -> None:
    values, data = _exact()
    got = summarise(values, data, COLUMNS, [4], method="shap_kernel", target="yes")
    np.testing.assert_allclose(got.mean_abs, np.abs(values).mean(0))
    ranked = [c for c, _ in got.ranked()]
    assert ranked[0] == "x2" and set(ranked[1:3]) == {"x0", "x1"}, "x0 and x1 share the product's credit equally"
    assert got.ranked()[-1][1] == 0.0 and got.rows == 400
    assert got.dependence[0].labels == ("red", "blue")
    assert got.units == "contribution to the predicted probability of class 'yes'"


def test_one_column_has_no_partner() -> None:
    values, data = _exact()
    assert strongest_interaction(values[:, :1], data[:, :1], 0) is None
