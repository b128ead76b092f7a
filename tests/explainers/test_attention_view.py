"""The attention view of one input: every layer and head, the tokens and the row the prediction reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers the methods)
from xaidash.data.registry import get_info
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers.inspection.attention import collect_attention, rollout
from xaidash.explainers.inspection.attention_view import attention_view
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


def test_attention_view_vision_and_text():
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
