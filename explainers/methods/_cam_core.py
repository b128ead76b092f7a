"""What every class-activation-map method reads (registers no method): the layer parameter, when a CAM applies, and
one layer's activations (and target-logit gradients) laid out as (N, C, h, w) feature maps through the model's
declared `FeatureLayout` (plain conv maps, Swin's channels-last maps, vision-transformer tokens on the patch grid).

Grad-CAM, Grad-CAM++ (`cam.py`), Layer-CAM, XGrad-CAM, HiResCAM, Score-CAM, Eigen-CAM and Ablation-CAM all start here,
so a layout the model declares works for all of them. The formulas themselves are small functions of (acts, grads)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from captum._utils.gradient import compute_layer_gradients_and_eval

from xaidash.explainers.guard import evaluating
from xaidash.explainers.methods._common import batch_slices, grad_leaf, per_slice
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import FeatureLayout, ModelError

LAYER = Param(
    "layer",
    "layer",
    None,
    "Layer whose feature maps are weighted: a conv layer, or a transformer block's tokens laid out on the patch grid "
    "(default: the last one; earlier layers give finer, noisier maps).",
)


def conv_applies(bundle: ModelBundle) -> str | None:
    """None when the model has feature maps a CAM can weight, else why not."""
    if not bundle.spec.conv_layers:
        return "it has no convolutional feature maps"
    if not bundle.spec.last_conv:
        return "its spec names no last convolutional layer"
    return None


def declared_layout(ctx: MethodContext, path: str) -> bool:
    """Whether `path` declares a layout other than plain (N, C, h, w) feature maps."""
    return ctx.bundle.spec.feature_layout(path).kind != "nchw"


def _as_maps(layout: FeatureLayout, path: str, t: torch.Tensor) -> torch.Tensor:
    try:
        maps = layout.to_maps(t)
    except ModelError as e:
        raise ExplainError(f"Layer {path!r} cannot be read as feature maps: {e}.") from None
    if maps.dim() != 4:
        raise ExplainError(f"Layer {path!r} gives {tuple(maps.shape)}, not (N, C, h, w) feature maps.")
    return maps


def maps_and_grads(ctx: MethodContext, path: str, s: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations and target-logit gradients of layer `path` as (n, C, h, w), from one forward and backward pass
    (captum's `compute_layer_gradients_and_eval`, the call LayerGradCam itself makes)."""
    layout = ctx.bundle.spec.feature_layout(path)
    grads, acts = compute_layer_gradients_and_eval(
        ctx.model, ctx.bundle.layer(path), (grad_leaf(ctx.x[s]),), target_ind=ctx.targets[s]
    )
    return _as_maps(layout, path, acts[0].detach()), _as_maps(layout, path, grads[0].detach())


