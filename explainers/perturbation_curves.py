"""Deletion and insertion curves (Petsiuk et al. 2018, RISE): how the modality adapters hide a map's most (or least)
relevant features and read the target's probability as they go; the deletion and insertion metrics score their areas.

Pixels are ranked by attribution (highest first). Deletion moves them, `steps` chunks at a
time, from the image to a substrate (black by default); insertion moves them from a blurred
canvas into the image. The target's softmax probability is read after every chunk and the
area under that curve over the fraction of pixels moved (trapezoid rule) is the score: low
deletion and high insertion AUC mean the map found what the model uses.

Written by hand because no installed library batches these curves: captum has no deletion
metric and RISE's reference code runs one forward pass per step per image. Here all steps of
all inputs are (input, step) pairs streamed through the model `batch_size` at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from xaidash.data.tokenizer import split_words
from xaidash.explainers.baselines import BASELINES, make_baselines
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import Attributions, image_batch, image_maps, target_tensor, word_maps
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

Mode = Literal["deletion", "insertion"]

# Chunks every deletion/insertion curve is cut into, images and text alike: the CLI's --steps, the Explain
# page, the Compare page's control and the per-input scores default to it, so one map gets one AUC.
# On a text with fewer words than steps, neighbouring points move the same words (a word cannot be
# split): a few more short forward passes, the same kind of curve.
CURVE_STEPS = 16


@dataclass
class CurveResult:
    """Per-input curves (N, steps + 1) of the target probability over `fractions`, and their AUCs (N,)."""

    mode: str
    fractions: np.ndarray
    curves: np.ndarray
    aucs: np.ndarray
    targets: np.ndarray
    substrate: str

    def mean_auc(self) -> float:
        return float(np.mean(self.aucs)) if len(self.aucs) else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly (lists of floats)."""
        return {
            "mode": self.mode,
            "substrate": self.substrate,
            "auc": [float(a) for a in self.aucs],
            "mean_auc": self.mean_auc(),
            "fractions": [float(f) for f in self.fractions],
            "curves": [[float(v) for v in c] for c in self.curves],
            "targets": [int(t) for t in self.targets],
        }


