"""Every registered zoo model: shapes, layer paths, attention, DeepLift safety, fits, and the pretrained ones."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

import xaidash.data.sets  # registers the data sets: a table model is built for `planted`)
import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, get_info, list_datasets
from xaidash.data.tokenizer import split_words
from xaidash.models.registry import ModelError, build_model, get_spec, list_models
from xaidash.models.runs.checkpoint import load_weights, save_weights

RGB = DatasetInfo("rgb32", "image", ("a", "b", "c", "d"), (3, 32, 32), (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
GREY = DatasetInfo("grey28", "image", tuple(str(i) for i in range(10)), (1, 28, 28), (0.13,), (0.31,))
TEXT = DatasetInfo("text2", "text", ("neg", "pos"))
SERIES = DatasetInfo("series2x40", "series", ("a", "b", "c"), (2, 40), (0.0, 0.0), (1.0, 1.0))
VOCAB, PAD = 50, 0
TEXTS = ["Unbelievably good, isn't it?", "bad"]

NAMES = [s.name for s in list_models()]
_built: dict[str, nn.Module] = {}


def info_for(name: str) -> DatasetInfo:
    spec = get_spec(name)
    if spec.modality == "text":
        return TEXT
    if spec.modality == "table":
        return get_info("planted")
    if spec.modality == "graph":  # node classification on one shared graph
        return get_info("ba_shapes")
    if spec.modality == "series":  # the first built-in series set it fits (a classifier's or a forecast's)
        return next(i for i in list_datasets() if i.modality == "series" and i.builtin and spec.fits(i) is None)
    return next(info for info in (RGB, GREY) if spec.fits(info) is None)


def model_for(name: str) -> nn.Module:
    """Each model built once per test module (minilm and resnet18 are the slow ones), in eval mode."""
    if name not in _built:
        torch.manual_seed(0)
        _built[name] = build_model(name, info_for(name), vocab_size=VOCAB, pad_id=PAD).eval()
    return _built[name]


def inputs_for(name: str) -> torch.Tensor:
    spec, info = get_spec(name), info_for(name)
    if spec.modality in ("image", "series"):  # standardised pixels or steps
        return torch.randn(2, *info.input_shape, generator=torch.Generator().manual_seed(1))
    if spec.modality in ("table", "graph"):  # two typical rows or graphs, prepared as the model reads them
        adapter = modality_of(spec.modality)
        return adapter.prepare(adapter.example(info, None, 2), info, None, torch.device("cpu"))
    if spec.tokenizer is not None:
        return spec.tokenizer().encode(TEXTS)
    return torch.tensor([[4, 9, 17, 3, 8, 2], [5, 11, 0, 0, 0, 0]])  # second row padded


def pad_id_of(name: str) -> int:
    spec = get_spec(name)
    return spec.tokenizer().pad_id if spec.tokenizer is not None else PAD


@pytest.mark.parametrize("name", NAMES)
def test_forward_gives_finite_logits_per_class(name: str) -> None:
    x = inputs_for(name)
    with torch.no_grad():
        out = model_for(name)(x)
    rows = modality_of(get_spec(name).modality).rows(x)  # a graph batch: one row per input, not per graph
    assert out.shape == (rows, info_for(name).num_classes)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_weights_round_trip_through_safetensors(name: str, tmp_path) -> None:
    """What the engine saves, load_bundle can load into a fresh build: same names, shapes and outputs."""
    model, x = model_for(name), inputs_for(name)
    save_weights(model, tmp_path / "w.safetensors")
    torch.manual_seed(1)  # a different initialisation, overwritten by the load
    fresh = build_model(name, info_for(name), vocab_size=VOCAB, pad_id=PAD).eval()
    load_weights(fresh, tmp_path / "w.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), model(x))


def test_the_zoo_holds_the_expected_models() -> None:
    expected = {"simple_cnn", "resnet_small", "vit_tiny", "mlp", "text_cnn", "text_transformer", "minilm", "resnet18"}
    assert expected <= set(NAMES)


def test_simple_cnn_keeps_the_seed_parameter_count() -> None:
    assert sum(p.numel() for p in model_for("simple_cnn").parameters()) == 10_890


@pytest.mark.parametrize("name", NAMES)
def test_spec_layer_paths_resolve(name: str) -> None:
    spec, model = get_spec(name), model_for(name)
    for path in (spec.last_conv, *spec.conv_layers, *spec.attention):
        if path:
            model.get_submodule(path)
    if spec.embedding:
        assert isinstance(model.get_submodule(spec.embedding), nn.Embedding)
    if spec.gap_classifier:
        assert isinstance(model.get_submodule(spec.gap_classifier), nn.Linear)
    if spec.last_conv:
        assert spec.last_conv in spec.conv_layers


ATTENTION = [s.name for s in list_models() if s.attention]


def test_attention_models_are_the_transformers() -> None:
    assert {"vit_tiny", "text_transformer", "minilm"} <= set(ATTENTION)


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_weights_per_layer(name: str) -> None:
    spec, model, x = get_spec(name), model_for(name), inputs_for(name)
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
    torch.testing.assert_close(logits, plain)
    assert len(weights) == len(spec.attention)
    tokens = 1 + model.grid[0] * model.grid[1] if spec.modality == "image" else x.shape[-1]  # series: one per step
    pad = x == pad_id_of(name) if spec.modality == "text" else None
    for path, a in zip(spec.attention, weights, strict=True):
        assert a.dim() == 4 and a.shape[0] == len(x) and a.shape[2:] == (tokens, tokens)
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]), atol=1e-5, rtol=0)
        torch.testing.assert_close(hooked[path], a)  # the spec's path names the module that made A_l
        if pad is not None:
            assert pad.any()
            assert (a * pad[:, None, None, :]).abs().max() < 1e-6  # nobody attends to padding
            assert (a * ~pad[:, None, None, :]).sum(-1).min() > 0.999


def test_vit_heads_and_patch_grid() -> None:
    from xaidash.models.zoo.vit_tiny import patch_size_for

    assert (patch_size_for(28, 28), patch_size_for(32, 32), patch_size_for(8, 8)) == (4, 4, 2)
    assert 7 <= 224 // patch_size_for(224, 224) <= 16
    model = build_model("vit_tiny", GREY).eval()
    _, weights = model.forward_with_attention(torch.randn(1, 1, 28, 28))
    assert [tuple(a.shape) for a in weights] == [(1, 4, 50, 50)] * 4  # class token + 7x7 patches


@pytest.mark.parametrize(
    ("side", "patch", "plan"), [(32, 4, (2, 1)), (28, 4, (2, 1)), (8, 2, (1, 1)), (224, 28, (2, 7)), (27, 3, (0, 3))]
)
def test_vit_conv_stem_gives_one_token_per_patch(side: int, patch: int, plan: tuple[int, int]) -> None:
    from xaidash.models.zoo.vit_tiny import patch_size_for, stem_plan

    assert patch_size_for(side, side) == patch and stem_plan(patch) == plan
    info = DatasetInfo(f"sq{side}", "image", ("a", "b"), (3, side, side))
    model = build_model("vit_tiny", info).eval()
    assert model.grid == (side // patch, side // patch) and model.patch_size == patch
    with torch.no_grad():
        _, weights = model.forward_with_attention(torch.randn(1, 3, side, side))
    assert weights[0].shape[-1] == 1 + (side // patch) ** 2


def test_vit_tokens_see_their_own_patch_and_its_border_only() -> None:
    # What lets the Attention page draw token (r, c) over its patch: the stem's receptive field is the patch
    # plus a few pixels (two 3x3 stride-2 convolutions: 7 px, stride 4), not the whole image.
    model = build_model("vit_tiny", RGB).eval()
    x = torch.randn(1, 3, 32, 32)
    far = x.clone()
    far[..., 8:, :] = torch.randn(1, 3, 24, 32)  # everything below row 8 changes
    far[..., :, 8:] = torch.randn(1, 3, 32, 24)
    with torch.no_grad():
        near, changed = model.stem(x), model.stem(far)
    torch.testing.assert_close(near[..., 0, 0], changed[..., 0, 0])  # token (0, 0): pixels 0-3, border to 4
    assert not torch.allclose(near[..., 3, 3], changed[..., 3, 3])


NONLINEAR = (
    nn.ReLU,
    nn.GELU,
    nn.Softmax,
    nn.Dropout,
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d,
)


@pytest.mark.parametrize("name", NAMES)
def test_no_nonlinearity_is_reused_or_in_place(name: str) -> None:
    model = model_for(name)
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
            model(inputs_for(name))
    finally:
        for h in handles:
            h.remove()
    assert calls, f"{name} ran no nonlinearity module"
    assert max(calls.values()) == 1, {p: c for p, c in calls.items() if c > 1}


def test_deeplift_covers_every_model_that_claims_it() -> None:
    claims = {s.name for s in list_models() if s.deeplift_ok}
    assert {"simple_cnn", "resnet_small", "vit_tiny", "mlp", "resnet18", "text_cnn", "text_transformer"} <= claims
    assert "minilm" not in claims


@pytest.mark.parametrize("name", [s.name for s in list_models() if s.deeplift_ok and s.modality == "image"])
def test_deeplift_on_image_models(name: str) -> None:
    from captum.attr import DeepLift

    model, x = model_for(name), inputs_for(name)
    attr, delta = DeepLift(model).attribute(x, baselines=torch.zeros_like(x), target=1, return_convergence_delta=True)
    assert attr.shape == x.shape and torch.isfinite(attr).all() and attr.abs().sum() > 0
    if name != "vit_tiny":  # piecewise-linear nets: attributions add up to f(x) - f(baseline)
        assert delta.abs().max() < 1e-2 * (1 + model(x)[:, 1].abs().max())


@pytest.mark.parametrize("name", [s.name for s in list_models() if s.deeplift_ok and s.modality == "text"])
def test_layer_deeplift_on_text_models(name: str) -> None:
    from captum.attr import LayerDeepLift

    spec, model, ids = get_spec(name), model_for(name), inputs_for(name)
    attr = LayerDeepLift(model, model.get_submodule(spec.embedding)).attribute(
        ids, baselines=torch.full_like(ids, PAD), target=1
    )
    assert attr.shape[:2] == ids.shape and torch.isfinite(attr).all() and attr.abs().sum() > 0


TEXT_MODELS = [s.name for s in list_models() if s.modality == "text"]


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_text_models_score_a_text_the_same_alone_or_padded(name: str) -> None:
    model, pad = model_for(name), pad_id_of(name)
    with torch.no_grad():
        for ids in ([7], [7, 8], [7, 8, 9, 10, 11, 12]):  # shorter and longer than text_cnn's widest kernel (5)
            assert pad not in ids
            alone = model(torch.tensor([ids]))
            padded = model(torch.tensor([ids + [pad] * 7]))
            torch.testing.assert_close(alone, padded, atol=1e-5, rtol=1e-5)


def test_text_models_need_a_vocabulary() -> None:
    with pytest.raises(ModelError, match="vocab_size"):
        build_model("text_cnn", TEXT)
    with pytest.raises(ModelError, match="pad_id"):
        build_model("text_transformer", TEXT, vocab_size=10, pad_id=10)


def test_text_transformer_refuses_overlong_input() -> None:
    with pytest.raises(ModelError, match="at most 128"):
        model_for("text_transformer")(torch.ones(1, 129, dtype=torch.long))


@pytest.mark.parametrize(
    ("name", "info", "words"),
    [
        ("simple_cnn", RGB, "1x28x28"),
        ("resnet18", GREY, "3-channel"),
        ("resnet18", DatasetInfo("small", "image", ("a", "b"), (3, 16, 16)), "32x32"),
        ("vit_tiny", DatasetInfo("odd", "image", ("a", "b"), (3, 29, 31)), "share no factor"),
        ("vit_tiny", DatasetInfo("tiny", "image", ("a", "b"), (1, 4, 4)), "8x8"),
    ],
)
def test_fits_refuses_wrong_shapes_with_a_reason(name: str, info: DatasetInfo, words: str) -> None:
    reason = get_spec(name).fits(info)
    assert reason and words in reason
    with pytest.raises(ModelError, match=words):
        build_model(name, info)


def test_modality_mismatch_is_refused() -> None:
    with pytest.raises(ModelError, match="text model"):
        build_model("text_cnn", RGB, vocab_size=VOCAB)


# --- minilm -------------------------------------------------------------------------------


def test_minilm_loads_offline_with_six_layers_of_twelve_heads() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    spec, model, ids = get_spec("minilm"), model_for("minilm"), inputs_for("minilm")
    assert spec.pretrained and not spec.deeplift_ok
    _, weights = model.forward_with_attention(ids)
    assert [tuple(a.shape[:2]) for a in weights] == [(2, 12)] * 6


def test_minilm_trains_only_its_head_unless_unfrozen() -> None:
    model = model_for("minilm")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"fc.weight", "fc.bias"}
    model.train()
    try:
        assert model.fc.training and model.dropout.training and not model.bert.training
    finally:
        model.eval()
    other = build_model("minilm", TEXT, freeze_encoder=False)
    assert all(p.requires_grad for p in other.parameters())
    with torch.no_grad():  # each build owns its encoder: changing one leaves the other alone
        other.bert.embeddings.word_embeddings.weight.zero_()
    assert model.bert.embeddings.word_embeddings.weight.abs().sum() > 0


def test_minilm_tokenizer_follows_the_protocol() -> None:
    tok = get_spec("minilm").tokenizer()
    ids = tok.encode(TEXTS)
    assert ids.shape[0] == 2 and (ids[1] == tok.pad_id).any()
    assert tok.tokens(TEXTS[0])[0] == "[CLS]" and tok.tokens(TEXTS[0])[-1] == "[SEP]"
    assert len(tok.tokens(TEXTS[0])) == len(tok.word_ids(TEXTS[0])) == ids.shape[1]
    assert tok.encode(["word " * 500]).shape[1] == tok.max_length == 128


@pytest.mark.parametrize("text", ["Unbelievably good, isn't it?", "Top-notch -- 3.5 stars!!", "  spaced   out  "])
def test_minilm_word_ids_align_with_split_words(text: str) -> None:
    tok = get_spec("minilm").tokenizer()
    words, pieces, word_ids = split_words(text), tok.tokens(text), tok.word_ids(text)
    assert word_ids[0] is None and word_ids[-1] is None
    inner = word_ids[1:-1]
    assert None not in inner and inner == sorted(inner)  # every piece has a word, in reading order
    assert set(inner) == set(range(len(words)))  # and every word has a piece
    for piece, w in zip(pieces[1:-1], inner, strict=True):
        assert piece.removeprefix("##") in words[w]


def test_minilm_word_ids_for_contractions_and_punctuation() -> None:
    tok = get_spec("minilm").tokenizer()
    # [CLS] un ##bel ##ie ##va ##bly good , isn ' t it ? [SEP] over unbelievably / good / , / isn't / it / ?
    assert tok.word_ids("Unbelievably good, isn't it?") == [None, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 4, 5, None]


# --- resnet18 -----------------------------------------------------------------------------


def test_resnet18_offline_without_cached_weights_starts_random_and_says_so(tmp_path, monkeypatch) -> None:
    from xaidash.models.zoo import resnet18

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    model = build_model("resnet18", RGB)
    assert model.pretrained_loaded is False
    assert "RANDOM" in model.xai_note and "resnet18-f37072fd.pth" in model.xai_note
    assert str(tmp_path / "torch" / "hub" / "checkpoints") in model.xai_note
    assert resnet18.weights_note() == model.xai_note


def test_resnet18_loads_a_cached_checkpoint_and_matches_torchvision(tmp_path, monkeypatch) -> None:
    from torchvision.models import resnet18 as tv_resnet18

    from xaidash.models.zoo.resnet18 import weights_file, weights_note

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    torch.manual_seed(3)
    reference = tv_resnet18(weights=None).eval()
    weights_file().parent.mkdir(parents=True)
    torch.save(reference.state_dict(), weights_file())
    assert weights_note() is None
    imagenet = DatasetInfo("inet", "image", tuple(str(i) for i in range(1000)), (3, 32, 32))
    model = build_model("resnet18", imagenet).eval()
    assert model.pretrained_loaded and "ImageNet" in model.xai_note
    model.fc.load_state_dict(reference.fc.state_dict())  # build gives a fresh head; compare the whole net
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))


def test_resnet18_spec_normalises_like_imagenet() -> None:
    spec = get_spec("resnet18")
    assert spec.input_mean == (0.485, 0.456, 0.406) and spec.input_std == (0.229, 0.224, 0.225)
    assert spec.conv_layers == ("layer1", "layer2", "layer3", "layer4") and spec.last_conv == "layer4"
