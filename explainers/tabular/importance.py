"""Permutation importance of each column (Breiman 2001; scikit-learn's `permutation_importance`), on the model's
device: a column's values are shuffled among the rows `repeats` times (seeded) and the model's score on the true
labels is measured again; the importance is how much the score gets worse. All repeats of a column go through the
model in one pass of (repeats x rows) rows.

Scores: `accuracy` (importance = drop in accuracy, a share of rows) or `log_loss` (importance = rise in the mean
log-loss of the true class, in nats) for a classifier; `r2` for a model that predicts a number (importance = drop in
R² of the predicted values against the true ones, scikit-learn's `r2_score` over the rows, a share of the target's
variance: 0.1 means shuffling the column loses a tenth of the variance the model explained). The interval is the 95 % t-interval of the mean over the repeats: how much the
importance moves with the shuffles drawn, not with the choice of rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from scipy import stats

from xaidash.explainers.tabular.passes import BATCH_ROWS, Predict, probabilities

Scoring = Literal["accuracy", "log_loss", "r2"]
SCORINGS: tuple[Scoring, ...] = ("accuracy", "log_loss")  # a classifier's
REGRESSION_SCORINGS: tuple[Scoring, ...] = ("r2",)  # a model that predicts a number
ALL_SCORINGS: tuple[Scoring, ...] = SCORINGS + REGRESSION_SCORINGS
UNITS = {
    "accuracy": "drop in accuracy (share of rows)",
    "log_loss": "rise in log-loss of the true class (nats)",
    "r2": "drop in R² (share of the target's variance)",
}
NAMES = {"accuracy": "accuracy", "log_loss": "log-loss", "r2": "R²"}  # how a baseline score is named
DEFAULT_REPEATS = 10
EPS = 1e-15  # probabilities are clipped here before the log, as scikit-learn's log_loss does


@dataclass
class ColumnImportance:
    """One column: `mean` and `std` of its importance over the repeats, the 95 % interval of the mean
    (`low`..`high`), and each repeat's value."""

    column: str
    mean: float
    std: float
    low: float
    high: float
    values: list[float] = field(default_factory=list)


@dataclass
class PermutationImportance:
    """Every column's importance in input order; `baseline` is the score on the rows as they are."""

    scoring: Scoring
    units: str
    baseline: float
    repeats: int
    rows: int
    seed: int
    columns: list[ColumnImportance]

    def ranked(self) -> list[ColumnImportance]:
        """The columns, most important first."""
        return sorted(self.columns, key=lambda c: -c.mean)

    def means(self) -> np.ndarray:
        """(F,) the mean importance of each column, in input order."""
        return np.array([c.mean for c in self.columns], dtype=np.float64)


def score(probs: torch.Tensor, labels: torch.Tensor, scoring: Scoring) -> torch.Tensor:
    """(..., ) the score of probabilities (..., N, K) on `labels` (N,): accuracy, or mean log-loss of the true class;
    `r2`: R² of predicted values (..., N, 1) against the true values `labels` (N,)."""
    if scoring == "r2":
        pred, y = probs[..., 0].double(), labels.double()
        total = ((y - y.mean()) ** 2).sum()
        return 1.0 - ((pred - y) ** 2).sum(-1) / total.clamp(min=1e-12)
    if scoring == "accuracy":
        return (probs.argmax(-1) == labels).double().mean(-1)
    true = probs.gather(-1, labels.expand(probs.shape[:-1]).unsqueeze(-1)).squeeze(-1)
    return -true.double().clamp(EPS, 1.0).log().mean(-1)


def _interval(values: np.ndarray) -> tuple[float, float]:
    """The 95 % t-interval of the mean of `values` (a point when there is one value or no spread)."""
    mean = float(values.mean())
    if len(values) < 2:
        return mean, mean
    half = float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean - half, mean + half


def permutation_importance(
    predict: Predict,
    rows: torch.Tensor,
    labels: torch.Tensor,
    names: Sequence[str],
    *,
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
    scoring: Scoring = "accuracy",
    batch_rows: int = BATCH_ROWS,
) -> PermutationImportance:
    """Each column's permutation importance for `rows` (N, F) raw values and their true `labels` (N,): classes, or
    values in the target's units for `r2` (`predict` then gives the predicted values (M, 1))."""
    if scoring not in ALL_SCORINGS:
        raise ValueError(f"scoring must be one of {ALL_SCORINGS}, not {scoring!r}")
    n, repeats = len(rows), max(1, int(repeats))
    labels = labels.to(rows.device)
    baseline = float(score(probabilities(predict, rows, batch_rows), labels, scoring))
    sign = -1.0 if scoring == "log_loss" else 1.0  # accuracy and R² fall, log-loss rises when a column matters
    generator = torch.Generator().manual_seed(int(seed))
    out = []
    for j, name in enumerate(names):
        orders = torch.stack([torch.randperm(n, generator=generator) for _ in range(repeats)]).to(rows.device)
        copies = rows.unsqueeze(0).repeat(repeats, 1, 1)  # (R, N, F)
        copies[:, :, j] = rows[:, j][orders]
        probs = probabilities(predict, copies.reshape(-1, rows.shape[1]), batch_rows).reshape(repeats, n, -1)
        values = sign * (baseline - score(probs, labels, scoring).cpu().numpy())
        low, high = _interval(values)
        std = float(values.std(ddof=1)) if repeats > 1 else 0.0
        out.append(ColumnImportance(name, float(values.mean()), std, low, high, [float(v) for v in values]))
    return PermutationImportance(scoring, UNITS[scoring], baseline, repeats, n, int(seed), out)
