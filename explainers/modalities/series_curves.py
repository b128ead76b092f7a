"""Deletion and insertion curves over a series' time steps (the table's and the image's are in table_curves.py and
explainers/perturbation_curves.py): steps are ranked by |attribution|, strongest first, and moved `steps` chunks at a
time from the series to the reference (deletion) or from the reference into it (insertion), every channel of a step
at once; the target's probability is read after every chunk. The reference is each channel's training mean, i.e. 0
in the prepared (standardised) space the model reads, the series 'mean' baseline. Every point of every series is one
row of one stream of batched passes on the model's device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import target_tensor, word_maps
from xaidash.explainers.modalities.table_curves import column_ranks, share_aucs
from xaidash.explainers.params import ExplainError
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.models.bundle import ModelBundle

SUBSTRATE = "mean"  # each channel's training mean: 0 once standardised


@torch.no_grad()
def series_perturbation_curve(
    bundle: ModelBundle,
    series: torch.Tensor,
    attributions: Any,
    targets: Any = None,
    *,
    mode: Mode = "deletion",
    steps: int = 16,
    batch_size: int = 256,
) -> CurveResult:
    """Curves (N, steps + 1) of the target's probability (a forecaster's predicted value) over the share of time steps moved, and their AUCs.
    `series` raw (N, C, T); targets default to the explanation's, else the predicted classes."""
    if mode not in ("deletion", "insertion"):
        raise ExplainError(f"mode must be 'deletion' or 'insertion', got {mode!r}.")
    if targets is None and hasattr(attributions, "targets"):
        targets = attributions.targets
    n, _, length = series.shape
    maps = np.stack(word_maps(attributions)) if n else np.zeros((0, length), np.float32)
    if maps.shape != (n, length):
        raise ExplainError(f"Attributions have shape {maps.shape}; expected {(n, length)} for these series.")
    steps = int(max(1, steps))
    device = bundle.device
    ranks = torch.from_numpy(column_ranks(maps)).to(device)
    fractions = torch.linspace(0.0, 1.0, steps + 1, device=device)
    counts = torch.round(fractions * length).long()
    x = bundle.prepare(series.to(device))
    ref = torch.zeros_like(x)
    start, finish = (x, ref) if mode == "deletion" else (ref, x)
    total = n * (steps + 1)
    probs = torch.empty(total, device=device)
    with evaluating(bundle.model):
        t = target_tensor(targets, n, device)
        t = bundle.predicted(x, batch_size) if t is None else t
        for s in range(0, total, max(1, int(batch_size))):
            idx = torch.arange(s, min(s + batch_size, total), device=device)
            i, k = idx // (steps + 1), idx % (steps + 1)
            moved = (ranks[i] < counts[k].unsqueeze(1)).unsqueeze(1)  # (B, 1, T): every channel of a step
            batch = torch.where(moved, finish[i], start[i])
            p = bundle.scores(bundle.model(batch).float())
            probs[s : s + len(idx)] = p.gather(1, t[i].unsqueeze(1))[:, 0]
    curves = probs.view(n, steps + 1).cpu().numpy()
    frac = fractions.cpu().numpy()
    target = bundle.regression
    if target is None:
        aucs = np.trapezoid(curves, frac, axis=1).astype(np.float32)
    else:  # a forecast: the AUC of the share of f(series) - f(mean series) present, as a table row's (table_curves)
        ends = (curves[:, 0], curves[:, -1]) if mode == "deletion" else (curves[:, -1], curves[:, 0])
        aucs = share_aucs(curves.astype(np.float64), frac, ends, target.std)
    return CurveResult(mode, frac, curves, aucs, t.cpu().numpy(), SUBSTRATE)
