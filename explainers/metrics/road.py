"""ROAD, remove and debias (Rong et al. 2022): deletion curves whose removed pixels are filled by noisy linear
imputation instead of a constant, so that removal leaves no sharp-edged holes (out-of-distribution inputs the
model reacts to whatever the map said).

Each removed pixel becomes the weighted mean of its 8 neighbours (1/6 for the four direct ones, 1/12 for the
diagonal ones; removed neighbours are unknowns too), one sparse linear system, plus Gaussian noise. MoRF removes
the most relevant pixels first (a faithful map makes the probability fall fast: low is better); LeRF the least
relevant first (the probability should hold: high is better). Fractions run from 0 to 90% as in the paper (with
every pixel removed nothing anchors the system).

Written by hand: Quantus's ROAD (the reference, a test-only dependency; tests/explainers/test_metrics_road.py
checks the imputation against its `noisy_linear_imputation`) builds and solves one system per image per
percentage in Python loops and predicts the class per step. Here every (image, step) pair of a model batch is one
block-diagonal system built with numpy and solved in one `spsolve`, and the model reads the whole batch on its
device; the score is the target probability, like the deletion curve's, and its mean over the curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import spsolve

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import Attributions, image_batch, image_maps, target_tensor
from xaidash.explainers.params import ExplainError
from xaidash.explainers.perturbation_curves import ranks as _ranks
from xaidash.models.bundle import ModelBundle

ROAD_STEPS = 9  # 10%, 20%, ... 90% removed, as in Rong et al.
ROAD_MAX_FRACTION = 0.9
ROAD_NOISE = 0.01  # std of the noise added to imputed values, in [0, 1] pixel units (Quantus's default)
# Pulls each unknown very weakly towards its image's mean: only matters where a patch of removed pixels has no
# kept neighbour at all (the system is singular there); elsewhere it moves values by about 1e-6.
_ANCHOR = 1e-6

_NEIGHBOURS = (
    ((1, 1), 1 / 12),
    ((0, 1), 1 / 6),
    ((-1, 1), 1 / 12),
    ((1, -1), 1 / 12),
    ((0, -1), 1 / 6),
    ((-1, -1), 1 / 12),
    ((1, 0), 1 / 6),
    ((-1, 0), 1 / 6),
)


def noisy_linear_imputation(
    images: np.ndarray, removed: np.ndarray, noise: float = ROAD_NOISE, seed: int = 0
) -> np.ndarray:
    """`images` (B, C, H, W) with the pixels where `removed` (B, H, W) is True replaced, in every channel, by the
    weighted mean of their neighbours (solved jointly: one sparse system for the whole batch) plus N(0, noise²)."""
    x = np.asarray(images, dtype=np.float64)
    removed = np.asarray(removed, dtype=bool)
    b_n, c_n, h, w = x.shape
    if removed.shape != (b_n, h, w):
        raise ExplainError(f"Removal masks have shape {removed.shape}; images need {(b_n, h, w)}.")
    ids = np.flatnonzero(removed)
    out = x.copy()
    if ids.size == 0:
        return out
    nv = ids.size
    var_of = np.full(removed.size, -1, dtype=np.int64)
    var_of[ids] = np.arange(nv)
    bi, r, c = np.unravel_index(ids, removed.shape)
    pixels = x.transpose(0, 2, 3, 1).reshape(-1, c_n)  # (B*H*W, C)
    weight_sum = np.zeros(nv)
    rhs = np.zeros((nv, c_n))
    rows, cols, vals = [], [], []
    for (dr, dc), wt in _NEIGHBOURS:
        rr, cc = r + dr, c + dc
        ok = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
        p = np.flatnonzero(ok)
        q = np.ravel_multi_index((bi[ok], rr[ok], cc[ok]), removed.shape)
        weight_sum[p] += wt
        unknown = var_of[q] >= 0
        rows.append(p[unknown])
        cols.append(var_of[q[unknown]])
        vals.append(np.full(int(unknown.sum()), wt))
        rhs[p[~unknown]] -= wt * pixels[q[~unknown]]
    means = x.mean(axis=(2, 3))[bi]  # (nv, C): each unknown's image mean, the anchor
    diag = np.arange(nv)
    rows.append(diag)
    cols.append(diag)
    vals.append(-(weight_sum + _ANCHOR))
    rhs -= _ANCHOR * means
    a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(nv, nv)).tocsc()
    solved = np.asarray(spsolve(a, rhs)).reshape(nv, c_n)
    if noise > 0:
        solved = solved + noise * np.random.default_rng(seed).standard_normal(solved.shape)
    out[bi, :, r, c] = solved
    return out


@dataclass
class RoadResult:
    """Per-input ROAD curves (N, steps + 1) of the target probability over `fractions` removed, and their means
    over the curve (N,): the area under it divided by its width."""

    order: str
    fractions: np.ndarray
    curves: np.ndarray
    scores: np.ndarray
    targets: np.ndarray


@torch.no_grad()
def road_curve(
    bundle: ModelBundle,
    images: torch.Tensor | np.ndarray,
    attributions: Attributions,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    order: str = "morf",
    steps: int = ROAD_STEPS,
    noise: float = ROAD_NOISE,
    batch_size: int = 64,
    seed: int = 0,
) -> RoadResult:
    """ROAD curves of images (N, C, H, W) in [0, 1] and their maps (N, H, W): `order` 'morf' removes the most
    relevant pixels first, 'lerf' the least relevant. `targets` default to the Explanation's, else the predictions."""
    if order not in ("morf", "lerf"):
        raise ExplainError(f"order must be 'morf' or 'lerf', got {order!r}.")
    if not bundle.adapter.spatial:
        raise ExplainError("ROAD is for image models.")
    if targets is None and isinstance(attributions, Explanation):
        targets = attributions.targets
    raw = image_batch(bundle, images)
    maps = torch.from_numpy(image_maps(attributions)).to(bundle.device)
    n, (h, w) = len(raw), raw.shape[-2:]
    if maps.shape != (n, h, w):
        raise ExplainError(f"Attributions have shape {tuple(maps.shape)}; expected {(n, h, w)} for these images.")
    steps = int(max(1, steps))
    t = target_tensor(targets, n, bundle.device)
    ranks = _ranks(maps if order == "morf" else -maps).cpu().numpy()  # 0 = removed first
    fractions = np.linspace(0.0, ROAD_MAX_FRACTION, steps + 1)
    counts = np.round(fractions * h * w).astype(np.int64)
    raw_np = raw.cpu().numpy()
    total = n * (steps + 1)
    probs = np.empty(total)
    chunk = max(1, int(batch_size))
    with evaluating(bundle.model):
        t = bundle.predicted(bundle.prepare(raw)) if t is None else t
        for s in range(0, total, chunk):
            idx = np.arange(s, min(s + chunk, total))
            i, k = idx // (steps + 1), idx % (steps + 1)
            removed = (ranks[i] < counts[k][:, None]).reshape(-1, h, w)
            filled = noisy_linear_imputation(raw_np[i], removed, noise, seed=seed + s)
            batch = bundle.prepare(torch.from_numpy(filled).float().to(bundle.device))
            p = torch.softmax(bundle.model(batch).float(), dim=1)
            probs[idx] = p.gather(1, t[torch.from_numpy(i).to(bundle.device)].unsqueeze(1))[:, 0].cpu().numpy()
    curves = probs.reshape(n, steps + 1)
    scores = np.asarray(np.trapezoid(curves, fractions, axis=1)) / ROAD_MAX_FRACTION
    return RoadResult(order, fractions, curves, scores, t.cpu().numpy())
