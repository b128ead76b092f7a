"""Tables through training: the rows are prepared once by the table adapter (numeric columns standardised with the
training split's mean and std, categories one-hot) and held as device tensors; `xaidash train` writes a normal run
folder (the columns in config.json, checkpoints, the test accuracy and confusion matrix), `xaidash runs` lists it,
a run resumes for more epochs, and picture-only settings are refused."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from xaidash.dashboard.cli import main
from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_info, load_split
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import list_runs, load_bundle
from xaidash.models.training.batches import TensorData
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.data import split_data


def test_rows_are_standardised_and_one_hot_once_on_the_device() -> None:
    info = get_info("planted")
    split = load_split("planted", "train")
    data = split_data(split, None, info, None, torch.device("cpu"), 0)
    assert isinstance(data, TensorData) and data.x.dtype == torch.float32
    categorical = [c for c in info.columns if c.categorical]
    assert data.x.shape == (
        len(split),
        len(info.columns) - len(categorical) + sum(len(c.categories) for c in categorical),
    )
    numeric = [i for i, c in enumerate(info.columns) if not c.categorical]
    # the numeric columns come first in planted's prepared rows: (value - mean) / std of the training split
    raw = split.rows[:, numeric].numpy()
    expected = (raw - raw.mean(0)) / raw.std(0)
    np.testing.assert_allclose(data.x[:, : len(numeric)].numpy(), expected, atol=1e-3)
    one_hot = data.x[:, len(numeric) :]
    assert torch.equal(one_hot.sum(1), torch.ones(len(split)))
    assert torch.equal(one_hot.argmax(1), split.rows[:, -1].long())  # group's code -> its position
    assert torch.equal(data.y, split.labels)


def test_a_subset_and_an_empty_one_keep_the_prepared_width() -> None:
    info = get_info("wine")
    split = load_split("wine", "train")
    whole = split_data(split, None, info, None, torch.device("cpu"), 0)
    some = split_data(split, torch.tensor([5, 1, 7]), info, None, torch.device("cpu"), 0)
    assert isinstance(whole, TensorData) and isinstance(some, TensorData)
    assert torch.equal(some.x, whole.x[[5, 1, 7]]) and torch.equal(some.y, split.labels[[5, 1, 7]])
    empty = split_data(split, torch.tensor([], dtype=torch.long), info, None, torch.device("cpu"), 0)
    assert isinstance(empty, TensorData) and empty.x.shape == (0, len(info.columns)) and len(empty) == 0


def test_the_cli_trains_a_table_lists_it_and_trains_it_further(capsys) -> None:
    assert main(["train", "--dataset", "planted", "--model", "tabular_mlp", "--epochs", "2", "--quiet"]) == 0
    assert "completed" in capsys.readouterr().out
    (run,) = list_runs()
    config = json.loads(run.file("config.json").read_text())
    assert config["modality"] == "table" and config["train"]["augment"] == "none"
    assert [c["name"] for c in config["dataset_info"]["columns"]] == [c.name for c in get_info("planted").columns]
    assert config["dataset_info"]["truth_columns"] == ["x0", "x1", "x2"]
    summary = run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == 2
    assert len(run.checkpoints()) == 2
    confusion = np.asarray(summary["confusion"])
    assert confusion.shape == (2, 2) and confusion.sum() == len(load_split("planted", "test"))
    assert summary["test_acc"] == pytest.approx(np.trace(confusion) / confusion.sum())
    bundle = load_bundle(run.id, device="cpu")  # the columns come back from config.json
    assert bundle.info.columns == get_info("planted").columns
    assert main(["runs"]) == 0
    listed = capsys.readouterr().out
    assert run.id in listed and "planted" in listed and "2/2" in listed

    assert main(["train", "--resume", run.id, "--epochs", "4", "--quiet"]) == 0
    summary = run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == 4 and len(run.checkpoints()) == 4
    metrics = [json.loads(line) for line in run.file("metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics if m.get("kind", "epoch") == "epoch" and "epoch" in m][-4:] == [1, 2, 3, 4]


def test_a_table_model_explains_its_own_rows_predictions(tmp_path) -> None:
    assert main(["train", "--dataset", "wine", "--model", "tabular_mlp", "--epochs", "1", "--quiet"]) == 0
    bundle = load_bundle(list_runs()[0].id, device="cpu")
    test = load_split("wine", "test")
    rows = bundle.adapter.items(test, [0, 1, 2])
    probs = bundle.predict_proba(rows)
    assert probs.shape == (3, 3) and torch.allclose(probs.sum(1), torch.ones(3), atol=1e-5)
    assert bundle.adapter.one_line(rows[0], bundle.info, 60).startswith(f"{bundle.info.columns[0].name} ")


@pytest.mark.parametrize("augment", ["shift", "flip", "shift+flip"])
def test_picture_augmentations_are_refused_for_rows(augment: str) -> None:
    refusal = f"Augmentation '{augment}' does not apply to the rows of wine; choose none."
    with pytest.raises(ModelError, match=f"^{re.escape(refusal)}$"):
        TrainConfig(dataset="wine", model="tabular_mlp", augment=augment).validate()
    TrainConfig(dataset="wine", model="tabular_mlp", augment="none").validate()
    assert "shift" in modality_of(get_info("shapes").modality).augmentations  # images keep theirs
    TrainConfig(dataset="shapes", model="resnet_small", augment=augment).validate()
