"""`masks:<folder>`: a folder of images with a PNG mask each, for segmentation (and detection through its boxes).

    folder/images/<name>.png|.jpg|.jpeg   the pictures
    folder/masks/<name>.png               each pixel's class index, 0 the background (grey or palette PNG)
    folder/classes.txt                    optional: one class name per line for indices 1..C (a first line
                                          'background' names index 0 and is skipped)

Objects are the connected parts of each class's pixels (scipy.ndimage.label, 8-connected: a diagonal step joins),
each with its tight box. The folder is checked when the set is named (every mask is read once: sizes and class
indices), each problem one sentence (DatasetError); nothing is written. `own.split_indices` cuts the folder into
train/val/test."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.scenes.boxes import boxes_of_masks
from xaidash.data.scenes.own import SPLIT_NOTE, OwnSceneSet, image_size_of, read_rgb, split_indices, square_size
from xaidash.data.scenes.types import SceneSplit, SceneTarget

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
MASK_MODES = ("1", "L", "P", "I", "I;16")  # one value per pixel
IGNORE = 255  # VOC-style masks mark object borders 255: without classes.txt that would read as 255 classes
LAYOUT = "images in images/ (PNG or JPEG) and for each a PNG of class indices with the same name in masks/"


@dataclass(frozen=True)
class MaskFolder:
    folder: Path
    classes: tuple[str, ...]
    images: tuple[Path, ...]
    masks: tuple[Path, ...]
    sizes: tuple[tuple[int, int], ...]  # (width, height) per image


def mask_scene_set(argument: str) -> OwnSceneSet:
    """The facts of `masks:<argument>` (every mask is read and checked; the images' headers only)."""
    found = read_folder(Path(argument).expanduser())
    n = len(found.images)
    description = (
        f"Images with class-index masks from {found.folder}: {n:,} images, {len(found.classes)} classes; objects "
        f"are the 8-connected parts of each class's pixels. {SPLIT_NOTE}"
    )

    def load(split: str, count: int | None) -> SceneSplit:
        return load_split(found, split, count)

    return OwnSceneSet(found.folder.name, description, found.classes, square_size(list(found.sizes)), True, load)


def read_folder(folder: Path) -> MaskFolder:
    """The checked folder (cached until a file in it changes)."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise DatasetError(f"No folder at {folder}: a masks: set is a folder with {LAYOUT}.")
    listing: list[tuple[str, int]] = []
    for sub in (folder, folder / "images", folder / "masks"):
        if sub.is_dir():
            listing += [(str(Path(sub.name) / e.name), _mtime(e)) for e in os.scandir(sub)]
    return _read_folder(folder, tuple(sorted(listing)))


def _mtime(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat().st_mtime_ns
    except OSError:  # a broken link: the image check names it
        return 0


@lru_cache(maxsize=8)
def _read_folder(folder: Path, listing: tuple[tuple[str, int], ...]) -> MaskFolder:
    image_dir = folder / "images"
    found = (p for p in image_dir.glob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    images = sorted(found, key=_natural)
    if not images:
        raise DatasetError(f"{folder} has no images: put {LAYOUT}.")
    stems: dict[str, Path] = {}
    for p in images:
        if p.stem in stems:
            raise DatasetError(f"Two images in {image_dir} are named {p.stem!r} ({stems[p.stem].name}, {p.name}).")
        stems[p.stem] = p
    masks = [folder / "masks" / f"{p.stem}.png" for p in images]
    for image, mask in zip(images, masks, strict=True):
        if not mask.is_file():
            raise DatasetError(f"Image {image.name} has no mask: expected {mask}.")
    names = _class_names(folder)
    sizes, top = [], 0
    for image, mask in zip(images, masks, strict=True):
        size = image_size_of(image)
        values = read_mask(mask)
        if (values.shape[1], values.shape[0]) != size:
            raise DatasetError(
                f"Mask {mask.name} is {values.shape[1]}x{values.shape[0]} px but its image {image.name} is "
                f"{size[0]}x{size[1]}."
            )
        most = int(values.max())
        if names is None and most == IGNORE:
            raise DatasetError(
                f"Mask {mask.name} holds index {IGNORE} (VOC's 'ignore' border): paint those pixels 0, or name "
                f"{IGNORE} classes in classes.txt."
            )
        if names is not None and most > len(names):
            raise DatasetError(
                f"Mask {mask.name} holds class index {most}, but classes.txt names only {len(names)} classes "
                f"(1..{len(names)}; 0 is the background)."
            )
        sizes.append(size)
        top = max(top, most)
    if names is None:
        if top == 0:
            raise DatasetError(f"Every mask in {folder / 'masks'} is all background (0): no class to learn.")
        names = tuple(f"class {k}" for k in range(1, top + 1))
    return MaskFolder(folder, names, tuple(images), tuple(masks), tuple(sizes))


def _natural(path: Path) -> list[Any]:
    """Sort key that puts scene_2 before scene_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _class_names(folder: Path) -> tuple[str, ...] | None:
    """classes.txt's names for 1..C, None without the file."""
    path = folder / "classes.txt"
    if not path.is_file():
        return None
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"Cannot read {path} as text: {e}.") from None
    while lines and not lines[-1]:
        lines.pop()
    if lines and lines[0].lower() in ("background", "_background_", "__background__"):
        lines = lines[1:]
    if not lines:
        raise DatasetError(f"{path} names no class: write one class name per line, for indices 1, 2, ...")
    if "" in lines:
        raise DatasetError(f"{path} has an empty line {lines.index('') + 1}: one class name per line, none blank.")
    if len(set(lines)) < len(lines):
        twice = next(name for name in lines if lines.count(name) > 1)
        raise DatasetError(f"{path} names the class {twice!r} twice.")
    return tuple(lines)


def read_mask(path: Path) -> np.ndarray:
    """(H, W) int64 class indices of a mask PNG; DatasetError for a colour image or an unreadable file."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            if im.mode not in MASK_MODES:
                raise DatasetError(
                    f"Mask {path.name} is a {im.mode} image: a mask holds one class index per pixel "
                    "(a grey or palette PNG)."
                )
            return np.asarray(im, dtype=np.int64)
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise DatasetError(f"Cannot read mask {path} as an image: {e}.") from None


def instances(semantic: np.ndarray, num_classes: int) -> SceneTarget:
    """The objects of a class-index mask: each class's 8-connected parts, by class then in reading order."""
    from scipy import ndimage

    masks: list[np.ndarray] = []
    labels: list[int] = []
    for c in range(1, num_classes + 1):
        parts, n = ndimage.label(semantic == c, structure=np.ones((3, 3), dtype=bool))
        for k in range(1, n + 1):
            masks.append(parts == k)
            labels.append(c)
    h, w = semantic.shape
    stacked = torch.from_numpy(np.stack(masks)) if masks else torch.zeros(0, h, w, dtype=torch.bool)
    return SceneTarget(boxes_of_masks(stacked), torch.tensor(labels, dtype=torch.int64), stacked)


def load_split(found: MaskFolder, split: str, count: int | None) -> SceneSplit:
    """The images of `split` (their first `count`) with their objects."""
    chosen = split_indices(len(found.images), split)[:count]
    images = [read_rgb(found.images[i]) for i in chosen]
    targets = [instances(read_mask(found.masks[i]), len(found.classes)) for i in chosen]
    names = [found.images[i].name for i in chosen]
    return SceneSplit(split, found.classes, images, targets, names, True)
