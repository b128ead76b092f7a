"""Label noise for training (`TrainConfig.label_noise`, `xaidash train --label-noise F`): a seeded fraction of the
training samples (validation excluded) trained with another class, recorded in the run's label_noise.json, and
`training_samples(run)` giving back exactly the samples and labels the engine trained with (image and text runs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from train_configs import quick

from xaidash.dashboard.cli import main
from xaidash.data.registry import ImageSplit, get_info, load_split
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import list_runs, runs_root
from xaidash.models.training.batches import LoaderData, TensorData
from xaidash.models.training.data import (
    LABEL_NOISE,
    TrainingSamples,
    _apply_noise,
    _Relabelled,
    flip_labels,
    split_indices,
    training_samples,
)
from xaidash.models.training.distributed import SINGLE
from xaidash.models.training.engine import train


def test_flip_labels_is_seeded_exact_and_always_another_class() -> None:
    labels = torch.arange(1000) % 4
    flipped = flip_labels(labels, 4, 0.05, seed=3)
    changed = flipped != labels
    assert int(changed.sum()) == 50 and ((flipped >= 0) & (flipped < 4)).all()
    assert torch.equal(flip_labels(labels, 4, 0.05, seed=3), flipped)
    assert not torch.equal(flip_labels(labels, 4, 0.05, seed=4), flipped)
    assert torch.equal(flip_labels(labels, 4, 0.0, seed=3), labels) and torch.equal(labels, torch.arange(1000) % 4)
    # every other class is drawn: the flips are not all to one neighbour
    assert len(set(((flipped - labels) % 4)[changed].tolist())) == 3


@pytest.mark.parametrize("bad", [-0.1, 0.5, 0.9, math.nan])
def test_bad_label_noise_is_refused(bad: float) -> None:
    with pytest.raises(ModelError, match=r"label noise must be in \[0, 0.5\)"):
        quick(label_noise=bad).validate()


def test_cli_refuses_bad_label_noise_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--dataset", "digits", "--model", "mlp", "--epochs", "1", "--quiet", "--label-noise", "0.5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "label noise must be in [0, 0.5)" in err
    assert not runs_root().exists() or not list_runs()


def test_label_noise_on_a_number_to_predict_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "train",
        "--dataset",
        "diabetes",
        "--model",
        "tabular_mlp",
        "--epochs",
        "1",
        "--quiet",
        "--label-noise",
        "0.1",
    ]
    assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "a number to predict (disease progression), not classes" in errors[0], errors
    assert not runs_root().exists() or not list_runs()


@pytest.mark.parametrize(("dataset", "model"), [("digits", "mlp"), ("cues", "text_cnn")])
def test_run_records_its_flips_and_training_samples_gives_them_back(dataset: str, model: str) -> None:
    result = train(quick(dataset=dataset, model=model, epochs=1, max_train_samples=300, label_noise=0.1, seed=5))
    assert result.ok, result.error
    run = result.run
    assert run.config()["train"]["label_noise"] == 0.1
    samples = training_samples(run)
    split = load_split(dataset, "train")
    train_idx, val_idx = split_indices(len(split), 5, 300, 0.1)
    assert torch.equal(samples.indices, train_idx) and len(samples) == run.config()["train_samples"] == 270
    assert not set(val_idx.tolist()) & set(samples.indices.tolist()), "validation samples are never training samples"
    assert torch.equal(samples.dataset_labels, split.labels[train_idx].long())
    assert int(samples.flipped.sum()) == 27
    recorded = json.loads(run.file(LABEL_NOISE).read_text())
    assert recorded["train_samples"] == 270
    flips = {
        int(samples.indices[i]): (int(samples.dataset_labels[i]), int(samples.labels[i]))
        for i in samples.flipped.nonzero().flatten()
    }
    assert {r["index"]: (r["dataset_label"], r["label"]) for r in recorded["flipped"]} == flips


def test_a_run_without_noise_trains_on_the_data_set_labels() -> None:
    result = train(quick(epochs=1, max_train_samples=100))
    assert result.ok, result.error
    samples = training_samples(result.run)
    assert not samples.flipped.any() and not result.run.file(LABEL_NOISE).exists()


def test_noise_reaches_both_kinds_of_training_data(tmp_path: Path) -> None:
    from xaidash.models.runs.store import Run

    run = Run(tmp_path)
    idx = torch.tensor([4, 0, 2])
    samples = TrainingSamples(idx, torch.tensor([1, 0, 0]), torch.tensor([0, 0, 2]))  # sample 4 and 2 flipped
    tensors = TensorData(torch.zeros(3, 2), samples.dataset_labels.clone())
    _apply_noise(samples, tensors, run, seed=0, dist=SINGLE)
    assert tensors.y.tolist() == [1, 0, 0]
    # a lazily read split (image folders) reads its labels through a DataLoader: the flipped ones are swapped in
    info = get_info("shapes")
    base = [(torch.zeros(*info.input_shape), i % 4) for i in range(5)]
    split = ImageSplit(labels=torch.tensor([i % 4 for i in range(5)]), dataset=base)  # type: ignore[arg-type]
    loader = LoaderData(split, info, torch.device("cpu"), idx.tolist())
    _apply_noise(samples, loader, run, seed=0, dist=SINGLE)
    assert isinstance(loader.dataset, _Relabelled)
    assert torch.cat([y for _, y in loader.batches(8, shuffle=False)]).tolist() == [1, 0, 0]
    assert json.loads(run.file(LABEL_NOISE).read_text())["flipped"] == [
        {"index": 4, "dataset_label": 0, "label": 1},
        {"index": 2, "dataset_label": 2, "label": 0},
    ]


def test_imported_runs_have_no_training_samples(tmp_path: Path) -> None:
    from xaidash.models.runs.store import Run

    run = Run.create("shapes", "mlp", tmp_path)
    run.write_config({"model": "x", "dataset": None, "modality": "image", "source": {"kind": "module", "record": {}}})
    with pytest.raises(ModelError, match="not trained here"):
        training_samples(run)
