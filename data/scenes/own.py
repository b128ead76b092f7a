"""What a user's own scene set (`coco:`, `masks:`) shares: the facts it hands the registry, the deterministic split
of one folder of images into train/val/test, and reading an image file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.scenes.types import SceneSplit

SPLIT_SHARES = {"train": 0.8, "val": 0.1, "test": 0.1}
SPLIT_SEED = 34  # fixed: the same file always splits the same way
MIN_TO_SPLIT = 10  # fewer images: every split is all of them
SPLIT_NOTE = (
    "Its images are cut 80/10/10 into train/val/test in a fixed shuffled order (every split is all images when "
    f"there are fewer than {MIN_TO_SPLIT})."
)


@dataclass(frozen=True)
class OwnSceneSet:
    """A user's scene set as read (annotations or class names; images only on `load`)."""

    label: str
    description: str
    classes: tuple[str, ...]
    image_size: int | None
    has_masks: bool
    load: Callable[[str, int | None], SceneSplit]


def split_indices(n: int, split: str) -> list[int]:
    """The images of `split` among n: a fixed shuffle cut 80/10/10 (val and test at least one image each), in file
    order within the split; all n when n < 10."""
    if n < MIN_TO_SPLIT:
        return list(range(n))
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    n_val = max(1, round(n * SPLIT_SHARES["val"]))
    n_test = max(1, round(n * SPLIT_SHARES["test"]))
    n_train = n - n_val - n_test
    cut = {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}
    return sorted(int(i) for i in cut[split])


def square_size(sizes: list[tuple[int, int]]) -> int | None:
    """The side when every (width, height) is the same square, else None."""
    unique = set(sizes)
    if len(unique) == 1:
        w, h = next(iter(unique))
        return w if w == h else None
    return None


def read_rgb(path: Path) -> torch.Tensor:
    """An image file as (3, H, W) float32 in [0, 1]; DatasetError when it cannot be read as an image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            array = np.asarray(im.convert("RGB"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise DatasetError(f"Cannot read {path} as an image: {e}.") from None
    return torch.from_numpy(array.transpose(2, 0, 1).copy()).float() / 255.0


def image_size_of(path: Path) -> tuple[int, int]:
    """(width, height) from the file's header, without decoding it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return int(im.size[0]), int(im.size[1])
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise DatasetError(f"Cannot read {path} as an image: {e}.") from None
