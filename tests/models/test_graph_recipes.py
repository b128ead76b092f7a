"""The graph models' recipes (issue 32): one recommended model per graph data set (the Train page's default), whose
recorded accuracy on BA-Shapes and BA-2Motifs is above the issue's 95%, and (slow) the recorded recipes, trained
through the engine as `xaidash train --dataset D --model M` trains them, reach the accuracy they record."""

from __future__ import annotations

import os

import pytest
import torch

import xaidash.data.sets  # registers the data sets
import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.registry import get_info
from xaidash.models.registry import get_spec, models_for, recommended_model
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

GRAPH_MODELS = ("gcn", "sage", "gin", "gat")
GRAPH_SETS = ("ba_shapes", "tree_cycles", "tree_grid", "infection", "karate", "ba_2motifs")
ISSUE_FLOOR = {"ba_shapes": 0.95, "ba_2motifs": 0.95}  # what issue 32 asks of the defaults
POINTS = 0.03  # a recipe's run lands within 3 points of the accuracy it records


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("dataset", GRAPH_SETS)
def test_each_graph_set_recommends_one_measured_model(dataset: str) -> None:
    info = get_info(dataset)
    recommended = [s.name for s in models_for(info) if s.recipe(info)[0] == dataset and s.recipe(info)[1].recommended]
    assert len(recommended) == 1, (dataset, recommended)
    spec = recommended_model(info)
    assert spec is not None and spec.name == recommended[0] and spec.name in GRAPH_MODELS
    recipe = spec.recipes[dataset]
    assert recipe.expected_acc is not None
    assert recipe.expected_acc > ISSUE_FLOOR.get(dataset, 1 / info.num_classes), (dataset, recipe.expected_acc)


ALL_MEASURED = [
    (name, key)
    for name in GRAPH_MODELS
    for key, recipe in get_spec(name).recipes.items()
    if recipe.expected_acc is not None
]
# By default the two the issue sets a floor for, with their recommended models (about a minute each on a quiet
# machine); XAIDASH_ALL_RECIPES=1 checks every recorded one, as after a change to a graph model or the engine.
DEFAULTS = [(recommended_model(get_info(d)).name, d) for d in ISSUE_FLOOR]  # type: ignore[union-attr]
MEASURED = ALL_MEASURED if os.environ.get("XAIDASH_ALL_RECIPES") == "1" else DEFAULTS


def test_the_recipes_checked_by_default_are_recorded_ones() -> None:
    assert set(DEFAULTS) <= set(ALL_MEASURED)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "dataset"), MEASURED)
def test_each_measured_graph_recipe_reaches_its_recorded_accuracy(model: str, dataset: str, one_thread) -> None:
    recipe = get_spec(model).recipes[dataset]
    result = train(TrainConfig(dataset=dataset, model=model, device="cpu"))
    summary = result.run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == recipe.epochs
    assert recipe.expected_acc is not None
    assert abs(summary["test_acc"] - recipe.expected_acc) <= POINTS, (summary["test_acc"], recipe.expected_acc)
