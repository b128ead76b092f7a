"""The logit lens: each layer's residual stream decoded through the final norm and the unembedding; the last layer's
row is the model's own next-token distribution (transformers' last hidden state is already normalised: the lens must
not normalise it twice)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from smollm2_run import smollm2_lm
from tiny_lm import tiny_lm

from xaidash.explainers.language.logit_lens import MAX_TOP_K, decode, logit_lens, residual_stream
from xaidash.explainers.params import ExplainError
from xaidash.models.language.prompt import build_prompt


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm(request):
    torch.set_num_threads(1)
    return tiny_lm(request.param)


@pytest.fixture(scope="module")
def ids(lm):
    return list(build_prompt(lm, "what is the capital of france ?").ids)


def test_last_layer_decodes_to_the_models_logits(lm, ids):
    x = torch.tensor([ids])
    states = residual_stream(lm, x)
    assert len(states) == lm.num_layers + 1
    logits = lm.logits(x)[0]
    torch.testing.assert_close(decode(lm, states[-1])[0], logits, atol=1e-5, rtol=1e-5)
    # transformers' own last hidden state is the final norm's output: decoding it through the norm again differs
    with torch.no_grad():
        hidden = lm.model(input_ids=x, output_hidden_states=True).hidden_states
        torch.testing.assert_close(lm.final_norm()(states[-1]), hidden[-1])
        torch.testing.assert_close(states[1], hidden[1])
        assert not torch.allclose(decode(lm, hidden[-1])[0], logits, atol=1e-4)


def test_lens_grid(lm, ids):
    lens = logit_lens(lm, ids, top_k=3, track=ids[1])
    rows = lm.num_layers + 1
    assert lens.shape == (rows, len(ids)) and lens.layers[0] == "embeddings" and len(lens.layers) == rows
    assert lens.top_ids.shape == lens.top_probs.shape == (rows, len(ids), 3)
    assert np.all(np.diff(lens.top_probs, axis=-1) <= 0) and np.all(lens.top_probs <= 1)
    probs = torch.softmax(lm.logits(torch.tensor([ids]))[0], dim=-1).numpy()
    np.testing.assert_array_equal(lens.top_ids[-1, :, 0], probs.argmax(-1))
    np.testing.assert_allclose(lens.top_probs[-1, :, 0], probs.max(-1), atol=1e-6)
    assert lens.tracked_probs is not None and lens.tracked_probs.shape == (rows, len(ids))
    np.testing.assert_allclose(lens.tracked_probs[-1], probs[:, ids[1]], atol=1e-6)
    assert lens.top_grid()[2][4] == lm.token_text([int(lens.top_ids[2, 4, 0])])[0]
    assert lens.tokens == lm.token_text(ids)
    assert len(lens.to_dict()["top_tokens"]) == rows


def test_positions_and_tracked_tokens(lm, ids):
    lens = logit_lens(lm, ids, positions=[-1, 2], track=[ids[3], ids[4]])
    assert lens.positions == [len(ids) - 1, 2] and lens.top_ids.shape == (lm.num_layers + 1, 2, 1)
    full = logit_lens(lm, ids, top_k=1)
    np.testing.assert_allclose(lens.top_probs[:, 0], full.top_probs[:, -1], atol=1e-6)
    for bad in ({"positions": [len(ids)]}, {"top_k": MAX_TOP_K + 1}, {"track": [1]}, {"track": 10**6}):
        with pytest.raises(ExplainError):
            logit_lens(lm, ids, **bad)


@pytest.mark.slow
def test_smollm2_lens_ends_on_its_answer(tmp_path_factory):
    torch.set_num_threads(1)
    lm = smollm2_lm(tmp_path_factory)
    prompt = build_prompt(lm, "The capital of France is", chat=False)
    paris = lm.tokenizer.encode(" Paris", add_special_tokens=False)
    lens = logit_lens(lm, prompt.ids, positions=[-1], top_k=5, track=paris[0])
    assert lens.shape == (31, 1)
    logits = lm.logits(torch.tensor([prompt.ids]))[0, -1]
    assert int(lens.top_ids[-1, 0, 0]) == int(logits.argmax()) == paris[0]
    assert lens.tracked_probs is not None
    assert lens.tracked_probs[-1, 0] == pytest.approx(float(torch.softmax(logits, -1)[paris[0]]), abs=1e-5)
    assert lens.tracked_probs[-1, 0] > lens.tracked_probs[1, 0]  # the answer forms in the later layers
