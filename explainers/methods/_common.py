"""Small helpers shared by method modules (registers no method): batching, quiet captum calls, pass counts."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from xaidash.explainers.registry import MethodOutput, Passes

# One slice of the inputs -> (attributions, {diagnostic name: one value per input of the slice}).
SliceFn = Callable[[slice], "tuple[torch.Tensor, dict[str, torch.Tensor]]"]


def batch_slices(n: int, batch_size: int) -> list[slice]:
    """Consecutive slices of at most `batch_size` items covering range(n)."""
    step = max(1, int(batch_size))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def per_input(fwd_bwd: int = 0, fwd: int = 0) -> Passes:
    """Pass counts of a method that makes a fixed number of passes per input, whatever its params."""

    def passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
        return fwd_bwd * n, fwd * n

    return passes


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
