"""Grad-CAM on layers that are not (N, C, h, w): vision transformer tokens and Swin's channels-last maps.

The maps must equal what pytorch-grad-cam users compute by hand with a `reshape_transform` (drop the class
token, lay the patch tokens out on the grid, channels first), here written out with plain autograd.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from imported_models import imported_bundle

from xaidash.explainers import explain
from xaidash.models import ModelBundle
from xaidash.models.registry import FeatureLayout, ModelError


def test_token_and_channels_last_layouts_become_feature_maps():
    tokens = torch.arange(2 * 7 * 3, dtype=torch.float32).reshape(2, 7, 3)  # 1 class token + a 2x3 grid, 3 channels
    maps = FeatureLayout("tokens", prefix=1, grid=(2, 3)).to_maps(tokens)
    assert maps.shape == (2, 3, 2, 3)
    assert torch.equal(maps[1, :, 1, 2], tokens[1, 1 + 5])  # patch (row 1, col 2) is token 1 + 5
    nhwc = torch.randn(2, 4, 5, 6)
    assert torch.equal(FeatureLayout("nhwc").to_maps(nhwc), nhwc.permute(0, 3, 1, 2))
    with pytest.raises(ModelError, match="1 \\+ a 2x3 patch grid"):
        FeatureLayout("tokens", prefix=1, grid=(2, 3)).to_maps(torch.zeros(2, 8, 3))


def by_hand(bundle: ModelBundle, x01: torch.Tensor, target: int, path: str, to_nchw) -> np.ndarray:
    """Grad-CAM the pytorch-grad-cam way: hook the layer, reshape activations and gradients, weight, ReLU, upsample."""
    store: dict[str, torch.Tensor] = {}
    handle = bundle.layer(path).register_forward_hook(lambda m, i, out: store.setdefault("a", out))
    try:
        x = bundle.prepare(x01)
        logits = bundle.model(x)
        (grad,) = torch.autograd.grad(logits[0, target], store["a"])
    finally:
        handle.remove()
    acts, grads = to_nchw(store["a"].detach()), to_nchw(grad)
    cam = torch.relu((grads.mean(dim=(2, 3), keepdim=True) * acts).sum(dim=1, keepdim=True))
    return F.interpolate(cam, size=tuple(x01.shape[-2:]), mode="bilinear", align_corners=False)[0, 0].numpy()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cam_layouts")


def test_grad_cam_on_vision_transformer_tokens_matches_the_hand_reshape(base: Path):
    bundle = imported_bundle("timm_vit", base)
    path = bundle.spec.last_conv
    assert path == "blocks.0" and bundle.spec.feature_layout(path).kind == "tokens"
    x = torch.rand(1, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0))

    def reshape(t: torch.Tensor) -> torch.Tensor:  # pytorch-grad-cam's documented ViT reshape_transform
        return t[:, 1:, :].reshape(t.size(0), 4, 4, t.size(2)).permute(0, 3, 1, 2)

    for target in (0, 2):
        got = explain(bundle, x, [target], "gradcam").item(0)
        np.testing.assert_allclose(got, by_hand(bundle, x, target, path, reshape), rtol=1e-4, atol=1e-6)
        assert got.max() > 0


def test_grad_cam_on_swin_channels_last_maps_matches_the_hand_reshape(base: Path):
    bundle = imported_bundle("timm_swin", base)
    path = bundle.spec.last_conv
    assert bundle.spec.feature_layout(path).kind == "nhwc"
    x = torch.rand(1, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0))
    got = explain(bundle, x, [1], "gradcam").item(0)
    np.testing.assert_allclose(got, by_hand(bundle, x, 1, path, lambda t: t.permute(0, 3, 1, 2)), rtol=1e-4, atol=1e-6)


def test_cam_on_swin_uses_the_pooled_channels_last_maps(base: Path):
    """timm's Swin ends in a norm, a spatial mean and one linear layer: CAM applies, and its map averages to the
    target's logit minus the bias (CAM's defining identity for GAP + linear)."""
    bundle = imported_bundle("timm_swin", base)
    assert bundle.spec.gap_classifier == "head.fc"
    x = torch.rand(1, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logit = bundle.model(bundle.prepare(x))[0, 2].item()
    fc = bundle.layer("head.fc")
    store: dict[str, torch.Tensor] = {}
    handle = bundle.layer(bundle.spec.last_conv).register_forward_hook(lambda m, i, out: store.setdefault("a", out))
    with torch.no_grad():
        bundle.model(bundle.prepare(x))
    handle.remove()
    coarse = torch.einsum("k,hwk->hw", fc.weight[2], store["a"][0])
    assert coarse.mean().item() == pytest.approx(logit - fc.bias[2].item(), rel=1e-4, abs=1e-5)
    assert np.isfinite(explain(bundle, x, [2], "cam").item(0)).all()
