"""Receptive-field arithmetic, the architecture summary and the activation cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.registry import get_info
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import (
    PENULTIMATE,
    compute_activations,
    embedding_layers,
    feature_maps,
    first_layer_filters,
    input_activation,
)
from xaidash.models.inspect.receptive_field import bundle_receptive_fields, find_layer, receptive_fields
from xaidash.models.inspect.summary import summarize, summarize_bundle
from xaidash.models.registry import ModelError, build_model, get_spec
from xaidash.models.runs.store import load_bundle
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train


def fresh(name: str, dataset: str, **options) -> ModelBundle:
    info = get_info(dataset)
    return ModelBundle(build_model(name, info, **options), get_spec(name), info, torch.device("cpu"))


def test_two_stacked_3x3_convs_see_5x5():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 2, 3))
    layers = receptive_fields(model, torch.zeros(1, 1, 12, 12))
    assert [layer.rf for layer in layers] == [(3, 3), (5, 5)]
    assert layers[-1].output_size == (8, 8) and layers[-1].jump == (1, 1)
    # unit (0, 0) of the second conv reads pixels 0..4; unit (2, 3) reads rows 2..6, cols 3..7
    assert layers[-1].box((0, 0)) == (0, 0, 4, 4)
    assert layers[-1].box((2, 3)) == (2, 3, 6, 7)


def test_dilation_stride_padding_and_non_square_kernels():
    model = nn.Sequential(nn.Conv2d(1, 1, (3, 5), stride=2, padding=(1, 2)), nn.Conv2d(1, 1, 3, dilation=2))
    first, second = receptive_fields(model, torch.zeros(1, 1, 20, 20))
    assert first.rf == (3, 5) and first.jump == (2, 2) and first.start == (0.0, 0.0) and first.output_size == (10, 10)
    # dilation 2 makes the 3-tap kernel span 5 inputs of jump 2: 3 + 4 * 2 = 11, 5 + 4 * 2 = 13
    assert second.rf == (11, 13) and second.start == (4.0, 4.0) and second.output_size == (6, 6)
    # padding lies outside the image: the box is clipped to it
    assert first.box((0, 0)) == (-1, -2, 1, 2)
    assert first.box((0, 0), (20, 20)) == (0, 0, 1, 2)


def test_simple_cnn_table_matches_hand_computation():
    # By hand, input 28x28, jump 1, rf 1, start 0 (pixel centres at 0, 1, ...):
    # features.0 conv3:    out 26, jump 1, rf 1+2*1=3,   start 0+1*1=1
    # features.2 maxpool2: out 13, jump 2, rf 3+1*1=4,   start 1+0.5*1=1.5
    # features.3 conv3:    out 11, jump 2, rf 4+2*2=8,   start 1.5+1*2=3.5
    # features.5 maxpool2: out 5,  jump 4, rf 8+1*2=10,  start 3.5+0.5*2=4.5
    # features.6 conv3:    out 3,  jump 4, rf 10+2*4=18, start 4.5+1*4=8.5
    expected = [
        ("features.0", 26, 1, 3, 1.0),
        ("features.2", 13, 2, 4, 1.5),
        ("features.3", 11, 2, 8, 3.5),
        ("features.5", 5, 4, 10, 4.5),
        ("features.6", 3, 4, 18, 8.5),
    ]
    layers = bundle_receptive_fields(fresh("simple_cnn", "mnist"))
    got = [(layer.path, layer.output_size[0], layer.jump[0], layer.rf[0], layer.start[0]) for layer in layers]
    assert got == expected
    last = find_layer(layers, "features.6")
    assert last.centre_unit() == (1, 1)
    assert last.box((1, 1), (28, 28)) == (4, 4, 21, 21)  # centre 12.5 +- 8.5
    assert last.box((2, 2), (28, 28)) == (8, 8, 25, 25)
    assert last.row()["receptive field"] == "18x18"
    with pytest.raises(ModelError, match="outside"):
        last.box((3, 0))


def test_resnets_follow_the_main_path():
    small = bundle_receptive_fields(fresh("resnet_small", "shapes"))
    paths = [layer.path for layer in small]
    assert not any("shortcut" in p for p in paths)
    assert paths[:3] == ["stem.0", "layers.0.conv1", "layers.0.conv2"]
    # every conv of resnet_small is 3x3 with padding 1: +2 jumps per conv; blocks 2 and 3 stride 2
    conv = [layer for layer in small if layer.kind == "Conv2d"]
    assert [layer.rf[0] for layer in conv] == [3, 5, 7, 9, 13, 17, 25]
    assert conv[-1].output_size == (8, 8) and conv[-1].jump == (4, 4)
    big = bundle_receptive_fields(fresh("resnet18", "shapes", pretrained=False))
    assert [layer.path for layer in big[:3]] == ["conv1", "maxpool", "layer1.0.conv1"]
    assert [layer.rf[0] for layer in big[:3]] == [7, 11, 19]  # 7; 7 + 2*2; 11 + 2*4
    assert not any("downsample" in layer.path for layer in big)


@pytest.mark.parametrize(
    "name,dataset,reason",
    [
        ("vit_tiny", "shapes", "self-attention"),
        ("mlp", "digits", "no convolution"),
    ],
)
def test_models_without_receptive_fields_say_why(name, dataset, reason):
    with pytest.raises(ModelError, match=reason):
        bundle_receptive_fields(fresh(name, dataset))


def test_text_models_have_no_receptive_field():
    info = get_info("cues")
    spec = get_spec("text_cnn")
    model = build_model("text_cnn", info, vocab_size=50, pad_id=0)
    with pytest.raises(ModelError, match="convolutional models of images and series"):
        bundle_receptive_fields(ModelBundle(model, spec, info, torch.device("cpu")))


def test_a_causal_series_forecaster_sees_127_steps_up_to_its_own():
    """series_tcn's six causal blocks (kernel 3, dilations 1..32) as the arithmetic reads them from the module graph:
    the padding modules move each field to end at its own step, and the last block sees the 127 steps its formula
    gives; unit t's field is steps t-126 .. t."""
    from xaidash.models.zoo.series_tcn import RECEPTIVE_FIELD

    bundle = fresh("series_tcn", "seasonal_trend")
    layers = bundle_receptive_fields(bundle)
    assert [layer.rf[1] for layer in layers] == [3, 7, 15, 31, 63, 127] and layers[-1].rf[1] == RECEPTIVE_FIELD
    assert all(layer.axes == 1 and layer.causal and layer.rf[0] == 1 for layer in layers)
    last = layers[-1]
    steps = bundle.info.input_shape[-1]
    assert last.default_unit() == (0, steps - 1) and last.box((0, steps - 1)) == (0, steps - 127, 0, steps - 1)
    assert last.box((0, 10), (1, steps)) == (0, 0, 0, 10)  # clipped at the first step: the rest is padding
    assert last.row()["receptive field"] == "127" and last.row()["output size"] == str(steps)


