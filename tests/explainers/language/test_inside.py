"""A decoder's attention for the Attention page: the weights of every layer under the causal mask, the per-head
summaries of the layers x heads grid, causal rollout, and the page's AttentionView."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_lm import tiny_lm

from xaidash.explainers.inspection.attention import rollout
from xaidash.explainers.language import inside
from xaidash.explainers.language.inside import causal_rollout, decoder_attention, decoder_view, head_grid
from xaidash.explainers.params import ExplainError
from xaidash.models.language.prompt import build_prompt


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm(request):
    torch.set_num_threads(1)
    return tiny_lm(request.param)


@pytest.fixture(scope="module")
def ids(lm):
    return list(build_prompt(lm, "what is the capital of france ?").ids)


def _causal(pattern: str, layers: int = 2, heads: int = 3, t: int = 6) -> np.ndarray:
    """(layers, heads, t, t) rows of a known kind: each query on itself, on the token before, or spread evenly."""
    if pattern == "self":
        m = np.eye(t)
    elif pattern == "previous":
        m = np.eye(t, k=-1)
        m[0, 0] = 1.0
    else:
        m = np.tril(np.ones((t, t)))
        m /= m.sum(1, keepdims=True)
    return np.broadcast_to(m, (layers, heads, t, t)).astype(np.float32)


def test_weights_per_layer_follow_the_causal_mask(lm, ids):
    weights = decoder_attention(lm, ids)
    assert len(weights) == lm.num_layers
    for w in weights:
        assert w.shape == (lm.num_heads, len(ids), len(ids))
        torch.testing.assert_close(w.sum(-1), torch.ones(lm.num_heads, len(ids)), atol=1e-5, rtol=0)
        assert torch.triu(w, 1).abs().max() == 0


def test_head_summaries_of_known_patterns():
    t = 6
    uniform = _causal("uniform", t=t)
    np.testing.assert_allclose(head_grid(uniform, "entropy"), 1.0, atol=1e-5)
    np.testing.assert_allclose(head_grid(uniform, "first"), np.mean(1.0 / np.arange(2, t + 1)), atol=1e-6)
    np.testing.assert_allclose(head_grid(_causal("self"), "self"), 1.0)
    np.testing.assert_allclose(head_grid(_causal("self"), "entropy"), 0.0, atol=1e-5)
    np.testing.assert_allclose(head_grid(_causal("previous"), "previous"), 1.0)
    np.testing.assert_allclose(head_grid(_causal("previous"), "self"), 0.0)
    with pytest.raises(ExplainError, match="head measure"):
        head_grid(uniform, "loudest")


def test_head_grid_of_a_model(lm, ids):
    weights = decoder_attention(lm, ids)
    for measure in inside.HEAD_MEASURES:
        grid = head_grid(weights, measure)
        assert grid.shape == (lm.num_layers, lm.num_heads)
        assert np.all((grid >= -1e-6) & (grid <= 1 + 1e-6))
    # the same from the page's numpy weights
    view = decoder_view(lm, ids)
    np.testing.assert_allclose(head_grid(view.weights), head_grid(weights), atol=1e-6)


def test_causal_rollout(lm, ids):
    weights = decoder_attention(lm, ids)
    rolled = causal_rollout(weights)
    assert rolled.shape == (len(ids), len(ids))
    np.testing.assert_allclose(rolled.sum(1), 1.0, atol=1e-5)
    assert np.abs(np.triu(rolled, 1)).max() == 0
    expected = rollout([w.mean(0)[None].cpu() for w in weights])[0].numpy()
    np.testing.assert_allclose(rolled, expected, atol=1e-6)
    # a weight leaking above the diagonal is masked out rather than rolled into earlier tokens
    leaky = np.stack([w.cpu().numpy() for w in weights])
    leaky[..., 0, -1] = 0.5
    assert np.abs(np.triu(causal_rollout(leaky), 1)).max() == 0


def test_decoder_view_for_the_attention_page(lm, ids, monkeypatch):
    view = decoder_view(lm, ids)
    assert view.weights.shape == (lm.num_layers, lm.num_heads, len(ids), len(ids))
    assert isinstance(view.weights, np.ndarray) and view.grid is None
    assert view.query == len(ids) - 1 and view.tokens == lm.token_text(ids)
    np.testing.assert_allclose(view.read_row(view.matrix(0)), view.weights[0].mean(0)[-1])
    np.testing.assert_allclose(view.rollout(), causal_rollout(view.weights), atol=1e-6)
    with pytest.raises(ExplainError, match="token labels"):
        decoder_view(lm, ids, tokens=["a"])
    monkeypatch.setattr(inside, "MAX_VIEW_BYTES", 1000)
    with pytest.raises(ExplainError, match="at most"):
        decoder_view(lm, ids)


def test_a_fused_attention_kernel_is_refused_clearly():
    lm = tiny_lm("llama")
    lm.model.set_attn_implementation("sdpa")
    with pytest.raises(ExplainError, match="eager attention"):
        decoder_attention(lm, [2, 4, 6])
