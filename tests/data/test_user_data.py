"""User data sets: `imagefolder:<path>` and `csv:<path>`, built in temporary folders."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from xaidash.data.errors import DatasetError
from xaidash.data.registry import ImageSplit, TextSplit, get_info, get_source, load_split

COLOURS = {"cat": (255, 0, 0), "dog": (0, 255, 0), "fish": (0, 0, 255)}
FORMATS = (("png", "PNG"), ("jpg", "JPEG"), ("bmp", "BMP"), ("webp", "WEBP"), ("gif", "GIF"))


def _save(path: Path, colour: tuple[int, int, int], mode: str = "RGB", size: tuple[int, int] = (20, 14)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", size, colour)
    if mode != "RGB":
        img = img.convert(mode)
    fmt = dict(FORMATS)[path.suffix.lstrip(".").lower()]
    img.save(path, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))


def _class_folder(folder: Path, name: str, n: int = 5) -> None:
    for i in range(n):
        ext, _ = FORMATS[i % len(FORMATS)]
        _save(folder / name / f"{i}.{ext}", COLOURS[name])


@pytest.fixture
def pets(tmp_path: Path) -> Path:
    root = tmp_path / "pets"
    for name in COLOURS:
        _class_folder(root, name)
    (root / "cat" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    (root / "dog" / "empty.jpg").write_bytes(b"")
    (root / "fish" / "notes.txt").write_text("not an image, not counted")
    _save(root / "fish" / "nested" / "deep.png", COLOURS["fish"], mode="P")  # palette image in a sub-folder
    _save(root / "dog" / "alpha.png", COLOURS["dog"], mode="RGBA")
    _save(root / "cat" / "grey.png", COLOURS["cat"], mode="L")
    return root


def test_imagefolder_flat_layout(pets):
    with pytest.warns(UserWarning, match="Skipped unreadable image"):
        source = get_source(f"imagefolder:{pets}")
    info = source.info
    assert info.name == f"imagefolder:{pets}" and info.modality == "image"
    assert info.classes == ("cat", "dog", "fish") and info.input_shape == (3, 64, 64)
    assert sum("broken.png" in n for n in source.notes) == 1 and sum("empty.jpg" in n for n in source.notes) == 1
    train, test = source.load("train"), source.load("test")
    assert isinstance(train, ImageSplit) and train.images is None and not train.in_memory
    assert (len(train), len(test)) == (14, 4)  # 6 readable images per class, 80/20 overall
    assert train.labels.dtype == torch.int64
    assert sorted(torch.bincount(test.labels).tolist()) == [1, 1, 2]
    assert not set(train.paths) & set(test.paths) and len(set(train.paths + test.paths)) == 18
    assert not any("broken" in p or "notes" in p for p in train.paths + test.paths)
    image, label = train.dataset[0]
    assert image.shape == (3, 64, 64) and image.dtype == torch.float32 and isinstance(label, int)
    assert image.min() >= 0.0 and image.max() <= 1.0
    # The image shows its class's colour (grey images keep the red's luminance in every channel).
    name = info.classes[label]
    path = train.paths[0]
    if not path.endswith("grey.png"):
        np.testing.assert_allclose(image.mean(dim=(1, 2)).numpy(), np.array(COLOURS[name]) / 255, atol=0.03)
    assert train.batch([0, 1, 2]).shape == (3, 3, 64, 64)
    batch, labels = next(iter(torch.utils.data.DataLoader(train.dataset, batch_size=4)))
    assert batch.shape == (4, 3, 64, 64) and labels.tolist() == train.labels[:4].tolist()


def test_imagefolder_stats_and_determinism(tmp_path):
    root = tmp_path / "flat"
    for name in COLOURS:
        _class_folder(root, name, n=10)
    info = get_info(f"imagefolder:{root}")
    # Train holds 8 red, 8 green, 8 blue solid images: each channel is 1 a third of the time.
    np.testing.assert_allclose(info.mean, [1 / 3] * 3, atol=0.01)
    np.testing.assert_allclose(info.std, [np.sqrt(1 / 3 - 1 / 9)] * 3, atol=0.01)
    a, b = load_split(f"imagefolder:{root}", "test"), load_split(f"imagefolder:{root}", "test")
    assert a.paths == b.paths and torch.equal(a.labels, b.labels)


def test_imagefolder_size_option_and_train_test_layout(tmp_path):
    root = tmp_path / "split"
    for part, n in (("train", 4), ("test", 2)):
        for name in ("cat", "dog"):
            _class_folder(root / part, name, n=n)
    source = get_source(f"imagefolder:{root}?size=16")
    assert source.info.input_shape == (3, 16, 16) and source.info.classes == ("cat", "dog")
    train, test = source.load("train"), source.load("test")
    assert (len(train), len(test)) == (8, 4)
    assert all("/train/" in p for p in train.paths) and all("/test/" in p for p in test.paths)
    assert test.image(0).shape == (3, 16, 16)


def test_imagefolder_sees_new_files(tmp_path):
    root = tmp_path / "growing"
    for name in ("cat", "dog"):
        _class_folder(root, name, n=5)
    assert len(load_split(f"imagefolder:{root}", "train")) == 8
    time.sleep(0.01)
    _class_folder(root, "fish", n=5)
    assert get_info(f"imagefolder:{root}").classes == ("cat", "dog", "fish")


def test_imagefolder_errors(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        get_source(f"imagefolder:{tmp_path / 'nowhere'}")
    flat = tmp_path / "just_files"
    _save(flat / "a.png", (1, 2, 3))
    with pytest.raises(DatasetError, match="no class sub-folders"):
        get_source(f"imagefolder:{flat}")
    with pytest.raises(DatasetError, match="is a file"):
        get_source(f"imagefolder:{flat / 'a.png'}")

    one = tmp_path / "one_class"
    _class_folder(one, "cat")
    with pytest.raises(DatasetError, match="at least 2 classes"):
        get_source(f"imagefolder:{one}")

    empty = tmp_path / "empty_class"
    _class_folder(empty, "cat")
    (empty / "dog").mkdir()
    with pytest.raises(DatasetError, match=r"dog holds no images"):
        get_source(f"imagefolder:{empty}")

    corrupt = tmp_path / "corrupt_class"
    _class_folder(corrupt, "cat")
    (corrupt / "dog").mkdir()
    (corrupt / "dog" / "x.jpg").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match="no readable images"):
        get_source(f"imagefolder:{corrupt}")

    ok = tmp_path / "ok"
    for name in ("cat", "dog"):
        _class_folder(ok, name)
    for bad in ("size=abc", "size=2", "colour=red"):
        with pytest.raises(DatasetError, match=r"size|Unknown option"):
            get_source(f"imagefolder:{ok}?{bad}")


# --- csv ---------------------------------------------------------------------------------------


def _rows(n: int) -> list[tuple[str, str]]:
    return [(f"review number {i}, with a comma", "pos" if i % 2 else "neg") for i in range(n)]


def test_csv_autodetect_and_stratified_split(tmp_path):
    path = tmp_path / "reviews.csv"
    lines = ["Review,Sentiment,extra"] + [f'"{t}",{label},x' for t, label in _rows(50)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = get_source(f"csv:{path}")
    assert source.info.classes == ("neg", "pos") and source.info.modality == "text"
    assert source.info.name == f"csv:{path}"
    train, test = source.load("train"), source.load("test")
    assert isinstance(train, TextSplit) and (len(train), len(test)) == (40, 10)
    assert torch.bincount(test.labels).tolist() == [5, 5]
    assert sorted(train.texts + test.texts) == sorted(t for t, _ in _rows(50))
    texts = dict(_rows(50))
    assert all(
        source.info.classes[label] == texts[t] for t, label in zip(test.texts, test.labels.tolist(), strict=True)
    )
    assert load_split(f"csv:{path}", "test").texts == test.texts  # deterministic


def test_csv_named_columns_int_labels_and_split_column(tmp_path):
    path = tmp_path / "data.tsv"
    rows = ["body\tstars\tSplit"] + [
        f"text {i}\t{[2, 10, 1][i % 3]}\t{'test' if i < 3 else 'train'}" for i in range(12)
    ]
    path.write_text("\n".join(rows), encoding="utf-8")
    source = get_source(f"csv:{path}?text=body&label=stars")
    assert source.info.classes == ("1", "2", "10")  # numeric order, not string order
    train, test = source.load("train"), source.load("test")
    assert (len(train), len(test)) == (9, 3)
    assert test.texts == ["text 0", "text 1", "text 2"] and test.labels.tolist() == [1, 2, 0]


def test_csv_latin1_file(tmp_path):
    path = tmp_path / "latin.csv"
    body = "text,label\n" + "".join(f"café numéro {i},{i % 2}\n" for i in range(10))
    path.write_bytes(body.encode("latin-1"))
    with pytest.warns(UserWarning, match="Latin-1"):
        source = get_source(f"csv:{path}")
    assert any("Latin-1" in note for note in source.notes)
    texts = source.load("train").texts + source.load("test").texts
    assert "café numéro 3" in texts


def test_csv_drops_empty_rows_with_a_note(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("text,label\n" + "".join(f"t{i},{'a' if i % 2 else 'b'}\n" for i in range(10)) + "t,\n,a\n")
    with pytest.warns(UserWarning, match="Dropped 2 row"):
        source = get_source(f"csv:{path}")
    assert len(source.load("train")) + len(source.load("test")) == 10


def test_csv_errors(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        get_source(f"csv:{tmp_path / 'missing.csv'}")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DatasetError, match="is empty"):
        get_source(f"csv:{empty}")
    header = tmp_path / "header.csv"
    header.write_text("text,label\n")
    with pytest.raises(DatasetError, match="no rows"):
        get_source(f"csv:{header}")
    cols = tmp_path / "cols.csv"
    cols.write_text("body,stars\nhello,1\nbye,2\n")
    with pytest.raises(DatasetError, match=r"no text column.*body, stars"):
        get_source(f"csv:{cols}")
    with pytest.raises(DatasetError, match=r"no column 'words'"):
        get_source(f"csv:{cols}?text=words&label=stars")
    single = tmp_path / "single.csv"
    single.write_text("text,label\na,x\nb,x\nc,x\n")
    with pytest.raises(DatasetError, match="only one class"):
        get_source(f"csv:{single}")
    split = tmp_path / "split.csv"
    split.write_text("text,label,split\na,0,train\nb,1,valid\nc,0,test\n")
    with pytest.raises(DatasetError, match="'valid'"):
        get_source(f"csv:{split}")
    with pytest.raises(DatasetError, match="Unknown option"):
        get_source(f"csv:{cols}?txt=body")


def test_csv_rows_with_unbalanced_quotes_are_refused_not_merged(tmp_path):
    """40 lines, each opening a quote it never closes, were read as 20 merged samples without a word (issue 21)."""
    path = tmp_path / "quotes.csv"
    path.write_text("text,label\n" + "".join(f'"sample {i} is fine,{i % 2}\n' for i in range(40)))
    with pytest.raises(DatasetError, match=r"20 rows were read from 40 lines: a quote .* is not closed near line 3"):
        get_source(f"csv:{path}")


def test_csv_quoted_line_breaks_are_read_and_counted_in_a_note(tmp_path):
    """Texts with line breaks inside quotes are legitimate: read as one row each, the difference said in a note."""
    path = tmp_path / "multiline.csv"
    path.write_text("text,label\n" + "".join(f'"first line {i}\nsecond line",{i % 2}\n' for i in range(40)))
    with pytest.warns(UserWarning, match="40 rows from 80 lines: 40 line break"):
        source = get_source(f"csv:{path}")
    texts = source.load("train").texts + source.load("test").texts
    assert len(texts) == 40 and all("\nsecond line" in t for t in texts)
    plain = tmp_path / "plain.csv"  # a quote inside an unquoted text is a plain character: nothing to say
    plain.write_text("text,label\n" + "".join(f'he said "hi" {i},{i % 2}\n' for i in range(40)))
    assert len(get_source(f"csv:{plain}").load("train")) + len(get_source(f"csv:{plain}").load("test")) == 40
