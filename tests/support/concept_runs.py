"""For the concept (TCAV) tests: resnet_small trained on shapes_colour once per session under a file lock (like
`trained_shapes_run`), and concept folders of generated images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# TCAV settings small enough for an untrained model in a unit test (one layer, 3 random sets, 8 examples).
FAST = {"layers": ["layers.2"], "random_count": 3, "examples": 8, "inputs": 12}


def write_images(folder: Path, images: np.ndarray) -> Path:
    """(N, 3, H, W) floats in [0, 1] as PNG files in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, im in enumerate(images):
        Image.fromarray((im.transpose(1, 2, 0) * 255).round().astype(np.uint8)).save(folder / f"{i:03d}.png")
    return folder


def red_folder(folder: Path, n: int = 50, seed: int = 5) -> Path:
    """Red squares, triangles and crosses: the colour of the cued class, never the class itself."""
    from xaidash.data.sets import shapes_colour

    return write_images(folder, shapes_colour.generate(n, seed, hue=0.0, classes=(1, 2, 3))[0])


def noise_folder(folder: Path, n: int = 50, seed: int = 0) -> Path:
    """Uniform noise images: a concept unrelated to the labels."""
    return write_images(folder, np.random.default_rng(seed).uniform(0, 1, (n, 3, 32, 32)).astype(np.float32))


def trained_colour_run(tmp_path_factory: pytest.TempPathFactory):
    """resnet_small trained on shapes_colour (2 epochs on 3,000 samples, about 10 s on one core: ~80% test
    accuracy, enough for the colour cue, which it learns first). Trained once per session."""
    from shared_runs import train_once

    from xaidash.models.training.config import TrainConfig

    config = TrainConfig(
        dataset="shapes_colour",
        model="resnet_small",
        epochs=2,
        batch_size=64,
        lr=3e-3,
        optimizer="adamw",
        schedule="onecycle",
        seed=1,
        val_fraction=0.05,
        max_train_samples=3000,
        device="cpu",
    )
    return train_once(tmp_path_factory, "trained_colour_run", config)
