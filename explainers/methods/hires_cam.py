"""HiResCAM (Draelos & Carin, 2020): sum_k dS/dA_k * A_k, the gradient times the activation at every location,
summed over channels, with no spatial pooling. Kept signed (pytorch-grad-cam's HiResCAM clips at 0): for a model
ending in global average pooling and one linear layer its coarse map sums exactly to the target logit minus the
bias (tests check it), so it shows where the logit comes from, positive and negative.

At a layer whose output feeds a normalisation of each location (a vision transformer's last block before its final
LayerNorm), the score does not change when a location's features are scaled, so gradient . activation is 0 at every
location (Euler's theorem) and the map is blank whatever the input: HiResCAM refuses such a layer instead."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from xaidash.explainers.guard import evaluating
from xaidash.explainers.methods._cam_core import LAYER, conv_applies, maps_and_grads
from xaidash.explainers.methods._common import per_input, per_slice, quiet_hook_notices
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

# The map counts as blank where |sum_k g A| is below this share of sum_k |g A| at every location.
BLANK_SHARE = 1e-4
# model -> {layer: whether HiResCAM is blank there}, probed once per model on a random input.
_BLANK: weakref.WeakKeyDictionary[torch.nn.Module, dict[str, bool]] = weakref.WeakKeyDictionary()


def hirescam_maps(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """(N, K, h, w) activations and target-score gradients -> (N, h, w) HiResCAM maps (signed)."""
    return (grads * acts).sum(dim=1)


def blank(acts: torch.Tensor, grads: torch.Tensor) -> bool:
    """Whether gradient . activation cancels at every location of every input while its terms do not."""
    terms = grads * acts
    scale = terms.abs().sum(dim=1).flatten(1).amax(1)
    total = terms.sum(dim=1).abs().flatten(1).amax(1)
    return bool((scale > 0).all() and (total <= BLANK_SHARE * scale).all())


def _refusal(path: str) -> str:
    return f"gradient x activation cancels at every location of {path!r} (it feeds a per-location LayerNorm)"


def _maps(ctx: MethodContext, path: str, s: slice) -> torch.Tensor:
    acts, grads = maps_and_grads(ctx, path, s)
    if blank(acts, grads):
        raise ExplainError(f"HiResCAM's map would be blank: {_refusal(path)}; use Grad-CAM or an earlier layer.")
    return hirescam_maps(acts, grads)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    return per_slice(len(ctx.x), ctx.batch_size, lambda s: (_maps(ctx, params["layer"], s), {}))


def _applies(bundle: ModelBundle) -> str | None:
    reason = conv_applies(bundle)
    if reason or bundle.spec.last_conv is None:
        return reason
    path = bundle.spec.last_conv
    known = _BLANK.setdefault(bundle.model, {})
    if path not in known:  # one forward and backward pass of a random input, the first time
        raw = torch.rand(1, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0))
        ctx = MethodContext(bundle, bundle.prepare(raw), torch.zeros(1, dtype=torch.long, device=bundle.device), raw)
        with quiet_hook_notices(), evaluating(bundle.model):
            known[path] = blank(*maps_and_grads(ctx, path, slice(0, 1)))
    return _refusal(path) if known[path] else None


register(
    MethodSpec(
        id="hirescam",
        label="HiResCAM",
        modalities=("image",),
        compute=_compute,
        params=(LAYER,),
        applies=_applies,
        signed=True,
        family="cam",
        description="Gradient times activation at every location of the feature maps, summed over channels, no "
        "pooling (Draelos & Carin, 2020). Signed: negative where the features lower the target's logit.",
        output="logit",
        passes=per_input(fwd_bwd=1),
    )
)
