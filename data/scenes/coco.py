"""`coco:<annotations.json>`: a COCO-format instances file and its images, as a scene set.

Images are found by their `file_name` beside the file or in its `images/` folder. Categories become labels 1..C in
the order of their ids; boxes [x, y, w, h] become x0, y0, x1, y1; crowd annotations (`iscrowd` 1) are left out, as
torchvision's detection references do. Masks are rasterised by pycocotools for polygons and RLE alike: it is COCO's
own rasteriser, so a polygon covers the pixels COCO's box and evaluation assume (a polygon from 2 to 8 fills pixels
2..7). The whole file is checked when the set is named; every problem is one sentence (DatasetError) naming the
file and the annotation; nothing is written anywhere. A file is one collection: `own.split_indices` cuts it into
train/val/test."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.scenes.own import SPLIT_NOTE, OwnSceneSet, read_rgb, split_indices, square_size
from xaidash.data.scenes.types import SceneSplit, SceneTarget

EDGE_TOLERANCE = 1.0  # px a box may pass the image's edge (rounding in exported files); it is clipped to the image
SHAPE = "a COCO instances file is a JSON object with 'images', 'annotations' and 'categories'"


@dataclass(frozen=True)
class CocoImage:
    id: int
    file: Path
    width: int
    height: int


@dataclass(frozen=True)
class CocoObject:
    label: int
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 px
    segmentation: Any  # polygons (list of lists) or RLE (dict); None without one
    who: str = "an annotation"  # how messages name it: "instances.json: annotation 17"


@dataclass(frozen=True)
class CocoFile:
    path: Path
    classes: tuple[str, ...]
    images: tuple[CocoImage, ...]
    objects: tuple[tuple[CocoObject, ...], ...]  # per image, in file order
    has_masks: bool


def coco_scene_set(argument: str) -> OwnSceneSet:
    """The facts of `coco:<argument>` (the file is read and checked, the images are not decoded)."""
    coco = read_coco(Path(argument).expanduser())
    n = len(coco.images)
    masks = "instance masks" if coco.has_masks else "boxes only (not every annotation has a segmentation)"
    description = (
        f"COCO annotations {coco.path.name}: {n:,} images, {sum(map(len, coco.objects)):,} objects of "
        f"{len(coco.classes)} categories, {masks}. {SPLIT_NOTE}"
    )

    def load(split: str, count: int | None) -> SceneSplit:
        return load_split(coco, split, count)

    sizes = [(im.width, im.height) for im in coco.images]
    return OwnSceneSet(coco.path.name, description, coco.classes, square_size(sizes), coco.has_masks, load)


def read_coco(path: Path) -> CocoFile:
    """The checked contents of a COCO instances file (cached until the file changes)."""
    path = path.resolve()
    if not path.exists():
        raise DatasetError(f"No COCO annotations file at {path}.")
    if path.is_dir():
        raise DatasetError(f"{path} is a folder: name the COCO annotations .json file in it.")
    stat = path.stat()
    return _read_coco(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=2)  # a large COCO file parses to hundreds of MB: keep few
def _read_coco(path: Path, mtime_ns: int, size: int) -> CocoFile:
    data = _load_json(path)
    classes, labels = _categories(data, path)
    images, index = _images(data, path)
    if "annotations" not in data:
        raise DatasetError(f"{path.name} has no 'annotations' key: {SHAPE}.")
    annotations = data["annotations"]
    if not isinstance(annotations, list):
        raise DatasetError(f"{path.name}: 'annotations' must be a list of annotation objects.")
    objects: list[list[CocoObject]] = [[] for _ in images]
    for k, ann in enumerate(annotations):
        found = _annotation(ann, k, path, labels, images, index)
        if found is not None:
            objects[found[0]].append(found[1])
    flat = [o for per_image in objects for o in per_image]
    has_masks = bool(flat) and all(o.segmentation is not None for o in flat)
    return CocoFile(path, classes, tuple(images), tuple(tuple(o) for o in objects), has_masks)


def _load_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError(f"{path.name} is not a text file: {SHAPE}.") from None
    except OSError as e:
        raise DatasetError(f"Cannot read {path}: {e.strerror or e}.") from None
    if not text.strip():
        raise DatasetError(f"{path.name} is empty: {SHAPE}.")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path.name} is not JSON: {e.msg} at line {e.lineno}, column {e.colno}.") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path.name} holds a JSON {type(data).__name__}, not an object: {SHAPE}.")
    return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _categories(data: dict[str, Any], path: Path) -> tuple[tuple[str, ...], dict[int, int]]:
    """Class names and each category id's label (1..C, in the order of the ids)."""
    cats = data.get("categories")
    if not isinstance(cats, list) or not cats:
        raise DatasetError(f"{path.name} has no categories: {SHAPE}, each category with an id and a name.")
    named: dict[int, str] = {}
    for k, cat in enumerate(cats):
        if not isinstance(cat, dict) or not _is_int(cat.get("id")) or not isinstance(cat.get("name"), str):
            raise DatasetError(f"{path.name}: category #{k + 1} needs an integer 'id' and a text 'name'.")
        if cat["id"] in named:
            raise DatasetError(f"{path.name}: category id {cat['id']} appears twice.")
        named[cat["id"]] = cat["name"]
    ids = sorted(named)
    return tuple(named[i] for i in ids), {cat_id: k + 1 for k, cat_id in enumerate(ids)}


