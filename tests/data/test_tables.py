"""The built-in tables and the table adapter's data half: splits, columns measured on the training split, rows
standardised and one-hot encoded for the model, per-position values summed back to columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import xaidash.data.sets  # noqa: F401  (registers the data sets)
from xaidash.data.modalities import modality_of
from xaidash.data.modalities.table import column_slices, feature_mask, prepared_width, to_columns
from xaidash.data.registry import TableSplit, get_info, load_split


@pytest.mark.parametrize(
    ("name", "train", "test", "columns", "classes"),
    [("breast_cancer", 455, 114, 30, 2), ("wine", 142, 36, 13, 3), ("planted", 1600, 400, 9, 2)],
)
def test_each_table_has_its_split_and_columns(name: str, train: int, test: int, columns: int, classes: int) -> None:
    info = get_info(name)
    a, b = load_split(name, "train"), load_split(name, "test")
    assert isinstance(a, TableSplit) and isinstance(b, TableSplit)
    assert (len(a), len(b)) == (train, test)
    assert a.rows.shape[1] == b.rows.shape[1] == len(info.columns) == columns == info.input_shape[0]
    assert info.num_classes == classes and info.modality == "table" and info.builtin
    assert set(a.labels.tolist()) == set(range(classes))


def test_numeric_columns_carry_the_training_split_s_statistics() -> None:
    info, train = get_info("breast_cancer"), load_split("breast_cancer", "train").rows.double().numpy()
    for i, column in enumerate(info.columns):
        assert column.mean == pytest.approx(train[:, i].mean())
        assert column.std == pytest.approx(train[:, i].std())
        assert (column.low, column.high) == (pytest.approx(train[:, i].min()), pytest.approx(train[:, i].max()))
        assert column.median == pytest.approx(np.median(train[:, i]))


def test_planted_labels_follow_the_rule_of_its_truth_columns() -> None:
    info, split = get_info("planted"), load_split("planted", "test")
    assert info.truth_columns == ("x0", "x1", "x2")
    names = [c.name for c in info.columns]
    x0, x1, x2 = (split.rows[:, names.index(n)].double() for n in info.truth_columns)
    assert torch.equal(split.labels, (x0 * x1 + x2 - 5 > 0).long())
    group = info.columns[names.index("group")]
    assert group.categorical and group.categories == ("red", "green", "blue") and group.width == 3


def test_rows_are_standardised_and_one_hot_encoded_for_the_model() -> None:
    info, rows = get_info("planted"), load_split("planted", "train").rows
    x = modality_of("table").prepare(rows, info, None, torch.device("cpu"))
    assert x.shape == (len(rows), prepared_width(info)) == (1600, 11)
    numeric = x[:, :8].double()
    assert numeric.mean(0).abs().max() < 1e-4 and (numeric.std(0, unbiased=False) - 1).abs().max() < 1e-4
    one_hot = x[:, 8:]
    assert torch.equal(one_hot.sum(1), torch.ones(len(rows))) and torch.equal(one_hot.argmax(1), rows[:, 8].long())
    assert column_slices(info)[8] == slice(8, 11) and feature_mask(info).tolist()[-3:] == [8, 8, 8]


def test_values_over_the_model_s_input_sum_back_to_one_per_column() -> None:
    info = get_info("planted")
    values = torch.arange(2 * 11, dtype=torch.float32).reshape(2, 11)
    columns = to_columns(values, info)
    assert columns.shape == (2, 9)
    assert torch.equal(columns[:, :8], values[:, :8]) and torch.equal(columns[:, 8], values[:, 8:].sum(1))


def test_a_row_of_the_wrong_width_is_refused_in_one_line() -> None:
    from xaidash.data.errors import ExplainError

    with pytest.raises(ExplainError, match="has 9 values"):
        modality_of("table").prepare(torch.zeros(2, 5), get_info("planted"), None, torch.device("cpu"))
