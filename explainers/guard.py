"""The one guarded call every method, metric and prompt method runs inside: the model in eval mode (dropout off,
batch-norm statistics fixed) with every module's train/eval flag put back afterwards, torch's generators seeded,
and the caller's torch and NumPy random states restored (shap and lime reseed NumPy's global generator)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """The model in eval mode inside, every module's train/eval flag as the caller left it afterwards."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | str | None = None) -> Iterator[None]:
    """torch's generators (and NumPy's global one) seeded inside; the caller's random states restored afterwards."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    devices = [dev] if dev.type == "cuda" else []
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            np.random.seed(seed % 2**32)
            yield
    finally:
        np.random.set_state(numpy_state)


@contextlib.contextmanager
def guarded(model: torch.nn.Module, seed: int, device: torch.device | str | None = None) -> Iterator[None]:
    """`evaluating(model)` and `seeded(seed, device)` together: what one method call runs inside."""
    with evaluating(model), seeded(seed, device):
        yield
