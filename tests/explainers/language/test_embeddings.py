"""Sentence and token representations of a causal language model for the Embeddings page: the layer read, pooling,
independence from the batch and its padding, token properties, refusals, and on SmolLM2 that SST-2's sentiment is
linearly readable from the middle layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from smollm2_run import smollm2_lm
from tiny_lm import tiny_lm

from xaidash.explainers.inspection.projection import project
from xaidash.explainers.language.embeddings import (
    TOKEN_PROPERTIES,
    labelled_texts,
    layer_names,
    middle_layer,
    sentence_representations,
    start_token,
    token_representations,
)
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import wrap

TEXTS = [
    "what is the capital of france ?",
    "paris",
    "a red cat and a blue dog in london , yes",
    "yes , no",
    "the city",
    "it is a green country and it is in the city",
]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm(request):
    return tiny_lm(request.param, seed=2)


def _states(lm, text: str) -> list[torch.Tensor]:
    """Every layer's states of one text read alone (the start token first), the last one before the final norm."""
    ids = [start_token(lm)] + lm.tokenizer(text)["input_ids"]
    before_norm: list[torch.Tensor] = []
    handle = lm.final_norm().register_forward_pre_hook(lambda m, args: before_norm.append(args[0]))
    try:
        with torch.no_grad():
            out = lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    finally:
        handle.remove()
    return [h[0, 1:] for h in out.hidden_states[:-1]] + [before_norm[0][0, 1:]]


def test_the_layers_read_are_the_residual_stream(lm):
    assert layer_names(lm) == {0: "embeddings", 1: "layer 1", 2: "layer 2"} and middle_layer(lm) == 1
    for layer in range(lm.num_layers + 1):
        means = sentence_representations(lm, TEXTS, layer, "mean")
        lasts = sentence_representations(lm, TEXTS, layer, "last")
        assert means.shape == lasts.shape == (len(TEXTS), lm.config.hidden_size) and means.dtype == np.float32
        for i, text in enumerate(TEXTS):
            states = _states(lm, text)[layer]
            np.testing.assert_allclose(means[i], states.mean(0).numpy(), atol=1e-5)
            np.testing.assert_allclose(lasts[i], states[-1].numpy(), atol=1e-5)
    assert not np.allclose(means, lasts)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("pool", ["mean", "last"])
def test_a_text_reads_the_same_alone_or_in_a_padded_batch(lm, padding, pool):
    alone = np.stack([sentence_representations(lm, [t], 2, pool)[0] for t in TEXTS])
    for batch_size in (2, 4, len(TEXTS)):  # texts of different lengths share batches
        batched = sentence_representations(lm, TEXTS, 2, pool, batch_size=batch_size, padding=padding)
        np.testing.assert_allclose(batched, alone, atol=1e-5)
    tokens = token_representations(lm, TEXTS, 2, limit=1000, batch_size=4, padding=padding)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(tokens.features[tokens.text_index == i], _states(lm, text)[2].numpy(), atol=1e-5)


def test_an_early_layer_stops_the_pass(lm):
    """Layer 1 is the input of block 2: the blocks after it never run."""
    calls = []
    handle = lm.layers()[1].register_forward_hook(lambda m, args, out: calls.append(1))  # after block 2 ran
    try:
        sentence_representations(lm, TEXTS, 1)
        assert calls == []
        sentence_representations(lm, TEXTS, 2)
        assert calls
    finally:
        handle.remove()


def test_token_rows_and_their_limit(lm):
    words = [t.split() for t in TEXTS]
    tokens = token_representations(lm, TEXTS, 1, limit=10)
    assert len(tokens) == 10 and tokens.features.shape == (10, lm.config.hidden_size)
    assert tokens.token == (words[0] + words[1] + words[2])[:10]
    assert tokens.text_index.tolist() == [0] * 7 + [1] + [2] * 2
    assert tokens.position.tolist() == [*range(7), 0, 0, 1]
    assert tokens.per_token(np.array(["a", "b", "c", "d", "e", "f"])).tolist() == ["a"] * 7 + ["b"] + ["c"] * 2
    every = token_representations(lm, TEXTS, 1, limit=10_000)
    assert len(every) == sum(len(w) for w in words) and set(every.text_index.tolist()) == set(range(len(TEXTS)))
    assert set(every.properties) == set(TOKEN_PROPERTIES) and all(
        len(v) == len(every) for v in every.properties.values()
    )
    assert not set(every.token_id.tolist()) & lm.special_ids()


def test_progress_is_reported(lm):
    seen: list[tuple[int, int]] = []
    sentence_representations(lm, TEXTS, 1, batch_size=4, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(4, 6), (6, 6)]


