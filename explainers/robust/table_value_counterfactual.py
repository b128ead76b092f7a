"""A counterfactual for a table row of a model that predicts a number (`bundle.regression`): the fewest changed
columns, each new value within the training data's range (the same beam search over column changes as a class's,
`table_counterfactual.search_columns`, with the columns the user marks fixed left alone), that bring the predicted
value into a range the user gives in the target's units: "at most 100", "at least 200", "between 100 and 150"
(`parse_range`).

Without a range the default is to move the prediction past the training split's median of the target to the other
side: a row predicted above the median asks for "at most the median", one predicted at or below it for "at least the
median" (`default_range`; the target's declared mean when the model has no training split). The result says which
range it used and whether it was the default. When no change of up to `max_changes` columns reaches the range, the
result is not found and its summary is one line saying so (a beam search: a change outside the beam may exist)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.registry import RegressionTarget, load_split
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.result import ColumnChange
from xaidash.explainers.robust.searches import COLUMNS, Progress, quiet
from xaidash.explainers.robust.table_counterfactual import (
    BEAM_NOTE,
    DEFAULT_BEAM,
    DEFAULT_CHANGES,
    Goal,
    timed_search,
)
from xaidash.models.bundle import ModelBundle

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_FORMS = (
    (re.compile(rf"^(?:at\s+most|<=?|≤|below|under)\s*({_NUMBER})$"), "high"),
    (re.compile(rf"^(?:at\s+least|>=?|≥|above|over)\s*({_NUMBER})$"), "low"),
)
_BETWEEN = re.compile(rf"^(?:between\s+)?({_NUMBER})\s*(?:\.\.|and|to)\s*({_NUMBER})$")
RANGE_HELP = "'at most 100', 'at least 200' or 'between 100 and 150' (also '<= 100', '>= 200', '100..150')"


@dataclass(frozen=True)
class ValueRange:
    """The values the prediction should reach, in the target's units: `low` <= value <= `high` (None: open)."""

    low: float | None = None
    high: float | None = None

    def contains(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def text(self, target: RegressionTarget) -> str:
        if self.low is not None and self.high is not None:
            return f"between {target.value_text(self.low)} and {target.value_text(self.high)}"
        if self.high is not None:
            return f"at most {target.value_text(self.high)}"
        return f"at least {target.value_text(float(self.low or 0.0))}"

    def to_json(self) -> dict[str, float | None]:
        return {"low": self.low, "high": self.high}


def parse_range(text: str) -> ValueRange:
    """A range as a person types it (`RANGE_HELP`); ExplainError in one line otherwise."""
    given = " ".join(str(text).strip().lower().split())
    for pattern, side in _FORMS:
        if m := pattern.match(given):
            value = float(m.group(1))
            return ValueRange(high=value) if side == "high" else ValueRange(low=value)
    if m := _BETWEEN.match(given):
        low, high = float(m.group(1)), float(m.group(2))
        if low > high:
            raise ExplainError(f"The range {text!r} starts above its end: give the lower value first.")
        return ValueRange(low, high)
    raise ExplainError(f"Cannot read the range {text!r}: give it as {RANGE_HELP}.")


def target_median(bundle: ModelBundle) -> float:
    """The training split's median of the target; the target's declared mean when there is no training split."""
    target = bundle.regression
    assert target is not None
    if bundle.has_dataset:
        try:
            labels = load_split(bundle.info.name, "train").labels
            if len(labels):
                return float(torch.as_tensor(labels).double().median())
        except DatasetError:
            pass
    return float(target.mean)


def default_range(bundle: ModelBundle, prediction: float) -> ValueRange:
    """Past the training median to the other side: at most the median for a prediction above it, else at least it."""
    median = target_median(bundle)
    return ValueRange(high=median) if prediction > median else ValueRange(low=median)


def value_change_text(target: RegressionTarget, before: float, after: float) -> str:
    """'disease progression: 152.3 → 171.0 (+18.7)' in the target's units (float noise of an unchanged value: +0)."""
    delta = after - before if abs(after - before) > 1e-4 * target.std else 0.0
    change = f"{'+' if delta >= 0 else '−'}{target.value_text(abs(delta))}"
    return f"{target.name}: {target.value_text(before)} → {target.value_text(after)} ({change})"


def value_goal(bundle: ModelBundle, wanted: ValueRange, batch_size: int) -> Goal:
    """How far inside `wanted` each raw row's predicted value lies (>= 0: inside), batched on the device."""
    low = -math.inf if wanted.low is None else wanted.low
    high = math.inf if wanted.high is None else wanted.high

    @torch.no_grad()
    def margins(rows: torch.Tensor) -> torch.Tensor:
        def run(size: int) -> torch.Tensor:
            out = [bundle.model(bundle.prepare(rows[s : s + size])).float()[:, 0] for s in range(0, len(rows), size)]
            pred = torch.cat(out) if out else torch.zeros(0, device=bundle.device)
            return torch.minimum(pred - low, high - pred)

        result, _ = run_halving(run, rows_per_pass(batch_size, bundle.device), what="the counterfactual search")
        return result

    return Goal(margins, inclusive=True)


@dataclass(frozen=True)
class ValueCounterfactual:
    """The search's outcome for a number to predict: the `goal` range (`default_goal`: chosen by `default_range`),
    the predicted value `before` and `after` the `changes` (None when none was found), the row after them."""

    target: RegressionTarget
    goal: ValueRange
    default_goal: bool
    found: bool
    budget: int
    before: float
    after: float | None
    changes: tuple[ColumnChange, ...] = ()
    row: np.ndarray | None = field(default=None, repr=False)
    fixed: tuple[str, ...] = ()
    seconds: float = 0.0
    note: str = ""
    modality: str = "table"
    search: str = COLUMNS
    name: str = "counterfactual"

    def summary(self) -> str:
        """One line: what was changed and where the prediction went, or that no such change was found."""
        t = self.target
        wanted, why = self.goal.text(t), "the default: past the training median" if self.default_goal else ""
        now = f"{t.name} {t.value_text(self.before)}"
        if not self.found or self.after is None:
            return (
                f"Not reachable within {self.budget} changed column{'s' if self.budget != 1 else ''} (within the "
                f"data's ranges{', fixed columns kept' if self.fixed else ''}): no change brings the predicted "
                f"{now} to {wanted}{f' ({why})' if why else ''}."
            )
        n, reached = len(self.changes), wanted + (f", {why}" if why else "")
        return (
            f"Counterfactual: {now} → {t.value_text(self.after)} ({reached}) by changing {n} column"
            f"{'s' if n != 1 else ''}: " + "; ".join(c.text() for c in self.changes) + f" ({self.seconds:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "modality": self.modality,
            "search": self.search,
            "name": self.name,
            "target": {"name": self.target.name, "unit": self.target.unit},
            "goal": {**self.goal.to_json(), "text": self.goal.text(self.target), "default": self.default_goal},
            "found": self.found,
            "budget": self.budget,
            "summary": self.summary(),
            "value_before": self.before,
            "value_after": self.after,
            "changes": [
                {"column": c.column, "old": c.old, "new": c.new, "old_text": c.old_text, "new_text": c.new_text}
                for c in self.changes
            ],
            "change_count": len(self.changes),
            "row": None if self.row is None else [float(v) for v in self.row],
            "fixed": list(self.fixed),
            "seconds": self.seconds,
            "note": self.note,
        }


def table_value_counterfactual(
    bundle: ModelBundle,
    row: torch.Tensor,
    goal: ValueRange | str | None = None,
    *,
    fixed: Sequence[str] = (),
    max_changes: int = DEFAULT_CHANGES,
    beam: int = DEFAULT_BEAM,
    batch_size: int = 256,
    progress: Progress = quiet,
) -> ValueCounterfactual:
    """The fewest changed columns found that bring a regression model's prediction for the raw row (F,) into `goal`
    (a `ValueRange`, its text for `parse_range`, or None: `default_range`). ExplainError in one line for a model that
    predicts classes, a range it cannot read, or a row already predicted inside the range."""
    target = bundle.regression
    if target is None:
        raise ExplainError("A range of values applies to a model that predicts a number; name a class for this model.")
    x = torch.as_tensor(row, dtype=torch.float32).reshape(-1)
    before = float(bundle.predict_proba(x.unsqueeze(0))[0, 0])
    wanted = parse_range(goal) if isinstance(goal, str) else goal or default_range(bundle, before)
    if wanted.contains(before):
        raise ExplainError(
            f"The model already predicts {target.name} {target.value_text(before)} for this row, "
            f"{wanted.text(target)}: give a range it does not reach yet."
        )
    found, scores_after, seconds = timed_search(
        bundle,
        x,
        0,
        fixed=fixed,
        max_changes=max_changes,
        beam=beam,
        batch_size=batch_size,
        progress=progress,
        goal=value_goal(bundle, wanted, batch_size),
    )
    after = None if scores_after is None else float(scores_after[0])
    return ValueCounterfactual(
        target=target,
        goal=wanted,
        default_goal=goal is None,
        found=found.found,
        budget=int(max_changes),
        before=before,
        after=after,
        changes=found.changes,
        row=found.row if found.found else None,
        fixed=tuple(fixed),
        seconds=seconds,
        note="" if found.found else BEAM_NOTE,
    )
