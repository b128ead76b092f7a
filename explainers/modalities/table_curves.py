"""Deletion and insertion curves over a table row's columns (see explainers/perturbation_curves.py for the image and
text ones): columns are ranked by |attribution|, strongest first, and moved `steps` chunks at a time from the row to
the reference row (deletion) or from the reference row into the row (insertion); the target's probability is read
after every chunk. The reference is the training split's mean row (a category column's most frequent category),
the 'mean' baseline the table methods offer. Every point of every row is one row of one stream of batched passes."""

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
    """Curves (N, steps + 1) of the target's probability over the share of columns moved, and their AUCs. Targets
    default to the explanation's, else the predicted classes."""
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
            p = torch.softmax(bundle.model(bundle.prepare(batch)).float(), dim=1)
            probs[s : s + len(idx)] = p.gather(1, t[i].unsqueeze(1))[:, 0]
    curves = probs.view(n, steps + 1).cpu().numpy()
    frac = fractions.cpu().numpy()
    aucs = np.trapezoid(curves, frac, axis=1).astype(np.float32)
    return CurveResult(mode, frac, curves, aucs, t.cpu().numpy(), SUBSTRATE)
