"""Small helpers shared by method modules (registers no method): batching, quiet captum calls, pass counts,
KernelSHAP's coalitions and fit (superpixels for images, words for text)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
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


# captum's KernelShap weighs its first two samples (every feature shown, every one hidden) this much
# against 1 for the others, so the fit (nearly) meets f(x) and f(all hidden) exactly.
_INF_WEIGHT = 1e6


def kernel_coalitions(samples: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """captum KernelShap's samples of k features (superpixels, words), drawn at once: first all shown, then
    all hidden, then coalitions whose size j is drawn with p(j) ~ (k - 1) / (j (k - j)) and whose members are
    a uniform subset of that size (the Shapley kernel, applied by sampling). Returns ((samples, k) 0/1,
    per-sample weights). From the seed alone, on the CPU: the same draws for an input whatever else is explained."""
    gen = torch.Generator().manual_seed(int(seed))
    on = torch.zeros(samples, k, dtype=torch.long)
    on[0] = 1
    rest = samples - 2
    if rest > 0 and k >= 2:
        j = torch.arange(1, k, dtype=torch.float64)
        sizes = torch.multinomial((k - 1) / (j * (k - j)), rest, replacement=True, generator=gen) + 1
        ranks = torch.rand(rest, k, generator=gen).argsort(1).argsort(1)  # a random order of the features
        on[2:] = (ranks < sizes[:, None]).long()
    elif rest > 0:
        on[2:] = torch.randint(0, 2, (rest, k), generator=gen)
    count = on.sum(1)
    weights = torch.where((count == 0) | (count == k), _INF_WEIGHT, 1.0)
    return on.numpy(), weights.numpy()


def kernel_shap_fit(on: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """captum KernelShap's fit: sklearn's LinearRegression (with intercept) of the scores on the (samples, k)
    coalitions, weighted per sample. Returns the k Shapley value estimates (float32)."""
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(on, scores, sample_weight=weights).coef_.astype(np.float32)
