"""Effective receptive fields: exact on one convolution, inside the theoretical box, trained vs random weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import xaidash.explainers  # noqa: F401  (registers the methods)
from xaidash.data.registry import get_info
from xaidash.explainers.inspection.effective_receptive_field import bundle_erf, effective_receptive_field, reinitialized
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.receptive_field import bundle_receptive_fields, find_layer, receptive_fields
from xaidash.models.registry import build_model, get_spec


def test_erf_of_one_conv_is_nonzero_exactly_inside_the_kernel():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    x = torch.randn(5, 2, 9, 9)
    grad_map, unit, out_hw = effective_receptive_field(conv, x, "")
    assert unit == (4, 4) and out_hw == (9, 9)
    inside = np.zeros((9, 9), dtype=bool)
    inside[3:6, 3:6] = True
    assert (grad_map[inside] > 0).all() and (grad_map[~inside] == 0).all()
    # d(sum_o out[o, 4, 4]) / d x[i, 3 + dy, 3 + dx] = sum_o w[o, i, dy, dx], whatever the input
    expected = conv.weight.detach().sum(0).abs().sum(0).numpy()
    np.testing.assert_allclose(grad_map[3:6, 3:6], expected, rtol=1e-5)
    # a corner unit: the footprint is clipped by the padding
    corner, _, _ = effective_receptive_field(conv, x, "", unit=(0, 0))
    assert set(zip(*np.nonzero(corner), strict=True)) == {(r, c) for r in (0, 1) for c in (0, 1)}
    with pytest.raises(ExplainError, match="outside"):
        effective_receptive_field(conv, x, "", unit=(9, 0))


def test_erf_lies_inside_the_theoretical_box():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3))
    x = torch.randn(16, 1, 16, 16)
    layer = receptive_fields(model, x)[-1]
    grad_map, unit, out_hw = effective_receptive_field(model, x, "3", batch_size=5)
    assert out_hw == layer.output_size
    top, left, bottom, right = layer.box(unit, (16, 16))
    rows, cols = np.nonzero(grad_map)
    assert rows.min() >= top and rows.max() <= bottom and cols.min() >= left and cols.max() <= right
    assert grad_map.max() > 0


def test_bundle_erf_trained_and_random_weights():
    info = get_info("shapes")
    bundle = ModelBundle(build_model("resnet_small", info), get_spec("resnet_small"), info, torch.device("cpu"))
    images = torch.rand(4, 3, 32, 32)
    box = find_layer(bundle_receptive_fields(bundle), "layers.0.conv2")
    erf = bundle_erf(bundle, images, "layers.0.conv2")
    assert erf.samples == 4 and erf.weights == "trained" and erf.unit == box.centre_unit()
    top, left, bottom, right = erf.support()
    t, le, b, r = box.box(erf.unit, (32, 32))
    assert t <= top and le <= left and bottom <= b and right <= r
    assert erf.fraction_inside((t, le, b, r)) == pytest.approx(1.0)
    cy, cx = (t + b) // 2, (le + r) // 2
    assert 0 < erf.fraction_inside((cy, cx, cy, cx)) < 1
    rand = bundle_erf(bundle, images, "layers.0.conv2", random_weights=True, seed=3)
    assert rand.weights == "random" and not np.allclose(rand.map, erf.map)
    # re-initialisation leaves the original model untouched
    copy = reinitialized(bundle.model, seed=3)
    assert not torch.equal(copy.stem[0].weight, bundle.model.stem[0].weight)
    vit = ModelBundle(build_model("vit_tiny", info), get_spec("vit_tiny"), info, torch.device("cpu"))
    with pytest.raises(ExplainError, match="self-attention"):
        bundle_erf(vit, images, "patch_embed")


def test_a_series_erf_is_one_value_per_step_exactly_inside_the_kernel():
    """A Conv1d of kernel 5 over (N, C, T): the map is (1, T), non-zero on the unit's five steps alone, each the
    summed |weight| the objective's gradient gives; the default unit is the middle step."""
    torch.manual_seed(0)
    conv = nn.Conv1d(2, 3, 5, padding=2)
    x = torch.randn(4, 2, 21)
    grad_map, unit, out_hw = effective_receptive_field(conv, x, "")
    assert grad_map.shape == (1, 21) and unit == (0, 10) and out_hw == (1, 21)
    assert set(np.nonzero(grad_map[0])[0]) == set(range(8, 13))
    np.testing.assert_allclose(grad_map[0, 8:13], conv.weight.detach().sum(0).abs().sum(0).numpy(), rtol=1e-5)
    edge, _, _ = effective_receptive_field(conv, x, "", unit=(0, 20))
    assert set(np.nonzero(edge[0])[0]) == {18, 19, 20}  # clipped by the padding


def test_a_causal_forecasters_erf_never_reaches_a_later_step():
    """series_tcn without its anchor (which reads every step relative to the last): the last block's unit t has no
    gradient from any step after t, for trained-at-random and re-initialised weights alike."""
    info = get_info("seasonal_trend")
    bundle = ModelBundle(
        build_model("series_tcn", info, anchor=False), get_spec("series_tcn"), info, torch.device("cpu")
    )
    series = torch.randn(6, *info.input_shape) * 3 + 40
    for random_weights in (False, True):
        erf = bundle_erf(bundle, series, "blocks.5.conv", (0, 20), random_weights=random_weights)
        assert erf.map.shape == (1, info.input_shape[-1])
        assert erf.map[0, 21:].sum() == 0 and erf.map[0, :21].sum() > 0
