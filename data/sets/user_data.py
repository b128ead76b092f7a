"""User data: `imagefolder:<path>` (class sub-folders of images) and `csv:<path>` (texts + labels; a table of columns
with a target, `csv:<path>?target=<column>`, is data/sets/csv_table.py's).

Options follow a `?`: `imagefolder:/data/pets?size=96`, `csv:/data/reviews.csv?text=body&label=stars`.
A folder or file is scanned once per change (cached on modification times); what was skipped
or guessed on the way is kept in the source's `notes` and raised as a `DataNote` (data/notes.py).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import numpy as np
import torch
from PIL import Image

from xaidash.data.errors import DatasetError
from xaidash.data.notes import warn_notes
from xaidash.data.registry import DatasetInfo, ImageSplit, SplitName, TextSplit, register_factory
from xaidash.data.sets._common import NotedDatasetSource, stratified_indices
from xaidash.data.text_files import decode_text

if TYPE_CHECKING:
    import pandas as pd

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif")
DEFAULT_SIZE = 64
STATS_SAMPLE = 500  # images read to estimate the per-channel mean and std
TEXT_COLUMNS = ("text", "sentence", "message", "review")
LABEL_COLUMNS = ("label", "class", "target", "sentiment")


def parse_argument(arg: str, allowed: Sequence[str]) -> tuple[Path, dict[str, str]]:
    """Split 'path?key=value&...' into the path and its options; unknown keys are an error."""
    path, sep, query = arg.partition("?")
    if not path.strip():
        raise DatasetError(
            "No path given: write it after the prefix, e.g. imagefolder:/data/pets or csv:/data/reviews.csv."
        )
    options = dict(parse_qsl(query, keep_blank_values=True)) if sep else {}
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise DatasetError(f"Unknown option(s) {', '.join(unknown)} in {arg!r}; allowed: {', '.join(allowed)}.")
    return Path(path.strip()).expanduser(), options


# --- imagefolder -------------------------------------------------------------------------------


def read_image(path: str, size: int) -> torch.Tensor:
    """One image file as an RGB float tensor (3, size, size) in [0, 1] (stretched to a square)."""
    from torchvision.transforms.functional import pil_to_tensor  # imported on use, like pandas below

    try:
        with Image.open(path) as img:
            img.draft("RGB", (size, size))  # JPEG: decode at a reduced scale when the file is large
            rgb = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise DatasetError(f"Cannot read image {path}: {err}") from err
    return pil_to_tensor(rgb).to(torch.float32).div_(255.0)


class ImageFolderDataset(torch.utils.data.Dataset):
    """Reads the images of one split lazily: (image (3, size, size) in [0, 1], label)."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int], size: int):
        self.paths = list(paths)
        self.labels = list(labels)
        self.size = size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return read_image(self.paths[index], self.size), self.labels[index]


@dataclass(frozen=True)
class _Folder:
    classes: tuple[str, ...]
    splits: dict[str, tuple[tuple[str, ...], tuple[int, ...]]]  # split -> (paths, labels)
    mean: tuple[float, ...]
    std: tuple[float, ...]
    notes: tuple[str, ...]


def _link_back(path: Path, root: Path) -> str | None:
    """Why a link must not be read, for a link that leads back into the data set's own tree (`all -> .`, `cats2 ->
    cats`: every image would count twice, under two labels) or to a folder that holds it (`up -> ..`), or loops;
    None for anything else (not a link, or a link to another place, read as before)."""
    if not path.is_symlink():
        return None
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # a loop (a -> b -> a) or a dangling link: nothing to read there
        return f"Skipped {path.relative_to(root)}: a link that loops or leads nowhere."
    if target == root or root in target.parents:
        inside = "the data set itself" if target == root else f"{target.relative_to(root)}, inside the data set"
        return f"Skipped {path.relative_to(root)}: a link to {inside} (its images would be read twice)."
    if target in root.parents:
        return f"Skipped {path.relative_to(root)}: a link to {target}, a folder that holds the data set."
    return None


def _subfolders(folder: Path, root: Path, notes: list[str]) -> list[Path]:
    """The visible sub-folders of `folder`, links back into the tree left out with a note."""
    found = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or not (p.is_dir() or p.is_symlink()):
            continue
        why = _link_back(p, root)
        if why is not None:
            notes.append(why)
        elif p.is_dir():
            found.append(p)
    return found


def _image_files(folder: Path, root: Path, notes: list[str]) -> list[Path]:
    """Image files anywhere below `folder` (sorted, hidden entries skipped), like ImageFolder; links to folders
    below it are not followed (os.walk's default: no loop), links to files back into the tree skipped with a note."""
    found = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        named = [Path(here) / f for f in sorted(files) if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES)]
        for p in named:
            why = _link_back(p, root)
            if why is not None:
                notes.append(why)
            elif p.is_file():  # regular files only: opening a named pipe (FIFO) would block forever; stat() does not
                found.append(p)
    return found


