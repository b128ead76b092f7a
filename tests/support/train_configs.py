"""Training configs for tests of the engine's mechanics."""

from __future__ import annotations

from pathlib import Path

from xaidash.models.training.config import TrainConfig


def quick(**kw) -> TrainConfig:
    """The digits MLP on the CPU with every setting given, so tests of the engine's mechanics do not move when a
    recipe changes; any field can be overridden."""
    base = {
        "dataset": "digits",
        "model": "mlp",
        "epochs": 2,
        "batch_size": 64,
        "lr": 3e-3,
        "optimizer": "adam",
        "weight_decay": 0.0,
        "schedule": "cosine",
        "augment": "none",
        "label_smoothing": 0.0,
        "max_train_samples": 0,
        "device": "cpu",
    }
    return TrainConfig(**{**base, **kw})


def tiny_run(root: Path, dataset: str, model: str) -> Path:
    """The folder of a 1-epoch run on 64 samples under runs root `root`, trained offline: predictions that are
    not all one class, for tests of what is done with a run (files, reports, stores), not of its quality."""
    import pytest

    from xaidash.models.training.engine import train

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        result = train(
            TrainConfig(
                dataset=dataset, model=model, epochs=1, batch_size=32, max_train_samples=64, device="cpu", seed=0
            )
        )
    assert result.ok, result.error
    return result.run_dir
