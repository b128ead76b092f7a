"""Counterfactuals and what-if for table rows, on `tabular_mlp` trained on `planted`: the fewest changed columns found
flip the class, leave the fixed columns alone and stay within the training data (values it holds); a row that no
allowed change can flip says so; what-if edits a row by column name and explains the edited row."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from table_bundles import split, trained_bundle

from xaidash.data.errors import ExplainError
from xaidash.explainers.robust import counterfactual
from xaidash.explainers.robust.searches import COLUMNS, SEARCHES, searches
from xaidash.explainers.robust.what_if import what_if
from xaidash.models import ModelBundle

FIXED = ("x2", "group")


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle()


def _predicted(bundle: ModelBundle, row: torch.Tensor) -> int:
    return int(bundle.predict_proba(torch.as_tensor(row, dtype=torch.float32).reshape(1, -1)).argmax())


def test_tables_search_for_column_changes() -> None:
    assert searches("table") == [COLUMNS] and SEARCHES[COLUMNS].name == "counterfactual"


def test_counterfactuals_flip_the_class_with_free_columns_within_the_data(bundle: ModelBundle) -> None:
    rows, columns = split().rows[:20], bundle.info.columns
    names = [c.name for c in columns]
    found = 0
    for row in rows:
        to = 1 - _predicted(bundle, row)
        cf = counterfactual(bundle, row, to, fixed=FIXED, budget=3)
        if not cf.found:
            assert cf.summary().startswith("None found within 3 changed columns")
            continue
        found += 1
        assert cf.row is not None and _predicted(bundle, cf.row) == to
        assert cf.probs_after is not None and int(np.argmax(cf.probs_after)) == to
        differs = [names[j] for j in range(len(names)) if cf.row[j] != float(row[j])]
        assert [c.column for c in cf.changes] == differs and 1 <= len(differs) <= 3
        assert not set(differs) & set(FIXED)
        for change in cf.changes:
            column = columns[names.index(change.column)]
            assert column.low <= change.new <= column.high
            assert change.old == pytest.approx(float(row[names.index(change.column)]))
            assert change.new_text == column.value_text(change.new)
        d = cf.to_json()
        assert d["search"] == COLUMNS and d["change_count"] == len(cf.changes) and d["fixed"] == list(FIXED)
        assert cf.summary().startswith("Counterfactual: ") and all(c.column in cf.summary() for c in cf.changes)
    assert found >= 16, f"only {found} of 20 rows flipped"


def test_categories_change_to_categories(bundle: ModelBundle) -> None:
    """With only the category column and noise free, a change (when found) sets a category by its name."""
    rows = split().rows[:40]
    for row in rows:
        cf = counterfactual(bundle, row, 1 - _predicted(bundle, row), fixed=("x0", "x1", "x2"), budget=2)
        for change in cf.changes:
            if change.column == "group":
                assert change.new_text in bundle.info.columns[-1].categories and change.new.is_integer()


def test_a_row_nothing_allowed_can_flip_says_none_was_found(bundle: ModelBundle) -> None:
    rows = split().rows
    p = bundle.predict_proba(rows).max(1).values
    row = rows[int(p.argmax())]  # the most confident row: only the truth columns could move it
    cf = counterfactual(bundle, row, 1 - _predicted(bundle, row), fixed=("x0", "x1", "x2"), budget=1)
    assert not cf.found and cf.row is None and not cf.changes
    assert cf.summary().startswith("None found within 1 changed column:")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"fixed": ("x9",)}, ["no column 'x9'"]),
        ({"fixed": ("x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "group")}, ["Every column is marked fixed"]),
        ({"budget": 0}, ["max_changes=0"]),
        ({"search": "patch"}, ["does not apply to table models"]),
    ],
)
def test_bad_requests_get_one_line(bundle: ModelBundle, kwargs: dict, words: list[str]) -> None:
    row = split().rows[0]
    with pytest.raises(ExplainError) as err:
        counterfactual(bundle, row, 1 - _predicted(bundle, row), **kwargs)
    assert "\n" not in str(err.value) and all(w in str(err.value) for w in words), str(err.value)
    with pytest.raises(ExplainError) as err:
        counterfactual(bundle, row, _predicted(bundle, row))
    assert "already predicts" in str(err.value)


def test_what_if_explains_the_edited_row(bundle: ModelBundle) -> None:
    row = split().rows[3]
    w = what_if(bundle, row, {"x0": 1.5, "group": "blue"}, method="occlusion")
    assert w.row[0] == 1.5 and w.row[8] == 2 and torch.equal(w.row[1:8], row[1:8])
    assert [c.column for c in w.changes] == ["x0", "group"] and w.changes[1].new_text == "blue"
    np.testing.assert_allclose(w.after, bundle.predict_proba(w.row.unsqueeze(0))[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.before, bundle.predict_proba(row.unsqueeze(0))[0].numpy(), rtol=1e-6)
    assert w.explanation is not None and w.explanation.tokens is not None
    assert w.explanation.tokens[0][0] == "x0 = 1.5" and w.explanation.tokens[0][-1] == "group = blue"
    assert "x0:" in w.summary(bundle.info.classes)
    with pytest.raises(ExplainError) as err:
        what_if(bundle, row, {"x1": 7})
    assert "'x1'" in str(err.value) and "outside the training data's range" in str(err.value)