def test_a_same_padded_series_cnn_is_centred_and_checked_by_gradients():
    """series_cnn's kernels 8, 5, 3 behind 'same' padding modules: fields of 8, 12 and 14 steps centred on their
    step; a unit's input gradient is non-zero on exactly the steps of its theoretical field (random inputs)."""
    bundle = fresh("series_cnn", "gunpoint")
    layers = bundle_receptive_fields(bundle)
    convs = [layer for layer in layers if layer.kind == "Conv1d"]
    assert [layer.rf[1] for layer in convs] == [8, 12, 14] and not any(layer.causal for layer in layers)
    assert layers[-1].kind == "AdaptiveAvgPool1d" and layers[-1].output_size == (1, 1)
    model, last = bundle.model.eval(), convs[-1]
    x = torch.randn(1, *bundle.info.input_shape, requires_grad=True)
    captured: dict[str, torch.Tensor] = {}
    handle = model.get_submodule(last.path).register_forward_hook(lambda m, i, o: captured.update(out=o))
    model(x)
    handle.remove()
    (grad,) = torch.autograd.grad(captured["out"][0, :, 75].sum(), x)
    seen = np.nonzero(grad[0].abs().sum(0).numpy())[0]
    _, lo, _, hi = last.box((0, 75))
    assert (lo, hi) == (69, 82) and seen.min() == lo and seen.max() == hi


def test_recurrent_series_models_have_no_receptive_field():
    with pytest.raises(ModelError, match="no convolution"):
        bundle_receptive_fields(fresh("series_gru", "gunpoint"))


@pytest.mark.parametrize("name,dataset", [("simple_cnn", "mnist"), ("vit_tiny", "shapes"), ("resnet_small", "digits")])
def test_summary_totals_equal_parameter_count(name, dataset):
    bundle = fresh(name, dataset)
    s = summarize_bundle(bundle)
    assert s.total == sum(p.numel() for p in bundle.model.parameters())
    assert s.trainable == sum(p.numel() for p in bundle.model.parameters() if p.requires_grad)
    assert s.input_shape == tuple(bundle.info.input_shape)


