"""`mnist`, `fashion_mnist`, `cifar10`: the classic image sets, read with torchvision.datasets.

Files live under the data root in torchvision's own layout (root/MNIST/raw/*.gz,
root/FashionMNIST/raw/*.gz, root/cifar-10-batches-py/). Tensors are built from each data
set's `.data` / `.targets` arrays in one go rather than item by item through PIL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import URLError

import numpy as np
import torch

from xaidash.data.errors import DatasetError, DatasetUnavailable
from xaidash.data.paths import offline
from xaidash.data.registry import DatasetInfo, DatasetSource, ImageSplit, Loader, SplitName, register

_MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
_CIFAR_FILES = (
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
    "test_batch",
    "batches.meta",
)


@dataclass(frozen=True)
class _IdxSet:
    """An MNIST-layout data set: four IDX files under root/<folder>/raw."""

    folder: str  # torchvision's class name (MNIST, FashionMNIST), which is also its folder name
    source: str

    def open(self, root: Path, train: bool, download: bool) -> Any:
        from torchvision import datasets  # imported on use: keeps `import data.sets` light

        return getattr(datasets, self.folder)(str(root), train=train, download=download)

    def raw(self, root: Path) -> Path:
        return Path(root) / self.folder / "raw"

    def extracted(self, root: Path) -> bool:
        return all((self.raw(root) / f).is_file() for f in _MNIST_FILES)

    def gzipped(self, root: Path) -> bool:
        return all((self.raw(root) / f"{f}.gz").is_file() for f in _MNIST_FILES)

    def legacy(self, root: Path) -> bool:  # torchvision < 0.9 wrote processed/{training,test}.pt
        processed = Path(root) / self.folder / "processed"
        return (processed / "training.pt").is_file() and (processed / "test.pt").is_file()

    def available(self, root: Path) -> bool:
        return self.extracted(root) or self.gzipped(root) or self.legacy(root)

    def missing_message(self, root: Path, why: str) -> str:
        files = ", ".join(f"{f}.gz" for f in _MNIST_FILES)
        return (
            f"{self.folder} is not under the data root and {why}. Put the four files {files} "
            f"into {self.raw(root)} (official source: {self.source}), or set XAIDASH_DATA to a "
            "folder that holds them."
        )


def _download_allowed(download: bool) -> tuple[bool, str]:
    if offline():
        return False, "downloads are off (XAIDASH_OFFLINE / HF_HUB_OFFLINE is set)"
    if not download:
        return False, "download=False was asked"
    return True, ""


def _open_idx(spec: _IdxSet, split: SplitName, root: Path, download: bool) -> Any:
    from torchvision.datasets.utils import extract_archive

    train = split == "train"
    if not (spec.extracted(root) or spec.legacy(root)):
        if spec.gzipped(root):
            # Unpack the local .gz files ourselves: torchvision's download() would do the same
            # but falls back to the network when a checksum differs.
            try:
                for name in _MNIST_FILES:
                    extract_archive(str(spec.raw(root) / f"{name}.gz"), str(spec.raw(root)))
            except OSError as err:
                raise DatasetError(
                    f"Could not unpack the {spec.folder} files in {spec.raw(root)} ({err}); the folder "
                    "must be writable (copy or link the .gz files into a writable data root)."
                ) from err
        else:
            allowed, why = _download_allowed(download)
            if not allowed:
                raise DatasetUnavailable(spec.missing_message(root, why))
            try:
                return spec.open(root, train, download=True)
            except (RuntimeError, URLError, OSError) as err:
                raise DatasetUnavailable(spec.missing_message(root, f"the download failed ({err})")) from err
    return spec.open(root, train, download=False)


def _idx_loader(spec: _IdxSet) -> Loader:
    def load(split: SplitName, root: Path, download: bool) -> ImageSplit:
        ds = _open_idx(spec, split, Path(root), download)
        images = ds.data.to(torch.float32).div_(255.0).unsqueeze(1)  # (N, 1, 28, 28)
        return ImageSplit(labels=ds.targets.to(torch.int64), images=images)

    return load


_MNIST = _IdxSet(
    "MNIST", "https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of http://yann.lecun.com/exdb/mnist/)"
)
_FASHION = _IdxSet("FashionMNIST", "https://github.com/zalandoresearch/fashion-mnist")

register(
    DatasetSource(
        info=DatasetInfo(
            name="mnist",
            modality="image",
            classes=tuple(str(d) for d in range(10)),
            input_shape=(1, 28, 28),
            mean=(0.1307,),  # train split, measured once
            std=(0.3081,),
            description="Handwritten digits, 28x28 grey: 60,000 train / 10,000 test.",
            source_url="http://yann.lecun.com/exdb/mnist/",
        ),
        loader=_idx_loader(_MNIST),
        is_available=_MNIST.available,
    )
)

register(
    DatasetSource(
        info=DatasetInfo(
            name="fashion_mnist",
            modality="image",
            classes=(
                "T-shirt/top",
                "Trouser",
                "Pullover",
                "Dress",
                "Coat",
                "Sandal",
                "Shirt",
                "Sneaker",
                "Bag",
                "Ankle boot",
            ),
            input_shape=(1, 28, 28),
            mean=(0.2860,),  # train split, measured once
            std=(0.3530,),
            description="Zalando's clothing photos, 28x28 grey, 10 classes: 60,000 train / 10,000 test.",
            source_url="https://github.com/zalandoresearch/fashion-mnist",
        ),
        loader=_idx_loader(_FASHION),
        is_available=_FASHION.available,
    )
)


_CIFAR_FOLDER = "cifar-10-batches-py"
_CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


def _cifar_available(root: Path) -> bool:
    return all((Path(root) / _CIFAR_FOLDER / f).is_file() for f in _CIFAR_FILES)


def _cifar_missing(root: Path, why: str) -> str:
    return (
        f"CIFAR-10 is not under the data root and {why}. Download {_CIFAR_URL} (official source: "
        f"https://www.cs.toronto.edu/~kriz/cifar.html) and unpack it so that {Path(root) / _CIFAR_FOLDER} "
        "holds data_batch_1 ... data_batch_5, test_batch and batches.meta, or set XAIDASH_DATA to a "
        "folder that holds them."
    )


def _load_cifar(split: SplitName, root: Path, download: bool) -> ImageSplit:
    from torchvision import datasets

    root = Path(root)
    if not _cifar_available(root):
        allowed, why = _download_allowed(download)
        if not allowed:
            raise DatasetUnavailable(_cifar_missing(root, why))
        try:
            datasets.CIFAR10(str(root), train=True, download=True)
        except (RuntimeError, URLError, OSError) as err:
            raise DatasetUnavailable(_cifar_missing(root, f"the download failed ({err})")) from err
    try:
        ds = datasets.CIFAR10(str(root), train=split == "train", download=False)
    except RuntimeError as err:  # files there but failing torchvision's checksum
        raise DatasetError(
            f"The CIFAR-10 files in {root / _CIFAR_FOLDER} are damaged ({err}); delete them and download again."
        ) from err
    images = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2))).to(torch.float32).div_(255.0)
    return ImageSplit(labels=torch.as_tensor(ds.targets, dtype=torch.int64), images=images)


register(
    DatasetSource(
        info=DatasetInfo(
            name="cifar10",
            modality="image",
            classes=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
            input_shape=(3, 32, 32),
            mean=(0.4914, 0.4822, 0.4465),  # train split, measured once
            std=(0.2470, 0.2435, 0.2616),
            description="Small colour photos, 32x32, 10 classes: 50,000 train / 10,000 test.",
            source_url="https://www.cs.toronto.edu/~kriz/cifar.html",
        ),
        loader=_load_cifar,
        is_available=_cifar_available,
    )
)