def _images(data: dict[str, Any], path: Path) -> tuple[list[CocoImage], dict[int, int]]:
    """The images (files found beside the annotations or in images/) and each image id's position."""
    entries = data.get("images")
    if not isinstance(entries, list) or not entries:
        raise DatasetError(f"{path.name} has no images: {SHAPE}.")
    folder = path.parent
    images: list[CocoImage] = []
    index: dict[int, int] = {}
    for k, entry in enumerate(entries):
        ok = isinstance(entry, dict) and _is_int(entry.get("id")) and isinstance(entry.get("file_name"), str)
        if not ok:
            raise DatasetError(f"{path.name}: image #{k + 1} needs an integer 'id' and a 'file_name'.")
        if entry["id"] in index:
            raise DatasetError(f"{path.name}: image id {entry['id']} appears twice.")
        name = entry["file_name"]
        file = next((p for p in (folder / name, folder / "images" / name) if p.is_file()), None)
        if file is None:
            raise DatasetError(
                f"{path.name}: image file {name!r} (image id {entry['id']}) is neither in {folder} nor in "
                f"{folder / 'images'}."
            )
        width, height = entry.get("width"), entry.get("height")
        if not (_is_int(width) and _is_int(height) and width > 0 and height > 0):
            raise DatasetError(f"{path.name}: image {name!r} needs a positive integer 'width' and 'height'.")
        index[entry["id"]] = len(images)
        images.append(CocoImage(entry["id"], file, width, height))
    return images, index


def _annotation(
    ann: Any, k: int, path: Path, labels: dict[int, int], images: list[CocoImage], index: dict[int, int]
) -> tuple[int, CocoObject] | None:
    """(image position, object) of one annotation; None for a crowd annotation."""
    who = f"{path.name}: annotation {ann.get('id', f'#{k + 1}') if isinstance(ann, dict) else f'#{k + 1}'}"
    if not isinstance(ann, dict):
        raise DatasetError(f"{who} is not an object.")
    if ann.get("image_id") not in index:
        raise DatasetError(f"{who} names image id {ann.get('image_id')!r}, which is not among the images.")
    if ann.get("category_id") not in labels:
        ids = sorted(labels)
        known = ", ".join(map(str, ids)) if len(ids) <= 10 else f"{len(ids)} ids from {ids[0]} to {ids[-1]}"
        raise DatasetError(f"{who} has category id {ann.get('category_id')!r}, not one of the categories ({known}).")
    if ann.get("iscrowd", 0):
        return None
    image = images[index[ann["image_id"]]]
    box = _box(ann.get("bbox"), image, who)
    segmentation = ann.get("segmentation")
    if segmentation is not None and not (isinstance(segmentation, list) and not segmentation):
        _check_segmentation(segmentation, image, who)
    else:
        segmentation = None
    return index[ann["image_id"]], CocoObject(labels[ann["category_id"]], box, segmentation, who)


def _box(bbox: Any, image: CocoImage, who: str) -> tuple[float, float, float, float]:
    """[x, y, w, h] as x0, y0, x1, y1, checked against the image (clipped within EDGE_TOLERANCE)."""
    ok = isinstance(bbox, list) and len(bbox) == 4
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in bbox)
    if not ok:
        raise DatasetError(f"{who} needs a 'bbox' of four numbers [x, y, width, height], got {bbox!r}.")
    x, y, w, h = (float(v) for v in bbox)
    if w <= 0 or h <= 0:
        raise DatasetError(f"{who} has a box of zero or negative size: {bbox}.")
    t = EDGE_TOLERANCE
    if x < -t or y < -t or x + w > image.width + t or y + h > image.height + t:
        raise DatasetError(
            f"{who} has a box {bbox} outside its image {image.file.name} ({image.width}x{image.height} px)."
        )
    return max(x, 0.0), max(y, 0.0), min(x + w, float(image.width)), min(y + h, float(image.height))


