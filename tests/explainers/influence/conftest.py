"""Runs trained with known label errors, shared by the influence tests: resnet_small on shapes and the default text
model on cues, each with 5% of the training labels flipped (seeded) and 3 epochs (3 checkpoints). Trained once per
test session under a file lock, like tests/conftest.py's trained_shapes_run; tests only read them (the influence
cache they write under the run is shared, as it is meant to be: computed once, reused by every query)."""

from __future__ import annotations

import pytest

NOISE = 0.05


def _noisy_run(tmp_path_factory: pytest.TempPathFactory, name: str, **config):
    from shared_runs import train_once

    from xaidash.models.training.config import TrainConfig

    return train_once(
        tmp_path_factory, name, TrainConfig(label_noise=NOISE, seed=1, device="cpu", epochs=3, **config)
    ).run


@pytest.fixture(scope="session")
def noisy_shapes(tmp_path_factory: pytest.TempPathFactory):
    """resnet_small on shapes, 3 epochs, 5% flipped labels (about 20 s on one core)."""
    return _noisy_run(
        tmp_path_factory,
        "noisy_shapes_run",
        dataset="shapes",
        model="resnet_small",
        batch_size=64,
        lr=3e-3,
        optimizer="adamw",
        schedule="onecycle",
        val_fraction=0.05,
    )


@pytest.fixture(scope="session")
def noisy_cues(tmp_path_factory: pytest.TempPathFactory):
    """The default text model (text_cnn's recipe) on cues, 3 epochs, 5% flipped labels (about 8 s)."""
    return _noisy_run(tmp_path_factory, "noisy_cues_run", dataset="cues", model="text_cnn")
