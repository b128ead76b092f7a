"""LRP (zennit): the registered method equals zennit's own `Gradient` attributor with the same composite, its
relevance adds up to the logit where nothing absorbs it, and it refuses the models zennit has no rules for."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

from xaidash.explainers import explain, get_method
from xaidash.explainers import metrics as M
from xaidash.explainers.methods.lrp import COMPOSITES, input_bounds, make_composite
from xaidash.explainers.params import ExplainError
from xaidash.models import ModelBundle

pytest.importorskip("zennit")


def _images(bundle: ModelBundle, n: int = 3) -> torch.Tensor:
    return torch.rand(n, *bundle.info.input_shape, generator=torch.Generator().manual_seed(2))


def _zennit_relevance(bundle: ModelBundle, raw: torch.Tensor, targets: list[int], composite: str) -> np.ndarray:
    """zennit's documented call: `Gradient(model, composite)` with the target's logit as the output relevance."""
    from zennit.attribution import Gradient

    x = bundle.prepare(raw)
    onehot = torch.nn.functional.one_hot(torch.tensor(targets), bundle.info.num_classes).float()
    with Gradient(model=bundle.model, composite=make_composite(composite, bundle, len(x))) as attributor:
        _, relevance = attributor(x, lambda out: out * onehot)
    return relevance.detach().numpy()


@pytest.mark.parametrize("model", ["simple_cnn", "resnet_small"])
@pytest.mark.parametrize("composite", COMPOSITES)
def test_lrp_equals_zennits_gradient_attributor(model: str, composite: str) -> None:
    bundle = fresh_bundle(model)
    raw, targets = _images(bundle), [0, 1, 2]
    e = explain(bundle, raw, targets, "lrp", composite=composite)
    want = _zennit_relevance(bundle, raw, targets, composite)
    assert e.channel_attributions is not None
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(e.channel_attributions, want, rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(e.attributions, want.sum(1), rtol=1e-5, atol=1e-5 * scale)


def _without_biases(bundle: ModelBundle) -> ModelBundle:
    with torch.no_grad():
        for module in bundle.model.modules():
            if getattr(module, "bias", None) is not None and not isinstance(module, torch.nn.BatchNorm2d):
                module.bias.zero_()
    return bundle


@pytest.mark.parametrize("model", ["simple_cnn", "resnet_small"])
def test_relevance_adds_up_to_the_logit_when_no_bias_absorbs_it(model: str) -> None:
    """Untrained BatchNorm (mean 0, shift 0) merges into no bias; the residual addition is the canonizer's Sum."""
    bundle = _without_biases(fresh_bundle(model))
    raw = _images(bundle)
    e = explain(bundle, raw, [0, 1, 2], "lrp")
    logits = bundle.logits(bundle.prepare(raw))[torch.arange(3), torch.tensor([0, 1, 2])].detach().numpy()
    np.testing.assert_allclose(e.diagnostics["output_change"], logits, rtol=1e-5, atol=1e-6)
    gaps = M.completeness_gap(bundle, raw, e)
    assert np.nanmax(gaps) < 0.01, gaps  # the promise the method declares, checked by the shared machinery
    spec = get_method("lrp", "image")
    assert spec.completeness is not None and spec.completeness.reference == "zero"
    for i in range(3):
        check = spec.completeness.check(e.diagnostics, i, e.params)
        assert check is not None and check.holds


def test_gamma_box_bounds_are_black_and_white_after_normalising() -> None:
    bundle = fresh_bundle("resnet_small")
    low, high = input_bounds(bundle)
    mean = torch.tensor(bundle.info.mean).view(-1, 1, 1)
    std = torch.tensor(bundle.info.std).view(-1, 1, 1)
    torch.testing.assert_close(low, ((0 - mean) / std).expand_as(low))
    torch.testing.assert_close(high, ((1 - mean) / std).expand_as(high))


def test_composites_give_different_maps() -> None:
    bundle = fresh_bundle("simple_cnn")
    raw = _images(bundle, 1)
    maps = [explain(bundle, raw, [0], "lrp", composite=c).item(0) for c in COMPOSITES]
    assert not np.allclose(maps[0], maps[1]) and not np.allclose(maps[0], maps[2])


def test_lrp_refuses_attention_models_with_the_reason() -> None:
    bundle = fresh_bundle("vit_tiny")
    spec = get_method("lrp", "image")
    reason = spec.applies(bundle)
    assert reason is not None and "attention" in reason and "zennit" in reason
    with pytest.raises(ExplainError, match="does not apply to vit_tiny"):
        explain(bundle, _images(bundle, 1), [0], "lrp")


def test_an_identity_batch_norm_with_eps_zero_gets_the_smallest_positive_eps() -> None:
    # zennit 1.0 leaves merged BatchNorms as identities with eps 0, which torch 2.11 refuses to run
    from xaidash.explainers.methods.lrp import _positive_batch_norm_eps

    bn = torch.nn.BatchNorm2d(3).eval()
    bn.eps = 0.0
    x = torch.randn(2, 3, 4, 4)
    _positive_batch_norm_eps(torch.nn.Sequential(bn))
    assert 0 < bn.eps < 1e-30
    torch.testing.assert_close(bn(x), x)
