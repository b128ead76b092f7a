"""The series models' recipes: one recommended model per series data set (the Train page's default), and (slow) each
measured recipe trained through the engine reaches the accuracy it records; GunPoint's default beats 1-NN with DTW
(Ratanamahatana and Keogh's reference for the UCR archive) recomputed with sktime on the same train/test split."""

from __future__ import annotations

import os

import pytest
import torch

import xaidash.data.sets
import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.registry import get_info, load_split
from xaidash.models.registry import get_spec, models_for, recommended_model
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

SERIES_SETS = (
    "gunpoint",
    "arrowhead",
    "italy_power",
    "basic_motions",
    "japanese_vowels",
    "series_shapes",
    "series_shapes_mv",
)
POINTS = 0.03  # a recipe's run reaches the accuracy it records, less 3 points
DTW_GUNPOINT = 136 / 150  # 1-NN DTW on GunPoint's 150 test series, recomputed here with sktime (0.9067)


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("dataset", SERIES_SETS)
def test_each_series_set_recommends_the_convolutional_network(dataset: str) -> None:
    info = get_info(dataset)
    recommended = [s.name for s in models_for(info) if s.recipe(info)[0] == dataset and s.recipe(info)[1].recommended]
    assert recommended == ["series_cnn"], (dataset, recommended)
    assert recommended_model(info).name == "series_cnn"
    spec = get_spec("series_cnn")  # CAM and Grad-CAM apply to the default: global average pooling + linear
    assert spec.gap_classifier is not None and spec.last_conv is not None


def one_nn_dtw(dataset: str) -> float:
    """Test accuracy of sktime's 1-nearest-neighbour classifier with DTW (full window) on the data set's raw series."""
    from sktime.classification.distance_based import KNeighborsTimeSeriesClassifier

    train_split, test_split = load_split(dataset, "train"), load_split(dataset, "test")
    knn = KNeighborsTimeSeriesClassifier(distance="dtw", n_neighbors=1)
    knn.fit(train_split.series.double().numpy(), train_split.labels.numpy())
    predicted = knn.predict(test_split.series.double().numpy())
    return float((predicted == test_split.labels.numpy()).mean())


@pytest.mark.slow
def test_gunpoint_default_beats_one_nn_dtw(one_thread) -> None:
    """Recomputed, not taken from the archive's table: 1-NN DTW gets 136 of the 150 test series (0.907; the UCR
    archive publishes 0.907 too). The default model trains in seconds and must beat it."""
    assert one_nn_dtw("gunpoint") == pytest.approx(DTW_GUNPOINT, abs=1e-9)
    spec = recommended_model(get_info("gunpoint"))
    result = train(TrainConfig(dataset="gunpoint", model=spec.name, device="cpu"))
    summary = result.run.summary()
    assert summary["state"] == "completed"
    assert summary["test_acc"] > DTW_GUNPOINT, summary["test_acc"]


ALL_MEASURED = [
    (spec.name, key)
    for spec in (get_spec(n) for n in ("series_cnn", "series_gru", "series_lstm", "series_transformer"))
    for key, recipe in spec.recipes.items()
    if recipe.expected_acc is not None
]
# The suite checks one recipe per architecture, on a real archive (about 90 s in all; every recipe takes about 6
# minutes more, the multivariate and generated sets the longest); XAIDASH_ALL_RECIPES=1 checks every recorded one, as
# after a change to a series model or to the training engine.
EACH_ARCHITECTURE = [
    ("series_cnn", "italy_power"),
    ("series_gru", "gunpoint"),
    ("series_lstm", "gunpoint"),
    ("series_transformer", "gunpoint"),
]
MEASURED = ALL_MEASURED if os.environ.get("XAIDASH_ALL_RECIPES") == "1" else EACH_ARCHITECTURE


def test_the_recipes_checked_by_default_are_recorded_ones_of_every_architecture() -> None:
    assert set(EACH_ARCHITECTURE) <= set(ALL_MEASURED)
    assert {model for model, _ in EACH_ARCHITECTURE} == {model for model, _ in ALL_MEASURED}


@pytest.mark.slow
@pytest.mark.parametrize(("model", "dataset"), MEASURED)
def test_each_measured_recipe_reaches_its_recorded_accuracy(model: str, dataset: str, one_thread) -> None:
    recipe = get_spec(model).recipes[dataset]
    result = train(TrainConfig(dataset=dataset, model=model, device="cpu"))
    summary = result.run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == recipe.epochs
    assert recipe.expected_acc is not None
    # At least the recorded accuracy, less POINTS. Above it is no failure: 300 epochs of a recurrent model land
    # elsewhere on another CPU's kernels (series_lstm on GunPoint: 0.867 recorded on an AVX2 machine, 0.913 on an
    # AVX-512 one, same seed and settings).
    assert summary["test_acc"] >= recipe.expected_acc - POINTS, (summary["test_acc"], recipe.expected_acc)
