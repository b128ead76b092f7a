"""Compare's expected time (issue 29: the default run took 350 s with no estimate beforehand): the estimate is
computed from the methods' and metrics' declared passes priced by the model's measured time per row, the metrics
that recompute maps are declared as such (and so offered unticked), and a chosen subset of metrics is all that is
scored."""

from __future__ import annotations

import pytest
import torch

from xaidash.data.registry import get_source
from xaidash.explainers.comparison.compare import compare_methods
from xaidash.explainers.comparison.estimate import (
    MethodProbe,
    PassTimes,
    cost_words,
    estimate_compare,
    measure_pass_times,
    metric_cost,
    probe_method,
)
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.registry import get_method
from xaidash.explainers.samples import pick_test_sample
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec

TIMES = PassTimes(forward=0.001, backward=0.003, imputed=0.01)


@pytest.fixture(scope="module")
def image_bundle() -> ModelBundle:
    torch.manual_seed(0)
    info = get_source("shapes").info
    return ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))


def test_metrics_that_recompute_maps_are_declared_so():
    recompute = {m.id for m in REGISTRY.all() if m.recomputes_maps}
    assert recompute == {"max_sensitivity", "local_lipschitz", "random_logit"}
    assert cost_words(REGISTRY.get("deletion_auc"), 16) == "17 forward passes"
    assert cost_words(REGISTRY.get("road_morf"), 16) == "10 forward passes + 10 imputations"
    assert cost_words(REGISTRY.get("max_sensitivity"), 16) == "4 recomputed maps"
    assert cost_words(REGISTRY.get("sparseness"), 16) == "the map only"


def test_shared_recomputed_maps_are_counted_once():
    both = [REGISTRY.get("max_sensitivity"), REGISTRY.get("local_lipschitz")]
    _, maps = metric_cost(both, 16)
    assert maps == 4  # the same 4 neighbours' maps serve both
    _, maps = metric_cost([*both, REGISTRY.get("random_logit")], 16)
    assert maps == 5


def test_the_estimate_is_the_declared_passes_priced_per_row(image_bundle):
    n, steps = 8, 16
    chosen = ["deletion_auc", "road_lerf", "max_sensitivity"]
    e = estimate_compare(image_bundle, ["saliency", "ig"], {}, n, TIMES, metrics=chosen, steps=steps, sanity=False)
    methods = {}
    for m in ("saliency", "ig"):
        fb, f = get_method(m, "image").count_passes(image_bundle, {}, n, 0)
        methods[m] = fb * TIMES.backward + f * TIMES.forward
    assert methods["saliency"] == pytest.approx(n * TIMES.backward)  # one gradient per input
    assert e.per_method == pytest.approx(methods)
    assert e.maps == pytest.approx(sum(methods.values()) + n * TIMES.forward)  # + the sample's predictions
    rows = (steps + 1) * TIMES.forward + 10 * (TIMES.forward + TIMES.imputed)  # deletion, ROAD LeRF
    recomputed = {m: 4 * methods[m] for m in methods}  # 4 neighbours' maps per input, at the method's own price
    assert e.metrics == pytest.approx(2 * n * rows + sum(recomputed.values()))
    assert e.sanity == 0 and not e.unpriced
    # The sanity check: measured seconds per input where probed, else its steps at the method's declared price.
    with_sanity = estimate_compare(
        image_bundle,
        ["saliency", "ig"],
        {},
        n,
        TIMES,
        metrics=[],
        sanity=True,
        sanity_inputs=4,
        sanity_steps=3,
        probes={"ig": MethodProbe(maps=methods["ig"] / n, sanity=0.5)},
    )
    assert with_sanity.sanity == pytest.approx(4 * (0.5 + methods["ig"] / n) + 4 * (4 * methods["saliency"] / n))


def test_the_probe_measures_this_model(image_bundle):
    times = measure_pass_times(image_bundle, rows=4, repeats=1)
    assert times.rows == 4 and min(times.forward, times.backward, times.imputed) > 0  # no order: a shared CPU
    probe = probe_method(image_bundle, "saliency", {}, sanity_steps=1, inputs=2)
    assert 0 < probe.maps < 5 and probe.sanity is not None and 0 < probe.sanity < 5
    assert probe_method(image_bundle, "saliency", {}, sanity_steps=None, inputs=2).sanity is None
    # A probed method is priced at its measured time instead of its declared passes.
    probed = estimate_compare(
        image_bundle, ["saliency"], {}, 4, TIMES, metrics=[], sanity=False, probes={"saliency": probe}
    )
    assert probed.per_method["saliency"] == pytest.approx(4 * probe.maps)


def test_compare_scores_only_the_chosen_metrics(image_bundle):
    sample = pick_test_sample(image_bundle, n=2, seed=0)
    result = compare_methods(image_bundle, sample, ["saliency"], steps=4, sanity=False, metrics=["sparseness"])
    assert set(result.per_input["saliency"]) == {"sparseness", "seconds"}
    offered = {m.id for m in metrics_for("compare", "image")}
    assert {"deletion_auc", "max_sensitivity"} <= offered
