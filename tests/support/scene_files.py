"""Writers of a user's own scene data (a COCO file, a mask folder) from generated scenes, whose ground truth is
exact: what comes back through `coco:` or `masks:` can be compared with what went in. For the data tests and for
anyone who needs a small `coco:` or `masks:` set on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pycocotools import mask as coco_mask

from xaidash.data.scenes.types import SceneSplit


def save_png(image, path: Path) -> None:
    array = (image.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    Image.fromarray(array).save(path)


def coco_dict(split: SceneSplit, *, polygons: bool = False) -> dict[str, Any]:
    """COCO instances of `split` with RLE masks (or, with `polygons`, each object's box as a polygon)."""
    images, annotations = [], []
    for i, (image, target) in enumerate(zip(split.images, split.targets, strict=True)):
        h, w = int(image.shape[1]), int(image.shape[2])
        images.append({"id": 100 + i, "file_name": f"scene_{i}.png", "width": w, "height": h})
        assert target.masks is not None
        for box, label, mask in zip(target.boxes.tolist(), target.labels.tolist(), target.masks, strict=True):
            x0, y0, x1, y1 = box
            if polygons:
                seg: Any = [[x0, y0, x1, y0, x1, y1, x0, y1]]
            else:
                rle = coco_mask.encode(np.asfortranarray(mask.numpy().astype(np.uint8)))
                seg = {"size": rle["size"], "counts": rle["counts"].decode()}
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": 100 + i,
                    "category_id": 10 * label,  # ids 10..40: labels are their order, not the ids
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "area": float(mask.sum()),
                    "iscrowd": 0,
                    "segmentation": seg,
                }
            )
    categories = [{"id": 10 * (k + 1), "name": name} for k, name in enumerate(split.classes)]
    return {"images": images, "annotations": annotations, "categories": categories[::-1]}


def write_coco(split: SceneSplit, folder: Path, *, subfolder: bool = False, **kw: Any) -> Path:
    """`folder/instances.json` and the images beside it (or in `images/`)."""
    image_dir = folder / "images" if subfolder else folder
    image_dir.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(split.images):
        save_png(image, image_dir / f"scene_{i}.png")
    path = folder / "instances.json"
    path.write_text(json.dumps(coco_dict(split, **kw)))
    return path


def write_mask_folder(split: SceneSplit, folder: Path, classes: bool = True) -> Path:
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "masks").mkdir(exist_ok=True)
    for i, image in enumerate(split.images):
        save_png(image, folder / "images" / f"scene_{i}.png")
        semantic = split.semantic(i).numpy().astype(np.uint8)
        Image.fromarray(semantic, mode="L").save(folder / "masks" / f"scene_{i}.png")
    if classes:
        (folder / "classes.txt").write_text("\n".join(split.classes) + "\n")
    return folder


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every file under `folder` with its size: to show that reading wrote nothing."""
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*"))
