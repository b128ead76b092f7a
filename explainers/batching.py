"""Batch sizes for explanation methods: run at the largest batch asked for, halve it on out-of-memory.

Every batched method (perturbations, IG steps, noisy copies, expected-gradient samples) runs its whole
computation through `run_halving(fn, batch_size)`: `fn(b)` does the work `b` rows per model pass; when
it runs out of memory (torch.cuda.OutOfMemoryError, or the CPU allocator's 'out of memory' RuntimeError)
the device cache is emptied and it runs again at half the batch, down to 1 row, and only then fails
with an ExplainError that says so. Neither captum nor shap retries on OOM (captum's users hit it with
IG even on one image), so this is written here; the batch that succeeded is returned so the method
can report it (diagnostic `batch_size`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

import torch

from xaidash.explainers.params import ExplainError
from xaidash.models.device import is_out_of_memory

__all__ = ["CPU_ROWS_PER_PASS", "batched_rows", "is_out_of_memory", "rows_per_pass", "run_halving"]

T = TypeVar("T")

# On a CPU, rows past a few dozen per pass only spill the activations out of the caches: measured here
# (2 cores, one thread) resnet_small at 32 px ran 0.58-0.65 ms per row forward at 32-64 rows per pass
# and 0.97 ms at 256 (f+b 1.2 vs 2.1 ms); resnet18 at 224 px was flat from 4 to 32 rows. A GPU wants
# the largest batch that fits, so there the caller's batch is the start.
CPU_ROWS_PER_PASS = 64


def rows_per_pass(batch_size: int, device: torch.device) -> int:
    """The batch a method starts at: the caller's `batch_size`, at most CPU_ROWS_PER_PASS on a CPU."""
    size = max(1, int(batch_size))
    return min(size, CPU_ROWS_PER_PASS) if device.type == "cpu" else size


def _free_cached_memory() -> None:
    """Hand cached device blocks back (a full collection first, so cycles holding tensors go too).
    On the CPU freed tensors go straight back to the allocator: nothing to do (and gc costs ~0.3 s)."""
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()
    mps = getattr(torch, "mps", None)
    if mps is not None and torch.backends.mps.is_available():
        mps.empty_cache()


def run_halving(fn: Callable[[int], T], batch_size: int, *, what: str = "the explanation") -> tuple[T, int]:
    """`fn(b)` at b = batch_size, then half of it after each out-of-memory error, down to 1.

    Returns (fn's result, the batch size it ran at). Errors other than out-of-memory pass through
    unchanged; out-of-memory at a batch of 1 becomes an ExplainError naming `what`."""
    size = max(1, int(batch_size))
    while True:
        try:
            return fn(size), size
        except (torch.cuda.OutOfMemoryError, RuntimeError) as err:
            if not is_out_of_memory(err):
                raise
            message = str(err).splitlines()[0] if str(err) else "no message"
        # Outside the except block: the traceback (and the tensors its frames hold) is released first.
        _free_cached_memory()
        if size == 1:
            raise ExplainError(
                f"Out of memory computing {what} even one row at a time ({message}); "
                "use a smaller model or input, fewer inputs per call, or another device."
            )
        size = max(1, size // 2)


def batched_rows(
    n_rows: int,
    batch_size: int,
    rows: Callable[[torch.Tensor], torch.Tensor],
    *,
    device: torch.device,
) -> torch.Tensor:
    """`rows(index)` for consecutive index chunks of at most `batch_size` of range(n_rows), concatenated.
    `rows` gets a long tensor of row numbers on `device` and returns one result per row."""
    out = []
    for start in range(0, n_rows, max(1, batch_size)):
        index = torch.arange(start, min(start + batch_size, n_rows), device=device)
        out.append(rows(index))
    return torch.cat(out)
