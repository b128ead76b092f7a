"""`masks:<folder>`: a folder written from generated scenes comes back with the same semantic masks, objects as
connected parts with tight boxes, classes from classes.txt; every broken folder is refused in one sentence."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from scene_files import listing, save_png, write_mask_folder

from xaidash.data.errors import DatasetError
from xaidash.data.scenes import mask_folder, own
from xaidash.data.scenes.boxes import boxes_of_masks
from xaidash.data.scenes.registry import load_scene_set, scene_set


def test_round_trip(source, tmp_path):
    folder = write_mask_folder(source, tmp_path / "set")
    spec = scene_set(f"masks:{folder}")
    assert spec.classes == source.classes and spec.image_size == 96 and spec.has_masks
    assert spec.id == f"masks:{folder}" and "80/10/10" in spec.description
    for split in ("train", "val", "test"):
        loaded = load_scene_set(f"masks:{folder}", split)
        for k, i in enumerate(own.split_indices(12, split)):
            assert loaded.names[k] == f"scene_{i}.png"
            assert torch.allclose(loaded.images[k], source.images[i], atol=1 / 255)
            assert torch.equal(loaded.semantic(k), source.semantic(i))  # instances paint the mask back
            target = loaded.targets[k]
            assert target.masks is not None
            assert int(target.masks.sum(0).max()) <= 1
            assert torch.equal(target.boxes, boxes_of_masks(target.masks))
            for mask in target.masks:  # each instance is one connected part
                assert _parts(mask.numpy()) == 1


def _parts(mask: np.ndarray) -> int:
    from scipy import ndimage

    return int(ndimage.label(mask, structure=np.ones((3, 3)))[1])


def test_instances_are_connected_parts_per_class():
    semantic = np.zeros((8, 10), dtype=np.int64)
    semantic[1:3, 1:3] = 2  # one square of class 2
    semantic[3, 3] = 2  # touching it diagonally: the same object
    semantic[6:8, 0:2] = 2  # a second object of class 2
    semantic[0:4, 6:9] = 1  # one of class 1
    target = mask_folder.instances(semantic, 3)
    assert target.labels.tolist() == [1, 2, 2]
    assert target.boxes.tolist() == [[6, 0, 9, 4], [1, 1, 4, 4], [0, 6, 2, 8]]
    empty = mask_folder.instances(np.zeros((4, 4), dtype=np.int64), 3)
    assert len(empty) == 0 and empty.masks is not None and empty.masks.shape == (0, 4, 4)


def test_classes_without_classes_txt_and_background_line(source, tmp_path):
    folder = write_mask_folder(source, tmp_path / "a", classes=False)
    assert scene_set(f"masks:{folder}").classes == ("class 1", "class 2", "class 3", "class 4")
    (folder / "classes.txt").write_text("background\nring\nbox\ntri\nplus\nspare\n\n")
    assert scene_set(f"masks:{folder}").classes == ("ring", "box", "tri", "plus", "spare")


def test_jpeg_images_and_palette_masks(source, tmp_path):
    folder = write_mask_folder(source.subset([0]), tmp_path / "p")
    image = folder / "images" / "scene_0.png"
    Image.open(image).convert("RGB").save(folder / "images" / "scene_0.jpg")
    image.unlink()
    mask = Image.open(folder / "masks" / "scene_0.png").convert("P")
    mask.save(folder / "masks" / "scene_0.png")
    loaded = load_scene_set(f"masks:{folder}", "test")
    assert loaded.names == ["scene_0.jpg"]
    assert torch.equal(loaded.semantic(0), source.semantic(0))


def _refusal(folder: Path) -> str:
    before = listing(folder) if folder.is_dir() else []
    with pytest.raises(DatasetError) as caught:
        scene_set(f"masks:{folder}")
    message = str(caught.value)
    assert "\n" not in message and message.endswith(".") and len(message) < 300
    assert (listing(folder) if folder.is_dir() else []) == before
    return message


def test_broken_folders_get_one_sentence(source, tmp_path):
    assert re.search("No folder at .*nope", _refusal(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    assert "has no images: put images in images/" in _refusal(tmp_path / "empty")

    folder = write_mask_folder(source.subset([0, 1]), tmp_path / "b")
    (folder / "masks" / "scene_1.png").unlink()
    assert re.search(r"Image scene_1\.png has no mask: expected .*masks/scene_1\.png", _refusal(folder))

    folder = write_mask_folder(source.subset([0, 1]), tmp_path / "c")
    Image.fromarray(np.zeros((50, 96), dtype=np.uint8)).save(folder / "masks" / "scene_1.png")
    assert "Mask scene_1.png is 96x50 px but its image scene_1.png is 96x96" in _refusal(folder)

    folder = write_mask_folder(source.subset([0, 1]), tmp_path / "d")
    (folder / "classes.txt").write_text("circle\nsquare\n")
    assert re.search(r"holds class index [34], but classes.txt names only 2 classes \(1..2", _refusal(folder))

    folder = write_mask_folder(source.subset([0, 1]), tmp_path / "g", classes=False)
    border = np.asarray(Image.open(folder / "masks" / "scene_1.png")).copy()
    border[0, :] = 255
    Image.fromarray(border).save(folder / "masks" / "scene_1.png")
    assert "holds index 255 (VOC's 'ignore' border): paint those pixels 0" in _refusal(folder)

    folder = write_mask_folder(source.subset([0]), tmp_path / "e")
    save_png(source.images[0], folder / "masks" / "scene_0.png")
    assert "Mask scene_0.png is a RGB image: a mask holds one class index per pixel" in _refusal(folder)


def test_broken_class_lists_and_names(source, tmp_path):
    folder = write_mask_folder(source.subset([0]), tmp_path / "f")
    (folder / "classes.txt").write_text("a\n\nb\nc\nd\n")
    assert "has an empty line 2" in _refusal(folder)
    (folder / "classes.txt").write_text("a\nb\na\nd\n")
    assert "names the class 'a' twice" in _refusal(folder)
    (folder / "classes.txt").write_text("\n\n")
    assert "names no class" in _refusal(folder)
    (folder / "classes.txt").unlink()
    Image.fromarray(np.zeros((96, 96), dtype=np.uint8)).save(folder / "masks" / "scene_0.png")
    assert "is all background (0): no class to learn" in _refusal(folder)
    save_png(source.images[0], folder / "images" / "scene_0.jpg")
    assert "are named 'scene_0'" in _refusal(folder)
    (folder / "images" / "scene_0.jpg").write_bytes(b"junk")
    (folder / "images" / "scene_0.png").unlink()
    assert "Cannot read" in _refusal(folder)
