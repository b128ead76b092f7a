"""The layer the influence methods read: the last `nn.Linear` that produces the model's logits (its input is the
penultimate activation, its output gradient the loss gradient that TracIn's final-layer variant uses)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


def final_linear(bundle: ModelBundle, probe: torch.Tensor) -> str:
    """The name of the model's final linear layer: the spec's declared classifier where it has one (CAM's
    `gap_classifier`), else found by running `probe` (prepared inputs, a row or two) and taking the last
    `nn.Linear` called whose output is the logits. ExplainError when none is (no final linear layer), or when the
    model predicts a number (its loss gradient here is cross-entropy's, over classes)."""
    if bundle.regression is not None:
        raise ExplainError(
            f"The influence methods score training samples through a classifier's loss (cross-entropy over its "
            f"classes); this run predicts a number ({bundle.regression.name}), so they do not apply to it."
        )
    model = bundle.model
    declared = bundle.spec.gap_classifier
    if declared:
        try:
            if isinstance(model.get_submodule(declared), nn.Linear):
                return declared
        except AttributeError:
            pass
    calls: list[tuple[str, torch.Tensor]] = []
    handles = [
        m.register_forward_hook(lambda mod, inp, out, name=name: calls.append((name, out)))
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear)
    ]
    try:
        with torch.no_grad():
            logits = model(probe)
    finally:
        for h in handles:
            h.remove()
    for name, out in reversed(calls):
        if isinstance(out, torch.Tensor) and out.shape == logits.shape and torch.equal(out, logits):
            return name
    raise ExplainError(
        f"{bundle.spec.name} has no final nn.Linear layer that produces its logits, so the influence methods "
        "(which read that layer's input and gradient) do not apply to it."
    )


@contextmanager
def captured_input(layer: nn.Module) -> Iterator[list[torch.Tensor]]:
    """While open, the input of every call of `layer` is appended to the yielded list (detached)."""
    seen: list[torch.Tensor] = []
    handle = layer.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach()))
    try:
        yield seen
    finally:
        handle.remove()


def activations_and_logits(model: nn.Module, layer: nn.Linear, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(penultimate activations (N, D), logits (N, classes)), float32, of prepared inputs `x`, without gradients."""
    with torch.no_grad(), captured_input(layer) as seen:
        logits = model(x).float()
    if not seen:
        raise ExplainError("The final linear layer was not called in the forward pass.")
    acts = seen[-1].float().reshape(len(logits), -1)
    return acts, logits
