"""`explain()`: one entry point for every method, image or text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import guarded
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import MAX_BATCH_SIZE, ExplainError
from xaidash.explainers.registry import MethodContext, get_method
from xaidash.explainers.samples import resolve_background
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import synchronize


def predicted_targets(bundle: ModelBundle, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """The predicted class of each prepared input, (N,) long on the device (`ModelBundle.predicted`)."""
    return bundle.predicted(x, batch_size)


def _as_targets(
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None, n: int, bundle: ModelBundle, x: torch.Tensor
) -> torch.Tensor:
    if targets is None:
        return predicted_targets(bundle, x)
    t = torch.as_tensor([targets] * n if isinstance(targets, (int, np.integer)) else list(targets), dtype=torch.long)
    if len(t) != n:
        raise ExplainError(f"Got {len(t)} targets for {n} inputs.")
    if ((t < 0) | (t >= bundle.info.num_classes)).any():
        raise ExplainError(f"Target classes must lie in 0..{bundle.info.num_classes - 1}.")
    return t.to(bundle.device)


def explain(
    bundle: ModelBundle,
    inputs: torch.Tensor | Sequence[str] | str,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    method: str = "saliency",
    *,
    batch_size: int = 256,
    background: torch.Tensor | None = None,
    seed: int = 0,
    **params: Any,
) -> Explanation:
    """Explain `inputs` (images (N, C, H, W) or (C, H, W) in [0, 1], or texts) for `targets`
    (default: the predicted classes) with one registered method.

    `background`: prepared training samples for methods that need them (SHAP's gradient/deep
    explainers, the 'mean' baseline); without it such a method gets `samples.default_background`.
    The model is explained in eval mode and left in the mode it was in; randomness comes from `seed`
    alone and the caller's random state is left as it was."""
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ExplainError(f"batch_size={batch_size}: it must be between 1 and {MAX_BATCH_SIZE}.")
    spec = get_method(method, bundle.modality)
    spec.check(bundle)
    resolved = spec.resolve_for(bundle, params)
    adapter = adapter_of(bundle.modality)
    raw = adapter.checked(bundle, inputs)
    background = resolve_background(bundle, spec.needs_background(resolved), background)
    with guarded(bundle.model, seed, bundle.device):
        x = bundle.prepare(raw)
        t = _as_targets(targets, bundle.adapter.rows(x), bundle, x)
        ctx = MethodContext(
            bundle=bundle, x=x, targets=t, raw=raw, batch_size=batch_size, background=background, seed=seed
        )
        synchronize(bundle.device)
        start = time.perf_counter()
        out = spec.compute(ctx, resolved)
        synchronize(bundle.device)
        seconds = time.perf_counter() - start
    maps = adapter.to_maps(bundle, raw, out)
    return Explanation(
        method=spec.id,
        params=resolved,
        targets=t.cpu().numpy(),
        attributions=maps.attributions,
        seconds=seconds,
        device=str(bundle.device),
        modality=bundle.modality,
        tokens=maps.labels,
        channel_attributions=maps.channels,
        diagnostics={k: [float(v) for v in vals] for k, vals in out.diagnostics.items()},
        segments=None if out.segments is None else np.asarray(out.segments),
    )
