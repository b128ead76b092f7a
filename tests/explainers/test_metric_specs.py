"""Metrics run themselves: every registered metric computes its values and says whether it applies, scoring is a loop
over them (a metric that does not apply is left out, one that fails is reported while the others are computed), and
every metric that runs the model leaves each module's train/eval flag as the caller set it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

import xaidash.explainers  # noqa: F401  (registers methods)
from xaidash.data.registry import get_source
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import explain, scoring
from xaidash.explainers.metrics import cascading_randomization, infidelity_score, sensitivity_max_score
from xaidash.explainers.metrics.deletion import perturbation_curve, text_perturbation_curve
from xaidash.explainers.metrics.registry import REGISTRY, MetricContext, MetricSpec
from xaidash.explainers.metrics.road import road_curve
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec

TEXTS = ["not bad at all , a wonderful cast", "a dull and slow film"]


@pytest.fixture(scope="module")
def image_bundle() -> ModelBundle:
    return fresh_bundle("resnet_small", get_source("shapes").info)


@pytest.fixture(scope="module")
def text_bundle() -> ModelBundle:
    torch.manual_seed(0)
    info = get_source("cues").info
    vocab = WordVocab.build(TEXTS)
    model = build_model("text_cnn", info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    return ModelBundle(model, get_spec("text_cnn"), info, torch.device("cpu"), tokenizer=vocab)


def test_every_registered_metric_computes_itself_and_says_when_it_applies() -> None:
    assert len(REGISTRY) > 0
    for spec in REGISTRY:
        assert isinstance(spec, MetricSpec)
        assert callable(spec.score) and callable(spec.when), spec.id
        assert callable(spec.compute) and callable(spec.applies), spec.id


def test_scoring_computes_what_applies_and_reports_what_fails(image_bundle, monkeypatch) -> None:
    x = torch.rand(2, *image_bundle.info.input_shape, generator=torch.Generator().manual_seed(0))
    e = explain(image_bundle, x, None, "saliency")
    sparseness = REGISTRY.get("sparseness")

    def fails(ctx: MetricContext) -> list[float]:
        raise ValueError("no such luck")

    never = replace(sparseness, id="never", when=lambda ctx: False, score=fails)
    broken = replace(sparseness, id="broken", score=fails)
    monkeypatch.setattr(scoring, "metrics_for", lambda page, modality: [never, broken, sparseness])
    values, errors = scoring.input_metrics(image_bundle, x, e)
    assert set(values) == {"sparseness"} and len(values["sparseness"]) == 2
    # "never" does not apply: neither value nor error; a failure in plain words, no class name (issue 36)
    assert errors == {"broken": f"an unexpected error in {sparseness.title}: no such luck; the other metrics went on"}


def test_the_registry_decides_what_applies(image_bundle) -> None:
    """Without masks the pointing game does not apply; saliency declares no completeness, so no gap."""
    x = torch.rand(2, *image_bundle.info.input_shape, generator=torch.Generator().manual_seed(1))
    e = explain(image_bundle, x, None, "saliency")
    values, errors = scoring.input_metrics(image_bundle, x, e, steps=4)
    assert not errors
    assert {"deletion_auc", "insertion_auc", "sparseness", "complexity"} <= set(values)
    assert not {"pointing_game", "energy_in_mask", "completeness_gap", "rationale_pointing"} & set(values)
    masks = np.zeros((2, *x.shape[-2:]), dtype=bool)
    masks[:, 8:16, 8:16] = True
    with_masks, _ = scoring.input_metrics(image_bundle, x, e, masks=masks, steps=4)
    assert {"pointing_game", "energy_in_mask"} <= set(with_masks)


def _mixed_flags(model: torch.nn.Module) -> list[bool]:
    """The model in training mode with every other module switched to eval: flags no single call can restore."""
    model.train()
    for i, m in enumerate(model.modules()):
        if i % 2:
            m.eval()
    return [m.training for m in model.modules()]


def test_metrics_leave_each_modules_train_eval_flag_as_it_was(image_bundle, text_bundle) -> None:
    x = torch.rand(2, *image_bundle.info.input_shape, generator=torch.Generator().manual_seed(2))
    e = explain(image_bundle, x, None, "saliency")
    te = explain(text_bundle, TEXTS, None, "saliency")
    runs = {
        "deletion": lambda: perturbation_curve(image_bundle, x, e, steps=4),
        "text deletion": lambda: text_perturbation_curve(text_bundle, TEXTS, te, steps=4),
        "road": lambda: road_curve(image_bundle, x, e, steps=2),
        "infidelity": lambda: infidelity_score(image_bundle, x, e, n_perturb_samples=2),
        "max-sensitivity": lambda: sensitivity_max_score(image_bundle, x, "saliency", n_perturb_samples=2),
        "sanity": lambda: cascading_randomization(image_bundle, x, ["saliency"], max_steps=1),
        "scoring": lambda: scoring.input_metrics(image_bundle, x, e, steps=4, page="compare"),
    }
    bundles = (image_bundle, text_bundle)
    try:
        for name, run in runs.items():
            before = [_mixed_flags(b.model) for b in bundles]
            run()
            assert [[m.training for m in b.model.modules()] for b in bundles] == before, name
    finally:
        for b in bundles:
            b.model.eval()
