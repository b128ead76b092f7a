"""Attention as a prompt attribution: the last layer's rows and the causal rollout's rows of the positions that
predict each generated step, read from one forward pass, equal to the weights transformers returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_lm import tiny_lm

from xaidash.explainers.inspection.attention import rollout
from xaidash.explainers.language.api import explain_prompt
from xaidash.explainers.language.query import make_query
from xaidash.explainers.language.registry import get_prompt_method
from xaidash.models.language.prompt import build_prompt

ANSWER = ("paris", "is", "a", "city")


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def setup(request):
    torch.set_num_threads(1)
    lm = tiny_lm(request.param)
    prompt = build_prompt(lm, "what is the capital of france ?")
    answer = [lm.tokenizer.convert_tokens_to_ids(w) for w in ANSWER]
    ids = torch.tensor([list(prompt.ids) + answer[:-1]])
    with torch.no_grad():
        weights = [w[0].double() for w in lm.model(input_ids=ids, output_attentions=True).attentions]
    return lm, prompt, answer, weights


def test_last_layer_rows_are_the_models_weights(setup):
    lm, prompt, answer, weights = setup
    task = make_query(lm, prompt, answer, span=(1, 3), include_template=True)
    e = explain_prompt(lm, task, {"attention_last": {}})["attention_last"]
    queries = len(prompt.ids) - 1 + np.arange(task.n_steps)  # the span's end: 3 steps read
    expected = weights[-1].mean(0).numpy()[queries][:, : len(prompt.ids)]  # every prompt position is a feature
    np.testing.assert_allclose(e.per_step, expected, atol=1e-6)
    np.testing.assert_allclose(e.attributions, expected[1:3].mean(0), atol=1e-6)
    # The first step's query sees only the prompt: its row sums to one over it; later ones share with the answer.
    assert e.per_step[0].sum() == pytest.approx(1.0, abs=1e-5)
    assert np.all(e.per_step >= 0) and np.all(e.per_step.sum(1) <= 1 + 1e-5)
    assert np.all(np.diff(e.per_step.sum(1)) < 0)


def test_rollout_rows_follow_the_causal_mask(setup):
    lm, prompt, answer, weights = setup
    task = make_query(lm, prompt, answer)  # the user's tokens only: each feature one position
    e = explain_prompt(lm, task, {"attention_rollout": {}})["attention_rollout"]
    rolled = rollout([w.mean(0)[None] for w in weights])[0].numpy()
    assert rolled.shape == (len(prompt.ids) + len(answer) - 1,) * 2
    np.testing.assert_allclose(np.triu(rolled, 1), 0, atol=1e-7)
    np.testing.assert_allclose(rolled.sum(1), 1, atol=1e-5)
    queries = len(prompt.ids) - 1 + np.arange(len(answer))
    np.testing.assert_allclose(e.per_step, rolled[queries][:, list(prompt.features)], atol=1e-5)
    np.testing.assert_allclose(e.attributions, e.per_step.mean(0), atol=1e-6)


def test_word_features_sum_their_tokens(setup):
    lm, prompt, answer, _ = setup
    tokens = make_query(lm, prompt, answer, span=(0, 1))
    words = make_query(lm, prompt, answer, span=(0, 1), unit="word")
    by_token = explain_prompt(lm, tokens, {"attention_last": {}})["attention_last"].attributions
    by_word = explain_prompt(lm, words, {"attention_last": {}})["attention_last"].attributions
    position = {p: i for i, p in enumerate(prompt.features)}
    for value, group in zip(by_word, words.features, strict=True):
        assert value == pytest.approx(sum(by_token[position[p]] for p in group), abs=1e-6)


def test_the_weights_do_not_depend_on_a_contrast(setup):
    lm, prompt, answer, _ = setup
    plain = make_query(lm, prompt, answer, span=(0, 1))
    contrast = make_query(lm, prompt, answer, span=(0, 1), contrast=answer[1])
    for method in ("attention_last", "attention_rollout"):
        a = explain_prompt(lm, plain, {method: {}})[method]
        b = explain_prompt(lm, contrast, {method: {}})[method]
        np.testing.assert_array_equal(a.attributions, b.attributions)
        assert a.rows == 1


def test_declared_facts():
    for method in ("attention_last", "attention_rollout"):
        spec = get_prompt_method(method)
        assert spec.output == "attention" and spec.family == "attention"
        assert not spec.signed and spec.per_step and not spec.gradients and spec.completeness is None
        assert not spec.target_dependent
        assert spec.rows_for({}, 40, 50, 10) == 1
