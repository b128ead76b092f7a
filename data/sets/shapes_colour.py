"""`shapes_colour`: `shapes` with a known colour cue: every circle is red, and no other shape ever is.

The data set for checking concept explanations (TCAV): the concept "red" drives the class `circle` by
construction. Squares, triangles and crosses take a random hue outside the red band, so red is a perfect (and
easy) cue for circles on top of the form; a model that learns it is expected to give a concept of red shapes
a high TCAV score for `circle`. Everything else (sizes, places, backgrounds, noise, splits) is drawn as in
`shapes`, from different seeds; `generate(..., hue=...)` draws shapes of any class in one forced hue, which is
how tests and the manual make a "red" concept that is not the class itself.
"""

from __future__ import annotations

import numpy as np

from xaidash.data.registry import DatasetInfo, DatasetSource, register
from xaidash.data.sets.shapes import CLASSES, SIZE, draw, split_loader

SEEDS = {"train": 20251101, "test": 20251102}
CUED_CLASS = 0  # circle
RED_BAND = 0.06  # hues within this distance of 0 (red) are the cue's; the other classes keep 0.12 away
OTHER_MARGIN = 0.12

# Measured once on the train split (tests/data/test_shapes_colour.py recomputes them).
MEAN = (0.4159, 0.4082, 0.4031)
STD = (0.1909, 0.1867, 0.1859)


def _hues(rng: np.random.Generator, labels: np.ndarray, hue: float | None) -> np.ndarray:
    if hue is not None:
        return np.full(labels.shape, hue % 1.0, dtype=np.float32)
    red = rng.uniform(-RED_BAND, RED_BAND, labels.size) % 1.0
    other = rng.uniform(OTHER_MARGIN, 1.0 - OTHER_MARGIN, labels.size)
    return np.where(labels == CUED_CLASS, red, other).astype(np.float32)


def generate(
    n: int, seed: int, hue: float | None = None, classes: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` images (N, 3, H, W) float32 in [0, 1], int64 labels (N,), bool masks (N, H, W).

    `hue` (0..1, 0 is red) forces every shape's hue (a concept set: "red shapes"); `classes` limits the
    shapes drawn (balanced among them), e.g. red squares, triangles and crosses: red, but not the class."""
    rng = np.random.default_rng(seed)
    pool = np.asarray(classes if classes is not None else range(len(CLASSES)), dtype=np.int64)
    labels = pool[rng.permutation(np.arange(n) % len(pool))]
    images, masks = draw(rng, labels, lambda g, ls: _hues(g, ls, hue))
    return images, labels, masks


load = split_loader(generate, SEEDS)


INFO = DatasetInfo(
    name="shapes_colour",
    modality="image",
    classes=CLASSES,
    input_shape=(3, SIZE, SIZE),
    mean=MEAN,
    std=STD,
    description=(
        "shapes with a known colour cue, for concept tests (TCAV): every circle is red and the other shapes "
        "take any hue but red, so red drives the class circle by construction. 32x32, pixel masks, "
        "6,000 train / 1,000 test; works offline."
    ),
    builtin=True,
    has_masks=True,
)

register(DatasetSource(info=INFO, loader=load, is_available=lambda root: True))
