"""The series models (series_cnn, series_gru, series_lstm, series_transformer) on random (N, C, T) inputs: shapes and
parameter counts, the layers the explainers read (checked against what they compute), attention, gradients in eval
mode, refusals, DeepLift safety, and the weights' round trip."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelError, build_model, get_spec
from xaidash.models.runs.checkpoint import load_weights, save_weights
from xaidash.models.zoo.series_transformer import MAX_STEPS

SERIES = ("series_cnn", "series_gru", "series_lstm", "series_transformer")
UNI = DatasetInfo("uni", "series", ("a", "b", "c"), (1, 150), (0.0,), (1.0,))
MULTI = DatasetInfo("multi", "series", ("a", "b", "c", "d"), (6, 100), (0.0,) * 6, (1.0,) * 6)
SHORT = DatasetInfo("short", "series", ("a", "b"), (2, 3), (0.0, 0.0), (1.0, 1.0))
IMAGE = DatasetInfo("rgb", "image", ("a", "b"), (3, 32, 32))


def built(name: str, info: DatasetInfo = UNI, **options) -> nn.Module:
    torch.manual_seed(0)
    return build_model(name, info, **options).eval()


def series(info: DatasetInfo, n: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, *info.input_shape, generator=torch.Generator().manual_seed(seed))


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", SERIES)
@pytest.mark.parametrize("info", [UNI, MULTI, SHORT], ids=lambda i: i.name)
def test_logits_per_class_for_any_channels_and_length(name: str, info: DatasetInfo) -> None:
    x = series(info)
    with torch.no_grad():
        out = built(name, info)(x)
    assert out.shape == (3, info.num_classes) and torch.isfinite(out).all()


def test_parameter_counts() -> None:
    # series_cnn, 1 channel, 3 classes: convs 1*64*8+64, 64*128*5+128, 128*64*3+64; BatchNorm 2*(64+128+64); fc 64*3+3
    assert count(built("series_cnn")) == 576 + 41_088 + 24_640 + 512 + 195 == 67_011
    # the GRU: 3 gates of (input + hidden + 2 biases) * 64; the LSTM 4 gates; fc 64*3+3
    assert count(built("series_gru")) == 3 * 64 * (1 + 64 + 2) + 195 == 13_059
    assert count(built("series_lstm")) == 4 * 64 * (1 + 64 + 2) + 195 == 17_347
    # the transformer: embedding 1*64*9+64, positions 150*64, 2 blocks of 33,472 (two LayerNorms, qkv, proj, MLP),
    # the final LayerNorm, fc
    block = 2 * 128 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64)
    assert count(built("series_transformer")) == 640 + 9_600 + 2 * block + 128 + 195 == 77_507
    assert count(built("series_cnn", width=16)) < count(built("series_cnn")) // 10


@pytest.mark.parametrize("name", SERIES)
def test_the_layer_paths_the_spec_names_resolve(name: str) -> None:
    spec, model = get_spec(name), built(name)
    for path in (spec.last_conv, *spec.conv_layers, *spec.attention):
        if path:
            model.get_submodule(path)
    if spec.recurrent:
        rnn = model.get_submodule(spec.recurrent)
        assert spec.recurrent == "rnn" and isinstance(rnn, nn.GRU | nn.LSTM)
        assert rnn.batch_first and not rnn.bidirectional and not spec.deeplift_ok
    if spec.last_conv:
        assert spec.last_conv == spec.conv_layers[-1]
        assert all(spec.feature_layout(p).kind == "ncl" for p in spec.conv_layers)


def test_cnn_gap_classifier_is_the_class_activation_map() -> None:
    """CAM's identity (Zhou et al. 2016): the logits are the time average of fc's weights applied to the last block's
    feature maps, plus the bias; each block keeps one output per step (what Grad-CAM draws over the series)."""
    spec, model, x = get_spec("series_cnn"), built("series_cnn"), series(UNI)
    kept: dict[str, torch.Tensor] = {}
    handles = [
        model.get_submodule(p).register_forward_hook(lambda m, i, o, p=p: kept.__setitem__(p, o))
        for p in spec.conv_layers
    ]
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in handles:
            h.remove()
    assert [kept[p].shape[-1] for p in spec.conv_layers] == [150] * 3
    fc = model.get_submodule(spec.gap_classifier)
    maps = spec.feature_layout(spec.last_conv).to_maps(kept[spec.last_conv])
    assert maps.shape == (3, 64, 1, 150)
    cam = torch.einsum("kc,nchw->nkhw", fc.weight, maps)  # (N, classes, 1, T)
    torch.testing.assert_close(cam.mean(dim=(2, 3)) + fc.bias, logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["series_gru", "series_lstm"])
def test_rnn_logits_read_the_mean_hidden_state(name: str) -> None:
    model, x = built(name, MULTI), series(MULTI)
    with torch.no_grad():
        states, _ = model.rnn(x.transpose(1, 2))
        torch.testing.assert_close(model(x), model.fc(states.mean(dim=1)))


@pytest.mark.parametrize("name", ["series_gru", "series_lstm"])
def test_rnn_gradients_in_eval_mode_match_finite_differences(name: str) -> None:
    """What the gradient explainers take: an input gradient in eval mode, checked in double precision."""
    model = built(name, SHORT).double()
    x = series(SHORT, n=2).double().requires_grad_()
    assert not model.training
    assert torch.autograd.gradcheck(lambda v: model(v)[:, 1], (x,), eps=1e-6, atol=1e-5)
    model(x)[:, 1].sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


@pytest.mark.parametrize("info", [UNI, MULTI], ids=lambda i: i.name)
def test_transformer_attention_rows_sum_to_one(info: DatasetInfo) -> None:
    spec, model, x = get_spec("series_transformer"), built("series_transformer", info), series(info)
    hooked: dict[str, torch.Tensor] = {}
    handles = [
        model.get_submodule(p).register_forward_hook(lambda m, i, o, p=p: hooked.__setitem__(p, o[1]))
        for p in spec.attention
    ]
    try:
        with torch.no_grad():
            logits, weights = model.forward_with_attention(x)
            plain = model(x)
    finally:
        for h in handles:
            h.remove()
    steps = info.input_shape[1]
    torch.testing.assert_close(logits, plain)
    assert [tuple(a.shape) for a in weights] == [(3, 4, steps, steps)] * 2  # one token per step
    for path, a in zip(spec.attention, weights, strict=True):
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]), atol=1e-5, rtol=0)
        assert (a >= 0).all()
        torch.testing.assert_close(hooked[path], a)


def test_transformer_token_reads_its_own_neighbourhood_only() -> None:
    """A token embeds the 9 steps around its own (kernel 9): changing steps far from step 20 leaves its embedding."""
    model, x = built("series_transformer"), series(UNI, n=1)
    far = x.clone()
    far[..., 30:] = torch.randn(1, 1, 120)
    with torch.no_grad():
        near, changed = model.embed(model.pad(x)), model.embed(model.pad(far))
    assert near.shape[-1] == 150
    torch.testing.assert_close(near[..., 20], changed[..., 20])  # steps 16..24
    assert not torch.allclose(near[..., 27], changed[..., 27])  # steps 23..31
    one = built("series_transformer", kernel=1)
    with torch.no_grad():
        torch.testing.assert_close(one.embed(one.pad(x))[..., 29], one.embed(one.pad(far))[..., 29])


NONLINEAR = (nn.ReLU, nn.GELU, nn.Softmax, nn.Dropout, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d, nn.MaxPool1d)


@pytest.mark.parametrize("name", SERIES)
def test_no_nonlinearity_pooling_or_dropout_is_reused_or_in_place(name: str) -> None:
    model = built(name, MULTI)
    calls: dict[str, int] = {}
    handles = []
    for path, module in model.named_modules():
        if isinstance(module, NONLINEAR):
            assert not getattr(module, "inplace", False), f"{path} is in-place"
            handles.append(
                module.register_forward_hook(lambda m, i, o, p=path: calls.__setitem__(p, calls.get(p, 0) + 1))
            )
    try:
        with torch.no_grad():
            model(series(MULTI))
    finally:
        for h in handles:
            h.remove()
    assert calls and max(calls.values()) == 1, calls
    assert "pool" in calls  # the pooling over time is a module, not a mean in forward


@pytest.mark.parametrize("name", [n for n in SERIES if get_spec(n).deeplift_ok])
def test_deeplift_adds_up_where_the_spec_claims_it(name: str) -> None:
    from captum.attr import DeepLift

    model, x = built(name, MULTI), series(MULTI)
    attr, delta = DeepLift(model).attribute(x, baselines=torch.zeros_like(x), target=1, return_convergence_delta=True)
    assert attr.shape == x.shape and torch.isfinite(attr).all() and attr.abs().sum() > 0
    if name == "series_cnn":  # piecewise linear in eval mode: attributions add up to f(x) - f(0)
        assert delta.abs().max() < 1e-3 * (1 + model(x)[:, 1].abs().max())


@pytest.mark.parametrize("name", SERIES)
def test_weights_round_trip_through_safetensors(name: str, tmp_path) -> None:
    model, x = built(name, MULTI), series(MULTI)
    save_weights(model, tmp_path / "w.safetensors")
    torch.manual_seed(5)
    fresh = build_model(name, MULTI).eval()
    load_weights(fresh, tmp_path / "w.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), model(x))


@pytest.mark.parametrize("name", SERIES)
def test_non_series_data_is_refused_with_a_reason(name: str) -> None:
    assert "channels, steps" in (get_spec(name).fits(DatasetInfo("img", "series", ("a", "b"), (3, 8, 8))) or "")
    with pytest.raises(ModelError, match="series model"):
        build_model(name, IMAGE)


def test_transformer_refuses_long_series_and_other_lengths() -> None:
    long = DatasetInfo("long", "series", ("a", "b"), (1, MAX_STEPS + 1))
    reason = get_spec("series_transformer").fits(long)
    assert reason and f"at most {MAX_STEPS} steps" in reason and "\n" not in reason
    assert get_spec("series_cnn").fits(long) is None  # the others read any length
    with pytest.raises(ModelError, match="at most 512 steps"):
        build_model("series_transformer", long)
    with pytest.raises(ModelError, match="built for series of 150 steps"):
        built("series_transformer")(torch.randn(1, 1, 149))


@pytest.mark.parametrize(
    ("name", "options", "words"),
    [
        ("series_cnn", {"width": 0}, "width 0 is out of range"),
        ("series_gru", {"hidden": 2.5}, "hidden must be a whole number"),
        ("series_lstm", {"layers": 9}, "layers 9 is out of range"),
        ("series_transformer", {"dropout": 1.0}, "dropout 1.0 is out of range"),
        ("series_gru", {"width": 8}, "has no option 'width'"),
    ],
)
def test_options_are_checked_against_their_ranges(name: str, options: dict, words: str) -> None:
    with pytest.raises(ModelError, match=words):
        get_spec(name).check_options(options)


def test_stacked_rnn_takes_dropout_between_layers() -> None:
    model = built("series_lstm", MULTI, hidden=16, layers=2, dropout=0.2)
    assert model.rnn.num_layers == 2 and model.rnn.hidden_size == 16 and model.rnn.dropout == 0.2
    assert model(series(MULTI)).shape == (3, 4)
