"""Deletion and insertion curves over a table row's columns (see explainers/perturbation_curves.py for the image and
text ones): columns are ranked by |attribution|, strongest first, and moved `steps` chunks at a time from the row to
the reference row (deletion) or from the reference row into the row (insertion); the target's probability is read
after every chunk. The reference is the training split's mean row (a category column's most frequent category),
the 'mean' baseline the table methods offer. Every point of every row is one row of one stream of batched passes.

A model that predicts a number (`bundle.regression`): the curve is its predicted value in the target's units (no
softmax of its one output), from f(row) to f(mean row) for deletion and back for insertion. A value in units has no
natural 0..1 scale, so the AUC is taken of the curve rescaled per row to the share of the row's change still present,
(f(point) - f(mean row)) / (f(row) - f(mean row)): 1 at the row's own prediction, 0 at the mean row's. It reads as a
classifier's does: a low deletion AUC (the prediction falls to the mean row's once the first columns go) and a high
insertion AUC mean the ranking found the columns the prediction rests on; values outside 0..1 arise where hiding a
column overshoots (the prediction passes the mean row's: columns pulling both ways). A row predicted within
NORMALISE_FLOOR target standard deviations of the mean row has no change to share out: its AUC is NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import target_tensor, word_maps
from xaidash.explainers.modalities.table_values import reference_rows
from xaidash.explainers.params import ExplainError
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.models.bundle import ModelBundle

SUBSTRATE = "mean"
# regression: a row predicted within this many target standard deviations of the mean row's prediction has no change
# to share out (its shares would be ratios of small differences): its AUC is NaN, left out of means and rankings
NORMALISE_FLOOR = 0.05


def share_aucs(
    curves: np.ndarray, fractions: np.ndarray, ends: tuple[np.ndarray, np.ndarray], target_std: float
) -> np.ndarray:
    """Regression AUCs (N,): the area under each curve of predicted values (N, P) rescaled to the share of the change
    f(row) - f(mean row) still present, `ends` = (f(row), f(mean row)); NaN where that change is below
    NORMALISE_FLOOR target standard deviations."""
    row, ref = ends
    change = (row - ref).astype(np.float64)
    ok = np.abs(change) >= NORMALISE_FLOOR * max(float(target_std), 1e-12)
    shares = (curves - ref[:, None]) / np.where(ok, change, 1.0)[:, None]
    return np.where(ok, np.trapezoid(shares, fractions, axis=1), np.nan).astype(np.float32)


def column_ranks(maps: np.ndarray) -> np.ndarray:
    """(N, F): each column's position when a row's columns are sorted by |attribution|, strongest first (ties:
    column order)."""
    order = np.argsort(-np.abs(np.nan_to_num(maps)), axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(maps.shape[1])[None].repeat(len(maps), 0), axis=1)
    return ranks


@torch.no_grad()
def table_perturbation_curve(
    bundle: ModelBundle,
    rows: torch.Tensor,
    attributions: Any,
    targets: Any = None,
    *,
    mode: Mode = "deletion",
    steps: int = 16,
    batch_size: int = 256,
) -> CurveResult:
    """Curves (N, steps + 1) of the target's probability (a regression model's predicted value, in units) over the
    share of columns moved, and their AUCs (regression: of the rescaled curve, see the module's docstring). Targets
    default to the explanation's, else the predicted classes (regression: the one output)."""
    if mode not in ("deletion", "insertion"):
        raise ExplainError(f"mode must be 'deletion' or 'insertion', got {mode!r}.")
    if targets is None and hasattr(attributions, "targets"):
        targets = attributions.targets
    maps = np.stack(word_maps(attributions)) if len(rows) else np.zeros((0, rows.shape[1]), np.float32)
    n, f = rows.shape
    if maps.shape != (n, f):
        raise ExplainError(f"Attributions have shape {maps.shape}; expected {(n, f)} for these rows.")
    steps = int(max(1, steps))
    device = bundle.device
    ranks = torch.from_numpy(column_ranks(maps)).to(device)
    fractions = torch.linspace(0.0, 1.0, steps + 1, device=device)
    counts = torch.round(fractions * f).long()
    x = rows.to(device)
    ref = reference_rows(SUBSTRATE, bundle.info, None).to(device).expand_as(x)
    start, finish = (x, ref) if mode == "deletion" else (ref, x)
    total = n * (steps + 1)
    probs = torch.empty(total, device=device)
    with evaluating(bundle.model):
        t = target_tensor(targets, n, device)
        t = bundle.predicted(bundle.prepare(x), batch_size) if t is None else t
        for s in range(0, total, max(1, int(batch_size))):
            idx = torch.arange(s, min(s + batch_size, total), device=device)
            i, k = idx // (steps + 1), idx % (steps + 1)
            moved = ranks[i] < counts[k].unsqueeze(1)
            batch = torch.where(moved, finish[i], start[i])
            p = bundle.scores(bundle.model(bundle.prepare(batch)).float())
            probs[s : s + len(idx)] = p.gather(1, t[i].unsqueeze(1))[:, 0]
    curves = probs.view(n, steps + 1).cpu().numpy()
    frac = fractions.cpu().numpy()
    target = bundle.regression
    if target is None:
        aucs = np.trapezoid(curves, frac, axis=1).astype(np.float32)
    else:  # the row's own prediction and the mean row's: the first and last points (deletion) or the reverse
        ends = (curves[:, 0], curves[:, -1]) if mode == "deletion" else (curves[:, -1], curves[:, 0])
        aucs = share_aucs(curves.astype(np.float64), frac, ends, target.std)
    return CurveResult(mode, frac, curves, aucs, t.cpu().numpy(), SUBSTRATE)