def test_summary_shapes_and_shared_parameters():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(nn.Flatten(), shared, nn.ReLU(), shared)  # tied weights counted once
    s = summarize(model, torch.zeros(1, 2, 2))
    assert s.total == 20 == sum(p.numel() for p in model.parameters())
    rows = {r.path: r for r in s.rows}
    assert rows["0"].output_shape == (4,) and rows["1"].parameters == 20 and rows["1"].calls == 2


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("runs")
    old = os.environ.get("XAIDASH_RUNS")
    os.environ["XAIDASH_RUNS"] = str(root)
    try:
        result = train(
            TrainConfig(
                dataset="digits", model="resnet_small", epochs=1, batch_size=64, max_train_samples=300, device="cpu"
            )
        )
    finally:
        if old is None:
            os.environ.pop("XAIDASH_RUNS", None)
        else:
            os.environ["XAIDASH_RUNS"] = old
    assert result.ok, result.error
    return result.run


def test_activations_batched_cached_and_keyed_by_weights(digits_run):
    bundle = load_bundle(digits_run, device="cpu")
    seen = []
    first = compute_activations(bundle, PENULTIMATE, n=50, batch_size=16, progress=lambda d, t: seen.append((d, t)))
    assert first.features.shape == (50, 64) and not first.from_cache  # resnet_small's fc reads 64 features
    assert seen == [(16, 50), (32, 50), (48, 50), (50, 50)]
    assert first.path.is_file() and first.path.suffix == ".safetensors"
    again = compute_activations(bundle, PENULTIMATE, n=50, batch_size=16)
    assert again.from_cache
    np.testing.assert_array_equal(again.features, first.features)
    np.testing.assert_array_equal(again.preds, first.preds)
    # the cached features are what the model computes: the penultimate features through fc give its predictions
    logits = bundle.model.fc(torch.from_numpy(first.features))
    np.testing.assert_array_equal(logits.argmax(1).numpy(), first.preds)
    # other weights (an earlier epoch would do; here perturbed ones) must not read that file
    with torch.no_grad():
        bundle.model.fc.bias.add_(1.0)
    assert not compute_activations(bundle, PENULTIMATE, n=50, batch_size=16).from_cache
    # one input gives the same features as the batch
    split_images = __import__("xaidash.data.registry", fromlist=["load_split"]).load_split("digits", "test")
    one = input_activation(bundle, split_images.image(int(first.indices[0])))
    np.testing.assert_allclose(one[0], compute_activations(bundle, n=50).features[0], rtol=1e-4, atol=1e-5)


def test_conv_layer_activations_and_layers(digits_run):
    bundle = load_bundle(digits_run, device="cpu")
    assert embedding_layers(bundle)[0] == PENULTIMATE and "layers.2" in embedding_layers(bundle)
    acts = compute_activations(bundle, "layers.2", n=20, use_cache=False)
    assert acts.features.shape == (20, 64 * 2 * 2)  # 256 values: flattened
    pooled = compute_activations(bundle, "layers.2", n=20, reduce="mean", use_cache=False)
    np.testing.assert_allclose(pooled.features, acts.features.reshape(20, 64, 4).mean(-1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ModelError, match="no layer"):
        compute_activations(bundle, "nope", n=5)


def test_text_token_states_are_averaged_over_real_tokens():
    from xaidash.data.tokenizer import WordVocab

    info = get_info("cues")
    vocab = WordVocab.build(["the film was good", "a bad plot"])
    model = build_model("text_transformer", info, vocab_size=len(vocab), pad_id=vocab.pad_id)
    bundle = ModelBundle(model, get_spec("text_transformer"), info, torch.device("cpu"), tokenizer=vocab)
    assert embedding_layers(bundle) == [PENULTIMATE, "encoder.blocks.0", "encoder.blocks.1"]
    long_and_short = compute_activations(bundle, "encoder.blocks.1", n=8, batch_size=8, use_cache=False)
    one_by_one = compute_activations(bundle, "encoder.blocks.1", n=8, batch_size=1, use_cache=False)
    # padding to the longest text of a batch must not change a text's features
    np.testing.assert_allclose(long_and_short.features, one_by_one.features, rtol=1e-4, atol=1e-5)


def test_feature_maps_and_first_filters():
    bundle = fresh("resnet_small", "shapes")
    maps = feature_maps(bundle, torch.rand(3, 32, 32))
    assert [m.path for m in maps][:2] == ["stem.0", "layers.0.conv1"]
    assert maps[0].maps.shape == (16, 32, 32)
    assert any(m.shortcut for m in maps) and not maps[0].shortcut
    filters = first_layer_filters(bundle)
    assert filters.path == "stem.0" and filters.weights.shape == (16, 3, 3, 3)
    mlp = first_layer_filters(fresh("mlp", "digits"))
    assert mlp.kind == "Linear" and mlp.weights.shape == (256, 1, 8, 8)
    with pytest.raises(ModelError, match="no convolution"):
        feature_maps(fresh("mlp", "digits"), torch.rand(1, 8, 8))
