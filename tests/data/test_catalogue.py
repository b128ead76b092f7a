"""Every data set is registered with consistent info, and the built-in ones work offline."""

from __future__ import annotations

import pytest

from xaidash.data.errors import DatasetError
from xaidash.data.paths import data_root
from xaidash.data.registry import get_source, list_datasets, load_split

NAMES = {"shapes", "cues", "digits", "mnist", "fashion_mnist", "cifar10", "sst2", "sms_spam"}


def test_all_registered_with_consistent_info():
    infos = {i.name: i for i in list_datasets()}
    assert set(infos) >= NAMES
    for name in NAMES:
        info = infos[name]
        assert info.description and len(info.classes) == len(set(info.classes)) >= 2
        if info.modality == "image":
            channels = info.input_shape[0]
            assert len(info.input_shape) == 3 and len(info.mean) == len(info.std) == channels
            assert all(0 < m < 1 for m in info.mean) and all(0 < s < 1 for s in info.std)
        else:
            assert info.input_shape == () and not info.mean
        assert not (info.has_masks and info.modality == "text") and not (
            info.has_rationales and info.modality == "image"
        )


@pytest.mark.parametrize("name", ["shapes", "cues", "digits"])
def test_builtins_work_offline_from_an_empty_root(name):
    source = get_source(name)
    assert source.info.builtin and source.is_available(data_root())
    split = load_split(name, "test")
    assert len(split) > 0 and int(split.labels.max()) < source.info.num_classes and int(split.labels.min()) >= 0


def test_unknown_names():
    with pytest.raises(DatasetError, match="imagefolder:<path>"):
        get_source("no_such_set")
    with pytest.raises(DatasetError, match="split"):
        load_split("shapes", "validation")
