"""Small helpers shared by method modules (registers no method): batching and quiet captum calls."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

import torch
from torch import nn

from xaidash.explainers.registry import MethodOutput

# One slice of the inputs -> (attributions, {diagnostic name: one value per input of the slice}).
SliceFn = Callable[[slice], "tuple[torch.Tensor, dict[str, torch.Tensor]]"]


def batch_slices(n: int, batch_size: int) -> list[slice]:
    """Consecutive slices of at most `batch_size` items covering range(n)."""
    step = max(1, int(batch_size))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


@torch.no_grad()
def batched_forward(model: nn.Module, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Model outputs for `x`, computed `batch_size` rows at a time (no gradients kept)."""
    return torch.cat([model(x[s]) for s in batch_slices(len(x), batch_size)])


def target_scores(model: nn.Module, x: torch.Tensor, targets: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """The target logit of each input, (N,), in batches."""
    logits = batched_forward(model, x, batch_size)
    return logits.gather(1, targets.view(-1, 1).to(logits.device))[:, 0]


def grad_leaf(x: torch.Tensor) -> torch.Tensor:
    """A detached copy that requires grad: captum then neither warns about it nor touches the caller's tensor."""
    return x.detach().clone().requires_grad_()


@contextlib.contextmanager
def quiet_hook_notices() -> Iterator[None]:
    """Silence the notice captum prints on every call that it sets (and later removes) hooks on activations."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*Setting (forward, )?backward hooks")
        yield


def per_slice(n: int, batch_size: int, fn: SliceFn) -> MethodOutput:
    """Run `fn` on consecutive slices of at most `batch_size` of the n inputs and join the results."""
    attrs: list[torch.Tensor] = []
    diagnostics: dict[str, list[float]] = {}
    for s in batch_slices(n, batch_size):
        with quiet_hook_notices():
            attr, diag = fn(s)
        attrs.append(attr.detach())
        for name, values in diag.items():
            diagnostics.setdefault(name, []).extend(float(v) for v in values.detach().flatten().cpu())
    return MethodOutput(torch.cat(attrs), diagnostics)
