"""Layer-CAM, XGrad-CAM, HiResCAM, Eigen-CAM, Score-CAM and Ablation-CAM against their published formulas.

Each formula is checked on fixed tensors against a hand computation in numpy, then each method end to end against
the same formula applied to activations and gradients captured by hand (forward hook and torch.autograd.grad, or
one masked / ablated forward pass per channel), on a CNN and on a vision transformer's tokens (imported timm ViT).
pytorch-grad-cam is not used as a reference: importing any of its CAMs imports its base class, which needs OpenCV
and ttach; its formulas are the ones written out here (each module's docstring says where ours differs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from image_bundles import RGB16, fresh_bundle
from imported_models import imported_bundle
from model_state import model_state

import xaidash.explainers  # noqa: F401  (registers every method)
from xaidash.explainers import ExplainError, MethodContext, explain, get_method
from xaidash.explainers.methods.ablation_cam import ablation_weights
from xaidash.explainers.methods.eigen_cam import eigencam_maps
from xaidash.explainers.methods.hires_cam import hirescam_maps
from xaidash.explainers.methods.layer_cam import layercam_maps
from xaidash.explainers.methods.score_cam import score_masks
from xaidash.explainers.methods.xgrad_cam import xgradcam_maps
from xaidash.models import ModelBundle

FAMILY = ("layercam", "xgradcam", "hirescam", "eigencam", "scorecam", "ablationcam")
GEN = torch.Generator().manual_seed(0)
ACTS = torch.relu(torch.randn(2, 5, 3, 4, generator=GEN))  # (N, K, h, w), some exact zeros like after a ReLU
GRADS = torch.randn(2, 5, 3, 4, generator=GEN)


def test_gradient_formulas_on_fixed_tensors() -> None:
    a, g = ACTS.double().numpy(), GRADS.double().numpy()
    # Layer-CAM: ReLU(sum_k ReLU(g) A)
    np.testing.assert_allclose(layercam_maps(ACTS, GRADS), np.maximum((np.maximum(g, 0) * a).sum(1), 0), rtol=1e-5)
    # XGrad-CAM: w_k = sum(g A) / sum(A), ReLU(sum_k w_k A_k)
    w = (g * a).sum((2, 3)) / a.sum((2, 3))
    np.testing.assert_allclose(
        xgradcam_maps(ACTS, GRADS), np.maximum((w[:, :, None, None] * a).sum(1), 0), rtol=1e-5, atol=1e-7
    )
    # HiResCAM: sum_k g A, signed
    hires = hirescam_maps(ACTS, GRADS)
    np.testing.assert_allclose(hires, (g * a).sum(1), rtol=1e-5, atol=1e-7)
    assert (hires < 0).any() and (hires > 0).any()
    # a channel that is zero everywhere weighs 0 in XGrad-CAM (no division by zero)
    dead = ACTS.clone()
    dead[:, 0] = 0
    assert torch.isfinite(xgradcam_maps(dead, GRADS)).all()


def test_eigen_cam_is_the_first_principal_component() -> None:
    """pytorch-grad-cam's get_2d_projection_with_sign_correction, in numpy, then the ReLU its BaseCAM applies."""
    expected = []
    for act in ACTS.double().numpy():
        m = act.reshape(act.shape[0], -1).T
        m = m - m.mean(axis=0)
        _, _, vt = np.linalg.svd(m, full_matrices=True)
        proj = (m @ vt[0]).reshape(act.shape[1:])
        if abs(proj.min()) > abs(proj.max()):
            proj = -proj
        expected.append(np.maximum(proj, 0))
    np.testing.assert_allclose(eigencam_maps(ACTS), np.stack(expected), rtol=1e-4, atol=1e-6)
    # the sign of the singular vector does not matter: flipping every activation's centred part keeps the map
    np.testing.assert_allclose(eigencam_maps(-ACTS), eigencam_maps(ACTS), rtol=1e-4, atol=1e-6)


def test_score_masks_and_ablation_weights() -> None:
    masks = score_masks(ACTS[0], (6, 8))
    up = F.interpolate(ACTS[0][:, None], size=(6, 8), mode="bilinear", align_corners=False)[:, 0].numpy()
    lo, hi = up.min(axis=(1, 2), keepdims=True), up.max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(masks, (up - lo) / (hi - lo), rtol=1e-5, atol=1e-7)
    assert torch.equal(score_masks(torch.full((1, 2, 2), 3.0), (4, 4)), torch.zeros(1, 4, 4))  # constant map
    y = torch.tensor([2.0, -4.0])
    ablated = torch.tensor([[1.0, 2.0, 3.0], [-2.0, -4.0, -8.0]])
    expected = np.array([[0.5, 0.0, -0.5], [0.5, 0.0, -1.0]])  # (y - y_k) / y by hand
    np.testing.assert_allclose(ablation_weights(y, ablated), expected)
    assert torch.isfinite(ablation_weights(torch.tensor([0.0]), torch.tensor([[1.0]]))).all()


