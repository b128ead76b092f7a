"""Small helpers shared by method modules (registers no method): batching, quiet captum calls, pass counts."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from xaidash.explainers.batching import batched_rows, rows_per_pass, run_halving
from xaidash.explainers.registry import MethodContext, MethodOutput, Passes

# Row numbers (long, on the device) -> (the perturbed model inputs of those rows, the target class of each row).
RowBuilder = Callable[[torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]

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


def per_slice(n: int, batch_size: int, fn: SliceFn, *, what: str = "the explanation") -> MethodOutput:
    """Run `fn` on consecutive slices of at most `batch_size` of the n inputs and join the results;
    on out-of-memory the whole run starts again at half the slice (`batching.run_halving`). The slice
    size that ran is reported as the diagnostic 'batch_size'."""

    def run(size: int) -> tuple[list[torch.Tensor], dict[str, list[float]]]:
        attrs: list[torch.Tensor] = []
        diagnostics: dict[str, list[float]] = {}
        for s in batch_slices(n, size):
            with quiet_hook_notices():
                attr, diag = fn(s)
            attrs.append(attr.detach())
            for name, values in diag.items():
                diagnostics.setdefault(name, []).extend(float(v) for v in values.detach().flatten().cpu())
        return attrs, diagnostics

    (attrs, diagnostics), used = run_halving(run, batch_size, what=what)
    return MethodOutput(torch.cat(attrs), {**diagnostics, "batch_size": [float(used)] * n})


def scored_rows(
    ctx: MethodContext, n_rows: int, build: RowBuilder, *, probability: bool = False, what: str = "the explanation"
) -> tuple[torch.Tensor, int]:
    """The target's logit (or softmax probability) for each of `n_rows` perturbed inputs that `build`
    makes on the device, chunk by chunk: every perturbation of every input of the call shares one
    stream of model passes of `ctx.batch_size` rows (at most 64 on a CPU), halved on out-of-memory. Returns (n_rows,) float32
    scores on the device and the batch size that ran."""

    @torch.no_grad()
    def run(size: int) -> torch.Tensor:
        def rows(index: torch.Tensor) -> torch.Tensor:
            x, target = build(index)
            out = ctx.model(x).float()
            if probability:
                out = torch.softmax(out, dim=1)
            return out.gather(1, target.view(-1, 1))[:, 0]

        return batched_rows(n_rows, size, rows, device=ctx.x.device)

    return run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what=what)
