"""Counterfactuals: images reach the asked class at the smallest budget found (or say none was found within it),
text reaches it with few word edits from the model's vocabulary; the rank-correlation helpers; refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from xaidash.data.registry import get_info, load_split
from xaidash.data.tokenizer import WordVocab, split_words
from xaidash.explainers import ExplainError
from xaidash.explainers.robust import attack, counterfactual, explanation_change, rank_correlation, top_k_overlap
from xaidash.explainers.robust.counterfactual import image_counterfactual, text_counterfactual
from xaidash.explainers.robust.figures import change_figures, perturbation_figure
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


@pytest.fixture(scope="module")
def cues_cnn() -> ModelBundle:
    """text_cnn after 36 Adam steps on 1,536 cue sentences (as tests/explainers/test_text_methods.py)."""
    train, info = load_split("cues", "train"), get_info("cues")
    vocab = WordVocab.build(train.texts)
    torch.manual_seed(0)
    model = build_model("text_cnn", info, vocab_size=len(vocab))
    x, y = vocab.encode(train.texts[:1536]), train.labels[:1536]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(3):
        for idx in torch.randperm(len(x)).split(128):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return ModelBundle(model.eval(), get_spec("text_cnn"), info, torch.device("cpu"), tokenizer=vocab)


def test_rank_correlation_and_top_k() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(8, 8))
    assert rank_correlation(a, a) == pytest.approx(1.0)
    assert rank_correlation(a, -a) == pytest.approx(-1.0)
    assert rank_correlation(a, np.exp(a)) == pytest.approx(1.0)  # ranks, not values
    assert math.isnan(rank_correlation(a, np.zeros_like(a)))
    assert top_k_overlap(a, a, 5) == 1.0
    b = a.copy().ravel()
    top = np.argsort(-np.abs(b))[:4]
    b[top] = 0.0
    assert top_k_overlap(a, b.reshape(a.shape), 4) == 0.0
    with pytest.raises(ValueError):
        rank_correlation(a, a[:4])


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_image_counterfactual_reaches_the_class_and_is_small(trained_shapes: ModelBundle) -> None:
    test = load_split("shapes", "test")
    x = test.image(1).float()
    pred = int(trained_shapes.predict_proba(x[None])[0].argmax())
    to = (pred + 1) % trained_shapes.info.num_classes
    cf = image_counterfactual(trained_shapes, x, to, budget=0.1, steps=10)
    assert cf.found, cf.summary()
    assert cf.result is not None and cf.result.pred_after == to
    assert cf.epsilon is not None and cf.result.linf <= cf.epsilon + 1e-6 <= 0.1 + 1e-6
    assert cf.probes >= 2 and "ε =" in cf.summary() and cf.to_json()["found"]
    # At half the smallest budget found, the same attack does not reach the class (the bisection's lower side).
    below = attack(trained_shapes, x, to, "pgd", {"epsilon": cf.epsilon / 2, "steps": 10})
    assert not below.reached
    # None within a budget too small to move the answer: said plainly.
    none = image_counterfactual(trained_shapes, x, to, budget=0.2 / 255, steps=3)
    assert not none.found and none.summary().startswith("None found within")
    with pytest.raises(ExplainError, match="already predicts"):
        image_counterfactual(trained_shapes, x, pred)


def test_text_counterfactual_reaches_the_class_with_word_edits(cues_cnn: ModelBundle) -> None:
    test = load_split("cues", "test")
    probs = cues_cnn.predict_proba(test.texts[:20]).numpy()
    i = int(np.argmax(probs.max(1)))  # a confidently predicted sentence
    text, pred = test.texts[i], int(probs[i].argmax())
    to = 1 - pred
    steps: list = []
    cf = counterfactual(cues_cnn, text, to, budget=5, progress=steps.append)
    assert cf.found, cf.summary()
    assert 1 <= len(cf.edits) <= 5
    # a real counterfactual keeps its name; each greedy round is reported before it is scored
    assert cf.name == "counterfactual" and cf.summary().startswith("Counterfactual: ")
    assert [s.run for s in steps] == list(range(1, len(cf.edits) + 1)) and all(s.runs == 5 for s in steps)
    assert steps[0].text().startswith("word edit 1 of at most 5 · ")
    assert int(cues_cnn.predict_proba([cf.text])[0].argmax()) == to
    vocab = set(cues_cnn.tokenizer.itos)
    assert all(e.new is None or e.new in vocab for e in cf.edits)
    assert all(cf.original_words[e.position] == e.old for e in cf.edits)
    assert "word edit" in cf.summary() and cf.to_json()["edit_count"] == len(cf.edits)
    # Deletions only, one edit: not enough to turn a sentence whose cues all point one way (or said so).
    few = text_counterfactual(cues_cnn, text, to, max_edits=1, substitutions=False)
    if not few.found:
        assert few.summary().startswith("None found within 1 word edit")
    with pytest.raises(ExplainError, match="already predicts"):
        counterfactual(cues_cnn, text, pred)
    with pytest.raises(ExplainError, match="empty"):
        counterfactual(cues_cnn, "   ", to)
    assert len(split_words(cf.text)) <= len(split_words(text))


def test_text_models_are_told_the_counterfactual_is_their_option(cues_cnn: ModelBundle) -> None:
    with pytest.raises(ExplainError, match="counterfactual"):
        attack(cues_cnn, "a fine film", None, "pgd", {"epsilon": 0.03})


def test_explanation_change_and_figures() -> None:
    info = get_info("shapes")
    torch.manual_seed(0)
    bundle = ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))
    x = torch.rand(tuple(info.input_shape), generator=torch.Generator().manual_seed(1))
    r = attack(bundle, x, None, "fgsm", {"epsilon": 4 / 255})
    changes = explanation_change(bundle, r, ["saliency", "gradcam"])
    assert [c.method for c in changes] == ["saliency", "gradcam"]
    for c in changes:
        assert c.error is None and c.target == r.pred_before
        assert -1.0 <= c.spearman <= 1.0 and 0.0 <= c.top_k <= 1.0 and c.k >= 1
        before, after = change_figures(c, r, r.classes)
        assert before.scale == after.scale and before.figure_png and after.figure_png
    fig = perturbation_figure(r)
    assert fig.signed and fig.scale == pytest.approx(4.0) and not fig.clipped
    assert "/255" in fig.legend.units and fig.figure_png is not None