def context(bundle: ModelBundle, n: int = 2, seed: int = 1) -> MethodContext:
    raw = torch.rand(n, *bundle.info.input_shape, generator=torch.Generator().manual_seed(seed))
    t = torch.tensor([i % bundle.info.num_classes for i in range(n)])
    return MethodContext(bundle=bundle, x=bundle.prepare(raw), targets=t, raw=raw, batch_size=64)


def captured(bundle: ModelBundle, x: torch.Tensor, target: int, path: str, to_maps: Callable) -> tuple:
    """One input's layer activations and target-logit gradient as (1, K, h, w), and its logits: by hand."""
    store: dict[str, torch.Tensor] = {}
    handle = bundle.layer(path).register_forward_hook(lambda m, i, out: store.setdefault("a", out))
    try:
        logits = bundle.model(x)
        (grad,) = torch.autograd.grad(logits[0, target], store["a"])
    finally:
        handle.remove()
    return to_maps(store["a"].detach()), to_maps(grad), logits.detach()


def zeroed_channel_logit(bundle: ModelBundle, x: torch.Tensor, target: int, path: str, k: int, last: bool) -> float:
    """The target logit with channel k of layer `path` zeroed, one input, one pass."""

    def hook(m: torch.nn.Module, i: tuple, out: torch.Tensor) -> torch.Tensor:
        out = out.clone()
        if last:
            out[..., k] = 0
        else:
            out[:, k] = 0
        return out

    handle = bundle.layer(path).register_forward_hook(hook)
    try:
        with torch.no_grad():
            return float(bundle.model(x)[0, target])
    finally:
        handle.remove()


def by_hand(bundle: ModelBundle, ctx: MethodContext, method: str, path: str, to_maps: Callable) -> torch.Tensor:
    """The coarse (N, h, w) maps of `method` computed input by input, channel by channel."""
    last = bundle.spec.feature_layout(path).kind != "nchw"
    out = []
    for i in range(len(ctx.x)):
        x, t = ctx.x[i : i + 1], int(ctx.targets[i])
        a, g, logits = captured(bundle, x, t, path, to_maps)
        k = a.shape[1]
        if method == "layercam":
            m = torch.relu((torch.relu(g) * a).sum(1))
        elif method == "xgradcam":
            total = a.sum((2, 3))
            w = torch.where(total != 0, (g * a).sum((2, 3)) / total, 0.0)  # a dead channel weighs 0
            m = torch.relu((w[:, :, None, None] * a).sum(1))
        elif method == "hirescam":
            m = (g * a).sum(1)
        elif method == "scorecam":
            with torch.no_grad():
                p_base = torch.softmax(bundle.model(torch.zeros_like(x)), 1)[0, t]
                weights = []
                for c in range(k):
                    mask = F.interpolate(a[:, c : c + 1], size=x.shape[-2:], mode="bilinear", align_corners=False)
                    if mask.max() == mask.min():  # a constant map masks everything: x_b itself
                        weights.append(torch.tensor(0.0))
                        continue
                    mask = (mask - mask.min()) / (mask.max() - mask.min())
                    weights.append(torch.softmax(bundle.model(x * mask), 1)[0, t] - p_base)
            m = torch.relu((torch.stack(weights).view(1, k, 1, 1) * a).sum(1))
        elif method == "ablationcam":
            y = float(logits[0, t])
            w = torch.tensor([(y - zeroed_channel_logit(bundle, x, t, path, c, last)) / y for c in range(k)])
            m = torch.relu((w.view(1, k, 1, 1) * a).sum(1))
        else:
            raise ValueError(method)
        out.append(m[0])
    return torch.stack(out)


@pytest.mark.parametrize("method", ["layercam", "xgradcam", "hirescam", "scorecam", "ablationcam"])
def test_each_method_matches_its_formula_on_a_cnn(method: str) -> None:
    bundle = fresh_bundle("resnet_small", RGB16)
    ctx = context(bundle)
    path = "layers.1"  # 8x8 maps of 64 channels (a coarse last layer would hide mistakes in the masks)
    got = get_method(method, "image").compute(ctx, {"layer": path}).attributions
    expected = by_hand(bundle, ctx, method, path, lambda t: t)
    scale = float(expected.abs().max())
    assert scale > 0
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4 * scale)


