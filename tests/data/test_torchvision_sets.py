"""MNIST, Fashion-MNIST (read from the shared offline copies) and CIFAR-10 (absent here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.errors import DatasetUnavailable
from xaidash.data.paths import data_root
from xaidash.data.registry import get_info, get_source, load_split


def test_infos():
    mnist, fashion, cifar = get_info("mnist"), get_info("fashion_mnist"), get_info("cifar10")
    assert mnist.input_shape == fashion.input_shape == (1, 28, 28)
    assert cifar.input_shape == (3, 32, 32) and len(cifar.mean) == len(cifar.std) == 3
    assert mnist.classes == tuple("0123456789")
    assert fashion.classes[0] == "T-shirt/top" and fashion.classes[-1] == "Ankle boot"
    assert cifar.classes[0] == "airplane" and cifar.classes[-1] == "truck"
    assert all(i.num_classes == 10 and not i.builtin and i.source_url for i in (mnist, fashion, cifar))


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist", "cifar10"])
def test_missing_offline_names_the_folder(name):
    root = data_root()  # the autouse fixture's empty root, with XAIDASH_OFFLINE=1
    assert not get_source(name).is_available(root)
    with pytest.raises(DatasetUnavailable) as err:
        load_split(name, "train")
    message = str(err.value)
    folder = {
        "mnist": root / "MNIST" / "raw",
        "fashion_mnist": root / "FashionMNIST" / "raw",
        "cifar10": root / "cifar-10-batches-py",
    }[name]
    assert str(folder) in message
    assert "http" in message  # where to get the files
    assert "offline" in message.lower() or "OFFLINE" in message


def test_cifar_message_names_the_archive():
    with pytest.raises(DatasetUnavailable, match=r"cifar-10-python\.tar\.gz.*data_batch_1"):
        load_split("cifar10", "test")


def test_download_false_does_not_touch_the_network(monkeypatch):
    monkeypatch.delenv("XAIDASH_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(DatasetUnavailable, match="download=False"):
        load_split("mnist", "train", download=False)


def test_mnist(offline_data):
    assert get_source("mnist").is_available(offline_data)
    train, test = load_split("mnist", "train"), load_split("mnist", "test")
    assert (len(train), len(test)) == (60000, 10000)
    assert train.images.shape == (60000, 1, 28, 28) and test.images.shape == (10000, 1, 28, 28)
    assert train.images.dtype == torch.float32 and train.labels.dtype == torch.int64
    assert train.images.min() == 0.0 and train.images.max() == 1.0
    assert torch.bincount(train.labels).tolist()[1] == 6742
    assert torch.bincount(test.labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    info = get_info("mnist")
    np.testing.assert_allclose(train.images.mean().item(), info.mean[0], atol=1e-3)
    np.testing.assert_allclose(train.images.std().item(), info.std[0], atol=1e-3)
    assert torch.equal(load_split("mnist", "test").images, test.images)  # the same bytes every time


def test_fashion_mnist(offline_data):
    assert get_source("fashion_mnist").is_available(offline_data)
    train, test = load_split("fashion_mnist", "train"), load_split("fashion_mnist", "test")
    assert train.images.shape == (60000, 1, 28, 28) and test.images.shape == (10000, 1, 28, 28)
    assert torch.bincount(train.labels).tolist() == [6000] * 10
    assert torch.bincount(test.labels).tolist() == [1000] * 10
    info = get_info("fashion_mnist")
    np.testing.assert_allclose(train.images.mean().item(), info.mean[0], atol=1e-3)
    np.testing.assert_allclose(train.images.std().item(), info.std[0], atol=1e-3)


def test_failed_download_is_unavailable(tmp_path, monkeypatch):
    """Online with download=True, a network error becomes DatasetUnavailable naming the folder."""
    from urllib.error import URLError

    from torchvision import datasets

    monkeypatch.delenv("XAIDASH_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls: list[bool] = []

    def unreachable(root: str, train: bool, download: bool):
        calls.append(download)
        raise URLError("name resolution failed")

    monkeypatch.setattr(datasets, "FashionMNIST", unreachable)
    monkeypatch.setattr(datasets, "CIFAR10", unreachable)
    with pytest.raises(DatasetUnavailable, match=r"download failed.*name resolution failed") as err:
        load_split("fashion_mnist", "train", root=tmp_path)
    assert str(tmp_path / "FashionMNIST" / "raw") in str(err.value)
    with pytest.raises(DatasetUnavailable, match=r"download failed"):
        load_split("cifar10", "train", root=tmp_path)
    assert calls == [True, True]