def _byte_level_lm():
    """A tiny Llama whose tokenizer is GPT-2's byte alphabet without merges: every character its own token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    alphabet = [bytes_to_unicode()[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate([*alphabet, "<|endoftext|>"])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    config._attn_implementation = "eager"
    return wrap(LlamaForCausalLM(config), tokenizer, "bytes", torch.device("cpu"))


def test_token_properties_on_byte_tokens():
    lm = _byte_level_lm()
    tokens = token_representations(lm, ["Hi, 42 ok!"], 1)
    assert tokens.token == list("Hi, 42 ok!")
    props = tokens.properties
    assert props["kind"].tolist() == [
        "word start",
        "word piece",
        "punctuation",
        "space",
        "number",
        "number",
        "space",
        "word start",
        "word piece",
        "punctuation",
    ]
    assert props["starts_word"].tolist() == [True, False, False, True, True, False, True, True, False, False]
    assert props["digit"].tolist() == [c.isdigit() for c in "Hi, 42 ok!"]
    assert props["punctuation"].tolist() == [c in ",!" for c in "Hi, 42 ok!"]
    assert props["position"].tolist() == list(range(10))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda lm: sentence_representations(lm, TEXTS, 3), "no layer 3"),
        (lambda lm: sentence_representations(lm, TEXTS, -1), "no layer -1"),
        (lambda lm: sentence_representations(lm, TEXTS, True), "no layer True"),
        (lambda lm: sentence_representations(lm, TEXTS, 1, pool="max"), "Pooling is mean or last"),
        (lambda lm: sentence_representations(lm, [], 1), "No texts"),
        (lambda lm: sentence_representations(lm, ["paris", "  "], 1), "Text 1 is empty"),
        (lambda lm: sentence_representations(lm, TEXTS, 1, batch_size=0), "batch size must be at least 1"),
        (lambda lm: sentence_representations(lm, TEXTS, 1, padding="middle"), "'right' or the 'left'"),
        (lambda lm: sentence_representations(lm, ["<|im_end|>"], 1), "only special tokens"),
        (lambda lm: token_representations(lm, TEXTS, 1, limit=0), "at least one token"),
    ],
)
def test_refusals(lm, call, message):
    with pytest.raises(ExplainError, match=message):
        call(lm)


def test_sst2_texts_for_the_page(offline_data):
    texts, labels, classes = labelled_texts("sst2", "test", 50, seed=1)
    assert len(texts) == len(labels) == 50 and classes == ("negative", "positive")
    assert set(labels.tolist()) == {0, 1} and all(isinstance(t, str) and t for t in texts)
    assert (
        labelled_texts("sst2", "test", 50, seed=1)[0] == texts
        and labelled_texts("sst2", "test", 50, seed=2)[0] != texts
    )
    assert len(labelled_texts("sst2", "test", 10_000)[0]) == 872  # the whole split
    with pytest.raises(ExplainError, match="image data set"):
        labelled_texts("shapes", "test", 5)


def test_representations_feed_the_projection(lm):
    features = sentence_representations(lm, TEXTS, 1)
    assert project(features, "pca").coords.shape == (len(TEXTS), 2)
    tokens = token_representations(lm, TEXTS, 1)
    assert project(tokens.features, "pca").coords.shape == (len(tokens), 2)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


@pytest.mark.slow
def test_smollm2_middle_layer_reads_sst2_sentiment(smollm2, offline_data):
    """A logistic regression on the mean-pooled middle layer of 200 SST-2 training sentences, cross-validated,
    does better than always answering the majority class."""
    import time

    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    texts, labels, _ = labelled_texts("sst2", "train", 200, seed=0)
    started = time.perf_counter()
    features = sentence_representations(smollm2, texts, middle_layer(smollm2), "mean")
    seconds = time.perf_counter() - started
    accuracy = float(cross_val_score(LogisticRegression(max_iter=5000), features, labels, cv=5).mean())
    majority = max(labels.mean(), 1 - labels.mean())
    print(
        f"\nSmolLM2 layer {middle_layer(smollm2)}, 200 SST-2 sentences in {seconds:.1f} s: 5-fold accuracy "
        f"{accuracy:.3f} (majority class {majority:.3f})"
    )
    assert features.shape == (200, 576) and accuracy > majority + 0.1
    # the start token takes the attention sink's massive activations: no single direction dominates the map
    assert project(features, "pca").explained_variance[0] < 0.6


@pytest.mark.slow
def test_smollm2_token_properties(smollm2):
    tokens = token_representations(smollm2, ["SmolLM2 scored 90 points, well done."], middle_layer(smollm2))
    kinds = dict(zip(tokens.token, tokens.properties["kind"].tolist(), strict=True))
    assert "".join(tokens.token) == "SmolLM2 scored 90 points, well done."
    assert kinds["Sm"] == "word start" and kinds["LM"] == "word piece" and kinds[" scored"] == "word start"
    assert kinds["9"] == kinds["0"] == "number" and kinds[","] == kinds["."] == "punctuation"
    assert np.linalg.norm(tokens.features, axis=1).max() < 5000  # no token carries the sink's activations
