"""Every data set is registered with consistent info, the built-in ones work offline, and the catalogue
(`xaidash datasets`, the Home and Train pages) says where each one stands."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xaidash.data import registry
from xaidash.data.catalogue import dataset_status, datasets_table
from xaidash.data.errors import DatasetError
from xaidash.data.paths import data_root
from xaidash.data.registry import DatasetInfo, get_source, list_datasets, load_split

NAMES = {"shapes", "cues", "digits", "mnist", "fashion_mnist", "cifar10", "sst2", "sms_spam"}


def test_the_expected_data_sets_are_registered():
    assert {i.name for i in list_datasets()} >= NAMES


@pytest.mark.parametrize("info", list_datasets(), ids=lambda i: i.name)
def test_registered_with_consistent_info(info: DatasetInfo):
    fewest = 1 if info.regression is not None else 2  # a number to predict: its one name, the model's one output
    assert info.description and len(info.classes) == len(set(info.classes)) >= fewest
    if info.forecast is not None:  # a number per step ahead: one output each
        assert info.regression is not None and info.classes == info.forecast.steps
    else:
        assert info.regression is None or info.classes == (info.regression.name,)
    if info.modality == "image":
        channels = info.input_shape[0]
        assert len(info.input_shape) == 3 and len(info.mean) == len(info.std) == channels
        assert all(0 < m < 1 for m in info.mean) and all(0 < s < 1 for s in info.std)
    elif info.modality == "series":  # channels x steps, one training mean and std per channel, each channel named
        channels = info.input_shape[0]
        assert len(info.input_shape) == 2 and len(info.mean) == len(info.std) == len(info.channel_names) == channels
        assert all(s > 0 for s in info.std) and info.step_name
    elif info.graph is not None:  # graphs: one training mean and std per node feature, each feature named
        features = len(info.graph.feature_names)
        assert info.input_shape == (features,) and len(info.mean) == len(info.std) == features
        assert all(s > 0 for s in info.std) and info.graph.task in ("node", "graph") and info.graph.hops >= 1
    elif info.columns:  # a table: one value per column
        assert info.input_shape == (len(info.columns),) and not info.mean
    else:
        assert info.input_shape == () and not info.mean
    assert not (info.has_masks and info.modality == "text") and not (info.has_rationales and info.modality == "image")


@pytest.mark.parametrize("name", [i.name for i in list_datasets() if i.builtin])
def test_builtins_work_offline_from_an_empty_root(name):
    source = get_source(name)
    assert source.info.builtin and source.is_available(data_root())
    split = load_split(name, "test")
    assert len(split) > 0
    if source.info.regression is not None:  # values to predict, in the target's units
        assert split.labels.is_floating_point() and bool(split.labels.isfinite().all())
    else:
        assert int(split.labels.max()) < source.info.num_classes and int(split.labels.min()) >= 0


def test_unknown_names():
    with pytest.raises(DatasetError, match="imagefolder:<path>"):
        get_source("no_such_set")
    with pytest.raises(DatasetError, match="split"):
        load_split("shapes", "validation")


def test_status_in_an_empty_data_root():
    rows = {r["name"]: r for r in datasets_table()}
    assert rows["diabetes"]["classes"] == "a number"  # a regression target, not one class
    assert [r["name"] for r in datasets_table()] == [i.name for i in list_datasets()]
    assert rows["shapes"] == {
        "name": "shapes",
        "modality": "image",
        "classes": "4",
        "input": "x".join(map(str, get_source("shapes").info.input_shape)) + " images",
        "ground truth": "masks",
        "status": "built in",
    }
    assert rows["cues"]["input"] == "texts" and rows["cues"]["ground truth"] == "rationales"
    assert rows["breast_cancer"]["input"] == "rows of 30 columns" and rows["wine"]["input"] == "rows of 13 columns"
    assert rows["planted"]["ground truth"] == "columns x0, x1, x2" and rows["breast_cancer"]["ground truth"] == ""
    assert rows["mnist"]["status"] == rows["sst2"]["status"] == "needs download"


def test_status_of_data_under_the_data_root(offline_data):
    rows = {r["name"]: r["status"] for r in datasets_table()}
    assert rows["mnist"] == rows["fashion_mnist"] == rows["sst2"] == rows["sms_spam"] == "available"
    assert rows["cifar10"] == "needs download"


def test_a_source_that_cannot_say_is_unavailable_not_fatal(monkeypatch):
    def broken(root):
        raise PermissionError("data root not readable")

    source = get_source("mnist")
    monkeypatch.setitem(registry.DATASETS._entries, "mnist", replace(source, is_available=broken))
    assert dataset_status(source.info) == "unavailable"
    assert {r["name"]: r["status"] for r in datasets_table()}["mnist"] == "unavailable"
