"""Batch sizes halved on out-of-memory (explainers/batching.py), unit by unit and through every batched
method, with a model that fails above a batch size like a GPU that is full."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from image_bundles import GREY28, fresh_bundle
from torch import nn

from xaidash.explainers import ExplainError, explain
from xaidash.explainers.batching import CPU_ROWS_PER_PASS, is_out_of_memory, rows_per_pass, run_halving
from xaidash.models import ModelBundle


class FullDevice(nn.Module):
    """Wraps a model and fails like a full GPU (or CPU allocator) whenever a pass holds more than `limit` rows."""

    def __init__(self, model: nn.Module, limit: int, cpu_message: bool = False):
        super().__init__()
        self.model = model
        self.limit = limit
        self.cpu_message = cpu_message
        self.largest = 0  # the largest batch that went through

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(x) > self.limit:
            if self.cpu_message:
                raise RuntimeError(
                    "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory: "
                    "you tried to allocate 9663676416 bytes."
                )
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        self.largest = max(self.largest, len(x))
        return self.model(x)


def test_run_halving_halves_until_it_fits() -> None:
    tried: list[int] = []

    def fn(size: int) -> str:
        tried.append(size)
        if size > 5:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        return "done"

    assert run_halving(fn, 64) == ("done", 4)
    assert tried == [64, 32, 16, 8, 4]


def test_run_halving_passes_other_errors_and_gives_up_at_one() -> None:
    def broken(size: int) -> None:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        run_halving(broken, 8)

    def never_fits(size: int) -> None:
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes")

    with pytest.raises(ExplainError, match=r"Out of memory computing LIME even one row at a time"):
        run_halving(never_fits, 8, what="LIME")


def test_out_of_memory_is_recognised() -> None:
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory."))
    assert is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 9 GB"))
    assert not is_out_of_memory(RuntimeError("expected scalar type Float"))
    assert not is_out_of_memory(ValueError("out of memory"))


def test_a_cpu_starts_at_a_cache_sized_batch() -> None:
    assert rows_per_pass(256, torch.device("cpu")) == CPU_ROWS_PER_PASS == 64
    assert rows_per_pass(16, torch.device("cpu")) == 16
    assert rows_per_pass(256, torch.device("cuda")) == 256  # a GPU starts at the largest batch asked for
    assert rows_per_pass(0, torch.device("cuda")) == 1


# Each batched method at small settings whose rows exceed the limit (inputs x samples/steps/windows).
BATCHED = {
    "saliency": {},
    "ig": {"steps": 4},
    "smoothgrad": {"samples": 4},
    "occlusion": {"window": 14, "stride": 14},
    "lime": {"samples": 12},
    "shap_kernel": {"samples": 12},
    "shap_gradient": {"samples": 6, "background_size": 4},
}


@pytest.fixture(scope="module")
def cnn() -> ModelBundle:
    return fresh_bundle("simple_cnn", GREY28)


@pytest.mark.parametrize("method", list(BATCHED))
def test_every_batched_method_halves_on_out_of_memory(cnn: ModelBundle, method: str) -> None:
    x = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    background = cnn.prepare(torch.rand(4, 1, 28, 28, generator=torch.Generator().manual_seed(1)))
    kwargs = {"targets": [1, 2, 3], "method": method, "background": background, **BATCHED[method]}
    plain = explain(cnn, x, batch_size=2, **kwargs)
    full = FullDevice(cnn.model, limit=2, cpu_message=method == "lime")
    squeezed = explain(dataclasses.replace(cnn, model=full), x, batch_size=64, **kwargs)
    assert full.largest <= 2
    used = squeezed.diagnostics["batch_size"]
    assert used == [2.0] * 3  # 64 -> 32 -> 16 -> 8 -> 4 -> 2
    assert plain.diagnostics["batch_size"] == [2.0] * 3
    # the same map as asking for that batch in the first place
    np.testing.assert_allclose(squeezed.attributions, plain.attributions, rtol=1e-4, atol=1e-5)


def test_a_model_that_never_fits_gives_a_clear_error(cnn: ModelBundle) -> None:
    full = FullDevice(cnn.model, limit=0)
    with pytest.raises(ExplainError, match=r"Out of memory computing Occlusion even one row at a time"):
        explain(dataclasses.replace(cnn, model=full), torch.rand(1, 1, 28, 28), targets=0, method="occlusion")
