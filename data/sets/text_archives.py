"""`sst2` and `sms_spam`: two public text data sets read from their official archives.

SST-2 (GLUE): root/SST-2/{train,dev}.tsv with a `sentence<TAB>label` header; the labelled dev
file serves as the test split (GLUE's test.tsv has no labels). SMS Spam Collection (UCI):
root/smsspamcollection/SMSSpamCollection, `label<TAB>text` lines without a header, split 80/20.
"""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

import numpy as np
import torch

from xaidash.data.errors import DatasetError, DatasetUnavailable
from xaidash.data.paths import offline
from xaidash.data.registry import DatasetInfo, DatasetSource, SplitName, TextSplit, register
from xaidash.data.sets._common import stratified_indices

DOWNLOAD_TIMEOUT_S = 20

SST2_URL = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip"
SMS_URL = "https://archive.ics.uci.edu/static/public/228/sms+spam+collection.zip"


def _decode_line(raw: bytes) -> str:
    """UTF-8 where it decodes, else latin-1 (the SMS file mixes both), per line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _fetch(url: str, target: Path, name: str, folder: Path, download: bool, expected: Path) -> None:
    """Download a zip archive and unpack it into `target`, or explain how to get it by hand."""
    how = f"Download {url} and unpack it so that {folder} holds the files, or set XAIDASH_DATA to a folder that holds them."
    if offline():
        raise DatasetUnavailable(
            f"{name} is not in {folder} and downloads are off (XAIDASH_OFFLINE / HF_HUB_OFFLINE is set). {how}"
        )
    if not download:
        raise DatasetUnavailable(f"{name} is not in {folder} and download=False was asked. {how}")
    try:
        with urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            payload = response.read()
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            archive.extractall(target)  # extractall drops absolute paths and '..' parts
    except (URLError, OSError, zipfile.BadZipFile) as err:
        raise DatasetUnavailable(f"{name} is not in {folder} and the download failed ({err}). {how}") from err
    if not expected.is_file():
        raise DatasetUnavailable(
            f"The archive from {url} did not hold {expected.relative_to(target)} as expected. {how}"
        )


# --- SST-2 -------------------------------------------------------------------------------------


def _sst2_file(root: Path, split: SplitName) -> Path:
    return Path(root) / "SST-2" / ("train.tsv" if split == "train" else "dev.tsv")


def _sst2_available(root: Path) -> bool:
    return _sst2_file(root, "train").is_file() and _sst2_file(root, "test").is_file()


@lru_cache(maxsize=4)
def _read_sst2(path: Path, mtime: float) -> tuple[tuple[str, ...], np.ndarray]:
    texts: list[str] = []
    labels: list[int] = []
    lines = path.read_bytes().splitlines()
    if not lines or lines[0].strip().split(b"\t") != [b"sentence", b"label"]:
        raise DatasetError(f"{path} is not a GLUE SST-2 file: its first line should be 'sentence<TAB>label'.")
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        # Split on the last tab: sentences hold quotes that a csv reader would misread.
        text, _, label = _decode_line(raw).rpartition("\t")
        if label.strip() not in ("0", "1"):
            raise DatasetError(f"{path}, line {number}: label {label.strip()!r} is not 0 or 1.")
        texts.append(text.strip())
        labels.append(int(label))
    return tuple(texts), np.asarray(labels, dtype=np.int64)


def _load_sst2(split: SplitName, root: Path, download: bool) -> TextSplit:
    root = Path(root)
    if not _sst2_available(root):
        # The zip holds an SST-2/ folder.
        _fetch(SST2_URL, root, "SST-2", root / "SST-2", download, _sst2_file(root, "test"))
    path = _sst2_file(root, split)
    texts, labels = _read_sst2(path, path.stat().st_mtime)
    return TextSplit(texts=list(texts), labels=torch.from_numpy(labels.copy()))


register(
    DatasetSource(
        info=DatasetInfo(
            name="sst2",
            modality="text",
            classes=("negative", "positive"),
            description="Stanford Sentiment Treebank (GLUE SST-2): movie-review phrases, 67,349 train / 872 test (GLUE dev).",
            source_url="https://gluebenchmark.com/tasks",
        ),
        loader=_load_sst2,
        is_available=_sst2_available,
    )
)


# --- SMS Spam Collection -----------------------------------------------------------------------

SMS_CLASSES = ("ham", "spam")


def _sms_file(root: Path) -> Path:
    return Path(root) / "smsspamcollection" / "SMSSpamCollection"


def _sms_available(root: Path) -> bool:
    return _sms_file(root).is_file()


@lru_cache(maxsize=2)
def _read_sms(path: Path, mtime: float) -> tuple[tuple[str, ...], np.ndarray]:
    texts: list[str] = []
    labels: list[int] = []
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        label, sep, text = _decode_line(raw).partition("\t")
        if not sep or label not in SMS_CLASSES:
            raise DatasetError(f"{path}, line {number}: expected 'ham' or 'spam', a tab, then the message.")
        texts.append(text.strip())
        labels.append(SMS_CLASSES.index(label))
    return tuple(texts), np.asarray(labels, dtype=np.int64)


def _load_sms(split: SplitName, root: Path, download: bool) -> TextSplit:
    root = Path(root)
    folder = _sms_file(root).parent
    if not _sms_available(root):
        _fetch(SMS_URL, folder, "The SMS Spam Collection", folder, download, _sms_file(root))  # the zip is flat
    path = _sms_file(root)
    texts, labels = _read_sms(path, path.stat().st_mtime)
    idx = stratified_indices(labels, split)
    return TextSplit(texts=[texts[i] for i in idx], labels=torch.from_numpy(labels[idx]))


register(
    DatasetSource(
        info=DatasetInfo(
            name="sms_spam",
            modality="text",
            classes=SMS_CLASSES,
            description="UCI SMS Spam Collection: 5,574 text messages (747 spam), split 80/20 (stratified, seed 0).",
            source_url="https://archive.ics.uci.edu/dataset/228/sms+spam+collection",
        ),
        loader=_load_sms,
        is_available=_sms_available,
    )
)
