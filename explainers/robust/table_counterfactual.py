"""A table row's counterfactual: the fewest changed columns that make the model predict a chosen class, each new
value one the training data holds (within its range), the columns the user marks fixed left alone.

Beam search over sets of changed columns: at each depth every state of the beam is extended by every single change
of a column it has not changed yet (not fixed) to one of its candidate values (a numeric column: the training split's
quantiles, whole numbers for an integer column; a category column: its other categories), all of them scored in
shared batched passes on the device (`batching.run_halving`, `rows_per_pass`); the `beam` states whose target margin
(the class's logit minus the largest other) is highest go on. The first depth at which some state is predicted as the
class is the fewest changes found (a beam search: fewer may exist outside the beam); among its states the one
closest to the row (changes in training standard deviations, a changed category counting 1) is kept, and each changed
numeric column is then moved back toward its old value as far as the class still holds. No library searches
column changes against a PyTorch classifier with fixed columns and data ranges, so this is written here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, TableColumn
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.guard import evaluating
from xaidash.explainers.modalities.table_values import training_rows
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.result import ColumnChange, Counterfactual
from xaidash.explainers.robust.searches import COLUMNS, Progress, SearchStep, quiet
from xaidash.models.bundle import ModelBundle

TRAINING_ROWS = 5000  # training rows the candidate quantiles come from (a seeded pick)
DEFAULT_CHANGES = 3
DEFAULT_BEAM = 8
QUANTILES = 21  # candidate values of a numeric column: the training split's 0%, 5%, ..., 100% quantiles
PULL_BACK = 32  # values tried between a changed column's old and new value, to undo as much of the change as can be


@dataclass(frozen=True)
class Goal:
    """What the search reaches for: `margins(rows)` (N,) on the device for raw rows, how far each is inside the goal
    (a class: its logit minus the largest other, reached above 0; a range of values: the predicted value's distance
    inside the range, reached at 0 or above, `inclusive`). Larger is closer: the beam keeps the largest."""

    margins: Callable[[torch.Tensor], torch.Tensor]
    inclusive: bool = False

    def reached(self, m: torch.Tensor) -> torch.Tensor:
        return m >= 0 if self.inclusive else m > 0


def class_goal(bundle: ModelBundle, k: int, batch_size: int) -> Goal:
    """Reaching class k: `margins` of `bundle` for k."""
    return Goal(lambda rows: margins(bundle, rows, k, batch_size))


@dataclass(frozen=True)
class ColumnSearch:
    """What the search found: `changes` (empty when none reached the class), the row after them, and the depths
    (changed columns) it searched."""

    found: bool
    changes: tuple[ColumnChange, ...]
    row: np.ndarray
    depth: int


def candidate_values(column: TableColumn, training: torch.Tensor | None, j: int) -> torch.Tensor:
    """The values column j may be changed to: its categories, or its training quantiles (its range's ends and
    evenly spaced values between them when no training rows can be read), whole numbers for an integer column."""
    if column.categorical:
        return torch.arange(len(column.categories), dtype=torch.float32)
    if training is not None and len(training):
        values = torch.quantile(training[:, j].double(), torch.linspace(0, 1, QUANTILES, dtype=torch.float64))
    else:
        values = torch.linspace(column.low, column.high, QUANTILES, dtype=torch.float64)
    if column.integer:
        values = values.round()
    return torch.unique(values.float().clamp(*_inside(column)))


def _inside(column: TableColumn) -> tuple[torch.Tensor, torch.Tensor]:
    """The column's range as float32 ends that lie within it (rounding to float32 may step outside by one ulp)."""
    low, high = torch.tensor(column.low, dtype=torch.float32), torch.tensor(column.high, dtype=torch.float32)
    if float(low) < column.low:
        low = torch.nextafter(low, torch.tensor(torch.inf))
    if float(high) > column.high:
        high = torch.nextafter(high, torch.tensor(-torch.inf))
    return low, high


def fixed_indices(info: DatasetInfo, fixed: Sequence[str]) -> set[int]:
    names = [c.name for c in info.columns]
    unknown = [f for f in fixed if f not in names]
    if unknown:
        raise ExplainError(
            f"{info.name} has no column {', '.join(repr(u) for u in unknown)}. Columns: {', '.join(names)}."
        )
    left = set(range(len(names))) - {names.index(f) for f in fixed}
    if not left:
        raise ExplainError("Every column is marked fixed: leave at least one free to change.")
    return {names.index(f) for f in fixed}


