"""A run folder written out of sight and moved into place only when complete: every import (classifiers in
models/external, language models in models/language) writes under `<runs root>/.importing/`, checks the folder
by loading it back, and renames it into the runs root. A failed import leaves nothing behind."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run, runs_root

STAGING = ".importing"  # under the runs root; its sub-folders have no config.json at the top level: never listed


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "model"


@contextlib.contextmanager
def staging_folder(root: Path | None = None) -> Iterator[Path]:
    """A fresh folder under the runs root's staging area, removed with everything in it unless moved away."""
    base = (Path(root) if root else runs_root()) / STAGING
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=base))
    staging.chmod(0o755)  # mkdtemp's 0700 would make this run unlike the ones Run.create makes
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):  # another import is being written there
            base.rmdir()


def move_into_place(staging: Path, root: Path | None, name: str) -> Run:
    """Rename the finished staging folder to a new run id `<time>-imported-<name>` under the runs root."""
    root = Path(root) if root else runs_root()
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-imported-{slug(name)}"
    for n in range(1000):
        path = root / (stem if n == 0 else f"{stem}-{n}")
        if path.exists():
            continue
        try:
            os.rename(staging, path)
        except OSError:
            continue
        return Run(path)
    raise ModelError(f"Could not create a run folder under {root}.")


def package_versions(packages: Iterable[str]) -> dict[str, str]:
    """The installed version of each package (those not installed left out): an import records what made it."""
    out = {}
    for package in packages:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out
