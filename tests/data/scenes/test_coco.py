"""`coco:<annotations.json>`: a COCO file written from generated scenes comes back exactly (boxes, labels, RLE and
polygon masks), splits deterministically, and every broken file is refused in one sentence without writing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from scene_files import coco_dict, listing, write_coco

from xaidash.data.errors import DatasetError
from xaidash.data.scenes import coco, own
from xaidash.data.scenes.registry import load_scene_set, scene_set


def _all(path: Path, split: str = "train"):
    """Every image of the file, in file order (12 images: the 80/10/10 cut, so gather the three splits)."""
    parts = [load_scene_set(f"coco:{path}", s) for s in ("train", "val", "test")]
    order = [own.split_indices(12, s) for s in ("train", "val", "test")]
    by_index = {}
    for part, indices in zip(parts, order, strict=True):
        for k, i in enumerate(indices):
            by_index[i] = (part.images[k], part.targets[k], part.names[k])
    return [by_index[i] for i in range(12)]


def test_round_trip_with_rle_masks(source, tmp_path):
    path = write_coco(source, tmp_path)
    spec = scene_set(f"coco:{path}")
    assert spec.classes == source.classes  # category ids 40, 30, 20, 10 listed backwards: labels by id order
    assert spec.image_size == 96 and spec.has_masks and not spec.generated
    assert "80/10/10" in spec.description and spec.id == f"coco:{path}"
    for i, (image, target, name) in enumerate(_all(path)):
        truth = source.targets[i]
        assert name == f"scene_{i}.png"
        assert torch.allclose(image, source.images[i], atol=1 / 255)
        assert torch.equal(target.boxes, truth.boxes)
        assert torch.equal(target.labels, truth.labels)
        assert target.masks is not None and torch.equal(target.masks, truth.masks)


def test_polygons_fill_the_pixels_of_their_box(source, tmp_path):
    """A polygon from x0 to x1 covers pixels x0..x1-1, as COCO's boxes do (pycocotools' rasteriser)."""
    path = write_coco(source, tmp_path, subfolder=True, polygons=True)
    for i, (_, target, _) in enumerate(_all(path)):
        assert target.masks is not None
        for box, mask in zip(source.targets[i].boxes.int().tolist(), target.masks, strict=True):
            x0, y0, x1, y1 = box
            expected = torch.zeros_like(mask)
            expected[y0:y1, x0:x1] = True
            assert torch.equal(mask, expected)


def test_splits(source, tmp_path):
    path = write_coco(source, tmp_path)
    sizes = {s: len(load_scene_set(f"coco:{path}", s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 10, "val": 1, "test": 1}
    assert len(load_scene_set(f"coco:{path}", "train", count=3)) == 3
    assert own.split_indices(100, "val") == own.split_indices(100, "val")
    cut = [set(own.split_indices(100, s)) for s in ("train", "val", "test")]
    assert [len(c) for c in cut] == [80, 10, 10] and set.union(*cut) == set(range(100))
    assert own.split_indices(9, "test") == list(range(9))  # under 10: every split is everything


def test_boxes_only_crowd_and_empty_images(source, tmp_path):
    data = coco_dict(source.subset([0, 1, 2]))
    for ann in data["annotations"]:
        del ann["segmentation"]
    data["annotations"][0]["iscrowd"] = 1
    data["images"].append({"id": 7, "file_name": "scene_0.png", "width": 96, "height": 96})
    write_coco(source.subset([0, 1, 2]), tmp_path)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    spec = scene_set(f"coco:{path}")
    assert not spec.has_masks and "boxes only" in spec.description
    split = load_scene_set(f"coco:{path}", "test")
    assert len(split) == 4 and not split.has_masks
    assert all(t.masks is None for t in split.targets)
    assert len(split.targets[0]) == len(source.targets[0]) - 1  # the crowd annotation is left out
    assert len(split.targets[3]) == 0 and split.targets[3].boxes.shape == (0, 4)


def _broken(source, tmp_path: Path, edit) -> str:
    """The refusal of a COCO file edited by `edit(data)`; checks it is one sentence and nothing was written."""
    path = write_coco(source.subset([0, 1, 2]), tmp_path)
    data = coco_dict(source.subset([0, 1, 2]))
    text = edit(data)
    path.write_text(text if isinstance(text, str) else json.dumps(data))
    before = listing(tmp_path)
    with pytest.raises(DatasetError) as caught:
        scene_set(f"coco:{path}")
        load_scene_set(f"coco:{path}", "test")
    message = str(caught.value)
    assert "\n" not in message and message.endswith(".") and len(message) < 300
    assert listing(tmp_path) == before
    return message


def _set(**fields: Any):
    def edit(data):
        for key, value in fields.items():
            path = key.split("__")
            target = data
            for part in path[:-1]:
                target = target[int(part)] if part.isdigit() else target[part]
            target[path[-1]] = value

    return edit


def _wrong_width(data):
    """Boxes only (an RLE mask would already disagree with the declared size) and a declared width of 200."""
    for image in data["images"]:
        image["width"] = 200
    for ann in data["annotations"]:
        ann.pop("segmentation")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: "", "instances.json is empty"),
        (lambda d: "   \n", "instances.json is empty"),
        (lambda d: '{"images": [1, 2,\n  ]}', "is not JSON: .* at line 2, column 3"),
        (lambda d: "[1, 2]", "holds a JSON list, not an object"),
        (lambda d: d.pop("annotations"), "has no 'annotations' key"),
        (lambda d: d.update(images=[]), "has no images"),
        (lambda d: d.pop("categories"), "has no categories"),
        (_set(annotations__0__category_id=99), "annotation 1 has category id 99, not one of the categories"),
        (_set(annotations__0__image_id=5), "annotation 1 names image id 5, which is not among the images"),
        (_set(annotations__1__bbox=[90, 10, 20, 20]), r"annotation 2 has a box \[90, 10, 20, 20\] outside its image"),
        (_set(annotations__1__bbox=[-5, 10, 20, 20]), "outside its image scene_0.png"),
        (_set(annotations__0__bbox=[1, 2, 3]), "needs a 'bbox' of four numbers"),
        (_set(annotations__0__bbox=[1, 2, 0, 5]), "box of zero or negative size"),
        (_set(images__1__file_name="gone.png"), "image file 'gone.png' \\(image id 101\\) is neither in"),
        (_set(images__1__width=None), "needs a positive integer 'width' and 'height'"),
        (_wrong_width, "is 96x96 px but the annotations say 200x96"),
        (_set(images__2__id=100), "image id 100 appears twice"),
        (_set(categories__0__name=3), "category #1 needs an integer 'id' and a text 'name'"),
        (_set(annotations__0__segmentation=[[1, 2, 3]]), "polygon that is not a list of at least three"),
        (_set(annotations__0__segmentation={"counts": "x"}), "neither polygons nor RLE"),
        (_set(annotations__0__segmentation={"size": [5, 5], "counts": [25]}), "RLE mask of size \\[5, 5\\]"),
        (_set(annotations__0__segmentation={"size": [96, 96], "counts": [5, 3]}), "counts that add up to 8"),
    ],
)
def test_broken_files_get_one_sentence(source, tmp_path, edit, expected):
    message = _broken(source, tmp_path, edit)
    assert re.search(expected, message), message


def test_missing_file_folder_and_unreadable_image(source, tmp_path):
    with pytest.raises(DatasetError, match="No COCO annotations file at"):
        scene_set(f"coco:{tmp_path / 'nope.json'}")
    with pytest.raises(DatasetError, match=r"is a folder: name the COCO annotations \.json file"):
        scene_set(f"coco:{tmp_path}")
    with pytest.raises(DatasetError, match="No path given"):
        scene_set("coco:  ")
    path = write_coco(source.subset([0]), tmp_path)
    (tmp_path / "scene_0.png").write_bytes(b"not a png")
    with pytest.raises(DatasetError, match=r"Cannot read .*scene_0\.png as an image"):
        load_scene_set(f"coco:{path}", "test")


def test_the_file_is_read_again_when_it_changes(source, tmp_path):
    path = write_coco(source.subset([0, 1]), tmp_path)
    assert len(load_scene_set(f"coco:{path}", "test")) == 2
    data = coco_dict(source.subset([0, 1]))
    data["images"] = data["images"][:1]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] == 100]
    path.write_text(json.dumps(data) + " " * 7)  # another size: another cache key even within one clock tick
    assert len(load_scene_set(f"coco:{path}", "test")) == 1


def test_rasterise_refuses_what_it_cannot_decode():
    with pytest.raises(DatasetError, match="annotation 3: its segmentation"):
        coco.rasterise({"size": [4, 4], "counts": 12}, 4, 4, "annotation 3")