def margins(bundle: ModelBundle, rows: torch.Tensor, k: int, batch_size: int) -> torch.Tensor:
    """Class k's logit minus the largest other logit for raw rows (> 0: the model predicts k), batched."""

    @torch.no_grad()
    def run(size: int) -> torch.Tensor:
        out = []
        for s in range(0, len(rows), size):
            logits = bundle.model(bundle.prepare(rows[s : s + size])).float()
            others = logits.clone()
            others[:, k] = -torch.inf
            out.append(logits[:, k] - others.max(1).values)
        return torch.cat(out) if out else torch.zeros(0, device=bundle.device)

    result, _ = run_halving(run, rows_per_pass(batch_size, bundle.device), what="the counterfactual search")
    return result


def _distance(info: DatasetInfo, row: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """How far each state lies from the row: numeric changes in training standard deviations, 1 per category."""
    out = torch.zeros(len(states), device=states.device)
    for j, c in enumerate(info.columns):
        d = states[:, j] - row[j]
        out += (d != 0).float() if c.categorical else d.abs() / (c.std or 1.0)
    return out


def _extend(
    states: torch.Tensor, changed: torch.Tensor, candidates: list[torch.Tensor], free: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every state with one more column (free, not changed yet) set to one of its candidate values that differs."""
    rows, marks = [], []
    for s in range(len(states)):
        for j in free:
            if changed[s, j]:
                continue
            values = candidates[j][candidates[j] != states[s, j]]
            if not len(values):
                continue
            new = states[s].repeat(len(values), 1)
            new[:, j] = values
            mark = changed[s].repeat(len(values), 1)
            mark[:, j] = True
            rows.append(new)
            marks.append(mark)
    if not rows:
        return states[:0], changed[:0]
    return torch.cat(rows), torch.cat(marks)


def _pull_back(bundle: ModelBundle, row: torch.Tensor, best: torch.Tensor, goal: Goal) -> torch.Tensor:
    """`best` with each changed numeric column moved back toward the row's value as far as the goal still holds (all
    the way where the other changes suffice: the column is then not changed at all)."""
    info = bundle.info
    out = best.clone()
    for j, c in enumerate(info.columns):
        if c.categorical or out[j] == row[j]:
            continue
        steps = torch.linspace(0.0, 1.0, PULL_BACK + 1, device=row.device)[:-1]  # 0: the old value (undone)
        values = row[j] + steps * (out[j] - row[j])
        values = (values.round() if c.integer else values).clamp(*(v.to(row.device) for v in _inside(c)))
        tries = out.repeat(len(values), 1)
        tries[:, j] = values
        ok = goal.reached(goal.margins(tries))
        if bool(ok.any()):
            out[j] = values[int(ok.nonzero()[0])]  # the first that holds: the closest to the old value
    return out


def search_columns(
    bundle: ModelBundle,
    row: torch.Tensor,
    k: int,
    *,
    fixed: Sequence[str] = (),
    max_changes: int = DEFAULT_CHANGES,
    beam: int = DEFAULT_BEAM,
    training: torch.Tensor | None = None,
    batch_size: int = 256,
    progress: Progress = quiet,
    goal: Goal | None = None,
) -> ColumnSearch:
    """The fewest changed columns found that make the model predict class k for the raw row (F,), or that reach
    `goal` when given (a regression model's range of values: `table_value_counterfactual`)."""
    info = bundle.info
    if not 1 <= int(max_changes) <= len(info.columns):
        raise ExplainError(f"max_changes={max_changes}: allow between 1 and {len(info.columns)} changed columns.")
    if not 1 <= int(beam) <= 1000:
        raise ExplainError(f"beam={beam}: keep between 1 and 1000 candidate rows per step.")
    pinned = fixed_indices(info, fixed)
    free = [j for j in range(len(info.columns)) if j not in pinned]
    device = bundle.device
    x = torch.as_tensor(row, dtype=torch.float32).reshape(-1).to(device)
    train = None if training is None else training.float().cpu()  # quantiles on the CPU, once; values to the device
    candidates = [candidate_values(c, train, j).to(device) for j, c in enumerate(info.columns)]
    states, changed = x.unsqueeze(0), torch.zeros(1, len(info.columns), dtype=torch.bool, device=device)
    goal = goal or class_goal(bundle, k, batch_size)
    with evaluating(bundle.model):
        for depth in range(1, int(max_changes) + 1):
            progress(
                SearchStep(
                    depth,
                    int(max_changes),
                    "column change",
                    f"{len(states)} row{'s' if len(states) != 1 else ''} extended",
                )
            )
            states, changed = _extend(states, changed, candidates, free)
            if not len(states):
                break
            m = goal.margins(states)
            reached = goal.reached(m)
            if bool(reached.any()):
                hits = states[reached]
                best = hits[int(torch.argmin(_distance(info, x, hits)))]
                best = _pull_back(bundle, x, best, goal)
                return ColumnSearch(True, _changes(info, x, best), best.cpu().numpy(), depth)
            keep = torch.argsort(m, descending=True, stable=True)[: int(beam)]
            states, changed = states[keep], changed[keep]
    return ColumnSearch(False, (), x.cpu().numpy(), int(max_changes))


def _changes(info: DatasetInfo, row: torch.Tensor, new: torch.Tensor) -> tuple[ColumnChange, ...]:
    out = []
    for j, c in enumerate(info.columns):
        a, b = float(row[j]), float(new[j])
        if a != b:
            out.append(ColumnChange(c.name, a, b, c.value_text(a), c.value_text(b)))
    return tuple(out)


BEAM_NOTE = "a beam search: a change of more columns, or outside the beam, may still exist"


def timed_search(
    bundle: ModelBundle,
    x: torch.Tensor,
    k: int,
    *,
    fixed: Sequence[str],
    max_changes: int,
    beam: int,
    batch_size: int,
    progress: Progress,
    goal: Goal | None = None,
) -> tuple[ColumnSearch, torch.Tensor | None, float]:
    """`search_columns` over the run's training rows' values, timed: (the search, the model's scores for the changed
    row (None when none was found), seconds). What both kinds of table counterfactual (a class, a range) run."""
    start = time.perf_counter()
    found = search_columns(
        bundle,
        x,
        k,
        fixed=fixed,
        max_changes=max_changes,
        beam=beam,
        training=training_rows(bundle, TRAINING_ROWS, 0),
        batch_size=batch_size,
        progress=progress,
        goal=goal,
    )
    after = bundle.predict_proba(torch.as_tensor(found.row).unsqueeze(0))[0] if found.found else None
    return found, after, time.perf_counter() - start


def table_counterfactual(
    bundle: ModelBundle,
    row: torch.Tensor,
    to: int,
    *,
    fixed: Sequence[str] = (),
    max_changes: int = DEFAULT_CHANGES,
    beam: int = DEFAULT_BEAM,
    batch_size: int = 256,
    progress: Progress = quiet,
) -> Counterfactual:
    """The fewest changed columns found (`search_columns`) that make the model predict `to` for the raw row (F,),
    as a `Counterfactual` (search COLUMNS): its changes, the row after them and the probabilities before and after."""
    if bundle.regression is not None:
        raise ExplainError(
            f"This model predicts a number ({bundle.regression.name}), not a class: give a range of values for it to "
            "reach instead (table_value_counterfactual: 'at most 100', 'at least 200', 'between 100 and 150')."
        )
    x = torch.as_tensor(row, dtype=torch.float32).reshape(-1)
    before = bundle.predict_proba(x.unsqueeze(0))[0].numpy()
    k = int(to)
    if not 0 <= k < bundle.info.num_classes:
        raise ExplainError(f"Class {k} is out of range: the model has classes 0..{bundle.info.num_classes - 1}.")
    if k == int(np.argmax(before)):
        raise ExplainError(
            f"The model already predicts {bundle.info.classes[k]} for this row: pick another class for the counterfactual."
        )
    found, scores_after, seconds = timed_search(
        bundle, x, k, fixed=fixed, max_changes=max_changes, beam=beam, batch_size=batch_size, progress=progress
    )
    after = None if scores_after is None else scores_after.numpy()
    return Counterfactual(
        modality=bundle.modality,
        search=COLUMNS,
        target=k,
        classes=tuple(bundle.info.classes),
        found=found.found,
        budget=float(max_changes),
        probs_before=before,
        probs_after=after,
        seconds=seconds,
        changes=found.changes,
        row=found.row if found.found else None,
        fixed=tuple(fixed),
        note="" if found.found else BEAM_NOTE,
    )
