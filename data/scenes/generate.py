"""The generated scene sets: several shapes per image with exact ground truth, the `shapes` of detection.

`scenes`: 96x96 px, one to five objects (circle, square, triangle, cross; the drawing of `data/sets/shapes.py`,
here with any size, place and, for the hard set, rotation), colour independent of the class, on a noisy
low-frequency background. Objects drawn later hide what they cover; an instance mask holds only the visible pixels
and every object keeps at least `keep_visible` of its pixels visible (a placement that would hide more of an earlier
object is tried again elsewhere, and the object is left out when no place fits), so the ground truth never names
an object that cannot be seen. `scenes_hard`: 128x128 px, one to six objects, rotated, placed against each other
more often (more occlusion), over clutter (strokes and elongated blobs that are no object).

Scene i of a split is drawn from its own generator seeded (split seed, i), so a cut (`count`) is the first scenes of
the full split, and every scene is the same on every machine (NumPy's seeded generator, element-wise float32
arithmetic and Python's math module; no matrix products, whose BLAS kernels sum in their own order). Nothing is read
from disk.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.scenes.boxes import boxes_of_masks
from xaidash.data.scenes.types import SceneSplit, SceneTarget

CLASSES = ("circle", "square", "triangle", "cross")
SPLIT_SIZES = {"train": 2000, "val": 200, "test": 200}
SPLITS = tuple(SPLIT_SIZES)


@dataclass(frozen=True)
class SceneStyle:
    """How one generated set draws its scenes."""

    size: int
    objects: tuple[int, int]  # fewest and most objects drawn (fewer remain when no place fits)
    diameter: tuple[float, float]  # px
    keep_visible: float  # the share of its pixels every object keeps visible
    tries: int  # places tried per object
    cluster: float  # chance a new object is placed against an earlier one
    rotate: float  # largest rotation, degrees
    clutter: tuple[int, int]  # fewest and most distractors
    seeds: tuple[int, int, int]  # train, val, test

    def seed(self, split: str) -> int:
        return self.seeds[SPLITS.index(split)]


SCENES = SceneStyle(
    size=96,
    objects=(1, 5),
    diameter=(12.0, 40.0),
    keep_visible=0.6,
    tries=8,
    cluster=0.15,
    rotate=0.0,
    clutter=(0, 0),
    seeds=(34_096_001, 34_096_002, 34_096_003),
)
SCENES_HARD = SceneStyle(
    size=128,
    objects=(1, 6),
    diameter=(12.0, 44.0),
    keep_visible=0.3,
    tries=8,
    cluster=0.6,
    rotate=30.0,
    clutter=(3, 8),
    seeds=(34_128_001, 34_128_002, 34_128_003),
)


@dataclass(frozen=True)
class PackedScene:
    """One scene held compactly, as the registry caches it: the image in 8 bits (the generator rounds to 1/255, so
    a scene saved as PNG reads back exactly), each pixel's object (0 none, k + 1 object k: visible masks never
    overlap), labels and tight boxes. About 6 times smaller than the tensors `unpack` makes."""

    image: np.ndarray  # (3, H, W) uint8
    objects: np.ndarray  # (H, W) uint8
    labels: np.ndarray  # (N,) int64 in 1..4
    boxes: np.ndarray  # (N, 4) float32

    def unpack(self) -> tuple[torch.Tensor, SceneTarget]:
        """The image (3, H, W) float32 in [0, 1] and its ground truth, as new tensors."""
        image = torch.from_numpy(self.image).float().div_(255.0)
        ids = np.arange(1, len(self.labels) + 1, dtype=np.uint8)
        masks = torch.from_numpy(self.objects[None] == ids[:, None, None])
        return image, SceneTarget(torch.from_numpy(self.boxes.copy()), torch.from_numpy(self.labels.copy()), masks)


def draw_split(style: SceneStyle, split: str, count: int | None = None, start: int = 0) -> list[PackedScene]:
    """Scenes `start` to `count` - 1 (default: to the end) of `split` ('train', 'val' or 'test')."""
    if split not in SPLIT_SIZES:
        raise DatasetError(f"Unknown split {split!r}: use train, val or test.")
    total = SPLIT_SIZES[split]
    n = total if count is None else min(int(count), total)
    seed = style.seed(split)
    out: list[PackedScene] = []
    for i in range(start, n):
        image, masks, labels = draw_scene(style, np.random.default_rng((seed, i)))
        objects = np.zeros(image.shape[1:], dtype=np.uint8)
        for k in range(len(labels)):
            objects[masks[k]] = k + 1
        boxes = boxes_of_masks(torch.from_numpy(masks)).numpy()
        out.append(PackedScene(image, objects, labels, boxes))
    return out


def unpack(scenes: list[PackedScene], split: str, name: str) -> SceneSplit:
    """A SceneSplit of new tensors from packed scenes."""
    images: list[torch.Tensor] = []
    targets: list[SceneTarget] = []
    for scene in scenes:
        image, target = scene.unpack()
        images.append(image)
        targets.append(target)
    names = [f"{name} {split} {i}" for i in range(len(scenes))]
    return SceneSplit(split, CLASSES, images, targets, names, True)


def generate(style: SceneStyle, split: str, count: int | None = None, name: str = "scenes") -> SceneSplit:
    """The first `count` scenes (default: all) of `split` ('train', 'val' or 'test') drawn in `style`, not cached
    (`registry.load_scene_set` caches)."""
    return unpack(draw_split(style, split, count), split, name)


def draw_scene(style: SceneStyle, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One scene: image (3, H, W) uint8, visible instance masks (N, H, W) bool in drawing order and labels (N,)
    int64 in 1..4."""
    size = style.size
    canvas = _background(rng, size)  # (3, H, W)
    if style.clutter[1]:
        _draw_clutter(rng, canvas, style)
    masks, labels = _place_objects(rng, style)
    colours = _colours(rng, len(labels))
    for k in range(len(labels)):  # painter's order: later objects over earlier ones
        canvas[:, masks[k]] = colours[k][:, None]
    # Faint noise on the objects, stronger on the background (as in `shapes`).
    covered = masks.any(axis=0) if len(labels) else np.zeros((size, size), dtype=bool)
    sigma = np.where(covered, np.float32(0.02), np.float32(rng.uniform(0.03, 0.08)))
    # Uniform noise of standard deviation sigma from random bytes: four times faster than normal draws, and it
    # looks the same at these amplitudes.
    noise = np.frombuffer(rng.bytes(3 * size * size), dtype=np.int8).reshape(3, size, size).astype(np.float32)
    noise *= sigma * np.float32(math.sqrt(3) / 128)
    canvas += noise
    np.clip(canvas, 0.0, 1.0, out=canvas)
    canvas *= 255.0
    return np.rint(canvas).astype(np.uint8), _visible(masks), labels


