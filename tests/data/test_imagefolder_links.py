"""Links in `imagefolder:` data sets (issue 36, item 5): a class folder or a file that links back into the data
set's own tree (`all -> .`, `cats2 -> cats`, `up -> ..`, a loop) is skipped with one note naming it, and each real
image is read once under its own label; a link to a folder elsewhere is read as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from PIL import Image

from xaidash.data.notes import DataNote
from xaidash.data.registry import get_source

COLOURS = {"cats": (255, 0, 0), "dogs": (0, 255, 0)}


def _images(folder: Path, colour: tuple[int, int, int], n: int = 5) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"{i}.png"
        Image.new("RGB", (12, 10), tuple(min(255, c + 10 * i) for c in colour)).save(path)
        paths.append(path)
    return paths


def _pets(root: Path) -> dict[str, list[Path]]:
    return {name: _images(root / name, colour) for name, colour in COLOURS.items()}


def _read(folder: Path) -> tuple[object, dict[str, str]]:
    """The source and every image it reads (train and test), path -> class name; no path read twice."""
    source = get_source(f"imagefolder:{folder}?size=8")
    seen: dict[str, str] = {}
    for split in ("train", "test"):
        data = source.load(split)
        for path, label in zip(data.paths, data.labels.tolist(), strict=True):
            assert path not in seen, f"{path} read twice"
            seen[path] = source.info.classes[label]
    return source, seen


def _truth(pets: dict[str, list[Path]]) -> dict[str, str]:
    return {str(p): name for name, paths in pets.items() for p in paths}


@pytest.mark.parametrize(
    ("link", "target", "says"),
    [
        ("all", ".", "Skipped all: a link to the data set itself (its images would be read twice)."),
        ("cats2", "cats", "Skipped cats2: a link to cats, inside the data set (its images would be read twice)."),
        ("up", "..", "a folder that holds the data set."),
    ],
)
def test_a_class_folder_that_links_back_into_the_tree_is_skipped_with_a_note(
    tmp_path: Path, link: str, target: str, says: str
) -> None:
    root = (tmp_path / "pets").resolve()
    pets = _pets(root)
    os.symlink(target, root / link)
    with pytest.warns(DataNote) as caught:
        source, seen = _read(root)
    assert source.info.classes == ("cats", "dogs")
    assert seen == _truth(pets)  # each image once, under its own label: no class made of the others
    assert [n for n in source.notes if "Skipped" in n] == [n for n in source.notes if says in n], source.notes
    assert len([n for n in source.notes if says in n]) == 1
    assert any(says in str(w.message) and str(root) in str(w.message) for w in caught)


def test_a_link_loop_and_links_to_files_inside_are_skipped_and_never_followed(tmp_path: Path) -> None:
    root = (tmp_path / "pets").resolve()
    pets = _pets(root)
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")  # a -> b -> a
    os.symlink("../dogs/0.png", root / "cats" / "copy.png")  # a dog's image again, labelled a cat
    os.symlink(".", root / "cats" / "again")  # a folder inside a class folder that is the folder itself
    with pytest.warns(DataNote):
        source, seen = _read(root)
    assert source.info.classes == ("cats", "dogs") and seen == _truth(pets)
    notes = " | ".join(source.notes)
    assert "Skipped a: a link that loops or leads nowhere." in notes
    assert "Skipped b: a link that loops or leads nowhere." in notes
    assert "Skipped cats/copy.png: a link to dogs/0.png, inside the data set" in notes


def test_a_test_split_that_links_to_the_training_images_is_not_read_as_test(tmp_path: Path) -> None:
    root = (tmp_path / "pets").resolve()
    train = {name: _images(root / "train" / name, colour) for name, colour in COLOURS.items()}
    _images(root / "test" / "dogs", COLOURS["dogs"], 2)
    os.symlink("../train/cats", root / "test" / "cats")  # training images offered again as test images
    with pytest.warns(DataNote):
        source = get_source(f"imagefolder:{root}?size=8")
    test = source.load("test")
    assert not any("/train/" in p for p in test.paths) and test.labels.tolist() == [1, 1]
    assert len(source.load("train")) == sum(len(p) for p in train.values())
    assert "Skipped test/cats: a link to train/cats, inside the data set" in " ".join(source.notes)
    assert "test/ has no folder for class 'cats'." in source.notes


def test_links_to_folders_and_files_elsewhere_are_read_as_before(tmp_path: Path) -> None:
    elsewhere = _images(tmp_path / "shared" / "more_dogs", COLOURS["dogs"], 3)
    extra_cat = _images(tmp_path / "loose", COLOURS["cats"], 1)[0]
    root = (tmp_path / "pets").resolve()
    pets = _pets(root)
    os.symlink(tmp_path / "shared" / "more_dogs", root / "birds")  # a class folder kept elsewhere
    os.symlink(extra_cat, root / "cats" / "extra.png")
    source = get_source(f"imagefolder:{root}?size=8")
    assert source.info.classes == ("birds", "cats", "dogs") and not source.notes
    _, seen = _read(root)
    want = _truth(pets) | {str(root / "birds" / p.name): "birds" for p in elsewhere}
    want[str(root / "cats" / "extra.png")] = "cats"
    assert seen == want
    image = source.load("train").image(0)
    assert image.shape == (3, 8, 8) and torch.isfinite(image).all()
