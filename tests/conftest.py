"""Shared fixtures: an offline data root built from ../shared/data, and per-test run folders."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    # scripts/test.sh runs one pytest worker per core: each (and every process it starts) computes on one thread,
    # since torch's threads on a core another worker is using wait for each other at every operator.
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)

# Outside a test's own roots (session fixtures built before `_isolated_roots`, a job thread that outlives its test,
# a subprocess started with a copy of the environment) runs land in one folder of this process, removed at the end:
# never in the user's ~/.local/share/xaidash/runs, where 1-epoch test runs used to pile up.
_SESSION_RUNS = tempfile.mkdtemp(prefix="xaidash-test-runs-")
os.environ["XAIDASH_RUNS"] = _SESSION_RUNS


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SESSION_RUNS, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets beside the checkout (read-only)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """A writable data root mirroring ../shared/data: torchvision extracts next to the .gz files,
    so those are linked into fresh raw/ folders; the text archives are linked whole."""
    root = tmp_path_factory.mktemp("data_root")
    for name in ("MNIST", "FashionMNIST"):
        raw = root / name / "raw"
        raw.mkdir(parents=True)
        for gz in (shared_data / name / "raw").glob("*.gz"):
            (raw / gz.name).symlink_to(gz)
    for name in ("SST-2", "smsspamcollection"):
        (root / name).symlink_to(shared_data / name, target_is_directory=True)
    return root


@pytest.fixture(autouse=True)
def _isolated_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own runs root and an empty data root unless it asks for `data_root`."""
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("XAIDASH_DATA", str(tmp_path / "empty_data_root"))
    monkeypatch.setenv("XAIDASH_OFFLINE", "1")  # never wait on a network this machine does not have


@pytest.fixture
def offline_data(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XAIDASH_DATA at the shared-data mirror."""
    monkeypatch.setenv("XAIDASH_DATA", str(data_root))
    return data_root


@pytest.fixture(scope="session")
def trained_shapes_run(tmp_path_factory: pytest.TempPathFactory):
    """One resnet_small trained on shapes by the engine (2 epochs, one-cycle AdamW), shared by every
    test that needs a trained image model: the engine's accuracy test, quality metrics, sanity checks.

    Trained once per test session: under pytest-xdist the first worker that needs it trains it (holding a file
    lock in the session's shared temporary folder) and the others read its result; tests only read the run."""
    from shared_runs import train_once

    from xaidash.models.training.config import TrainConfig

    config = TrainConfig(
        dataset="shapes",
        model="resnet_small",
        epochs=2,
        batch_size=64,
        lr=3e-3,
        optimizer="adamw",
        schedule="onecycle",
        seed=1,
        val_fraction=0.05,
        device="cpu",
    )
    return train_once(tmp_path_factory, "trained_shapes_run", config)


@pytest.fixture
def trained_shapes(trained_shapes_run):
    """A fresh ModelBundle of the shared trained shapes run (tests may change it freely)."""
    from xaidash.models.runs.store import load_bundle

    return load_bundle(trained_shapes_run.run, device="cpu")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long(seconds=N)` (a minute or more alone) go first, longest first, so that under pytest-xdist
    the longest land on different workers and overlap with the many short ones instead of finishing the run
    alone; the order is otherwise kept."""

    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("long")
        return float(mark.kwargs.get("seconds", 60)) if mark else 0.0

    items.sort(key=lambda item: -seconds(item))
