"""Layer-wise relevance propagation (Bach et al. 2015; Montavon et al. 2019) through zennit.

zennit's composites map each layer type to a rule and its canonizers rewrite the model first (BatchNorm merged
into the convolution before it, a residual block's addition made a module with its own rule), so relevance is
propagated layer by layer from the target's logit back to the pixels. The call below is zennit's own `Gradient`
attributor written out (the composite's context, one backward pass with the logit as the output's relevance), so
one registration serves every slice of the batch; tests/explainers/test_lrp.py checks it against `Gradient`.

zennit has rules for convolutions, linear layers, pooling, activations and BatchNorm only: models with attention
or LayerNorm (vision transformers, text models, imported transformers) are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from xaidash.explainers.methods._common import per_input, per_slice
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness, MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle
from xaidash.models.zoo.resnet18 import SafeBasicBlock
from xaidash.models.zoo.resnet_small import BasicBlock as SmallBlock

COMPOSITES = ("epsilon_plus_flat", "epsilon_gamma_box", "epsilon_alpha2_beta1")
GAP = "conservation_gap"


def _small_block_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """resnet_small's block with its residual addition as zennit's `Sum` module (`canonizer_sum`), which
    shares the relevance between the two branches in proportion to their contributions."""
    out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
    return self.relu2(self.canonizer_sum(torch.stack([self.shortcut(x), out], dim=-1)))


def _safe_block_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """The zoo resnet18's block (torchvision's BasicBlock with its own ReLUs), its addition as zennit's `Sum`."""
    identity = x if self.downsample is None else self.downsample(x)
    out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
    return self.relu2(self.canonizer_sum(torch.stack([identity, out], dim=-1)))


_BLOCK_FORWARDS: dict[type[nn.Module], Callable[[Any, torch.Tensor], torch.Tensor]] = {
    SmallBlock: _small_block_forward,
    SafeBasicBlock: _safe_block_forward,
}


def zoo_block_canonizer() -> Any:
    """zennit's ResNetBasicBlockCanonizer, for the zoo's own residual blocks (not torchvision's classes)."""
    from zennit.canonizers import AttributeCanonizer
    from zennit.layer import Sum

    def attributes(name: str, module: nn.Module) -> dict[str, Any] | None:
        forward = _BLOCK_FORWARDS.get(type(module))
        return None if forward is None else {"forward": forward.__get__(module), "canonizer_sum": Sum()}

    return AttributeCanonizer(attributes)


def canonizers() -> list[Any]:
    """BatchNorm merged into the layer before it, and residual additions made modules: zennit's ResNetCanonizer
    (SequentialMergeBatchNorm plus torchvision's Bottleneck/BasicBlock) and the same for the zoo's own blocks.
    Each only touches the modules it recognises, so one list serves every CNN of the zoo."""
    from zennit.torchvision import ResNetCanonizer

    return [ResNetCanonizer(), zoo_block_canonizer()]


def input_bounds(bundle: ModelBundle) -> tuple[torch.Tensor, torch.Tensor]:
    """The lowest and highest model input per pixel: black and white ([0, 1] pixels) after the model's
    normalisation (the data set's mean/std, or the pretrained model's own), as (C, H, W) tensors."""
    shape = tuple(bundle.info.input_shape)
    low = bundle.prepare(torch.zeros(1, *shape, device=bundle.device))[0]
    high = bundle.prepare(torch.ones(1, *shape, device=bundle.device))[0]
    return torch.minimum(low, high), torch.maximum(low, high)


def make_composite(name: str, bundle: ModelBundle, rows: int = 1) -> Any:
    """A fresh zennit composite of this name with the zoo's canonizers, for batches of at most `rows` inputs."""
    from zennit.composites import EpsilonAlpha2Beta1, EpsilonGammaBox, EpsilonPlusFlat

    if name == "epsilon_gamma_box":
        # zennit's z-box rule takes per-sample bounds and cuts them to each batch's size
        low, high = (b.expand(max(1, rows), *b.shape) for b in input_bounds(bundle))
        return EpsilonGammaBox(low=low, high=high, canonizers=canonizers())
    if name == "epsilon_alpha2_beta1":
        return EpsilonAlpha2Beta1(canonizers=canonizers())
    return EpsilonPlusFlat(canonizers=canonizers())


def _applies(bundle: ModelBundle) -> str | None:
    for module in list(bundle.model.modules())[1:]:  # the layers, not a wrapper named after what it returns
        kind = type(module).__name__
        if isinstance(module, (nn.LayerNorm, nn.MultiheadAttention)) or "Attention" in kind or "LayerNorm" in kind:
            return (
                f"it has {kind} layers, and zennit has no relevance rule for attention or LayerNorm "
                "(use Integrated Gradients or attention rollout on transformers)."
            )
    return None


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    composite = make_composite(params["composite"], ctx.bundle, len(ctx.x))

    def one_slice(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        x = ctx.x[s].detach().clone().requires_grad_()
        out = modified(x)
        # the target's logit is the output's relevance: the relevance then adds up to it (up to biases and epsilon)
        start = out.detach() * nn.functional.one_hot(ctx.targets[s], out.shape[1]).to(out.dtype)
        (relevance,) = torch.autograd.grad(out, x, grad_outputs=start)
        logit = start.sum(1)
        total = relevance.detach().flatten(1).sum(1)
        return relevance.detach(), {GAP: total - logit, OUTPUT_CHANGE: logit}

    with torch.enable_grad(), composite.context(ctx.model) as modified:
        _positive_batch_norm_eps(modified)
        return per_slice(len(ctx.x), ctx.batch_size, one_slice, what="LRP")


def _positive_batch_norm_eps(model: nn.Module) -> None:
    """zennit 1.0's BatchNorm merge leaves an identity BatchNorm with eps 0, which torch 2.11 refuses ("batch_norm
    eps must be positive"; seen on the H200, 2026-11-27). The smallest positive float keeps it the identity
    (running_var is 1), and the canonizer's removal restores the layer's own eps."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.eps == 0:
            module.eps = torch.finfo(torch.float32).tiny


register(
    MethodSpec(
        id="lrp",
        label="LRP",
        modalities=("image",),
        compute=_compute,
        params=(
            Param(
                "composite",
                "choice",
                "epsilon_plus_flat",
                "zennit's rule set: EpsilonPlusFlat (flat first layer, z+ convolutions, epsilon dense layers), "
                "EpsilonGammaBox (z-box first layer bounded by black and white pixels, gamma convolutions) or "
                "EpsilonAlpha2Beta1 (alpha=2, beta=1 convolutions: positive and negative evidence).",
                choices=COMPOSITES,
            ),
        ),
        signed=True,
        family="gradient",
        output="logit",
        passes=per_input(fwd_bwd=1),
        applies=_applies,
        completeness=Completeness(
            reference="zero", unit="pixel", diagnostic=GAP, tolerance=0.05, absorbed="the biases"
        ),
        description=(
            "Layer-wise relevance propagation (zennit): the target's logit is passed back layer by layer by "
            "per-layer rules, so the relevance of the pixels adds up to the logit, less what biases absorb. "
            "Diagnostic conservation_gap: sum of relevance minus the logit."
        ),
        featured=None,
    )
)
