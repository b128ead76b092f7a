"""CAM family: cam, gradcam, gradcampp, guided_gradcam."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from captum.attr import LayerGradCam
from image_bundles import GREY28, IMAGE_MODELS, RGB16, fresh_bundle
from model_state import model_state

import xaidash.explainers  # noqa: F401  (registers every method)
from xaidash.explainers import ExplainError, MethodContext, explain, get_method
from xaidash.explainers.methods.cam import gradcampp_maps
from xaidash.models import ModelBundle

CAM_METHODS = ("cam", "gradcam", "gradcampp", "guided_gradcam")


def context(bundle: ModelBundle, n: int = 3, targets: list[int] | None = None, seed: int = 1) -> MethodContext:
    raw = torch.rand(n, *bundle.info.input_shape, generator=torch.Generator().manual_seed(seed))
    t = torch.tensor(targets if targets is not None else [i % bundle.info.num_classes for i in range(n)])
    return MethodContext(bundle=bundle, x=bundle.prepare(raw), targets=t, raw=raw, batch_size=2)


@pytest.mark.parametrize("model_name", IMAGE_MODELS)
def test_every_cam_method_on_every_image_model(model_name: str) -> None:
    bundle = fresh_bundle(model_name)
    x = torch.rand(3, *bundle.info.input_shape, generator=torch.Generator().manual_seed(1))
    before = model_state(bundle.model)
    for method_id in CAM_METHODS:
        spec = get_method(method_id, "image")
        if not bundle.spec.conv_layers or (method_id == "cam" and not bundle.spec.gap_classifier):
            assert not spec.supports(bundle)
            with pytest.raises(ExplainError, match="does not apply"):
                explain(bundle, x, method=method_id)
            continue
        assert spec.supports(bundle), method_id
        exp = explain(bundle, x, method=method_id, batch_size=2)
        a = np.asarray(exp.attributions)
        assert a.shape == (3, *bundle.info.input_shape[1:]), method_id
        assert np.isfinite(a).all(), method_id
        if not spec.signed:
            assert (a >= 0).all(), method_id
        assert model_state(bundle.model) == before, f"{method_id} left hooks or changed the model"


def test_cam_needs_a_gap_classifier_and_conv_layers() -> None:
    simple = fresh_bundle("simple_cnn", GREY28)  # conv layers, but flatten + MLP head
    with pytest.raises(ExplainError, match="global average pooling"):
        explain(simple, torch.rand(1, 1, 28, 28), method="cam")
    mlp = fresh_bundle("mlp", GREY28)
    for method_id in CAM_METHODS:
        with pytest.raises(ExplainError, match="no convolutional"):
            explain(mlp, torch.rand(1, 1, 28, 28), method=method_id)


def test_gradcam_at_the_last_conv_is_cam_up_to_a_positive_scale() -> None:
    """GAP + linear: dS/dA_k = w_k / (h w) everywhere, so Grad-CAM = CAM / (h w) before its ReLU."""
    bundle = fresh_bundle("resnet_small", RGB16)
    ctx = context(bundle, n=4, targets=[0, 1, 2, 0])
    cam = get_method("cam", "image").compute(ctx, {}).attributions  # signed (n, h, w)
    gradcam = get_method("gradcam", "image").compute(ctx, {"layer": bundle.spec.last_conv}).attributions
    h, w = cam.shape[-2:]
    assert (cam < 0).any() and (cam > 0).any()  # the comparison below is not trivial
    # pre-ReLU: captum's Grad-CAM without its ReLU is exactly CAM / (h w)
    raw = LayerGradCam(bundle.model, bundle.layer(bundle.spec.last_conv)).attribute(ctx.x, target=ctx.targets)[:, 0]
    assert torch.allclose(raw, cam / (h * w), rtol=1e-4, atol=1e-6)
    # as registered (ReLU, the paper's): proportional to ReLU(CAM)
    a, b = gradcam.flatten(), torch.relu(cam).flatten()
    corr = torch.corrcoef(torch.stack([a, b]))[0, 1]
    assert corr > 0.999
    scale = (a @ b) / (b @ b)
    assert torch.allclose(scale, torch.tensor(1.0 / (h * w)), rtol=1e-3)


def test_gradcampp_is_non_negative_and_differs_from_gradcam() -> None:
    for name, info in (("simple_cnn", GREY28), ("resnet_small", RGB16)):
        bundle = fresh_bundle(name, info)
        layer = bundle.spec.last_conv
        ctx = context(bundle, n=3)
        pp = get_method("gradcampp", "image").compute(ctx, {"layer": layer}).attributions
        gc = get_method("gradcam", "image").compute(ctx, {"layer": layer}).attributions
        assert pp.shape == gc.shape and (pp >= 0).all() and pp.sum() > 0
        # compare shapes of the maps, not their scales
        pp_n = pp / pp.flatten(1).amax(1).clamp_min(1e-12).view(-1, 1, 1)
        gc_n = gc / gc.flatten(1).amax(1).clamp_min(1e-12).view(-1, 1, 1)
        assert (pp_n - gc_n).abs().max() > 0.05, name


def test_gradcampp_closed_form_when_gradients_are_spatially_constant() -> None:
    """With dS/dA_k = c_k everywhere (GAP + linear), alpha_k = 1 / (2 + c_k sum(A_k)), so the
    weight is h w relu(c_k) / (2 + c_k sum(A_k))."""
    gen = torch.Generator().manual_seed(0)
    acts = torch.rand(2, 5, 3, 4, generator=gen)
    c = torch.randn(2, 5, generator=gen)
    grads = c.view(2, 5, 1, 1).expand_as(acts).clone()
    s = acts.sum(dim=(2, 3))
    weights = 12 * torch.relu(c) / (2 + c * s)
    expected = torch.relu((weights.view(2, 5, 1, 1) * acts).sum(1))
    assert torch.allclose(gradcampp_maps(acts, grads), expected, rtol=1e-5, atol=1e-7)
    # zero gradients give a zero map, not NaN
    assert torch.equal(gradcampp_maps(acts, torch.zeros_like(acts)), torch.zeros(2, 3, 4))


@pytest.mark.parametrize("method_id", CAM_METHODS)
def test_targets_are_respected(method_id: str) -> None:
    bundle = fresh_bundle("resnet_small", RGB16)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    maps = [explain(bundle, x, targets=t, method=method_id).attributions for t in (0, 1, 2)]
    assert not (np.allclose(maps[0], maps[1]) and np.allclose(maps[0], maps[2]))


def test_layer_param() -> None:
    bundle = fresh_bundle("resnet_small", RGB16)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    for method_id in ("gradcam", "gradcampp", "guided_gradcam"):
        with pytest.raises(ExplainError, match="'fc' is not a conv layer of resnet_small; pick one of stem"):
            explain(bundle, x, method=method_id, layer="fc")
        with pytest.raises(ExplainError, match="not a conv layer"):
            explain(bundle, x, method=method_id, layer="no.such.layer")
        default = explain(bundle, x, method=method_id)
        assert default.params["layer"] == bundle.spec.last_conv
        early = explain(bundle, x, method=method_id, layer="layers.0")
        assert early.params["layer"] == "layers.0"
        assert not np.allclose(early.attributions, default.attributions)
    with pytest.raises(ExplainError, match="no parameter layer"):
        explain(bundle, x, method="cam", layer="layers.0")  # CAM is defined at the last conv only


def test_coarse_maps_are_upsampled_to_the_input() -> None:
    bundle = fresh_bundle("resnet_small", RGB16)
    ctx = context(bundle, n=2)
    coarse = get_method("gradcam", "image").compute(ctx, {"layer": "layers.2"}).attributions
    assert coarse.shape == (2, 4, 4)  # two stride-2 blocks on 16x16
    full = explain(bundle, ctx.raw, targets=ctx.targets, method="gradcam")
    assert full.attributions.shape == (2, 16, 16) and full.channel_attributions is None
