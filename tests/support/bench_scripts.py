"""The scripts under bench/ as importable modules, for their smoke tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


@contextmanager
def bench_module(script: str) -> Iterator[ModuleType]:
    """bench/<script>.py loaded as a module, registered in sys.modules while in use (its dataclasses look their
    module up while being built) and removed after."""
    name = f"bench_{script}"
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