def _check_segmentation(seg: Any, image: CocoImage, who: str) -> None:
    if isinstance(seg, list):
        for poly in seg:
            ok = isinstance(poly, list) and len(poly) >= 6 and len(poly) % 2 == 0
            if not ok or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in poly):
                raise DatasetError(f"{who} has a polygon that is not a list of at least three x, y pairs.")
        return
    if not isinstance(seg, dict) or "counts" not in seg or "size" not in seg:
        raise DatasetError(f"{who} has a 'segmentation' that is neither polygons nor RLE (counts and size).")
    if not isinstance(seg["size"], list) or seg["size"] != [image.height, image.width]:
        raise DatasetError(
            f"{who} has an RLE mask of size {seg['size']} for an image of height {image.height}, width {image.width}."
        )
    counts = seg["counts"]
    if isinstance(counts, list) and not all(_is_int(c) and c >= 0 for c in counts):
        raise DatasetError(f"{who} has RLE counts that are not whole numbers of pixels.")
    if isinstance(counts, list) and sum(counts) != image.height * image.width:
        raise DatasetError(f"{who} has RLE counts that add up to {sum(counts)}, not the image's pixels.")


def rasterise(seg: Any, height: int, width: int, who: str = "A segmentation") -> np.ndarray:
    """(height, width) bool mask of a checked COCO segmentation (polygons or RLE), through pycocotools."""
    from pycocotools import mask as coco_mask  # type: ignore[import-untyped]  # no type information

    try:
        if isinstance(seg, list) or isinstance(seg.get("counts"), list):
            rles = coco_mask.frPyObjects(seg, height, width)
            rle = coco_mask.merge(rles) if isinstance(rles, list) else rles
        else:
            counts = seg["counts"]
            rle = {"size": [height, width], "counts": counts.encode() if isinstance(counts, str) else counts}
        with warnings.catch_warnings():  # pycocotools' own NumPy 2 deprecation notice, not the user's concern
            warnings.simplefilter("ignore", DeprecationWarning)
            mask = np.asarray(coco_mask.decode(rle), dtype=bool)
    except (TypeError, ValueError, AttributeError) as e:
        raise DatasetError(f"{who}: its segmentation cannot be decoded ({e}).") from None
    if mask.shape != (height, width):
        raise DatasetError(f"{who}: its segmentation decodes to {mask.shape}, not the image's ({height}, {width}).")
    return mask


def load_split(coco: CocoFile, split: str, count: int | None) -> SceneSplit:
    """The images of `split` (their first `count`), decoded, with their boxes and masks."""
    chosen = split_indices(len(coco.images), split)[:count]
    images: list[torch.Tensor] = []
    targets: list[SceneTarget] = []
    for i in chosen:
        image, objects = coco.images[i], coco.objects[i]
        pixels = read_rgb(image.file)
        if tuple(pixels.shape[1:]) != (image.height, image.width):
            raise DatasetError(
                f"{coco.path.name}: image {image.file.name} is {pixels.shape[2]}x{pixels.shape[1]} px but the "
                f"annotations say {image.width}x{image.height}."
            )
        images.append(pixels)
        targets.append(_target(objects, image, coco.has_masks))
    names = [coco.images[i].file.name for i in chosen]
    return SceneSplit(split, coco.classes, images, targets, names, coco.has_masks)


def _target(objects: tuple[CocoObject, ...], image: CocoImage, has_masks: bool) -> SceneTarget:
    boxes = torch.tensor([o.box for o in objects], dtype=torch.float32).reshape(-1, 4)
    labels = torch.tensor([o.label for o in objects], dtype=torch.int64)
    if not has_masks:
        return SceneTarget(boxes, labels, None)
    masks = np.zeros((len(objects), image.height, image.width), dtype=bool)
    for k, o in enumerate(objects):
        masks[k] = rasterise(o.segmentation, image.height, image.width, o.who)
    return SceneTarget(boxes, labels, torch.from_numpy(masks))
