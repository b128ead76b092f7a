"""KernelSHAP and LIME over time segments against captum: on the same coalitions (handed to captum through its own
perturbation generator), the same baseline series and the segments as captum's feature mask, the values equal
captum's KernelShap and captum's Lime (with lime's kernel and ridge surrogate, the one LIME fits here); KernelSHAP's
values add up to f(series) - f(every segment hidden); a segment's value is repeated over its steps; and without the
shared coalitions, captum's own KernelShap sampling agrees in expectation (correlation, as the image tests check)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from captum.attr import KernelShap
from series_method_bundles import bundle_of, context, conv_spec, raw_series, run, series_info

from xaidash.explainers.methods._common import kernel_coalitions
from xaidash.explainers.methods.lime_image import coalitions
from xaidash.explainers.methods.series_baselines import segment_bounds, segment_fill, segment_labels
from xaidash.explainers.methods.series_reference import kernel_shap_reference, lime_reference, segment_mask


@pytest.fixture(scope="module")
def multivariate():
    info = series_info(3, 60)
    return bundle_of(conv_spec(), info, seed=4), raw_series(info, 3, seed=6)


@pytest.mark.parametrize("baseline", ["zero", "mean", "smoothed", "interpolation"])
def test_kernel_shap_equals_captum_on_the_same_coalitions(multivariate, baseline: str) -> None:
    bundle, raw = multivariate
    ctx = context(bundle, raw, batch_size=50)  # the coalitions of all series share passes
    out = run("shap_kernel", ctx, segments=12, samples=150, baseline=baseline)
    labels = segment_labels(60, 12)
    fill = segment_fill(baseline, bundle, ctx.x, labels)
    rows, _ = kernel_coalitions(150, 12, 0)
    assert out.attributions.shape == (3, 1, 60)
    for i in range(3):
        expected = kernel_shap_reference(
            bundle.model, ctx.x[i : i + 1], fill[i : i + 1], int(ctx.targets[i]), labels, rows
        )
        for c in range(3):  # a segment spans every channel: captum repeats its value over them
            np.testing.assert_allclose(out.attributions[i, 0].numpy(), expected[0, c].numpy(), rtol=1e-3, atol=1e-5)
        per_segment = out.attributions[i, 0].numpy()[segment_bounds(60, 12)[:-1].numpy()]
        gap = abs(per_segment.sum() - out.diagnostics["output_change"][i])
        assert gap <= 1e-3 * max(1.0, abs(out.diagnostics["output_change"][i]))
    np.testing.assert_array_equal(out.segments, labels.expand(3, -1).numpy())


def test_kernel_shap_adds_up_to_the_change_from_every_segment_hidden(multivariate) -> None:
    """The interpolation fill drawn by hand: each segment a line between the values just outside it."""
    bundle, raw = multivariate
    ctx = context(bundle, raw)
    out = run("shap_kernel", ctx, segments=6, samples=100, baseline="interpolation")
    x = ctx.x.numpy()
    hidden = x.copy()
    for a in range(0, 60, 10):
        b = a + 10
        for t in range(a, b):
            left = x[:, :, a - 1] if a > 0 else x[:, :, b]
            right = x[:, :, b] if b < 60 else x[:, :, a - 1]
            hidden[:, :, t] = left + (right - left) * (t - (a - 1)) / (b - (a - 1)) if a > 0 and b < 60 else left
    with torch.no_grad():
        t = ctx.targets.view(-1, 1)
        change = (bundle.model(ctx.x).gather(1, t) - bundle.model(torch.as_tensor(hidden)).gather(1, t))[:, 0]
    np.testing.assert_allclose(out.diagnostics["output_change"], change.numpy(), rtol=1e-4, atol=1e-5)
    sums = out.attributions[:, 0, ::10].sum(1)  # each segment's value once
    np.testing.assert_allclose(sums.numpy(), change.numpy(), rtol=1e-3, atol=1e-5)


def test_kernel_shap_agrees_with_captums_own_sampling(multivariate) -> None:
    """captum's own coalitions (its global random state): a different estimate of the same values."""
    bundle, raw = multivariate
    ctx = context(bundle, raw[:1])
    out = run("shap_kernel", ctx, segments=8, samples=600, baseline="mean")
    labels = segment_labels(60, 8)
    torch.manual_seed(0)
    expected = KernelShap(bundle.model).attribute(
        ctx.x,
        baselines=torch.zeros_like(ctx.x),
        target=int(ctx.targets[0]),
        feature_mask=segment_mask(labels, 3),
        n_samples=600,
    )
    first = segment_bounds(60, 8)[:-1].numpy()  # each segment's first step
    ours, theirs = out.attributions[0, 0].numpy()[first], expected[0, 0].numpy()[first]
    assert np.corrcoef(ours, theirs)[0, 1] > 0.95


@pytest.mark.parametrize("baseline", ["series_mean", "interpolation"])
def test_lime_equals_captum_lime_with_the_same_samples_kernel_and_surrogate(multivariate, baseline: str) -> None:
    bundle, raw = multivariate
    ctx = context(bundle, raw, batch_size=64)
    out = run("lime", ctx, segments=10, samples=200, baseline=baseline, kernel_width=0.25)
    labels = segment_labels(60, 10)
    fill = segment_fill(baseline, bundle, ctx.x, labels)
    rows = coalitions(200, 10, 0).numpy()
    assert out.attributions.shape == (3, 1, 60)

    for i in range(3):
        expected = lime_reference(
            bundle.model, ctx.x[i : i + 1], fill[i : i + 1], int(ctx.targets[i]), labels, rows, 0.25
        )
        scale = float(expected.abs().max())
        np.testing.assert_allclose(out.attributions[i, 0].numpy(), expected[0, 1].numpy(), rtol=1e-3, atol=1e-4 * scale)
    assert all(0.0 <= r <= 1.0 for r in out.diagnostics["surrogate_r2"])


def test_the_shared_lime_fit_equals_one_limebase_call_per_series() -> None:
    from functools import partial

    from lime.lime_base import LimeBase
    from sklearn.metrics import pairwise_distances

    from xaidash.explainers.methods.lime_image import lime_kernel
    from xaidash.explainers.methods.series_lime import surrogates

    on = coalitions(120, 9, 3).numpy()
    probs = np.random.default_rng(0).random((4, 120))
    weights, r2 = surrogates(on, probs, 0.25, 0)
    distances = pairwise_distances(on, on[:1], metric="cosine").ravel()
    for i in range(4):
        base = LimeBase(partial(lime_kernel, kernel_width=0.25), random_state=0)
        _, coefs, score, _ = base.explain_instance_with_data(on, probs[i][:, None], distances, 0, 9, "none")
        expected = np.zeros(9)
        for feature, w in coefs:
            expected[int(feature)] = w
        np.testing.assert_allclose(weights[i], expected, rtol=1e-5, atol=1e-7)
        assert r2[i] == pytest.approx(score, rel=1e-9)