@torch.no_grad()
def maps_and_logits(ctx: MethodContext, path: str, s: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations of layer `path` as (n, C, h, w) and the model's (n, classes) logits, from one forward pass
    without gradients (the gradient-free CAMs: Score-CAM, Eigen-CAM, Ablation-CAM)."""
    store: list[torch.Tensor] = []
    handle = ctx.bundle.layer(path).register_forward_hook(lambda m, i, out: store.append(_first(out)))
    try:
        logits = ctx.model(ctx.x[s]).float()
    finally:
        handle.remove()
    return _as_maps(ctx.bundle.spec.feature_layout(path), path, store[0].detach()), logits


def _first(out: Any) -> torch.Tensor:
    """A layer's output tensor (some blocks return a tuple whose first item is the features)."""
    return out[0] if isinstance(out, (tuple, list)) else out


@contextmanager
def channels_kept(bundle: ModelBundle, path: str, keep: list[torch.Tensor | None]) -> Iterator[None]:
    """While inside, layer `path`'s output is multiplied by `keep[0]` when set: a (rows, C) 0/1 tensor over the
    channels in the layer's own layout (channels second for conv maps, last for tokens and channels-last maps),
    so channel k of a row is zeroed where keep[0][row, k] == 0 (Ablation-CAM). The hook is removed on leaving."""
    last = bundle.spec.feature_layout(path).kind != "nchw"

    def hook(module: torch.nn.Module, inputs: Any, out: Any) -> Any:
        mask = keep[0]
        if mask is None:
            return None
        t = _first(out)
        shape = (
            (mask.shape[0],) + (1,) * (t.dim() - 2) + (mask.shape[1],) if last else mask.shape + (1,) * (t.dim() - 2)
        )
        ablated = t * mask.view(shape).to(t.dtype)
        return (ablated, *out[1:]) if isinstance(out, (tuple, list)) else ablated

    handle = bundle.layer(path).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def weighted_maps(weights: torch.Tensor, acts: torch.Tensor) -> torch.Tensor:
    """sum_k weights[n, k] * acts[n, k] -> (N, h, w): the map every channel-weighting CAM ends with."""
    return torch.einsum("nk,nkhw->nhw", weights.to(acts.dtype), acts)


def layer_maps(ctx: MethodContext, path: str) -> tuple[torch.Tensor, torch.Tensor]:
    """`maps_and_logits` for every input, in slices of `ctx.batch_size`: ((N, C, h, w) maps, (N, classes) logits)."""
    parts = [maps_and_logits(ctx, path, s) for s in batch_slices(len(ctx.x), ctx.batch_size)]
    return torch.cat([a for a, _ in parts]), torch.cat([y for _, y in parts])


# model -> {(layer, input shape): (C, h, w)}: a layer's feature-map shape, probed once per model (pass counts, applies).
_SHAPES: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple[str, tuple[int, ...]], tuple[int, int, int]]] = (
    weakref.WeakKeyDictionary()
)


@torch.no_grad()
def layer_shape(bundle: ModelBundle, path: str) -> tuple[int, int, int]:
    """(channels, h, w) of layer `path`'s feature maps at the model's input size, from one forward pass of a blank
    input (prepared as every input is: resized or converted where the model asks) the first time it is asked."""
    shape = tuple(int(v) for v in bundle.info.input_shape)
    known = _SHAPES.setdefault(bundle.model, {})
    if (path, shape) not in known:
        store: list[torch.Tensor] = []
        handle = bundle.layer(path).register_forward_hook(lambda m, i, out: store.append(_first(out)))
        try:
            with evaluating(bundle.model):  # a probe pass outside explain(): batch-norm statistics untouched
                bundle.model(bundle.prepare(torch.zeros(1, *shape)))
        finally:
            handle.remove()
        c, h, w = _as_maps(bundle.spec.feature_layout(path), path, store[0]).shape[1:]
        known[(path, shape)] = (int(c), int(h), int(w))
    return known[(path, shape)]


def layer_width(bundle: ModelBundle, path: str) -> int:
    """Channels of layer `path`'s feature maps (one model pass per channel for Score-CAM and Ablation-CAM)."""
    return layer_shape(bundle, path)[0]


def maps_vary_applies(bundle: ModelBundle) -> str | None:
    """`conv_applies`, and the last feature maps must have more than one location at the model's input size: the
    methods that pay one model pass per channel (Score-CAM, Ablation-CAM) would pay them for a map of one value."""
    reason = conv_applies(bundle)
    if reason or bundle.spec.last_conv is None:
        return reason
    _, h, w = layer_shape(bundle, bundle.spec.last_conv)  # a model that cannot run: MethodSpec gives the reason
    if h * w < 2:
        size = "x".join(str(v) for v in bundle.info.input_shape[1:])
        return f"its last feature maps ({bundle.spec.last_conv}) are 1x1 at {size} px inputs, a map of one location shows nothing"
    return None


def gradient_cam(
    maps: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[[MethodContext, dict[str, Any]], MethodOutput]:
    """The `compute` of a CAM that turns a layer's (N, K, h, w) activations and target gradients into (N, h, w)
    maps with `maps(acts, grads)`, the inputs taken in slices of the batch size."""

    def compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
        return per_slice(len(ctx.x), ctx.batch_size, lambda s: (maps(*maps_and_grads(ctx, params["layer"], s)), {}))

    return compute
