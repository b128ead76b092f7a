"""SAELens imported once, lazily: importing it takes about 8 s (it brings TransformerLens, datasets, wandb), and
it must never log to wandb. Its modules come back as plain modules (SAELens ships no type information)."""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType


@functools.cache
def sae_lens(module: str = "") -> ModuleType:
    """`sae_lens` or its submodule `module` (e.g. "evals", "config", "registry")."""
    os.environ.setdefault("WANDB_MODE", "disabled")
    return importlib.import_module("sae_lens" + (f".{module}" if module else ""))