def _auc(curves: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    return np.trapezoid(curves, fractions, axis=1).astype(np.float32)


def ranks(maps: torch.Tensor) -> torch.Tensor:
    """For each pixel its position when pixels are sorted by attribution, highest first (ties: row-major order)."""
    flat = maps.flatten(1)
    order = torch.argsort(-flat, dim=1, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(flat.shape[1], device=flat.device).expand_as(order).contiguous())
    return ranks


@torch.no_grad()
def perturbation_curve(
    bundle: ModelBundle,
    images: torch.Tensor | np.ndarray,
    attributions: Attributions,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    mode: Mode = "deletion",
    steps: int = CURVE_STEPS,
    substrate: str | None = None,
    batch_size: int = 256,
    background: torch.Tensor | None = None,
    seed: int = 0,
) -> CurveResult:
    """Deletion or insertion curves for images (N, C, H, W) in [0, 1] and their maps (N, H, W).

    `substrate` is one of explainers.baselines.BASELINES ('zero' is accepted for 'black'); the
    default is 'black' for deletion and 'blur' for insertion, as in RISE. `targets` default to
    the Explanation's targets when one is given, else to the predicted classes.
    """
    if mode not in ("deletion", "insertion"):
        raise ExplainError(f"mode must be 'deletion' or 'insertion', got {mode!r}.")
    if not bundle.adapter.spatial:
        raise ExplainError("perturbation_curve is for image models; use text_perturbation_curve for text.")
    substrate = substrate or ("black" if mode == "deletion" else "blur")
    substrate = "black" if substrate == "zero" else substrate
    if substrate not in BASELINES:
        raise ExplainError(f"Unknown substrate {substrate!r}: choose one of zero, {', '.join(BASELINES)}.")
    if targets is None and isinstance(attributions, Explanation):
        targets = attributions.targets
    raw = image_batch(bundle, images)
    maps = torch.from_numpy(image_maps(attributions)).to(bundle.device)
    n, (h, w) = len(raw), raw.shape[-2:]
    if maps.shape != (n, h, w):
        raise ExplainError(f"Attributions have shape {tuple(maps.shape)}; expected {(n, h, w)} for these images.")
    steps = int(max(1, min(steps, h * w)))

    order = ranks(maps)  # (N, H*W)
    fractions = torch.linspace(0.0, 1.0, steps + 1, device=bundle.device)
    counts = torch.round(fractions * (h * w)).long()  # pixels moved after each chunk
    total = n * (steps + 1)
    probs = torch.empty(total, device=bundle.device)
    with evaluating(bundle.model):
        x = bundle.prepare(raw)
        # Mixing pixel-wise in the model's (normalised) space equals mixing in [0, 1] space: normalisation is per
        # channel.
        other = make_baselines(substrate, bundle, x, background=background, seed=seed)
        start, finish = (x, other) if mode == "deletion" else (other, x)
        t = target_tensor(targets, n, bundle.device)
        t = bundle.predicted(x, batch_size) if t is None else t
        for s in range(0, total, max(1, int(batch_size))):
            idx = torch.arange(s, min(s + batch_size, total), device=bundle.device)
            i, k = idx // (steps + 1), idx % (steps + 1)
            moved = (order[i] < counts[k].unsqueeze(1)).view(-1, 1, h, w)
            batch = torch.where(moved, finish[i], start[i])
            p = torch.softmax(bundle.model(batch).float(), dim=1)
            probs[s : s + len(idx)] = p.gather(1, t[i].unsqueeze(1))[:, 0]
    curves = probs.view(n, steps + 1).cpu().numpy()
    frac = fractions.cpu().numpy()
    return CurveResult(mode, frac, curves, _auc(curves, frac), t.cpu().numpy(), substrate)


@torch.no_grad()
def text_perturbation_curve(
    bundle: ModelBundle,
    texts: str | Sequence[str],
    attributions: Attributions,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    mode: Mode = "deletion",
    steps: int = CURVE_STEPS,
    words: Sequence[Sequence[str]] | None = None,
    batch_size: int = 256,
) -> CurveResult:
    """The same curves for text: words ranked by score are removed from the text (deletion) or put
    back, in their original order, into an empty text (insertion), `steps` chunks at a time.

    `words` are the units the scores refer to (default: the Explanation's tokens, else
    data.tokenizer.split_words of each text); perturbed texts are those words joined by spaces.
    """
    if mode not in ("deletion", "insertion"):
        raise ExplainError(f"mode must be 'deletion' or 'insertion', got {mode!r}.")
    texts = [texts] if isinstance(texts, str) else list(texts)
    if words is None and isinstance(attributions, Explanation) and attributions.tokens is not None:
        words = attributions.tokens
    if targets is None and isinstance(attributions, Explanation):
        targets = attributions.targets
    scores = word_maps(attributions)
    words = [list(w) for w in words] if words is not None else [split_words(t) for t in texts]
    if not (len(texts) == len(scores) == len(words)):
        raise ExplainError(f"Got {len(texts)} texts, {len(scores)} score rows and {len(words)} word lists.")
    steps = max(1, int(steps))
    frac = np.linspace(0.0, 1.0, steps + 1)
    variants: list[str] = []
    for ws, sc in zip(words, scores, strict=True):
        m = min(len(ws), len(sc))
        order = np.argsort(-sc[:m], kind="stable")
        for f in frac:
            moved = set(order[: round(float(f) * m)].tolist())
            keep = [j for j in range(m) if (j in moved) == (mode == "insertion")]
            variants.append(" ".join(ws[j] for j in keep))
    with evaluating(bundle.model):
        rows = bundle.predict_proba(variants, batch_size=batch_size).numpy().reshape(len(texts), steps + 1, -1)
    t = target_tensor(targets, len(texts), torch.device("cpu"))
    if t is None:  # the class predicted for all words: the first point of deletion, the last of insertion
        t = torch.as_tensor(rows[:, 0 if mode == "deletion" else -1].argmax(1))
    curves = np.take_along_axis(rows, t.numpy()[:, None, None], axis=2)[..., 0].astype(np.float32)
    return CurveResult(mode, frac.astype(np.float32), curves, _auc(curves, frac), t.numpy(), "removed words")
