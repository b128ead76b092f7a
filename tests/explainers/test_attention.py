"""Attention maths (rollout, head fusion, query rows) and the attention methods on transformer models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import ExplainError, explain
from xaidash.explainers.inspection.attention import collect_attention, fuse_heads, pick_layer, query_row, rollout
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelSpec, build_model, get_spec


def _stochastic(n: int, t: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, t, t, generator=g) * 3, dim=-1)


def test_rollout_of_identity_attention_is_identity() -> None:
    eye = torch.eye(5).expand(2, 5, 5)
    for residual in (True, False):
        out = rollout([eye, eye, eye], residual=residual)
        assert torch.allclose(out, torch.eye(5).expand(2, 5, 5))


def test_rollout_rows_sum_to_one() -> None:
    layers = [_stochastic(3, 7, s) for s in range(4)]
    out = rollout(layers)
    assert out.shape == (3, 7, 7)
    assert torch.allclose(out.sum(-1), torch.ones(3, 7), atol=1e-5)
    assert (out >= 0).all()


def test_rollout_multiplies_residual_mixed_layers_from_the_input_up() -> None:
    a1, a2 = _stochastic(1, 4, 1), _stochastic(1, 4, 2)
    eye = torch.eye(4)
    expected = (0.5 * a2 + 0.5 * eye) @ (0.5 * a1 + 0.5 * eye)
    assert torch.allclose(rollout([a1, a2]), expected, atol=1e-6)
    assert torch.allclose(rollout([a1, a2], residual=False), a2 @ a1, atol=1e-6)
    assert not torch.allclose(rollout([a1, a2]), rollout([a2, a1]))


def test_rollout_renormalises_max_fused_rows() -> None:
    heads = torch.stack([_stochastic(2, 5, 3), _stochastic(2, 5, 4)], dim=1)  # (N, heads, T, T)
    fused = fuse_heads(heads, fusion="max")
    assert (fused.sum(-1) > 1.0).any()
    assert torch.allclose(rollout([fused]).sum(-1), torch.ones(2, 5), atol=1e-5)


def test_fuse_heads_and_pick_layer() -> None:
    heads = torch.stack([torch.zeros(1, 3, 3), torch.ones(1, 3, 3)], dim=1)
    assert torch.allclose(fuse_heads(heads), torch.full((1, 3, 3), 0.5))
    assert torch.allclose(fuse_heads(heads, head=1), torch.ones(1, 3, 3))
    assert torch.allclose(fuse_heads(heads, fusion="min"), torch.zeros(1, 3, 3))
    with pytest.raises(ExplainError, match="Head 2"):
        fuse_heads(heads, head=2)
    layers = [torch.zeros(1), torch.ones(1)]
    assert pick_layer(layers, -1) is layers[1] and pick_layer(layers, 0) is layers[0]
    with pytest.raises(ExplainError, match="2 attention layers"):
        pick_layer(layers, 2)


def test_query_row_mean_ignores_masked_queries() -> None:
    m = torch.tensor([[[0.2, 0.8, 0.0], [0.6, 0.4, 0.0], [0.0, 0.0, 1.0]]])
    assert torch.allclose(query_row(m, "first"), m[:, 0])
    mask = torch.tensor([[True, True, False]])
    assert torch.allclose(query_row(m, "mean", mask), torch.tensor([[0.4, 0.6, 0.0]]))


class _PatchPointer(nn.Module):
    """forward_with_attention: the class token attends only to patch `k` (row-major on a 2x3 grid)."""

    grid = (2, 3)

    def __init__(self, k: int):
        super().__init__()
        self.k = k
        self.fc = nn.Linear(1, 2)

    def forward_with_attention(self, x: torch.Tensor):
        n, t = x.shape[0], 1 + 6
        a = torch.eye(t).repeat(n, 2, 1, 1)
        a[:, :, 0] = 0.0
        a[:, :, 0, 1 + self.k] = 1.0
        return self.fc(x.mean(dim=(1, 2, 3), keepdim=False)[:, None]), [a]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(x)[0]


def test_image_rollout_lays_the_class_token_row_on_the_patch_grid() -> None:
    info = DatasetInfo(name="toy", modality="image", classes=("a", "b"), input_shape=(1, 8, 12))
    spec = ModelSpec(name="pointer", modality="image", build=lambda info, **kw: _PatchPointer(0))
    bundle = ModelBundle(model=_PatchPointer(k=4), spec=spec, info=info, device=torch.device("cpu"))
    exp = explain(bundle, torch.rand(2, 1, 8, 12), method="attention_rollout", residual=False)
    assert exp.attributions.shape == (2, 8, 12)
    # patch 4 on a 2x3 grid is row 1, column 1: pixels 4..7 down, 4..7 across
    peak = np.unravel_index(exp.attributions[0].argmax(), (8, 12))
    assert 4 <= peak[0] < 8 and 4 <= peak[1] < 8


def test_vit_rollout_on_real_model() -> None:
    info = DatasetInfo(name="toy", modality="image", classes=("a", "b"), input_shape=(3, 16, 16))
    torch.manual_seed(0)
    bundle = ModelBundle(
        model=build_model("vit_tiny", info).eval(), spec=get_spec("vit_tiny"), info=info, device=torch.device("cpu")
    )
    images = torch.rand(3, 3, 16, 16)
    exp = explain(bundle, images, method="attention_rollout")
    assert exp.attributions.shape == (3, 16, 16)
    assert np.isfinite(exp.attributions).all() and (exp.attributions >= 0).all()
    with pytest.raises(ExplainError, match="Unknown method"):
        explain(bundle, images, method="attention")  # the raw attention method is text-only
    # chunks of the batch give the same maps as one pass
    chunked = explain(bundle, images, method="attention_rollout", batch_size=1)
    assert np.allclose(exp.attributions, chunked.attributions, atol=1e-6)


@pytest.fixture(scope="module")
def text_transformer() -> ModelBundle:
    info = DatasetInfo(name="toy", modality="text", classes=("neg", "pos"))
    vocab = WordVocab.build(["the film was good", "the plot was dull and slow"])
    torch.manual_seed(0)
    model = build_model("text_transformer", info, vocab_size=len(vocab)).eval()
    return ModelBundle(
        model=model, spec=get_spec("text_transformer"), info=info, device=torch.device("cpu"), tokenizer=vocab
    )


def test_text_attention_is_mean_over_real_tokens(text_transformer: ModelBundle) -> None:
    text = "the film was good"
    exp = explain(text_transformer, [text], method="attention", layer=0, head=1)
    x = text_transformer.prepare([text])
    a = collect_attention(text_transformer.model, x)[0][:, 1]  # (1, T, T), head 1 of layer 0
    assert np.allclose(exp.attributions[0], a.mean(dim=1)[0].numpy(), atol=1e-6)
    assert exp.attributions[0].sum() == pytest.approx(1.0, abs=1e-5)  # rows sum to one, so does their mean


def test_text_rollout_sums_to_one_over_words(text_transformer: ModelBundle) -> None:
    exp = explain(text_transformer, ["the plot was dull", "good"], method="attention_rollout")
    for scores in exp.attributions:
        assert scores.sum() == pytest.approx(1.0, abs=1e-5)


def test_attention_parameters_are_checked(text_transformer: ModelBundle) -> None:
    with pytest.raises(ExplainError, match="Layer 5"):
        explain(text_transformer, ["good"], method="attention", layer=5)
    with pytest.raises(ExplainError, match="Head 9"):
        explain(text_transformer, ["good"], method="attention", head=9)
    with pytest.raises(ExplainError, match="head_fusion"):
        explain(text_transformer, ["good"], method="attention_rollout", head_fusion="median")
