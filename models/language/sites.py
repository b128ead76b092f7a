"""Where inside a decoder an activation is read or changed: a layer's residual stream, its MLP output or its
attention output. One place that finds the module for a (layer, site) and hooks it, for harvesting activations,
sparse autoencoders, steering and activation patching alike.

Written by hand on forward hooks: the language model is the transformers module xaidash already loaded (any of the
architectures `model.decoder_parts` reads), which TransformerLens cannot wrap by name offline and nnsight would wrap
a second time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.models.language.model import LanguageModel
from xaidash.models.registry import ModelError


@dataclass(frozen=True)
class Site:
    """One kind of place in a decoder block: `id` (in files and commands), `label` (for people), `child` (the
    attribute of the block whose output it is; '' for the block's own output, the residual stream after it)."""

    id: str
    label: str
    child: str


SITES: dict[str, Site] = {
    s.id: s
    for s in (
        Site("resid", "residual stream after the block", ""),
        Site("mlp", "MLP output", "mlp"),
        Site("attn", "attention output", "self_attn"),
    )
}

Edit = Callable[[torch.Tensor], torch.Tensor]  # (batch, tokens, d_model) -> the same shape


def site_of(site: str) -> Site:
    if site not in SITES:
        raise ModelError(f"Unknown site {site!r}: choose one of {', '.join(SITES)}.")
    return SITES[site]


def check_layer(lm: LanguageModel, layer: Any) -> int:
    """`layer` as an int in range, or a ModelError naming the layers there are."""
    n = lm.num_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ModelError(f"Layer {layer!r} is out of range: {lm.name} has decoder layers 0 to {n - 1}.")
    return layer


def site_module(lm: LanguageModel, layer: int, site: str) -> nn.Module:
    """The module whose output is (layer, site); a ModelError when the layer is out of range or the architecture
    keeps its MLP or attention under another name."""
    block = lm.layers()[check_layer(lm, layer)]
    child = site_of(site).child
    if not child:
        return block
    module = getattr(block, child, None)
    if not isinstance(module, nn.Module):
        raise ModelError(f"{lm.name}'s decoder blocks have no {child!r} module: read the residual stream instead.")
    return module


def d_model(lm: LanguageModel) -> int:
    """The width of every site's activation (the residual stream's width)."""
    return int(lm.embedding().weight.shape[1])


def _main(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _with_main(output: Any, main: torch.Tensor) -> Any:
    if isinstance(output, tuple):
        return (main, *output[1:])
    if isinstance(output, list):
        return [main, *output[1:]]
    return main


@contextmanager
def reading(lm: LanguageModel, layer: int, site: str) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward pass appends (batch, tokens, d_model) activations of (layer, site) to the
    yielded list (as computed: on the device, in the graph when gradients are on)."""
    seen: list[torch.Tensor] = []

    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        seen.append(_main(output))

    handle = site_module(lm, layer, site).register_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@contextmanager
def editing(lm: LanguageModel, layer: int, site: str, edit: Edit) -> Iterator[None]:
    """Within the block, (layer, site)'s output is replaced by `edit(output)` in every forward pass: what follows
    the site reads the edited activations (steering, patching, an SAE's reconstruction)."""

    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        return _with_main(output, edit(_main(output)))

    handle = site_module(lm, layer, site).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
