"""What removes per-step launch overhead from training: torch.compile (with a fallback), CUDA graphs, channels_last.

On a GPU a small model's step is a few microseconds of arithmetic behind dozens of kernel launches, each
prepared by Python: the launches are the cost. `--compile on` runs the training forward and backward through
torch.compile (inductor fuses the elementwise work into few kernels); `--compile graphs` uses inductor's
'reduce-overhead' mode, which on CUDA also records the step as CUDA graphs (one launch per step for a batch
shape it has seen; a new shape, such as the last batch of an epoch, records one more). On a CPU both compile
the same kernels without graphs. Compiling costs time at the first steps (tens of seconds on a small CPU), so
it pays on long runs; evaluation, checkpoints and explanations always use the eager model.

A model torch.compile cannot handle (or a machine without a C++ compiler for inductor) does not fail the run:
the step that failed is taken again eagerly, the run goes on eagerly, and the reason is recorded.

`channels_last` stores image activations and convolution weights as NHWC, the layout tensor cores read; it
helps convolution networks on GPUs with bf16 and does nothing for text models.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Literal, TypeVar

import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.data.modalities import modality_of
from xaidash.models.device import is_out_of_memory

Compile = Literal["off", "on", "graphs"]
COMPILE_MODES: tuple[Compile, ...] = ("off", "on", "graphs")
# torch.compile's backend. Tests use "aot_eager" (the same graph capture and autograd, no C++ compilation).
BACKEND = "inductor"

T = TypeVar("T")


class CompiledSteps:
    """The training model compiled with torch.compile in `mode`, falling back to the eager model for good when
    a compiled step raises anything but an out-of-memory error (`failure` says why)."""

    def __init__(self, model: nn.Module, mode: Compile) -> None:
        if mode not in ("on", "graphs"):
            raise ValueError(f"compile mode {mode!r} compiles nothing")
        self.eager = model
        self.mode = mode
        self.failure: str | None = None
        graphs = mode == "graphs" and BACKEND == "inductor"  # the mode belongs to inductor
        self.compiled: Callable[..., torch.Tensor] = torch.compile(
            model, backend=BACKEND, mode="reduce-overhead" if graphs else None
        )

    def step(self, run: Callable[..., T], *args: object) -> T:
        """`run(model, *args)`: one training step (forward and backward) with the compiled model, or with the eager
        model once compiling has failed. A failed compiled step is run again eagerly (its gradients are reset
        by `run`, and no optimizer step has happened yet), so no step is lost."""
        if self.failure is not None:
            return run(self.eager, *args)
        if self.mode == "graphs":
            # Each call is a new training step: CUDA graph outputs of the last one may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        try:
            return run(self.compiled, *args)
        except Exception as e:  # any compiler failure: the eager model decides what is really wrong
            if is_out_of_memory(e):
                raise
            self.failure = plain_message(e, first_line=True)
            warnings.warn(
                f"torch.compile failed ({self.failure}); training goes on without it.", RuntimeWarning, stacklevel=2
            )
        return run(self.eager, *args)

    def describe(self) -> str:
        """For the run's summary: what the steps ran as."""
        if self.failure is None:
            graphs = ", reduce-overhead (CUDA graphs on a GPU)" if self.mode == "graphs" else ""
            return f"torch.compile ({BACKEND}{graphs})"
        return f"eager: torch.compile failed ({self.failure})"


def uses_channels_last(model: nn.Module, modality: str) -> bool:
    """Whether channels_last can apply: image data and a model with 2-D convolutions."""
    return modality_of(modality).spatial and any(isinstance(m, nn.Conv2d) for m in model.modules())
