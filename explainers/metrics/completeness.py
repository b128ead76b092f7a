"""Completeness (Sundararajan et al. 2017; "efficiency" for Shapley values): attributions of a path or
Shapley method should add up to the change of the explained output between reference and input.

gap = |sum(attr) - (f(x) - f(ref))| / |f(x) - f(ref)|, with f the target's logit (what every
method in explainers/methods explains). The reference output is computed here from the model,
not read from the method's own diagnostics, so the check is independent of the method.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from xaidash.explainers.api import predicted_targets
from xaidash.explainers.baselines import BASELINES, make_baselines
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.methods._common import batched_forward
from xaidash.explainers.metrics._common import Attributions, flat_maps, image_batch, target_tensor
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

_EPS = 1e-6  # below this |f(x) - f(ref)| the relative gap is undefined (NaN)


def relative_gap(attribution_sums: np.ndarray, scores: np.ndarray, reference_scores: np.ndarray) -> np.ndarray:
    """|sum - (f(x) - f(ref))| / |f(x) - f(ref)| elementwise; NaN where the output does not change."""
    delta = np.asarray(scores, dtype=np.float64) - np.asarray(reference_scores, dtype=np.float64)
    gap = np.abs(np.asarray(attribution_sums, dtype=np.float64) - delta)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.abs(delta) > _EPS, gap / np.abs(delta), np.nan).astype(np.float32)


def _target_logits(bundle: ModelBundle, x: torch.Tensor, t: torch.Tensor, batch_size: int) -> np.ndarray:
    logits = batched_forward(bundle.model, x, batch_size).float()
    return logits.gather(1, t.view(-1, 1))[:, 0].cpu().numpy()


@torch.no_grad()
def completeness_gap(
    bundle: ModelBundle,
    inputs: torch.Tensor | np.ndarray | str | Sequence[str],
    attributions: Attributions,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    baselines: str | torch.Tensor | np.ndarray | None = None,
    background: torch.Tensor | None = None,
    reference_scores: float | Sequence[float] | np.ndarray | None = None,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Relative completeness gap per input (0 = attributions sum exactly to the output change).

    The reference f(ref) is, in order of precedence:
    - `reference_scores`: the target logit(s) at the reference, given directly (one or one per input);
    - `baselines`: a kind from explainers.baselines.BASELINES, or images in [0, 1] like `inputs`
      ((N, C, H, W) or one (C, H, W)) — Integrated Gradients / DeepLift;
    - the Explanation's own `baseline` parameter (IG, DeepLift);
    - `background`: prepared model inputs (as `explain(background=...)` takes them); the reference is
      the mean target logit over them — the expected value SHAP's explainers start from.
    With a baseline, `background` and `seed` are what `explain` got (the 'mean' and 'noise' baselines use them).
    """
    t = target_tensor(
        targets if targets is not None else (attributions if isinstance(attributions, Explanation) else None),
        len(flat_maps(attributions)),
        bundle.device,
    )
    sums = np.array([float(np.sum(a, dtype=np.float64)) for a in flat_maps(attributions)])
    bundle.model.eval()
    if bundle.modality == "text":
        x = bundle.prepare([inputs] if isinstance(inputs, str) else list(inputs))
    else:
        x = bundle.prepare(image_batch(bundle, inputs))
    if len(x) != len(sums):
        raise ExplainError(f"Got {len(x)} inputs and {len(sums)} attribution maps.")
    t = predicted_targets(bundle, x, batch_size) if t is None else t
    scores = _target_logits(bundle, x, t, batch_size)

    if reference_scores is not None:
        ref = np.broadcast_to(np.asarray(reference_scores, dtype=np.float64).reshape(-1), scores.shape)
        return relative_gap(sums, scores, ref)
    if bundle.modality == "text":
        raise ExplainError("For text models pass reference_scores: the baseline lives in embedding space.")
    if baselines is None and isinstance(attributions, Explanation):
        baselines = attributions.params.get("baseline")  # None for SHAP: then the background's expectation
    if isinstance(baselines, str):
        if baselines not in BASELINES:
            raise ExplainError(f"Unknown baseline {baselines!r}: choose one of {', '.join(BASELINES)}.")
        ref_x = make_baselines(baselines, bundle, x, background=background, seed=seed)
    elif baselines is not None:
        b = torch.as_tensor(baselines, dtype=torch.float32)
        ref_x = bundle.prepare(b.to(bundle.device)).expand_as(x)
    elif background is not None:
        bg = torch.as_tensor(background, dtype=torch.float32).to(bundle.device)
        logits = batched_forward(bundle.model, bg, batch_size).float().mean(0)
        return relative_gap(sums, scores, logits[t].cpu().numpy())
    else:
        raise ExplainError("Completeness needs a reference: pass baselines, background or reference_scores.")
    return relative_gap(sums, scores, _target_logits(bundle, ref_x, t, batch_size))
