"""`shapes`: generated colour images of four shapes with per-pixel ground truth.

The offline default data set and the reference for judging explanations: every image holds
one filled shape (circle, square, triangle or cross) whose pixels are known exactly (`masks`).
Shape colours are drawn independently of the class, so only the form tells the classes apart.
Everything is drawn with vectorised numpy from fixed seeds; nothing is read from disk.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, DatasetSource, ImageSplit, Loader, SplitName, register

CLASSES = ("circle", "square", "triangle", "cross")
SIZE = 32
SIZES = {"train": 6000, "test": 1000}
SEEDS = {"train": 20240601, "test": 20240602}
MIN_DIAMETER, MAX_DIAMETER = 9.0, 16.0

# Measured once on the train split (see tests/data/test_shapes.py, which recomputes them).
MEAN = (0.413, 0.4112, 0.4096)
STD = (0.188, 0.1881, 0.1884)


def _shape_masks(labels: np.ndarray, cx: np.ndarray, cy: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Boolean masks (N, H, W) of each filled shape, centred at (cx, cy) with half-size r."""
    coords = np.arange(SIZE, dtype=np.float32) + 0.5  # pixel centres
    dx = coords[None, None, :] - cx[:, None, None]
    dy = coords[None, :, None] - cy[:, None, None]
    r = r[:, None, None]
    circle = dx**2 + dy**2 <= r**2
    square = np.maximum(np.abs(dx), np.abs(dy)) <= 0.82 * r  # same area as the circle, roughly
    # Upward triangle: apex at the top, base at the bottom, width growing linearly downwards.
    top, bottom = -r, 0.8 * r
    rise = np.clip((dy - top) / (bottom - top), 0.0, 1.0)
    triangle = (dy >= top) & (dy <= bottom) & (np.abs(dx) <= rise * r)
    arm = np.maximum(0.3 * r, 1.2)  # arms at least ~2.4 px thick so small crosses stay crosses
    cross = ((np.abs(dx) <= arm) & (np.abs(dy) <= r)) | ((np.abs(dy) <= arm) & (np.abs(dx) <= r))
    stacked = np.stack([circle, square, triangle, cross])  # (4, N, H, W)
    return np.take_along_axis(stacked, labels[None, :, None, None], axis=0)[0]


def _backgrounds(rng: np.random.Generator, n: int) -> np.ndarray:
    """Muted base colour + low-frequency colour gradient, (N, H, W, 3) (noise is added later)."""
    base = rng.uniform(0.2, 0.6, size=(n, 1, 1, 3)).astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi, size=n).astype(np.float32)
    ramp_colour = rng.uniform(-0.5, 0.5, size=(n, 1, 1, 3)).astype(np.float32)
    coords = (np.arange(SIZE, dtype=np.float32) + 0.5) / SIZE - 0.5
    ramp = np.cos(angle)[:, None, None] * coords[None, None, :] + np.sin(angle)[:, None, None] * coords[None, :, None]
    return base + ramp[..., None] * ramp_colour


def generate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` images (N, 3, H, W) float32 in [0, 1], int64 labels (N,), bool masks (N, H, W)."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % len(CLASSES)).astype(np.int64)  # balanced
    images, masks = draw(rng, labels)
    return images, labels, masks


Hues = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def draw(rng: np.random.Generator, labels: np.ndarray, hues: Hues | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, H, W) float32 in [0, 1] and masks (N, H, W) of the shapes `labels` name, drawn from `rng`:
    a random size and place, a saturated colour whose hue is `hues(rng, labels)` (default: uniform, independent
    of the class; `shapes_colour` ties it to a class), on a noisy background."""
    from skimage.color import hsv2rgb  # imported on use: keeps `import data.sets` light

    n = labels.size
    r = rng.uniform(MIN_DIAMETER / 2, MAX_DIAMETER / 2, size=n).astype(np.float32)
    cx = rng.uniform(r + 0.5, SIZE - r - 0.5).astype(np.float32)
    cy = rng.uniform(r + 0.5, SIZE - r - 0.5).astype(np.float32)
    masks = _shape_masks(labels, cx, cy, r)

    hue = hues(rng, labels) if hues is not None else rng.uniform(0, 1, n)
    hsv = np.stack([hue, rng.uniform(0.75, 1.0, n), rng.uniform(0.8, 1.0, n)], axis=-1).astype(np.float32)
    colours = hsv2rgb(hsv[:, None, :])[:, 0, :].astype(np.float32)

    # One draw of per-pixel colour noise: strong on the background, faint on the shape.
    noise = rng.standard_normal(size=(n, SIZE, SIZE, 3), dtype=np.float32)
    sigma = np.where(masks, np.float32(0.02), rng.uniform(0.03, 0.1, size=(n, 1, 1)).astype(np.float32))
    noise *= sigma[..., None]
    images = np.where(masks[..., None], colours[:, None, None, :], _backgrounds(rng, n))
    images += noise
    np.clip(images, 0.0, 1.0, out=images)
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32), masks


def split_loader(
    make: Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]], seeds: dict[str, int]
) -> Loader:
    """A data set loader for generated splits: `make(SIZES[split], seeds[split])`, generated once per split and
    handed out as copies, so a caller editing its tensors in place cannot change the cached data."""

    @lru_cache(maxsize=2)
    def cached(split: SplitName) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return make(SIZES[split], seeds[split])

    def load(split: SplitName, root: Path, download: bool) -> ImageSplit:
        images, labels, masks = cached(split)
        return ImageSplit(
            labels=torch.from_numpy(labels.copy()),
            images=torch.from_numpy(images.copy()),
            masks=torch.from_numpy(masks.copy()),
        )

    return load


load = split_loader(generate, SEEDS)


INFO = DatasetInfo(
    name="shapes",
    modality="image",
    classes=CLASSES,
    input_shape=(3, SIZE, SIZE),
    mean=MEAN,
    std=STD,
    description=(
        "Generated 32x32 colour images of a circle, square, triangle or cross (9-16 px) in a random "
        "colour at a random place on a noisy background, with the exact pixels of each shape as "
        "ground truth. 6,000 train / 1,000 test; works offline."
    ),
    builtin=True,
    has_masks=True,
)

register(DatasetSource(info=INFO, loader=load, is_available=lambda root: True))
