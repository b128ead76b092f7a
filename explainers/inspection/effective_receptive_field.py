"""The effective receptive field (Luo et al., 2016, "Understanding the Effective Receptive Field in
Deep Convolutional Neural Networks"): the gradient of one unit of a layer (all channels of the
centre unit by default) with respect to the input pixels, its absolute value summed over input
channels and averaged over many inputs. Shown for the trained weights and for the same
architecture re-initialised at random, beside the theoretical box of `models.inspect`. A series (N, C, T) is an
image one row high: the map is (1, T), one value per step.

Written by hand: captum attributes outputs of the whole model, not of one unit of an inner layer
averaged over inputs.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.receptive_field import feature_grid, why_not_applicable

Progress = Callable[[int, int], None]


class _Stop(Exception):
    """Raised by the hook once the chosen layer has run: the rest of the forward pass is not needed."""


@dataclass
class ERF:
    layer: str
    unit: tuple[int, int]
    output_size: tuple[int, int]
    map: np.ndarray  # (H, W) mean |d unit / d pixel|, summed over input channels
    samples: int
    weights: str  # "trained" | "random"

    def normalized(self) -> np.ndarray:
        top = float(self.map.max())
        return self.map / top if top > 0 else self.map

    def fraction_inside(self, box: tuple[int, int, int, int]) -> float:
        """The share of the summed gradient that falls inside the inclusive pixel box (top, left, bottom, right)."""
        top, left, bottom, right = box
        total = float(self.map.sum())
        return float(self.map[top : bottom + 1, left : right + 1].sum()) / total if total > 0 else 0.0

    def support(self, threshold: float = 0.0) -> tuple[int, int, int, int] | None:
        """(top, left, bottom, right) of the pixels whose normalised gradient exceeds `threshold`; None if none does."""
        rows, cols = np.nonzero(self.normalized() > threshold)
        if rows.size == 0:
            return None
        return int(rows.min()), int(cols.min()), int(rows.max()), int(cols.max())


def effective_receptive_field(
    model: nn.Module,
    x: torch.Tensor,
    layer: str,
    unit: tuple[int, int] | None = None,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]]:
    """(mean |gradient| map (H, W), unit, layer output size) of `layer`'s unit for prepared inputs x (N, C, H, W),
    or for series x (N, C, T): a map (1, T), the unit (0, step) and the output size (1, steps).

    The objective for each input is the sum over channels of the layer's output at `unit`
    (default: the centre unit); inputs are independent in eval mode, so one backward pass per
    batch gives every input's own gradient.
    """
    if x.dim() not in (3, 4):
        raise ExplainError(
            f"The effective receptive field needs images (N, C, H, W) or series (N, C, T); got shape {tuple(x.shape)}."
        )
    try:
        module = model.get_submodule(layer)
    except AttributeError:
        raise ExplainError(f"{type(model).__name__} has no layer {layer!r}.") from None
    captured: dict[str, torch.Tensor] = {}

    def hook(mod: nn.Module, inputs: Any, output: Any) -> None:
        captured["out"] = output
        raise _Stop

    was_training = model.training
    model.eval()
    total = torch.zeros(_grid(x.shape), dtype=torch.float64)
    out_hw: tuple[int, int] | None = None
    handle = module.register_forward_hook(hook)
    try:
        for start in range(0, len(x), batch_size):
            xb = x[start : start + batch_size].detach().clone().requires_grad_(True)
            captured.clear()
            with contextlib.suppress(_Stop):  # the hook stops the pass once the layer has run
                model(xb)
            out = captured.get("out")
            if not isinstance(out, torch.Tensor) or out.dim() != x.dim():
                raise ExplainError(
                    f"Layer {layer!r} does not output a feature map like its input's; pick a conv or pooling layer."
                )
            out_hw = _grid(out.shape)
            r, c = unit if unit is not None else (out_hw[0] // 2, out_hw[1] // 2)
            if not (0 <= r < out_hw[0] and 0 <= c < out_hw[1]):
                raise ExplainError(f"Unit ({r}, {c}) is outside {layer}'s output of {out_hw[0]}x{out_hw[1]}.")
            at_unit = out[:, :, c] if out.dim() == 3 else out[:, :, r, c]
            (grad,) = torch.autograd.grad(at_unit.sum(), xb)
            total += grad.detach().abs().sum(1).sum(0).double().cpu().reshape(total.shape)
            if progress:
                progress(min(start + batch_size, len(x)), len(x))
    finally:
        handle.remove()
        model.train(was_training)
    assert out_hw is not None
    return (total / len(x)).float().numpy(), (r, c), out_hw


def _grid(shape: torch.Size) -> tuple[int, int]:
    """A feature map's (height, width) as the theoretical fields read it; a series' (N, C, T) is one row of T."""
    grid = feature_grid(tuple(shape), len(shape) - 2)
    assert grid is not None  # images and series only: the caller checked the dimensions
    return grid


def reinitialized(model: nn.Module, seed: int = 0) -> nn.Module:
    """A copy of `model` with every layer's parameters drawn afresh (and BatchNorm statistics reset)."""
    torch.manual_seed(seed)
    fresh = copy.deepcopy(model)
    for m in fresh.modules():
        if hasattr(m, "reset_parameters") and callable(m.reset_parameters):
            m.reset_parameters()
    return fresh.eval()


def bundle_erf(
    bundle: ModelBundle,
    images01: torch.Tensor,
    layer: str,
    unit: tuple[int, int] | None = None,
    random_weights: bool = False,
    seed: int = 0,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> ERF:
    """The effective receptive field of `layer` over raw inputs as the data set holds them (images (N, C, H, W) in
    [0, 1], series (N, C, T)), with the bundle's weights or (random_weights) a randomly re-initialised copy."""
    reason = why_not_applicable(bundle.model, bundle.modality, bool(bundle.spec.attention))
    if reason:
        raise ExplainError(f"No receptive field for {bundle.spec.name}: {reason}.")
    images01 = torch.as_tensor(images01, dtype=torch.float32)
    if images01.dim() == len(bundle.info.input_shape):  # one input
        images01 = images01.unsqueeze(0)
    if len(images01) == 0:
        raise ExplainError("The effective receptive field needs at least one input.")
    model = reinitialized(bundle.model, seed) if random_weights else bundle.model
    x = bundle.prepare(images01)
    grad_map, unit, out_hw = effective_receptive_field(model, x, layer, unit, batch_size, progress)
    return ERF(layer, unit, out_hw, grad_map, len(x), "random" if random_weights else "trained")