@pytest.fixture(scope="module")
def vit(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    base: Path = tmp_path_factory.mktemp("cam_family")
    return imported_bundle("timm_vit", base)


def test_every_method_reads_vision_transformer_tokens(vit: ModelBundle) -> None:
    path = vit.spec.last_conv
    assert path is not None
    layout = vit.spec.feature_layout(path)
    assert layout.kind == "tokens"
    ctx = context(vit)
    before = model_state(vit.model)
    for method in ("layercam", "xgradcam", "ablationcam", "scorecam"):
        got = get_method(method, "image").compute(ctx, {"layer": path}).attributions
        expected = by_hand(vit, ctx, method, path, layout.to_maps)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()), msg=method)
    # The block feeds the final LayerNorm: scaling a token's features changes nothing, so sum_k g A = 0 there.
    assert "cancels at every location" in (get_method("hirescam", "image").applies(vit) or "")
    with pytest.raises(ExplainError, match="HiResCAM's map would be blank"):
        get_method("hirescam", "image").compute(ctx, {"layer": path})
    for method in set(FAMILY) - {"hirescam"}:  # through explain(): upsampled to the input, finite, hooks gone
        e = explain(vit, ctx.raw, ctx.targets, method)
        a = np.asarray(e.attributions)
        assert a.shape == (2, *vit.info.input_shape[1:]) and np.isfinite(a).all(), method
    assert model_state(vit.model) == before


def test_hirescam_at_the_last_conv_adds_up_to_the_logit() -> None:
    """Global average pooling + linear: dS/dA_k = w_k / (h w), so HiResCAM's coarse map sums to S - bias."""
    bundle = fresh_bundle("resnet_small", RGB16)
    ctx = context(bundle, n=3)
    maps = get_method("hirescam", "image").compute(ctx, {"layer": bundle.spec.last_conv}).attributions
    with torch.no_grad():
        logits = bundle.model(ctx.x).gather(1, ctx.targets.view(-1, 1))[:, 0]
    bias = bundle.layer(bundle.spec.gap_classifier).bias[ctx.targets].detach()
    torch.testing.assert_close(maps.flatten(1).sum(1), logits - bias, rtol=1e-4, atol=1e-5)


def test_eigen_cam_is_class_agnostic_and_declared_so() -> None:
    spec = get_method("eigencam", "image")
    assert spec.output == "activations" and not spec.target_dependent
    bundle = fresh_bundle("resnet_small", RGB16)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    maps = [explain(bundle, x, targets=t, method="eigencam").attributions for t in (0, 1)]
    np.testing.assert_array_equal(maps[0], maps[1])
    assert np.asarray(maps[0]).max() > 0


def test_scored_methods_share_passes_whatever_the_batch() -> None:
    """Score-CAM and Ablation-CAM run every input's masked rows in shared passes: the batch size changes the
    passes, not the maps, and is reported."""
    bundle = fresh_bundle("resnet_small", RGB16)
    x = torch.rand(3, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    for method in ("scorecam", "ablationcam"):
        big = explain(bundle, x, [0, 1, 2], method, batch_size=64)
        small = explain(bundle, x, [0, 1, 2], method, batch_size=5)
        assert small.diagnostics["batch_size"] == [5.0] * 3
        np.testing.assert_allclose(small.attributions, big.attributions, rtol=1e-4, atol=1e-5 * big.max_abs())


def test_score_cam_refuses_one_by_one_maps() -> None:
    spec = get_method("scorecam", "image")
    assert spec.supports(fresh_bundle("resnet_small", RGB16))  # 16x16 inputs give 4x4 maps
    resnet18 = fresh_bundle("resnet18")  # five halvings of 32x32: 1x1 maps
    assert "1x1" in (spec.applies(resnet18) or "")
    with pytest.raises(ExplainError, match="does not apply to resnet18: its last feature maps"):
        explain(resnet18, torch.rand(1, *resnet18.info.input_shape), [0], "scorecam")
    assert not get_method("ablationcam", "image").supports(resnet18)  # one pass per channel for one value
    assert get_method("gradcam", "image").supports(resnet18)


def test_probes_leave_a_training_model_as_it_was() -> None:
    """applies() and the pass counts probe the layer once per model, outside explain(): in eval mode, so a model
    handed over in training mode keeps its batch-norm statistics and its flags."""
    bundle = fresh_bundle("resnet_small", RGB16, seed=3)
    bundle.model.train()
    values = {k: v.clone() for k, v in bundle.model.state_dict().items()}
    for method in ("scorecam", "ablationcam", "hirescam"):
        spec = get_method(method, "image")
        assert spec.applies(bundle) is None
    assert get_method("scorecam", "image").count_passes(bundle, {}, 2, 0) == (0, 2 * (64 + 2))
    assert get_method("ablationcam", "image").count_passes(bundle, {"layer": "layers.1"}, 3, 0) == (0, 3 * (32 + 1))
    assert all(m.training for m in bundle.model.modules())
    assert all(torch.equal(v, bundle.model.state_dict()[k]) for k, v in values.items())
