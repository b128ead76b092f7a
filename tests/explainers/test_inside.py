"""Effective receptive fields and explanations across training."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import xaidash.explainers  # noqa: F401  (registers the methods)
from xaidash.data.registry import get_info, load_split
from xaidash.explainers.api import explain
from xaidash.explainers.inside import (
    bundle_erf,
    effective_receptive_field,
    epoch_validation,
    explanations_across_training,
    reinitialized,
)
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.engine import TrainConfig, train
from xaidash.models.inspect.receptive_field import bundle_receptive_fields, find_layer, receptive_fields
from xaidash.models.registry import build_model, get_spec
from xaidash.models.runstore import load_bundle


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
    assert set(zip(*np.nonzero(corner))) == {(r, c) for r in (0, 1) for c in (0, 1)}
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
    t, l, b, r = box.box(erf.unit, (32, 32))
    assert t <= top and l <= left and bottom <= b and right <= r
    assert erf.fraction_inside((t, l, b, r)) == pytest.approx(1.0)
    cy, cx = (t + b) // 2, (l + r) // 2
    assert 0 < erf.fraction_inside((cy, cx, cy, cx)) < 1
    rand = bundle_erf(bundle, images, "layers.0.conv2", random_weights=True, seed=3)
    assert rand.weights == "random" and not np.allclose(rand.map, erf.map)
    # re-initialisation leaves the original model untouched
    copy = reinitialized(bundle.model, seed=3)
    assert not torch.equal(copy.stem[0].weight, bundle.model.stem[0].weight)
    vit = ModelBundle(build_model("vit_tiny", info), get_spec("vit_tiny"), info, torch.device("cpu"))
    with pytest.raises(ExplainError, match="self-attention"):
        bundle_erf(vit, images, "patch_embed")


@pytest.fixture(scope="module")
def two_epoch_run(tmp_path_factory):
    import os

    old = os.environ.get("XAIDASH_RUNS")
    os.environ["XAIDASH_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    try:
        result = train(
            TrainConfig(
                dataset="digits",
                model="resnet_small",
                epochs=2,
                batch_size=64,
                lr=3e-3,
                max_train_samples=400,
                device="cpu",
            )
        )
    finally:
        if old is None:
            os.environ.pop("XAIDASH_RUNS", None)
        else:
            os.environ["XAIDASH_RUNS"] = old
    assert result.state == "completed", result.error
    return result.run


def test_explanations_across_training(two_epoch_run):
    run = two_epoch_run
    image = load_split("digits", "test").image(3)
    seen = []
    result = explanations_across_training(
        run, image, device="cpu", method_params={"ig": {"steps": 8}}, progress=lambda d, t: seen.append(d)
    )
    assert [e.epoch for e in result.epochs] == [1, 2] and seen == [1, 2]
    assert result.methods() == ["gradcam", "ig"] and not result.skipped
    val = epoch_validation(run)
    records = [r for r in run.metrics() if r["kind"] == "epoch"]
    assert [e.val_acc for e in result.epochs] == [val[1], val[2]] == [r["val_acc"] for r in records]
    final = load_bundle(run, device="cpu")
    assert result.target == int(final.predict_proba(image).argmax(1)[0])
    for e in result.epochs:
        for m, expl in e.explanations.items():
            assert expl.attributions.shape == (1, 8, 8) and int(expl.targets[0]) == result.target
    # the last epoch's weights are the run's final weights: same maps as explaining the final model
    again = explain(final, image, result.target, method="ig", steps=8)
    np.testing.assert_allclose(result.epochs[-1].explanations["ig"].item(0), again.item(0), rtol=1e-4, atol=1e-6)
    # and the weights changed between the epochs
    assert not np.allclose(result.epochs[0].explanations["ig"].item(0), result.epochs[1].explanations["ig"].item(0))
    assert result.scale("ig") >= max(e.explanations["ig"].max_abs() for e in result.epochs) > 0
    one = explanations_across_training(run, image, methods=["gradcam"], target=0, epochs=[2], device="cpu")
    assert [e.epoch for e in one.epochs] == [2] and one.target == 0
    with pytest.raises(ExplainError, match="no checkpoint for epoch 5"):
        explanations_across_training(run, image, epochs=[5], device="cpu")


def test_attention_view_vision_and_text():
    from xaidash.data.tokenizer import WordVocab
    from xaidash.explainers.attention import collect_attention, rollout
    from xaidash.explainers.inside import attention_view

    info = get_info("shapes")
    vit = ModelBundle(build_model("vit_tiny", info), get_spec("vit_tiny"), info, torch.device("cpu"))
    image = torch.rand(3, 32, 32)
    view = attention_view(vit, image)
    assert view.weights.shape == (4, 4, 65, 65) and view.grid == (8, 8) and view.query == 0
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-5)
    assert len(view.tokens) == 65 and view.tokens[0] == "[CLS]"
    # the patch map is the class token's row without itself, in row-major patch order
    np.testing.assert_allclose(view.patch_map(view.matrix(2, 1)).ravel(), view.weights[2, 1, 0, 1:])
    np.testing.assert_allclose(view.matrix(1), view.weights[1].mean(0), rtol=1e-6)
    expected = rollout([a.mean(1) for a in collect_attention(vit.model, vit.prepare(image))])[0].numpy()
    np.testing.assert_allclose(view.rollout(), expected, rtol=1e-5, atol=1e-6)

    cues = get_info("cues")
    vocab = WordVocab.build(["the film was not bad", "a dull plot"])
    tt = ModelBundle(
        build_model("text_transformer", cues, vocab_size=len(vocab), pad_id=0),
        get_spec("text_transformer"),
        cues,
        torch.device("cpu"),
        tokenizer=vocab,
    )
    text_view = attention_view(tt, "the film was not bad")
    assert text_view.tokens == ["the", "film", "was", "not", "bad"] and text_view.grid is None
    assert text_view.query is None  # no class token: the pooled mean reads every row
    np.testing.assert_allclose(text_view.read_row(text_view.matrix(0)), text_view.weights[0].mean(0).mean(0), rtol=1e-6)
    with pytest.raises(ExplainError, match="vision transformers"):
        text_view.patch_map(text_view.matrix(0))
    cnn = ModelBundle(build_model("resnet_small", info), get_spec("resnet_small"), info, torch.device("cpu"))
    with pytest.raises(ExplainError, match="no attention"):
        attention_view(cnn, image)


def test_across_training_skips_gradcam_without_convolutions(tmp_path, monkeypatch):
    result = train(
        TrainConfig(dataset="digits", model="mlp", epochs=1, batch_size=64, max_train_samples=200, device="cpu")
    )
    image = load_split("digits", "test").image(0)
    out = explanations_across_training(result.run, image, device="cpu", method_params={"ig": {"steps": 4}})
    assert out.methods() == ["ig"] and "gradcam" in out.skipped and "convolution" in out.skipped["gradcam"]