def _readable(path: Path) -> str | None:
    """None if PIL can parse the file, else why not. verify() checks structure without decoding."""
    try:
        with Image.open(path) as img:
            img.verify()
    except Exception as err:  # noqa: BLE001 - PIL raises many types for broken files (OSError, SyntaxError, struct.error, ...)
        return " ".join(str(err).split()) or "it cannot be parsed as an image"
    return None


def _scan_classes(
    folder: Path, classes: Sequence[str] | None, notes: list[str], root: Path
) -> tuple[list[str], list[str], list[int]]:
    """Classes (sorted sub-folder names, or the given ones), image paths and labels of one folder (in `root`'s
    tree: a class folder that links back into it is no class)."""
    dirs = _subfolders(folder, root, notes)
    if classes is None:
        if not dirs:
            raise DatasetError(
                f"{folder} has no class sub-folders: put each class's images into a sub-folder named after "
                "the class (e.g. pets/cat/1.jpg, pets/dog/2.jpg)."
            )
        classes = [d.name for d in dirs]
        if len(classes) < 2:
            raise DatasetError(
                f"{folder} has only one class folder ({classes[0]}); a classifier needs at least 2 classes."
            )
    else:
        extra = sorted({d.name for d in dirs} - set(classes))
        if extra:
            raise DatasetError(f"{folder} has class folder(s) {', '.join(extra)} that train/ does not have.")
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        class_dir = folder / name
        if class_dir not in dirs:
            notes.append(f"{folder.name}/ has no folder for class {name!r}.")
            continue
        files = _image_files(class_dir, root, notes)
        if not files:
            raise DatasetError(
                f"Class folder {class_dir} holds no images ({', '.join(IMAGE_SUFFIXES)}); add images or remove the folder."
            )
        good = []
        for f in files:
            why = _readable(f)
            if why is None:
                good.append(f)
            else:
                notes.append(f"Skipped unreadable image {f} ({why}).")
        if not good:
            raise DatasetError(
                f"Class folder {class_dir} has no readable images: all {len(files)} files failed to open."
            )
        paths += [str(f) for f in good]
        labels += [label] * len(good)
    return list(classes), paths, labels


