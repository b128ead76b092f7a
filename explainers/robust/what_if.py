"""What-if for a table row: the row with some columns set to other values (by name, each checked against the
training data's range or the column's categories: `table_values.edit_row`), the model's prediction for it and its
attributions by one method, beside the prediction for the row as it was. A page's sliders and choices call
`what_if` with the values the user set; several methods at once go through `explain_session` on `edited.row`.

For a model that predicts a number, `before` and `after` are its predicted values (1,) in the target's units, `target`
says which target (`before_value`, `after_value`, `summary` read them: "disease progression 152.3 → 131.0 (-21.3)")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.modalities.table_values import edit_row
from xaidash.explainers.robust.result import ColumnChange
from xaidash.models.bundle import ModelBundle


@dataclass(frozen=True)
class WhatIf:
    """The edited raw `row` (F,), the columns that changed, the class probabilities before and after (a number to
    predict: the predicted values (1,) in the target's units, `target` set), and the explanation of the edited row
    (None when no method was asked for)."""

    row: torch.Tensor
    changes: tuple[ColumnChange, ...]
    before: np.ndarray
    after: np.ndarray
    explanation: Explanation | None
    target: RegressionTarget | None = None

    @property
    def before_value(self) -> float | None:
        """The predicted value before the edit, in the target's units (None for a classifier)."""
        return None if self.target is None else float(self.before[0])

    @property
    def after_value(self) -> float | None:
        return None if self.target is None else float(self.after[0])

    def summary(self, classes: tuple[str, ...]) -> str:
        """One line: what changed and how the prediction moved (a number: its value before and after, in units)."""
        what = "; ".join(c.text() for c in self.changes) or "nothing changed"
        t = self.target
        if t is not None:
            a, b = float(self.before[0]), float(self.after[0])
            return f"{what}: {t.name} {t.value_text(a)} → {t.value_text(b)} ({b - a:+.4g})"
        a, b = int(np.argmax(self.before)), int(np.argmax(self.after))
        return (
            f"{what}: {classes[a]} ({self.before[a]:.1%}) → {classes[b]} ({self.after[b]:.1%})"
            if a != b
            else f"{what}: still {classes[b]}, {self.before[b]:.1%} → {self.after[b]:.1%}"
        )


def what_if(
    bundle: ModelBundle,
    row: torch.Tensor,
    changes: Mapping[str, str | float],
    method: str | None = "ig",
    *,
    target: int | None = None,
    seed: int = 0,
    **params: Any,
) -> WhatIf:
    """The raw row (F,) with `changes` (column name -> new value: a number in the column's units, or a category's
    name) applied, predicted and explained by `method` for `target` (default: the edited row's predicted class; a
    model that predicts a number: its one output, the value in units)."""
    info = bundle.info
    old = torch.as_tensor(row, dtype=torch.float32).reshape(-1)
    new = edit_row(info, old, changes)
    done = tuple(
        ColumnChange(c.name, float(a), float(b), c.value_text(float(a)), c.value_text(float(b)))
        for c, a, b in zip(info.columns, old.tolist(), new.tolist(), strict=True)
        if a != b
    )
    probs = bundle.predict_proba(torch.stack([old, new])).numpy()
    explanation = None
    if method is not None:
        explanation = explain(
            bundle, new.unsqueeze(0), None if target is None else [int(target)], method, seed=seed, **params
        )
    return WhatIf(new, done, probs[0], probs[1], explanation, bundle.regression)