def _visible(masks: np.ndarray) -> np.ndarray:
    """Each object's pixels not covered by a later one."""
    out = masks.copy()
    above = np.zeros(masks.shape[1:], dtype=bool)
    for k in range(len(masks) - 1, -1, -1):
        out[k] &= ~above
        above |= masks[k]
    return out


def _place_objects(rng: np.random.Generator, style: SceneStyle) -> tuple[np.ndarray, np.ndarray]:
    """Full masks (N, H, W) bool of the placed objects, in drawing order, and their labels 1..4. Each new object is
    tried at up to `style.tries` places and kept at the first that leaves every earlier object at least
    `keep_visible` of its pixels visible."""
    size = style.size
    wanted = int(rng.integers(style.objects[0], style.objects[1] + 1))
    masks: list[np.ndarray] = []
    labels: list[int] = []
    centres: list[tuple[float, float, float]] = []
    visible = np.zeros((0, size, size), dtype=bool)
    areas: list[int] = []
    for _ in range(wanted):
        label = int(rng.integers(0, len(CLASSES)))
        r = float(rng.uniform(*style.diameter)) / 2
        angle = math.radians(float(rng.uniform(-style.rotate, style.rotate)))
        for _try in range(style.tries):
            cx, cy = _centre(rng, style, r, centres)
            mask = shape_mask(label, cx, cy, r, angle, size)
            if not mask.any():
                continue
            left = (visible & ~mask).reshape(len(areas), size * size).sum(axis=1)
            if all(left[j] >= style.keep_visible * areas[j] for j in range(len(areas))):
                break
        else:
            continue  # no place fits: leave this object out
        masks.append(mask)
        labels.append(label + 1)
        centres.append((cx, cy, r))
        areas.append(int(mask.sum()))
        visible = np.concatenate([visible & ~mask, mask[None]])
    stacked = np.stack(masks) if masks else np.zeros((0, size, size), dtype=bool)
    return stacked, np.asarray(labels, dtype=np.int64)


