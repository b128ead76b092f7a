"""Catching a non-finite training loss without a host synchronisation per step.

`if not torch.isfinite(loss)` in the step loop makes the host wait for the GPU at every step; for a small
model on a GPU that wait (and the launches it leaves unqueued) is most of a step's time. So each step only
records on the device whether its loss was finite (and the first bad step and value), and the host reads
that flag at the step records, where it synchronises anyway. Between two reads a NaN may already have
reached the weights, so the guard keeps a copy of the weights (parameters and buffers) from the last read
that found everything finite, and puts it back before the run fails: the weights a failed run keeps are the
last good ones, not NaN.

Written here: torch's GradScaler skips non-finite steps only for float16 loss scaling, and it reads the
result on the host every step too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class NonFinite:
    """What the guard found: the first step whose loss was not finite, that loss, and the step whose
    weights were put back (0: the weights the session started from)."""

    step: int
    loss: float
    restored_step: int


class FiniteGuard:
    """Per step `watch(loss, step)` (device only); at a step record `check()` (one host read) returns None
    when every loss since the last check was finite (and remembers the weights), else a `NonFinite` after
    putting back the weights of the last good check."""

    def __init__(self, model: nn.Module, device: torch.device, step: int = 0) -> None:
        self.model = model
        self._bad = torch.zeros((), dtype=torch.bool, device=device)
        self._first_step = torch.full((), -1, dtype=torch.long, device=device)
        self._first_loss = torch.zeros((), dtype=torch.float32, device=device)
        self._good: list[torch.Tensor] = [t.detach().clone() for t in self._tensors()]
        self.good_step = step

    def _tensors(self) -> list[torch.Tensor]:
        # Parameters and floating buffers (BatchNorm's running statistics can turn NaN too); integer
        # buffers (num_batches_tracked) are counters, kept as they are.
        return [*self.model.parameters(), *(b for b in self.model.buffers() if b.is_floating_point())]

    def watch(self, loss: torch.Tensor, step: int) -> None:
        """Note on the device whether `loss` (of step `step`, counted from 1) is finite; no host read."""
        with torch.no_grad():
            value = loss.detach().float()
            bad = ~torch.isfinite(value)
            first = bad & ~self._bad
            self._first_step = torch.where(first, step, self._first_step)
            self._first_loss = torch.where(first, value, self._first_loss)
            self._bad |= bad

    def check(self, step: int, agree: Callable[[bool], bool] = bool) -> NonFinite | None:
        """At a step record (`step` steps taken): None and a new copy of the weights when every loss since
        the last check was finite; else the weights of the last good check are put back and returned.
        `agree`: with several processes, whether any of them saw a non-finite loss (all act alike; a rank
        that saw none reports step -1)."""
        if not agree(bool(self._bad)):  # the one host read
            with torch.no_grad():
                for kept, live in zip(self._good, self._tensors(), strict=True):
                    kept.copy_(live)
            self.good_step = step
            return None
        with torch.no_grad():
            for kept, live in zip(self._good, self._tensors(), strict=True):
                live.copy_(kept)
        found = NonFinite(int(self._first_step), float(self._first_loss), self.good_step)
        self._bad.zero_()
        self._first_step.fill_(-1)
        return found
