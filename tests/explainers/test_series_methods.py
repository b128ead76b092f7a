"""Series methods against captum and hand computations, on small stand-in models (a 1-D conv classifier, a GRU, a
model that reads one known window): the baselines equal the raw-space baselines prepared (scipy's Gaussian filter for
the smoothed copy, a hand-drawn line for the interpolation); IG and DeepLift add up to f(x) - f(baseline) and IG equals
captum's on the same baseline series; occlusion equals captum's Occlusion (window, stride, tensor baseline, all
channels or one at a time) and a hand computation with the interpolation; the CAMs equal captum's LayerGradCam and the
CAM formula interpolated to the steps; every method finds the window the model reads; and through `explain()` (once
the series adapter is there) every method gives one map over the steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from series_method_bundles import (
    attention_spec,
    bundle_of,
    context,
    conv_spec,
    gru_spec,
    raw_series,
    run,
    series_info,
    window_spec,
)

from xaidash.explainers.methods.series_baselines import fixed_baseline, line_fill, segment_labels
from xaidash.explainers.params import ExplainError

STEPS = 64  # σ of the smoothed copy: 64 / 32 = 2 steps, scipy's radius at truncate=3 equals ours (6 steps)


@pytest.fixture(scope="module")
def univariate():
    info = series_info(1, STEPS)
    return bundle_of(conv_spec(), info), raw_series(info, 5)


@pytest.fixture(scope="module")
def multivariate():
    info = series_info(3, 50)
    return bundle_of(conv_spec(), info, seed=2), raw_series(info, 4, seed=3)


def _raw_baseline(name: str, raw: torch.Tensor, info) -> torch.Tensor:
    """Each baseline in raw units, computed independently of the module."""
    from scipy.ndimage import gaussian_filter1d

    if name == "zero":
        return torch.zeros_like(raw)
    if name == "mean":
        return torch.tensor(info.mean).view(1, -1, 1).expand_as(raw).clone()
    if name == "series_mean":
        return raw.mean(2, keepdim=True).expand_as(raw).clone()
    sigma = max(1.0, raw.shape[-1] / 32)
    return torch.as_tensor(gaussian_filter1d(raw.double().numpy(), sigma, axis=2, mode="nearest", truncate=3.0)).float()


@pytest.mark.parametrize("name", ["zero", "mean", "series_mean", "smoothed"])
def test_each_baseline_is_the_raw_baseline_prepared(univariate, multivariate, name: str) -> None:
    for bundle, raw in (univariate, multivariate):
        ctx = context(bundle, raw)
        expected = bundle.prepare(_raw_baseline(name, raw, bundle.info))
        torch.testing.assert_close(fixed_baseline(name, bundle, ctx.x), expected, rtol=1e-4, atol=1e-4)


def _hand_line(row: np.ndarray, a: int, b: int) -> np.ndarray:
    """The interpolation of steps [a, b) of one channel, by the definition."""
    steps = len(row)
    out = row.copy()
    for t in range(a, b):
        if a > 0 and b < steps:
            out[t] = row[a - 1] + (row[b] - row[a - 1]) * (t - (a - 1)) / (b - (a - 1))
        elif a > 0:
            out[t] = row[a - 1]
        elif b < steps:
            out[t] = row[b]
        else:
            out[t] = row.mean()
    return out


@pytest.mark.parametrize(("a", "b"), [(10, 17), (0, 5), (40, 50), (0, 50)])
def test_interpolation_draws_a_line_between_the_window_edges(multivariate, a: int, b: int) -> None:
    _, raw = multivariate
    x = raw[:2]
    start, stop = torch.full((50,), a), torch.full((50,), b)
    filled = line_fill(x, start, stop)
    for i in range(2):
        for c in range(3):
            expected = _hand_line(x[i, c].numpy(), a, b)
            np.testing.assert_allclose(filled[i, c, a:b].numpy(), expected[a:b], rtol=1e-5, atol=1e-5)


def test_segments_are_equal_and_cover_the_steps() -> None:
    labels = segment_labels(64, 16)
    assert torch.equal(torch.bincount(labels), torch.full((16,), 4))
    assert int(segment_labels(10, 16).max()) == 9  # a short series: one segment per step
    assert torch.all(labels[1:] >= labels[:-1])


def _target_logit(bundle, x: torch.Tensor, t: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return bundle.model(x).gather(1, t.view(-1, 1))[:, 0].double().numpy()


@pytest.mark.parametrize("baseline", ["zero", "mean", "series_mean", "smoothed"])
@pytest.mark.parametrize("method", ["ig", "deeplift"])
def test_ig_and_deeplift_add_up_to_the_change_from_the_baseline(univariate, multivariate, method, baseline) -> None:
    for bundle, raw in (univariate, multivariate):
        ctx = context(bundle, raw)
        out = run(method, ctx, baseline=baseline)
        assert out.attributions.shape == ctx.x.shape
        base = bundle.prepare(_raw_baseline(baseline, raw, bundle.info))
        change = _target_logit(bundle, ctx.x, ctx.targets) - _target_logit(bundle, base, ctx.targets)
        sums = out.attributions.flatten(1).sum(1).double().numpy()
        np.testing.assert_allclose(sums, change, atol=0.01 * np.abs(change).max() + 1e-4)
        np.testing.assert_allclose(out.diagnostics["output_change"], change, rtol=1e-3, atol=1e-4)


def test_ig_equals_captum_on_the_same_baseline_series(multivariate) -> None:
    from captum.attr import IntegratedGradients

    bundle, raw = multivariate
    ctx = context(bundle, raw, batch_size=16)  # several passes
    out = run("ig", ctx, baseline="zero", steps=32)
    kept = [i for i, used in enumerate(out.diagnostics["steps"]) if used == 32]  # within 1%: not refined
    assert len(kept) >= 2
    base = fixed_baseline("zero", bundle, ctx.x)  # the same series (checked against the raw zeros prepared above)
    expected = IntegratedGradients(bundle.model).attribute(
        ctx.x, baselines=base, target=ctx.targets, n_steps=32, method="gausslegendre"
    )
    expected = expected.detach()[kept]
    torch.testing.assert_close(out.attributions[kept], expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


def test_saliency_smoothgrad_and_input_x_gradient_equal_captum(multivariate) -> None:
    from captum.attr import InputXGradient, Saliency

    bundle, raw = multivariate
    ctx = context(bundle, raw)
    ctx.x.requires_grad_()  # as the methods hand captum their inputs (grad_leaf): no warning
    torch.testing.assert_close(
        run("saliency", ctx).attributions, Saliency(bundle.model).attribute(ctx.x, target=ctx.targets, abs=True)
    )
    torch.testing.assert_close(
        run("inputxgrad", ctx).attributions, InputXGradient(bundle.model).attribute(ctx.x, target=ctx.targets).detach()
    )
    out = run("smoothgrad", ctx, samples=6, noise_level=0.3)
    noise = torch.randn((6, *ctx.x.shape[1:]), generator=torch.Generator().manual_seed(0)) * 0.3
    expected = torch.stack(
        [Saliency(bundle.model).attribute(ctx.x + noise[k], target=ctx.targets, abs=True) for k in range(6)]
    ).mean(0)
    torch.testing.assert_close(out.attributions, expected, rtol=1e-4, atol=1e-6)
    alone = run("smoothgrad", context(bundle, raw[1:2], ctx.targets[1:2]), samples=6, noise_level=0.3)
    torch.testing.assert_close(alone.attributions[0], out.attributions[1], rtol=1e-4, atol=1e-6)


def test_deeplift_is_refused_where_the_model_says_its_rules_do_not_hold() -> None:
    info = series_info(2, 30)
    ctx = context(bundle_of(gru_spec(), info), raw_series(info, 2))
    with pytest.raises(ExplainError, match="DeepLift does not apply"):
        run("deeplift", ctx)
    assert run("ig", ctx, steps=16).attributions.shape == (2, 2, 30)  # the GRU's gradients reach the input


@pytest.mark.parametrize(("window", "stride"), [(7, 3), (8, 8), (5, 1), (0, 0)])
@pytest.mark.parametrize("baseline", ["zero", "mean", "smoothed"])
def test_occlusion_equals_captum(univariate, multivariate, window: int, stride: int, baseline: str) -> None:
    from captum.attr import Occlusion

    for bundle, raw in (univariate, multivariate):
        ctx = context(bundle, raw, batch_size=7)  # windows of several series share passes
        channels, steps = bundle.info.input_shape
        out = run("occlusion", ctx, window=window, stride=stride, baseline=baseline)
        w, s = int(out.diagnostics["window"][0]), int(out.diagnostics["stride"][0])
        assert (w, s) == ((window, stride) if window else (max(1, steps // 16), max(1, steps // 16 // 2)))
        base = bundle.prepare(_raw_baseline(baseline, raw, bundle.info))
        expected = Occlusion(bundle.model).attribute(
            ctx.x, sliding_window_shapes=(channels, w), strides=(1, s), baselines=base, target=ctx.targets
        )
        assert out.attributions.shape == (len(raw), 1, steps)  # one value per step for all channels
        for c in range(channels):
            torch.testing.assert_close(out.attributions[:, 0], expected[:, c], rtol=1e-4, atol=1e-5)
        if channels > 1:
            each = run("occlusion", ctx, window=window, stride=stride, baseline=baseline, channels="each")
            expected = Occlusion(bundle.model).attribute(
                ctx.x, sliding_window_shapes=(1, w), strides=(1, s), baselines=base, target=ctx.targets
            )
            torch.testing.assert_close(each.attributions, expected, rtol=1e-4, atol=1e-5)


def test_occlusion_with_the_interpolation_equals_the_hand_computation(multivariate) -> None:
    bundle, raw = multivariate
    ctx = context(bundle, raw, batch_size=5)
    out = run("occlusion", ctx, window=6, stride=4, baseline="interpolation")
    x = ctx.x.numpy()
    starts = list(range(0, 50 - 6 + 4, 4))  # captum's windows: ceil((50 - 6) / 4) + 1, the last cut at the end
    assert starts[-1] + 6 >= 50
    for i in range(len(x)):
        t = ctx.targets[i : i + 1]
        f_x = _target_logit(bundle, ctx.x[i : i + 1], t)[0]
        total, count = np.zeros(50), np.zeros(50)
        for a in starts:
            b = min(a + 6, 50)
            hidden = np.stack([_hand_line(x[i, c], a, b) for c in range(3)])
            drop = f_x - _target_logit(bundle, torch.as_tensor(hidden[None], dtype=torch.float32), t)[0]
            total[a:b] += drop
            count[a:b] += 1
        np.testing.assert_allclose(out.attributions[i, 0].numpy(), total / count, rtol=1e-4, atol=1e-5)


def test_occlusion_refuses_a_window_longer_than_the_series(univariate) -> None:
    bundle, raw = univariate
    with pytest.raises(ExplainError, match="longer than the series"):
        run("occlusion", context(bundle, raw), window=STEPS + 1)
    with pytest.raises(ExplainError, match="longer than its window"):
        run("occlusion", context(bundle, raw), window=4, stride=5)


@pytest.mark.parametrize("layer", ["act1", "act2"])
def test_gradcam_equals_captum_interpolated_to_the_steps(multivariate, layer: str) -> None:
    from captum.attr import LayerGradCam

    bundle, raw = multivariate
    ctx = context(bundle, raw)
    out = run("gradcam", ctx, layer=layer)
    maps = LayerGradCam(bundle.model, bundle.layer(layer)).attribute(ctx.x, target=ctx.targets, relu_attributions=True)
    expected = torch.nn.functional.interpolate(maps.detach(), size=50, mode="linear", align_corners=False)
    assert out.attributions.shape == (len(raw), 1, 50)
    torch.testing.assert_close(out.attributions, expected, rtol=1e-4, atol=1e-6)


def test_cam_weighs_the_last_maps_by_the_classifier(univariate) -> None:
    bundle, raw = univariate
    ctx = context(bundle, raw)
    out = run("cam", ctx)
    model = bundle.model
    with torch.no_grad():
        acts = model.act2(model.conv2(model.act1(model.conv1(ctx.x))))  # (N, 8, 32)
        maps = torch.einsum("nk,nkl->nl", model.fc.weight[ctx.targets], acts).unsqueeze(1)
    expected = torch.nn.functional.interpolate(maps, size=STEPS, mode="linear", align_corners=False)
    torch.testing.assert_close(out.attributions, expected, rtol=1e-4, atol=1e-6)
    for method in ("gradcampp", "layercam", "xgradcam"):
        other = run(method, ctx).attributions
        assert other.shape == (len(raw), 1, STEPS) and torch.isfinite(other).all() and (other >= 0).all()


def test_the_cams_are_refused_on_a_model_without_convolutions() -> None:
    info = series_info(1, 30)
    ctx = context(bundle_of(gru_spec(), info), raw_series(info, 1))
    for method in ("cam", "gradcam", "layercam"):
        with pytest.raises(ExplainError, match="no convolutional feature maps"):
            run(method, ctx)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("saliency", {}),
        ("ig", {"baseline": "mean", "steps": 16}),
        ("smoothgrad", {"samples": 8}),
        ("occlusion", {"window": 4, "stride": 2, "baseline": "interpolation"}),
        ("occlusion", {"window": 4, "stride": 2, "baseline": "series_mean"}),
        ("shap_kernel", {"samples": 200, "baseline": "interpolation"}),
        ("lime", {"samples": 300, "baseline": "mean"}),
    ],
)
def test_every_method_points_at_the_window_the_model_reads(method: str, params: dict) -> None:
    info = series_info(2, STEPS)
    bundle = bundle_of(window_spec(24, 32), info)
    raw = raw_series(info, 6, seed=5)
    raw[:, 0, 24:32] += 4 * torch.tensor(info.std[0])  # a bump in the window: class 1 wins
    ctx = context(bundle, raw)
    assert torch.all(ctx.targets == 1)
    out = run(method, ctx, **params).attributions
    per_step = out.abs().sum(1) if method in ("saliency", "smoothgrad") else out.sum(1)
    peaks = per_step.argmax(1)
    assert torch.all((peaks >= 24) & (peaks < 32)), f"{method}: peaks at {peaks.tolist()}"


def test_series_methods_run_end_to_end_through_explain(univariate) -> None:
    """Through `explain()` and the series adapter: every series method on the conv stand-in gives one finite value
    per step, and occlusion's equals its compute summed over the channels."""
    pytest.importorskip("xaidash.explainers.modalities.series", reason="the series adapter (helper sadapter)")
    from xaidash.explainers import explain
    from xaidash.explainers.registry import list_methods

    bundle, raw = univariate
    for spec in list_methods("series"):
        if not spec.supports(bundle):
            continue
        e = explain(bundle, raw[:2], method=spec.id)
        for i in range(2):
            values = np.asarray(e.item(i), dtype=np.float64)
            assert values.size == STEPS and np.isfinite(values).all(), spec.id
    e = explain(bundle, raw[:2], method="occlusion", window=4, stride=2)
    direct = run("occlusion", context(bundle, raw[:2], e.targets), window=4, stride=2).attributions.sum(1)
    np.testing.assert_allclose(np.stack([np.ravel(e.item(i)) for i in range(2)]), direct.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_is_offered_for_series_transformers_only(univariate) -> None:
    from xaidash.explainers.registry import get_method

    info = series_info(2, 20)
    transformer = bundle_of(attention_spec(), info)
    for method in ("attention", "attention_rollout"):
        spec = get_method(method, "series")
        assert spec.applies(transformer) is None
        assert "no global attention weights" in str(spec.applies(univariate[0]))


def test_attention_through_explain_is_the_attention_each_step_receives() -> None:
    """Through `explain()` and the series adapter: the map is the last layer's attention, heads averaged, that each
    step receives, averaged over the query steps (no class token)."""
    pytest.importorskip("xaidash.explainers.modalities.series", reason="the series adapter (helper sadapter)")
    from xaidash.explainers import explain

    info = series_info(2, 20)
    bundle = bundle_of(attention_spec(), info)
    raw = raw_series(info, 3)
    e = explain(bundle, raw, method="attention")
    with torch.no_grad():
        _, (weights,) = bundle.model.forward_with_attention(bundle.prepare(raw))
    expected = weights.mean(1).mean(1).numpy()  # heads, then query rows: (N, T)
    for i in range(3):
        np.testing.assert_allclose(np.ravel(e.item(i)), expected[i], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("method", "params"), [("occlusion", {"window": 6, "stride": 4}), ("shap_kernel", {})])
def test_declared_passes_count_the_rows_scored(multivariate, method: str, params: dict) -> None:
    from xaidash.explainers.registry import get_method

    bundle, raw = multivariate
    spec = get_method(method, "series")
    seen: list[int] = []
    handle = bundle.model.register_forward_hook(lambda m, inputs, out: seen.append(len(inputs[0])))
    try:
        for mode in ("together", "each") if method == "occlusion" else ("",):
            given = {**params, **({"channels": mode} if mode else {})}
            ctx = context(bundle, raw)
            seen.clear()
            out = run(method, ctx, **given)
            _, rows = spec.count_passes(bundle, given, len(raw), 0)
            if method == "occlusion":  # 12 windows over 50 steps, each hiding every channel or one at a time
                assert rows == sum(seen) == len(raw) * (1 + 12 * (3 if mode == "each" else 1))
                assert out.attributions.shape[1] == (3 if mode == "each" else 1)
            else:  # an upper bound: a coalition drawn twice is scored once
                assert rows == len(raw) * 300 and sum(seen) < rows
    finally:
        handle.remove()
