"""Table methods on a model that predicts a number (`tabular_mlp` trained on `diabetes`): every local method explains
the predicted VALUE in the target's units, never a softmax of the one output (which is always 1: every attribution
would be 0). Against the references: IG adds up to f(row) - f(reference) in units; occlusion is the drop of the
predicted value when a column is hidden; KernelSHAP agrees with shap's KernelExplainer on the regression function;
LIME equals lime's own LimeTabularExplainer in regression mode; the legend says the units."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from table_bundles import split, trained_bundle

from xaidash.explainers import explain
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.methods.table_lime import TRAINING_ROWS, lime_table_reference
from xaidash.explainers.modalities.table_values import reference_rows, training_rows
from xaidash.explainers.registry import get_method
from xaidash.models import ModelBundle

BACKGROUND = 10
METHODS = ("ig", "inputxgrad", "saliency", "occlusion", "shap_kernel", "lime")


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle("diabetes")


def _value(bundle: ModelBundle, rows: torch.Tensor) -> np.ndarray:
    """The predicted disease progression of raw rows, in its units."""
    return bundle.predict_proba(rows)[:, 0].double().numpy()


def test_the_model_predicts_values_in_the_target_s_units(bundle: ModelBundle) -> None:
    test = split("diabetes")
    pred = _value(bundle, test.rows)
    y = test.labels.double().numpy()
    r2 = 1.0 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2 > 0.2  # the test bundle overfits a little; far above the 0 of predicting the mean
    assert 25.0 < float(np.median(pred)) < 341.0  # values in the target's range, not probabilities


@pytest.mark.parametrize("method", METHODS)
def test_every_method_explains_the_predicted_value(bundle: ModelBundle, method: str) -> None:
    rows = split("diabetes").rows[:3]
    params = {"samples": 300} if method in ("shap_kernel", "lime") else {}
    e = explain(bundle, rows, method=method, **params)
    maps = np.stack([e.item(i) for i in range(len(rows))])
    assert maps.shape == (3, 10) and np.isfinite(maps).all()
    # a softmax of the one output would be 1.0 whatever the row: every value 0
    assert (np.abs(maps).max(1) > 0.1).all(), (method, maps)


@pytest.mark.parametrize("baseline", ["mean", "median", "background"])
def test_ig_adds_up_to_the_change_of_the_predicted_value(bundle: ModelBundle, baseline: str) -> None:
    rows = split("diabetes").rows[:6]
    raw_bg = training_rows(bundle, BACKGROUND, seed=3)
    assert raw_bg is not None
    e = explain(
        bundle, rows, method="ig", baseline=baseline, background=bundle.prepare(raw_bg), background_size=BACKGROUND
    )
    refs = reference_rows(baseline, bundle.info, raw_bg)
    change = _value(bundle, rows) - _value(bundle, refs).mean()
    sums = np.array([e.item(i).sum() for i in range(len(rows))])
    np.testing.assert_allclose(sums, change, atol=0.01 * np.abs(change).max() + 1e-3)
    np.testing.assert_allclose(e.diagnostics["output_change"], change, rtol=1e-4, atol=1e-3)
    assert np.abs(change).max() > 5.0  # a change in units of disease progression, not of a probability


def test_occlusion_is_the_drop_of_the_predicted_value(bundle: ModelBundle) -> None:
    rows = split("diabetes").rows[:4]
    e = explain(bundle, rows, method="occlusion", baseline="mean")
    means = torch.tensor([c.mean for c in bundle.info.columns])
    for i in range(len(rows)):
        hidden = rows[i].repeat(len(means), 1)
        hidden[torch.arange(len(means)), torch.arange(len(means))] = means
        expected = _value(bundle, rows[i : i + 1])[0] - _value(bundle, hidden)
        np.testing.assert_allclose(e.item(i), expected, rtol=1e-4, atol=1e-3)


def test_kernel_shap_agrees_with_shap_s_kernel_explainer_on_the_regression_function(bundle: ModelBundle) -> None:
    import shap

    rows = split("diabetes").rows[10:13]
    raw_bg = training_rows(bundle, BACKGROUND, seed=3)
    assert raw_bg is not None
    e = explain(
        bundle,
        rows,
        method="shap_kernel",
        samples=2000,
        background=bundle.prepare(raw_bg),
        background_size=BACKGROUND,
    )

    def f(m: np.ndarray) -> np.ndarray:
        return _value(bundle, torch.as_tensor(m, dtype=torch.float32))

    explainer = shap.KernelExplainer(f, raw_bg.double().numpy())
    for i in range(len(rows)):
        reference = np.asarray(explainer.shap_values(rows[i].double().numpy(), silent=True)).reshape(-1)
        ours = e.item(i)
        assert np.corrcoef(ours, reference)[0, 1] >= 0.95, (ours, reference)
        np.testing.assert_allclose(ours, reference, atol=0.1 * np.abs(reference).max())
        # both add up to f(row) - mean f(background), in units
        assert ours.sum() == pytest.approx(reference.sum(), abs=1e-2)
    assert max(e.diagnostics["additivity_gap"]) < 1e-2


def test_lime_equals_lime_s_own_regression_explainer(bundle: ModelBundle) -> None:
    from lime.lime_tabular import LimeTabularExplainer

    rows = split("diabetes").rows[:3]
    e = explain(bundle, rows, method="lime", samples=300, seed=5)
    training = training_rows(bundle, TRAINING_ROWS, 0)
    assert training is not None
    names = [c.name for c in bundle.info.columns]
    for i in range(len(rows)):
        reference = lime_table_reference(bundle, rows[i], 0, 300, training.double().numpy(), seed=5)
        np.testing.assert_allclose(e.item(i), reference, rtol=1e-5, atol=1e-6)
        # lime's documented regression use, written out: the same weights
        plain = LimeTabularExplainer(training.double().numpy(), mode="regression", feature_names=names, random_state=5)
        exp = plain.explain_instance(
            rows[i].double().numpy(),
            lambda m: _value(bundle, torch.as_tensor(m, dtype=torch.float32)),
            num_features=len(names),
            num_samples=300,
        )
        weights = np.zeros(len(names))
        for j, w in exp.as_map()[1]:
            weights[j] = w
        np.testing.assert_allclose(e.item(i), weights, rtol=1e-5, atol=1e-6)
        assert np.abs(weights).max() > 0.1


@pytest.mark.parametrize("method", METHODS)
def test_the_legend_says_the_units(bundle: ModelBundle, method: str) -> None:
    spec = get_method(method, "table")
    base = map_legend(spec, "table")
    legend = map_legend(spec, "table", target=bundle.regression)
    assert "predicted disease progression" in legend.units
    assert "logit" not in legend.units + legend.meaning and "probability" not in legend.units + legend.meaning
    if spec.completeness is not None:
        assert legend.units == "contribution to the predicted disease progression per column"
    assert map_legend(spec, "table", target=None) == base  # a classifier's legend is unchanged


@pytest.mark.parametrize("method", ["ig", "shap_kernel"])
def test_the_completeness_metric_reads_the_predicted_value(bundle: ModelBundle, method: str) -> None:
    from xaidash.explainers.metrics.completeness import completeness_gap

    rows = split("diabetes").rows[:3]
    raw_bg = training_rows(bundle, BACKGROUND, seed=3)
    assert raw_bg is not None
    background = bundle.prepare(raw_bg)
    params = {"samples": 600} if method == "shap_kernel" else {}
    e = explain(bundle, rows, method=method, background=background, background_size=BACKGROUND, **params)
    gaps = completeness_gap(bundle, rows, e, background=background)
    assert gaps.max() < 0.01, gaps  # a softmax of the one output would make the change 0 and the gap the whole sum
