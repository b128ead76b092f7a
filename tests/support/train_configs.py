"""Training configs for tests of the engine's mechanics."""

from __future__ import annotations

from xaidash.models.engine import TrainConfig


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