def _channel_stats(paths: Sequence[str], size: int, notes: list[str]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Mean and std per channel over up to STATS_SAMPLE images spread evenly over `paths`."""
    picks = np.unique(np.linspace(0, len(paths) - 1, min(STATS_SAMPLE, len(paths))).round().astype(int))
    total = np.zeros(3)
    total_sq = np.zeros(3)
    count = 0
    for i in picks:
        try:
            x = read_image(paths[i], size).double()
        except DatasetError as err:
            notes.append(f"{err} (it passed the first check; training will fail on it: remove it).")
            continue
        total += x.sum(dim=(1, 2)).numpy()
        total_sq += (x**2).sum(dim=(1, 2)).numpy()
        count += size * size
    if count == 0:
        raise DatasetError("None of the sampled images could be decoded.")
    mean = total / count
    std = np.sqrt(np.maximum(total_sq / count - mean**2, 1e-12))
    return tuple(round(float(m), 4) for m in mean), tuple(round(float(s), 4) for s in std)


def _folder_signature(folder: Path) -> tuple:
    """Modification times of the folder and its sub-folders: they change when files come or go."""
    stamp = [(str(folder), folder.stat().st_mtime_ns)]
    for here, dirs, _ in os.walk(folder):
        stamp += [(os.path.join(here, d), os.stat(os.path.join(here, d)).st_mtime_ns) for d in sorted(dirs)]
    return tuple(stamp)


@lru_cache(maxsize=16)
def _scan_folder(folder: Path, size: int, signature: tuple) -> _Folder:
    notes: list[str] = []
    top = {d.name.lower(): d for d in _subfolders(folder, folder, notes)}
    if "train" in top and "test" in top:
        classes, train_paths, train_labels = _scan_classes(top["train"], None, notes, folder)
        _, test_paths, test_labels = _scan_classes(top["test"], classes, notes, folder)
        ignored = sorted(name for name in top if name not in ("train", "test"))
        if ignored:
            notes.append(f"Ignored folder(s) {', '.join(ignored)}: only train/ and test/ are read.")
        splits = {"train": (tuple(train_paths), tuple(train_labels)), "test": (tuple(test_paths), tuple(test_labels))}
    else:
        classes, paths, labels = _scan_classes(folder, None, notes, folder)
        splits = {}
        for split in ("train", "test"):
            idx = stratified_indices(labels, split)
            splits[split] = (tuple(paths[i] for i in idx), tuple(labels[i] for i in idx))
    mean, std = _channel_stats(splits["train"][0], size, notes)
    return _Folder(tuple(classes), splits, mean, std, tuple(dict.fromkeys(notes)))  # the top is listed twice


def imagefolder_source(arg: str) -> NotedDatasetSource:
    """The source for 'imagefolder:<path>[?size=N]'."""
    folder, options = parse_argument(arg, ("size",))
    try:
        size = int(options.get("size", DEFAULT_SIZE))
    except ValueError:
        raise DatasetError(f"size must be a whole number of pixels, got {options['size']!r}.") from None
    if not 8 <= size <= 512:
        raise DatasetError(f"size must be between 8 and 512 pixels, got {size}.")
    if not folder.exists():
        raise DatasetError(f"Image folder {folder} does not exist.")
    if not folder.is_dir():
        raise DatasetError(f"{folder} is a file; imagefolder: needs a folder with one sub-folder per class.")
    folder = folder.resolve()
    scanned = _scan_folder(folder, size, _folder_signature(folder))
    warn_notes(scanned.notes, f"imagefolder {folder}")

    def load(split: SplitName, root: Path, download: bool) -> ImageSplit:
        paths, labels = scanned.splits[split]
        return ImageSplit(
            labels=torch.tensor(labels, dtype=torch.int64),
            dataset=ImageFolderDataset(paths, labels, size),
            paths=list(paths),
        )

    n_train, n_test = (len(scanned.splits[s][0]) for s in ("train", "test"))
    info = DatasetInfo(
        name=f"imagefolder:{arg}",
        modality="image",
        classes=scanned.classes,
        input_shape=(3, size, size),
        mean=scanned.mean,
        std=scanned.std,
        description=(
            f"Images from {folder}, resized to {size}x{size}: {len(scanned.classes)} classes, "
            f"{n_train} train / {n_test} test."
            + (
                f" {len(scanned.notes)} warning(s), e.g. skipped files: see the source's notes."
                if scanned.notes
                else ""
            )
        ),
    )
    return NotedDatasetSource(info=info, loader=load, is_available=lambda root: folder.is_dir(), notes=scanned.notes)


register_factory("imagefolder", imagefolder_source)


# --- csv ---------------------------------------------------------------------------------------


def _delimiter(header: str) -> str:
    """The likeliest delimiter of a table, judged from its header line."""
    counts = {d: header.count(d) for d in (",", "\t", ";", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _read_table(path: Path, notes: list[str]) -> pd.DataFrame:
    import pandas as pd  # imported on use: keeps `import data.sets` light

    decoded = decode_text(path.read_bytes(), str(path), latin1=True)  # the byte-order mark tells UTF-16
    content = decoded.text
    if not content.strip():
        raise DatasetError(f"{path} is empty: it needs a header line (e.g. text,label) and one row per sample.")
    if decoded.note:
        notes.append(f"{path.name} is {decoded.note}")
    header = content.splitlines()[0]
    sep = _delimiter(header)
    try:
        frame = pd.read_csv(io.StringIO(content), sep=sep, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise DatasetError(f"Cannot parse {path} as a table: {err}") from err
    _check_row_count(path, content, sep, len(frame), notes)
    return frame


def _check_row_count(path: Path, content: str, sep: str, rows: int, notes: list[str]) -> None:
    """Compare the rows read with the file's lines. Fewer rows than lines means some field spans several lines:
    fine when it is a quoted text with line breaks, wrong when a quote was never closed (40 lines, each with one
    unclosed quote, read as 20 merged samples). Python's csv reader in strict mode tells them apart: a quote closed
    in the middle of a field (the next line's opening quote) is an error there, a quoted line break is not."""
    import csv

    lines = sum(1 for line in content.splitlines() if line.strip()) - 1  # the header is not a row
    if rows >= lines:
        return
    reader = csv.reader(io.StringIO(content), delimiter=sep, strict=True)
    try:
        for _ in reader:
            pass
    except csv.Error as err:
        raise DatasetError(
            f'{path}: {rows} rows were read from {lines} lines: a quote (") is not closed near line {reader.line_num} '
            f'({err}), so rows ran together. Close the quote, write a quote inside a text as two (""), or remove it.'
        ) from None
    notes.append(f"{path.name}: {rows} rows from {lines} lines: {lines - rows} line break(s) are inside quoted texts.")


def _pick_column(
    frame: pd.DataFrame, given: str | None, candidates: Sequence[str], role: str, path: Path, hint: str = ""
) -> str:
    columns = {str(c).strip().lower(): c for c in frame.columns}
    available = ", ".join(map(str, frame.columns))
    if given is not None:
        if given in frame.columns:
            return given
        if given.strip().lower() in columns:
            return columns[given.strip().lower()]
        raise DatasetError(f"{path} has no column {given!r} for the {role}; its columns are: {available}.")
    for name in candidates:
        if name in columns:
            return columns[name]
    raise DatasetError(
        f"{path} has no {role} column: name one of {', '.join(candidates)} or pick it with "
        f"csv:{path}?{role}=<column>; its columns are: {available}{hint}."
    )


@dataclass(frozen=True)
class _Table:
    classes: tuple[str, ...]
    splits: dict[str, tuple[tuple[str, ...], tuple[int, ...]]]
    notes: tuple[str, ...]


@lru_cache(maxsize=16)
def _scan_csv(path: Path, mtime_ns: int, text_col: str | None, label_col: str | None) -> _Table:
    notes: list[str] = []
    frame = _read_table(path, notes)
    if frame.empty:
        raise DatasetError(f"{path} has a header but no rows.")
    table_hint = f" (a table of columns to classify: csv:{path}?target=<column>)"
    text_col = _pick_column(frame, text_col, TEXT_COLUMNS, "text", path, table_hint)
    label_col = _pick_column(frame, label_col, LABEL_COLUMNS, "label", path)
    if text_col == label_col:
        raise DatasetError(f"{path}: the text and the label cannot be the same column ({text_col!r}).")

    texts = frame[text_col].astype(str)
    raw_labels = frame[label_col].astype(str).str.strip()
    keep = (texts.str.strip() != "") & (raw_labels != "")
    if not keep.all():
        notes.append(f"Dropped {int((~keep).sum())} row(s) with an empty text or label.")
    frame, texts, raw_labels = frame[keep], texts[keep], raw_labels[keep]
    if frame.empty:
        raise DatasetError(f"{path} has no row with both a text and a label.")

    unique = sorted(set(raw_labels))
    try:  # integer labels sort as numbers (2 before 10)
        unique = [str(v) for v in sorted({int(v) for v in unique})]
        raw_labels = raw_labels.map(lambda v: str(int(v)))
    except ValueError:
        pass
    if len(unique) < 2:
        raise DatasetError(
            f"{path}: column {label_col!r} has only one class ({unique[0]}); a classifier needs at least 2."
        )
    index = {c: i for i, c in enumerate(unique)}
    labels = raw_labels.map(index).to_numpy(dtype=np.int64)
    texts_list = texts.tolist()

    split_col = next((c for c in frame.columns if str(c).strip().lower() == "split"), None)
    splits: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
    if split_col is not None:
        which = frame[split_col].astype(str).str.strip().str.lower().to_numpy()
        bad = sorted(set(which) - {"train", "test"})
        if bad:
            raise DatasetError(
                f"{path}: column {split_col!r} must hold 'train' or 'test', found {', '.join(map(repr, bad))}."
            )
        for split in ("train", "test"):
            idx = np.flatnonzero(which == split)
            if idx.size == 0:
                raise DatasetError(f"{path}: column {split_col!r} has no {split!r} rows.")
            splits[split] = (tuple(texts_list[i] for i in idx), tuple(int(labels[i]) for i in idx))
    else:
        for split in ("train", "test"):
            idx = stratified_indices(labels, split)
            splits[split] = (tuple(texts_list[i] for i in idx), tuple(int(labels[i]) for i in idx))
    return _Table(tuple(unique), splits, tuple(notes))


def csv_source(arg: str) -> NotedDatasetSource:
    """The source for 'csv:<path>[?text=<column>&label=<column>]'."""
    path, options = parse_argument(arg, ("text", "label"))
    if not path.exists():
        raise DatasetError(f"CSV file {path} does not exist.")
    if not path.is_file():
        raise DatasetError(f"{path} is not a file; csv: needs a table with a text and a label column.")
    path = path.resolve()
    table = _scan_csv(path, path.stat().st_mtime_ns, options.get("text"), options.get("label"))
    warn_notes(table.notes, f"csv {path}")

    def load(split: SplitName, root: Path, download: bool) -> TextSplit:
        texts, labels = table.splits[split]
        return TextSplit(texts=list(texts), labels=torch.tensor(labels, dtype=torch.int64))

    n_train, n_test = (len(table.splits[s][0]) for s in ("train", "test"))
    info = DatasetInfo(
        name=f"csv:{arg}",
        modality="text",
        classes=table.classes,
        description=f"Texts from {path}: {len(table.classes)} classes, {n_train} train / {n_test} test.",
    )
    return NotedDatasetSource(info=info, loader=load, is_available=lambda root: path.is_file(), notes=table.notes)


# `csv:` is registered by data/sets/csv_table.py: it sends a table's options (target=, ...) there and the rest here.
