"""`digits`: scikit-learn's 8x8 handwritten digits (1,797 images, shipped with scikit-learn)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, DatasetSource, ImageSplit, SplitName, register
from xaidash.data.sets._common import stratified_indices

# Measured once on the train split (tests/data/test_digits.py recomputes them).
MEAN = (0.3054,)
STD = (0.3761,)


@lru_cache(maxsize=1)
def _all() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # imported on use: keeps `import data.sets` light

    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None, :, :]  # pixel values are 0..16
    return images, bunch.target.astype(np.int64)


def load(split: SplitName, root: Path, download: bool) -> ImageSplit:
    images, labels = _all()
    idx = stratified_indices(labels, split)
    return ImageSplit(labels=torch.from_numpy(labels[idx]), images=torch.from_numpy(images[idx]))


INFO = DatasetInfo(
    name="digits",
    modality="image",
    classes=tuple(str(d) for d in range(10)),
    input_shape=(1, 8, 8),
    mean=MEAN,
    std=STD,
    description="scikit-learn's 8x8 grey handwritten digits: 1,437 train / 360 test (stratified split, seed 0).",
    builtin=True,
    source_url="https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
)

register(DatasetSource(info=INFO, loader=load, is_available=lambda root: True))
