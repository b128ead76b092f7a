"""The series adapter with the series methods (explainers/methods/series_*.py) end to end on the stand-in models of
tests/support/series_method_bundles.py: every registered series method explains through `explain` into (N, T) maps,
draws with its colour bar, and every metric the adapter lists scores on Compare without an error; a model whose
class reads only a known window is found there by the pointing game."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from series_method_bundles import bundle_of, conv_spec, raw_series, series_info, window_spec

from xaidash.explainers import explain
from xaidash.explainers.figures.map_figure import explanation_figures
from xaidash.explainers.metrics.completeness import declared_terms
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.registry import methods_for
from xaidash.explainers.scoring import input_metrics

INFO = series_info(channels=2, steps=32)
CONV_METHODS = [m.id for m in methods_for(bundle_of(conv_spec(), INFO))]


def test_the_series_methods_apply_to_a_conv_model() -> None:
    assert {"saliency", "ig", "occlusion", "gradcam", "lime"} <= set(CONV_METHODS), CONV_METHODS


@pytest.mark.parametrize("method", CONV_METHODS)
def test_every_series_method_explains_draws_and_scores(method: str) -> None:
    torch.set_num_threads(1)
    info = INFO
    bundle = bundle_of(conv_spec(), info)
    x = raw_series(info, 2)
    e = explain(bundle, x, None, method, seed=0)
    maps = np.asarray(e.attributions)
    assert maps.shape == (2, 32) and maps.dtype == np.float32 and np.isfinite(maps).all()
    figures = explanation_figures({method: e}, 0, classes=info.classes, image=x[0])
    fig = figures[method]
    assert fig.figure_png and fig.legend.units and "{" not in fig.legend.units
    values, errors = input_metrics(bundle, x, e, steps=4, page="compare")
    assert not errors, errors
    expected = {m.id for m in metrics_for("compare", "series", bundle)} - {"rationale_pointing", "rationale_energy"}
    if "completeness_gap" not in values:
        expected.discard("completeness_gap")  # applies only to a method that declares completeness
    assert set(values) == expected
    if "completeness_gap" in values:  # IG, DeepLift, KernelSHAP: the sum is f(x) - f(the baseline series)
        assert max(values["completeness_gap"]) < 0.02, values["completeness_gap"]
    for k, v in values.items():
        low, high = REGISTRY.get(k).value_range
        assert all(
            np.isnan(a) or ((low is None or a >= low - 1e-6) and (high is None or a <= high + 1e-6)) for a in v
        ), (k, v)


def test_the_pointing_game_finds_the_window_a_model_reads() -> None:
    info = series_info(channels=1, steps=32)
    bundle = bundle_of(window_spec(10, 16), info)
    x = raw_series(info, 3)
    e = explain(bundle, x, [1, 1, 1], "ig", seed=0)
    window = list(range(10, 16))
    values, errors = input_metrics(bundle, x, e, steps=4, page="explain", rationales=[window] * 3)
    assert not errors, errors
    assert values["rationale_pointing"] == [1.0, 1.0, 1.0]
    assert all(v > 0.99 for v in values["rationale_energy"])
    elsewhere = list(range(20, 26))
    values, _ = input_metrics(bundle, x, e, steps=4, page="explain", rationales=[elsewhere] * 3)
    assert values["rationale_pointing"] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("method", "baseline", "diagnostic"),
    [
        ("ig", "zero", "convergence_delta"),
        ("ig", "smoothed", "convergence_delta"),
        ("shap_kernel", "interpolation", "additivity_gap"),
    ],
)
def test_completeness_is_checked_against_the_series_baseline(method: str, baseline: str, diagnostic: str) -> None:
    """f(reference) is the method's own baseline series: the gap the metric finds is the method's own diagnostic."""
    bundle = bundle_of(conv_spec(), INFO)
    x = raw_series(INFO, 2)
    e = explain(bundle, x, None, method, seed=0, baseline=baseline)
    terms = declared_terms(bundle, x, e)
    np.testing.assert_allclose(terms.absolute_gaps(), np.abs(e.diagnostics[diagnostic]), atol=2e-5)
    values, errors = input_metrics(bundle, x, e, steps=4, page="compare", only=["completeness_gap"])
    assert not errors and len(values["completeness_gap"]) == 2
