"""Architecture summary: every layer a forward pass calls, its output shape and its parameters.

Shapes come from forward hooks on one dummy input of the model's input shape (mid-grey images,
or a short example text through the run's tokenizer). Each parameter is counted once, at the
module that owns it directly, so the rows add up to `sum(p.numel() for p in model.parameters())`
(parameters such as ViT's class token, owned by a container, get a row of their own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect._trace import example_input, trace


@dataclass(frozen=True)
class LayerRow:
    path: str
    kind: str
    output_shape: tuple[int, ...] | None  # without the batch dimension; None when not called
    parameters: int  # owned directly by this module
    trainable: int
    calls: int

    def row(self) -> dict[str, Any]:
        shape = "not called" if self.output_shape is None else " x ".join(map(str, self.output_shape)) or "scalar"
        return {
            "layer": self.path or "(model)",
            "type": self.kind,
            "output shape": shape,
            "parameters": self.parameters,
            "trainable": self.trainable,
        }


@dataclass
class ModelSummary:
    rows: list[LayerRow] = field(default_factory=list)
    total: int = 0
    trainable: int = 0
    input_shape: tuple[int, ...] = ()

    def table(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.rows]


def summarize(model: nn.Module, x: Any, input_shape: tuple[int, ...] | None = None) -> ModelSummary:
    """Rows in forward order (leaf modules, plus containers that own parameters themselves);
    modules the forward pass never calls come last, marked 'not called'. `x`: a prepared batch (its first sample is
    traced when it is a tensor; another prepared input, a graph batch, as it is); `input_shape`: one sample's shape
    where `x` has none of its own (a graph's node features)."""
    calls = trace(model, x[:1] if isinstance(x, torch.Tensor) else x, leaves_only=False)
    first: dict[int, Any] = {}
    counts: dict[int, int] = {}
    for c in calls:
        counts[id(c.module)] = counts.get(id(c.module), 0) + 1
        first.setdefault(id(c.module), c)
    seen_params: set[int] = set()
    rows: list[tuple[int, LayerRow]] = []
    order = {id(c.module): i for i, c in reversed(list(enumerate(calls)))}  # calls are sorted by start
    for path, module in model.named_modules():
        own = [p for p in module.parameters(recurse=False) if id(p) not in seen_params]
        seen_params.update(id(p) for p in own)
        is_leaf = not any(True for _ in module.children())
        if not is_leaf and not own:
            continue
        call = first.get(id(module))
        shape = tuple(call.output_shape[1:]) if call is not None and call.output_shape is not None else None
        row = LayerRow(
            path=path,
            kind=type(module).__name__,
            output_shape=shape,
            parameters=sum(p.numel() for p in own),
            trainable=sum(p.numel() for p in own if p.requires_grad),
            calls=counts.get(id(module), 0),
        )
        rows.append((order.get(id(module), len(calls) + len(rows)), row))
    rows.sort(key=lambda item: item[0])
    ordered = [r for _, r in rows]
    return ModelSummary(
        rows=ordered,
        total=sum(r.parameters for r in ordered),
        trainable=sum(r.trainable for r in ordered),
        input_shape=tuple(x.shape[1:]) if isinstance(x, torch.Tensor) else tuple(input_shape or ()),
    )


def summarize_bundle(bundle: ModelBundle) -> ModelSummary:
    return summarize(bundle.model, example_input(bundle), tuple(bundle.info.input_shape))