def _centre(
    rng: np.random.Generator, style: SceneStyle, r: float, placed: list[tuple[float, float, float]]
) -> tuple[float, float]:
    """A centre that keeps the shape (half-size r, rotated: up to 1.2 r) inside the image; with chance
    `style.cluster`, next to an earlier object so the two overlap a little."""
    reach = 1.2 * r + 1.0
    lo, hi = reach, style.size - reach
    if placed and rng.uniform() < style.cluster:
        ox, oy, orad = placed[int(rng.integers(0, len(placed)))]
        theta = rng.uniform(0, 2 * math.pi)
        dist = (orad + r) * rng.uniform(0.55, 0.95)
        return (
            float(np.clip(ox + dist * math.cos(theta), lo, hi)),
            float(np.clip(oy + dist * math.sin(theta), lo, hi)),
        )
    return float(rng.uniform(lo, hi)), float(rng.uniform(lo, hi))


def _window(cx: float, cy: float, reach: float, size: int) -> tuple[slice, slice]:
    """The rows and columns within `reach` px of (cx, cy): shapes are computed there only (far faster than over the
    whole image, and the same values pixel for pixel)."""
    x0, x1 = max(int(cx - reach) - 1, 0), min(int(cx + reach) + 2, size)
    y0, y1 = max(int(cy - reach) - 1, 0), min(int(cy + reach) + 2, size)
    return slice(y0, max(y1, y0)), slice(x0, max(x1, x0))


def shape_mask(label: int, cx: float, cy: float, r: float, angle: float, size: int) -> np.ndarray:
    """(size, size) bool: the filled shape `label` (0 circle, 1 square, 2 triangle, 3 cross) centred at (cx, cy)
    with half-size r, turned by `angle` radians; the formulas of `data/sets/shapes.py` at pixel centres."""
    rows, cols = _window(cx, cy, 1.5 * r, size)
    coords = np.arange(size, dtype=np.float32) + 0.5
    dx0 = coords[None, cols] - np.float32(cx)
    dy0 = coords[rows, None] - np.float32(cy)
    c, s = np.float32(math.cos(angle)), np.float32(math.sin(angle))
    dx = c * dx0 + s * dy0  # the pixel in the shape's own (unrotated) frame
    dy = -s * dx0 + c * dy0
    if label == 0:
        inside = dx**2 + dy**2 <= r * r
    elif label == 1:
        inside = np.maximum(np.abs(dx), np.abs(dy)) <= 0.82 * r
    elif label == 2:
        top, bottom = -r, 0.8 * r
        rise = np.clip((dy - top) / (bottom - top), 0.0, 1.0)
        inside = (dy >= top) & (dy <= bottom) & (np.abs(dx) <= rise * r)
    else:
        arm = max(0.3 * r, 1.2)
        inside = ((np.abs(dx) <= arm) & (np.abs(dy) <= r)) | ((np.abs(dy) <= arm) & (np.abs(dx) <= r))
    out = np.zeros((size, size), dtype=bool)
    out[rows, cols] = inside
    return out


