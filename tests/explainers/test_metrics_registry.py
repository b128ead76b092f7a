"""The metric registry: every metric declares its facts, `scoring.METRICS` keeps its (title, direction) shape,
and which page scores what follows the declared cost."""

from __future__ import annotations

import torch
from table_runs import fitted_bundle

from xaidash.data.registry import get_source, load_split
from xaidash.explainers import explain
from xaidash.explainers.metrics.registry import PAGES, REGISTRY, metrics_for
from xaidash.explainers.modalities import ADAPTERS, adapter_of
from xaidash.explainers.scoring import METRIC_MEANING, METRICS, input_metrics, metric_meaning
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


def test_every_metric_declares_its_facts() -> None:
    ids = [spec.id for spec in REGISTRY]
    assert list(METRICS) == ids and set(METRIC_MEANING) == set(ids)
    for spec in REGISTRY:
        k = spec.id
        assert METRICS[k] == (spec.title, spec.better)
        assert spec.better in ("lower is better", "higher is better")
        assert spec.cost in ("cheap", "costly") and set(spec.pages) <= set(PAGES) and spec.pages
        low, high = spec.value_range
        assert low is None or high is None or low < high
        for modality in ("image", "text"):
            assert "{" not in metric_meaning(k, modality)


def test_each_adapter_lists_registered_metrics_only() -> None:
    """Which metrics apply to a modality is its adapter's declaration; every one it lists is registered."""
    for adapter in ADAPTERS:
        assert set(adapter.metrics) <= {spec.id for spec in REGISTRY}, adapter.id
    assert {m.id for m in metrics_for("compare", "text")} <= set(adapter_of("text").metrics)


def test_the_explain_page_scores_only_cheap_new_metrics() -> None:
    explain_page = {m.id for m in metrics_for("explain", "image")}
    assert {"sparseness", "complexity"} <= explain_page
    assert not {"local_lipschitz", "max_sensitivity", "infidelity", "random_logit", "road_morf"} & explain_page
    compare_page = {m.id for m in metrics_for("compare", "image")}
    assert {"local_lipschitz", "max_sensitivity", "infidelity", "random_logit", "road_morf", "road_lerf"} <= (
        compare_page
    )
    assert "local_lipschitz" not in {m.id for m in metrics_for("compare", "text")}


def test_compare_scores_every_registered_image_metric() -> None:
    torch.manual_seed(0)
    info = get_source("shapes").info
    bundle = ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))
    x = torch.rand(2, *info.input_shape)
    e = explain(bundle, x, None, "saliency")
    values, errors = input_metrics(bundle, x, e, steps=4, page="compare")
    assert not errors
    expected = {m.id for m in metrics_for("compare", "image")} - {"pointing_game", "energy_in_mask"}
    expected -= {"completeness_gap"}  # saliency declares no completeness
    assert set(values) == expected
    for k, v in values.items():
        low, high = REGISTRY.get(k).value_range
        assert len(v) == 2 and all((low is None or x >= low - 1e-6) and (high is None or x <= high + 1e-6) for x in v)


def test_random_logit_is_neither_offered_nor_scored_for_a_number_to_predict() -> None:
    """A random other class needs two outputs: a model that predicts a number (one output) is not offered the metric
    on Compare and scoring leaves it out, where it used to fail with 'needs a model with at least two classes'."""
    regression, classes = fitted_bundle("diabetes", steps=1), fitted_bundle("breast_cancer", steps=1)
    every = {m.id for m in metrics_for("compare", "table")}
    assert every - {m.id for m in metrics_for("compare", "table", regression)} == {"random_logit"}
    assert {m.id for m in metrics_for("compare", "table", classes)} == every
    for bundle, dataset in ((regression, "diabetes"), (classes, "breast_cancer")):
        x = load_split(dataset, "test").rows[:2]
        values, errors = input_metrics(bundle, x, explain(bundle, x, None, "ig"), steps=4, page="compare")
        assert not errors, errors
        assert ("random_logit" in values) is (bundle is classes) and "sparseness" in values
