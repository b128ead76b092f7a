"""Theoretical receptive fields of the conv and pooling layers of an image model or a series model.

The arithmetic of Dumoulin & Visin (2016) and Araujo et al. (2019, "Computing receptive fields
of convolutional neural networks"), per axis, for a layer with kernel k, stride s, padding p,
dilation d (effective kernel k' = d (k - 1) + 1), starting from the input (jump 1, size 1,
start 0):

    jump_out  = jump_in * s
    rf_out    = rf_in + (k' - 1) * jump_in
    start_out = start_in + ((k' - 1) / 2 - p) * jump_in

`start` is the centre of the receptive field of output unit 0, in input pixel indices (pixel i
has its centre at i); unit u is centred at start + u * jump. Written by hand: none of the
installed libraries (torchvision, captum, ...) computes receptive fields.

The layers are read from the module graph in forward order by tracing one dummy input with
forward hooks, so the order is the one `forward` uses, not the order modules were declared.

Series (N, C, T) are read as images one row high: a Conv1d of kernel k is a (1, k) kernel, and a padding module
(ConstantPad1d, as the causal and 'same' series models pad) moves the fields by its left padding.

Residual networks: the arithmetic follows the main path. Modules inside a branch named
`shortcut` (resnet_small) or `downsample` (torchvision ResNets) are left out: a shortcut is an
identity or a 1x1 convolution with the block's stride, whose receptive field is centred on the
same pixel as the main path's and lies inside it, so the union of the two (what the sum
`main + shortcut` sees) is the main path's field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.data.modalities import modality_of
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect._trace import example_input, trace
from xaidash.models.registry import ModelError

SHORTCUT_NAMES = ("shortcut", "downsample")
Pair = tuple[int, int]


def _pair(v: Any) -> Pair:
    if isinstance(v, (tuple, list)):
        return (int(v[0]), int(v[1])) if len(v) == 2 else (int(v[0]), int(v[0]))
    return int(v), int(v)


@dataclass(frozen=True)
class RFLayer:
    """One conv or pooling layer of the main path with its receptive field, per axis (height, width)."""

    path: str
    kind: str
    kernel: Pair
    stride: Pair
    padding: Pair
    dilation: Pair
    output_size: Pair
    rf: Pair
    jump: Pair
    start: tuple[float, float]
    axes: int = 2  # 2: an image's rows and columns; 1: a series' steps (the row axis is one high)

    def centre_unit(self) -> Pair:
        return self.output_size[0] // 2, self.output_size[1] // 2

    @property
    def causal(self) -> bool:
        """A series layer whose unit t sees steps up to t and none after it (a causal convolution's)."""
        return self.axes == 1 and self.start[1] + (self.rf[1] - 1) / 2 == 0

    def default_unit(self) -> Pair:
        """The last step for a causal series layer (the one a forecaster's head reads), else the centre unit."""
        return (0, self.output_size[1] - 1) if self.causal else self.centre_unit()

    def box(self, unit: Pair, image_size: Pair | None = None) -> tuple[int, int, int, int]:
        """(top, left, bottom, right), inclusive pixel indices of the field of output unit (row, col);
        clipped to an image of `image_size` (H, W) when given (padding lies outside the image)."""
        row, col = int(unit[0]), int(unit[1])
        if not (0 <= row < self.output_size[0] and 0 <= col < self.output_size[1]):
            raise ModelError(
                f"Unit ({row}, {col}) is outside {self.path}'s output of {self.output_size[0]}x{self.output_size[1]}."
            )
        edges = []
        for axis, u in ((0, row), (1, col)):
            centre = self.start[axis] + u * self.jump[axis]
            half = (self.rf[axis] - 1) / 2
            edges.append((round(centre - half), round(centre + half)))  # integers by construction
        top, bottom = edges[0]
        left, right = edges[1]
        if image_size is not None:
            h, w = int(image_size[0]), int(image_size[1])
            top, left = max(top, 0), max(left, 0)
            bottom, right = min(bottom, h - 1), min(right, w - 1)
        return top, left, bottom, right

    def row(self) -> dict[str, Any]:
        """A table row with readable values ('3' for a square 3x3, '3x5' otherwise)."""

        def fmt(p: tuple) -> str:
            a, b = (f"{v:g}" if isinstance(v, float) else str(v) for v in p)
            return b if self.axes == 1 or a == b else f"{a}x{b}"

        return {
            "layer": self.path,
            "type": self.kind,
            "kernel": fmt(self.kernel),
            "stride": fmt(self.stride),
            "padding": fmt(self.padding),
            "dilation": fmt(self.dilation),
            "output size": fmt(self.output_size) if self.axes == 1 else f"{self.output_size[0]}x{self.output_size[1]}",
            "receptive field": fmt(self.rf) if self.axes == 1 else f"{self.rf[0]}x{self.rf[1]}",
            "jump": fmt(self.jump),
            "start": fmt(self.start),
        }


def _geometry(module: nn.Module, path: str, in_hw: Pair, out_hw: Pair) -> tuple[Pair, Pair, Pair, Pair] | None:
    """(kernel, stride, padding, dilation) of a layer that changes the receptive field, else None
    (`in_hw`, `out_hw`: the feature map's height and width before and after it)."""
    if isinstance(module, nn.Conv2d):
        if isinstance(module.padding, str):  # 'same' / 'valid'
            if module.padding == "valid":
                pad = (0, 0)
            else:
                k = _pair(module.kernel_size)
                d = _pair(module.dilation)
                pad = (d[0] * (k[0] - 1) // 2, d[1] * (k[1] - 1) // 2)
        else:
            pad = _pair(module.padding)
        return _pair(module.kernel_size), _pair(module.stride), pad, _pair(module.dilation)
    if isinstance(module, nn.MaxPool2d):
        return (
            _pair(module.kernel_size),
            _pair(module.stride or module.kernel_size),
            _pair(module.padding),
            _pair(module.dilation),
        )
    if isinstance(module, nn.AvgPool2d):
        return _pair(module.kernel_size), _pair(module.stride or module.kernel_size), _pair(module.padding), (1, 1)
    if isinstance(module, (nn.Conv1d, nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d)):
        return _line_geometry(module, path, in_hw[1], out_hw[1])
    if isinstance(module, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        (h, w), (oh, ow) = in_hw, out_hw
        if h % oh or w % ow:
            raise ModelError(
                f"{path}: adaptive pooling from {h}x{w} to {oh}x{ow} uses windows of varying size; "
                "its receptive field has no single size."
            )
        k = (h // oh, w // ow)
        return k, k, (0, 0), (1, 1)
    return None


def _line_geometry(module: nn.Module, path: str, steps_in: int, steps_out: int) -> tuple[Pair, Pair, Pair, Pair]:
    """(kernel, stride, padding, dilation) of a 1-D layer, as a (1, k) kernel over a series one row high."""
    if isinstance(module, (nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d)):
        if steps_in % steps_out:
            raise ModelError(
                f"{path}: adaptive pooling from {steps_in} to {steps_out} steps uses windows of varying size; "
                "its receptive field has no single size."
            )
        return (1, steps_in // steps_out), (1, steps_in // steps_out), (0, 0), (1, 1)
    kernel, stride = _pair(module.kernel_size)[1], _pair(module.stride or module.kernel_size)[1]
    dilation = _pair(getattr(module, "dilation", 1))[1]
    padding = getattr(module, "padding", 0)
    if isinstance(padding, str):  # Conv1d's 'same' / 'valid'
        padding = 0 if padding == "valid" else dilation * (kernel - 1) // 2
    return (1, kernel), (1, stride), (0, _pair(padding)[1]), (1, dilation)


def _left_padding(module: nn.Module) -> int | None:
    """The steps a series padding module adds before the first step (it moves every field by that many), else
    None."""
    if isinstance(module, (nn.ConstantPad1d, nn.ZeroPad1d, nn.ReflectionPad1d, nn.ReplicationPad1d)):
        return int(_pair(module.padding)[0])
    return None


def why_not_applicable(model: nn.Module, modality: str, has_attention: bool = False) -> str | None:
    """A one-line reason when receptive fields do not apply to this model, else None."""
    kind = modality_of(modality)
    if not kind.local:
        return (
            f"receptive fields are computed for convolutional models of images and series; a model of {kind.label} "
            "reads them whole (a text model reads token ids, and its attention or pooling over the whole text has no "
            "local window)"
        )
    if has_attention or callable(getattr(model, "forward_with_attention", None)):
        return (
            f"self-attention mixes every {kind.unit} (or patch) with every other one: after the embedding each token "
            f"already sees the whole input, so there is no local window to compute (see the Attention page)"
        )
    if not any(isinstance(m, (nn.Conv1d, nn.Conv2d)) for m in model.modules()):
        return (
            f"the model has no convolution (or a recurrent layer carries every {kind.unit} forward): no unit has a "
            f"local window of {kind.units}"
        )
    return None


def _on_shortcut(path: str) -> bool:
    return any(part in SHORTCUT_NAMES for part in path.split("."))


def feature_grid(shape: tuple[int, ...] | None, axes: int) -> Pair | None:
    """A feature map's (height, width): a series' (N, C, T) as one row of T; None for anything else (a vector)."""
    if shape is None or len(shape) != axes + 2:
        return None
    return (1, int(shape[-1])) if axes == 1 else (int(shape[-2]), int(shape[-1]))


def receptive_fields(model: nn.Module, x: torch.Tensor) -> list[RFLayer]:
    """The main path's conv and pooling layers of `model`, in forward order, each with its receptive field.

    `x` is one prepared input: an image (1, C, H, W) or a series (1, C, T). Layers that keep the feature map's size
    (ReLU, BatchNorm, dropout) pass through; a series' padding module moves the fields; the walk stops at the first
    module whose output is no longer a feature map (Flatten, Linear). A module that changes the size in a way this
    arithmetic does not model raises ModelError.
    """
    if x.dim() not in (3, 4):
        raise ModelError(
            f"Receptive fields need an image (N, C, H, W) or a series (N, C, T); got shape {tuple(x.shape)}."
        )
    axes = x.dim() - 2
    rf, jump, start = [1, 1], [1, 1], [0.0, 0.0]
    out: list[RFLayer] = []
    for call in trace(model, x[:1]):
        in_hw, out_hw = feature_grid(call.input_shape, axes), feature_grid(call.output_shape, axes)
        if _on_shortcut(call.path) or call.output_shape is None or call.input_shape is None:
            continue
        if in_hw is None or out_hw is None:
            if out:  # Flatten / Linear after the feature maps: the local part is over
                break
            continue
        left = _left_padding(call.module)
        if left is not None:  # padding before the first step: every field starts that many steps earlier
            start[1] -= left * jump[1]
            continue
        geometry = _geometry(call.module, call.path, in_hw, out_hw)
        if geometry is None:
            if in_hw != out_hw:
                raise ModelError(
                    f"Layer {call.path or '(model)'} ({type(call.module).__name__}) changes the feature map from "
                    f"{_size(in_hw, axes)} to {_size(out_hw, axes)} in a way the receptive-field arithmetic does "
                    "not model."
                )
            continue
        k, s, p, d = geometry
        for a in range(2):
            k_eff = d[a] * (k[a] - 1) + 1
            start[a] = start[a] + ((k_eff - 1) / 2 - p[a]) * jump[a]
            rf[a] = rf[a] + (k_eff - 1) * jump[a]
            jump[a] = jump[a] * s[a]
        out.append(
            RFLayer(
                call.path,
                type(call.module).__name__,
                k,
                s,
                p,
                d,
                out_hw,
                (rf[0], rf[1]),
                (jump[0], jump[1]),
                (start[0], start[1]),
                axes,
            )
        )
    if not out:
        raise ModelError(f"{type(model).__name__} has no conv or pooling layer on its main path.")
    return out


def _size(hw: Pair, axes: int) -> str:
    return f"{hw[1]} steps" if axes == 1 else f"{hw[0]}x{hw[1]}"


def bundle_receptive_fields(bundle: ModelBundle) -> list[RFLayer]:
    """`receptive_fields` for a model bundle, or ModelError saying why they do not apply."""
    reason = why_not_applicable(bundle.model, bundle.modality, bool(bundle.spec.attention))
    if reason:
        raise ModelError(f"No receptive fields for {bundle.spec.name}: {reason}.")
    return receptive_fields(bundle.model, example_input(bundle))


def find_layer(layers: list[RFLayer], path: str) -> RFLayer:
    for layer in layers:
        if layer.path == path:
            return layer
    raise ModelError(
        f"{path!r} is not a conv or pooling layer on the main path; pick one of {', '.join(layer.path for layer in layers)}."
    )


def coverage(layer: RFLayer, image_size: Pair) -> float:
    """The fraction of the image's side covered by one unit's (unclipped) field: >= 1 means the whole image."""
    return min(layer.rf[0] / image_size[0], layer.rf[1] / image_size[1]) if math.prod(image_size) else 0.0
