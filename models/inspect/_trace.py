"""Forward-order tracing of a model's modules with forward hooks on one dummy input.

Shared by the receptive-field arithmetic, the architecture summary and the activation readers:
each needs to know which modules a forward pass calls, in which order, and what shapes they see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelError


@dataclass
class Call:
    """One module call: its path, the module, the shape of its first tensor input and of its output."""

    path: str
    module: nn.Module
    input_shape: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    output_shapes: list[tuple[int, ...]]
    start: int = 0  # when the call began, counted over all hooked calls (containers begin before their children)


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in a module's input or output (tuples, lists and HF ModelOutputs included)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for v in value:
            t = first_tensor(v)
            if t is not None:
                return t
    return None


def _all_shapes(value: Any) -> list[tuple[int, ...]]:
    if isinstance(value, torch.Tensor):
        return [tuple(value.shape)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _all_shapes(v)]
    return []


def example_input(bundle: ModelBundle, batch: int = 1) -> torch.Tensor:
    """A prepared input of the model's input shape: the adapter's example (mid-grey images, a short text)."""
    adapter = bundle.adapter
    if adapter.tokenized and bundle.tokenizer is None:
        raise ModelError(f"{bundle.spec.name} is a text model without a tokenizer: load it from a run.")
    shape = tuple(bundle.info.input_shape)
    if adapter.spatial and len(shape) != 3:
        raise ModelError(f"Image models need an input shape (C, H, W); data set {bundle.info.name} declares {shape}.")
    return bundle.prepare(adapter.example(bundle.info, bundle.tokenizer, batch))


@torch.no_grad()
def trace(model: nn.Module, x: torch.Tensor, leaves_only: bool = True) -> list[Call]:
    """Every module call of `model(x)` in the order they happen (leaf modules only by default).

    A module called twice appears twice. The model is put in eval mode (dropout off, BatchNorm
    statistics untouched) for the pass.
    """
    calls: list[Call] = []
    handles = []
    started: dict[int, list[int]] = {}
    counter = [0]

    def pre(module: nn.Module, inputs: Any) -> None:
        started.setdefault(id(module), []).append(counter[0])
        counter[0] += 1

    def hook(path: str):
        def fn(module: nn.Module, inputs: Any, output: Any) -> None:
            t_in, t_out = first_tensor(inputs), first_tensor(output)
            calls.append(
                Call(
                    path=path,
                    module=module,
                    input_shape=tuple(t_in.shape) if t_in is not None else None,
                    output_shape=tuple(t_out.shape) if t_out is not None else None,
                    output_shapes=_all_shapes(output),
                    start=started[id(module)].pop(),
                )
            )

        return fn

    for path, module in model.named_modules():
        if leaves_only and any(True for _ in module.children()):
            continue
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(hook(path)))
    was_training = model.training
    model.eval()
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return sorted(calls, key=lambda c: c.start)