def _colours(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 3) saturated colours, independent of the class; hues a golden-ratio step apart so overlapping
    neighbours rarely share a colour."""
    start = rng.uniform()
    out = np.empty((n, 3), dtype=np.float32)
    for k in range(n):
        hue = (start + 0.618034 * k + rng.uniform(-0.06, 0.06)) % 1.0
        out[k] = colorsys.hsv_to_rgb(hue, rng.uniform(0.65, 1.0), rng.uniform(0.7, 1.0))
    return out


def _upsample(grid: np.ndarray, size: int) -> np.ndarray:
    """Bilinear up-sampling of a small (g, g, 3) grid to (3, size, size): a smooth random field. Element-wise
    arithmetic, not a matrix product, so every machine computes the same bits (BLAS kernels sum in their own
    order)."""
    g = grid.shape[0]
    pos = (np.arange(size, dtype=np.float32) + 0.5) / size * (g - 1)
    lo = np.minimum(pos.astype(np.int64), g - 2)
    frac = (pos - lo).astype(np.float32)
    rows = grid[lo] * (1 - frac)[:, None, None] + grid[lo + 1] * frac[:, None, None]  # (size, g, 3)
    both = rows[:, lo] * (1 - frac)[None, :, None] + rows[:, lo + 1] * frac[None, :, None]  # (size, size, 3)
    return both.transpose(2, 0, 1)


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """(3, H, W) float32: a muted base colour, a colour gradient and low-frequency colour blotches."""
    base = rng.uniform(0.25, 0.6, size=3).astype(np.float32)
    angle = rng.uniform(0, 2 * math.pi)
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5
    ramp = math.cos(angle) * coords[None, :] + math.sin(angle) * coords[:, None]
    ramp_colour = rng.uniform(-0.4, 0.4, size=3).astype(np.float32)
    g = int(rng.integers(3, 7))
    blotches = _upsample(rng.uniform(-0.12, 0.12, size=(g, g, 3)).astype(np.float32), size)
    canvas = ramp[None] * ramp_colour[:, None, None]
    canvas += base[:, None, None]
    canvas += blotches
    return canvas


def _draw_clutter(rng: np.random.Generator, canvas: np.ndarray, style: SceneStyle) -> None:
    """Distractors under the objects: thin strokes and elongated blobs (at least 2.5 times longer than wide, so no
    distractor reads as a circle or a square), in colours like the objects'."""
    size = style.size
    coords = np.arange(size, dtype=np.float32) + 0.5
    n = int(rng.integers(style.clutter[0], style.clutter[1] + 1))
    colours = _colours(rng, n)
    for k in range(n):
        cx, cy = (float(v) for v in rng.uniform(0, size, size=2))
        theta = rng.uniform(0, math.pi)
        c, s = math.cos(theta), math.sin(theta)
        stroke = rng.uniform() < 0.6
        if stroke:  # a thin line segment
            half, width = rng.uniform(8, 30), rng.uniform(0.5, 1.3)
            reach = half + width
        else:  # an elongated blob
            a = rng.uniform(6, 14)
            b = a / rng.uniform(2.5, 4.0)
            reach = a
        rows, cols = _window(cx, cy, reach, size)
        dx0 = coords[None, cols] - cx
        dy0 = coords[rows, None] - cy
        along = c * dx0 + s * dy0
        across = -s * dx0 + c * dy0
        if stroke:
            mask = (np.abs(along) <= half) & (np.abs(across) <= width)
        else:
            mask = (along / a) ** 2 + (across / b) ** 2 <= 1.0
        canvas[:, rows, cols][:, mask] = colours[k][:, None]
