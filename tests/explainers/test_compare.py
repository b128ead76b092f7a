"""Samples, per-input metrics and the method comparison behind the dashboard's Explain and Compare pages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers methods)
from xaidash.data.registry import get_source
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import explain
from xaidash.explainers.compare import compare_methods
from xaidash.explainers.params import ExplainError
from xaidash.explainers.samples import background_samples, pick_test_sample
from xaidash.explainers.scoring import input_metrics
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


@pytest.fixture(scope="module")
def image_bundle() -> ModelBundle:
    torch.manual_seed(0)
    info = get_source("shapes").info
    return ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))


@pytest.fixture(scope="module")
def text_bundle() -> ModelBundle:
    torch.manual_seed(0)
    source = get_source("cues")
    vocab = WordVocab.build(source.load("train").texts[:500])
    model = build_model("text_cnn", source.info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    return ModelBundle(model, get_spec("text_cnn"), source.info, torch.device("cpu"), tokenizer=vocab)


def test_pick_test_sample_is_seeded_and_carries_ground_truth(image_bundle, text_bundle):
    a = pick_test_sample(image_bundle, n=3, seed=1)
    assert a.raw.shape == (3, 3, 32, 32) and a.masks.shape == (3, 32, 32) and a.masks.dtype == bool
    assert pick_test_sample(image_bundle, n=3, seed=1).indices == a.indices
    assert pick_test_sample(image_bundle, n=3, seed=2).indices != a.indices
    chosen = pick_test_sample(image_bundle, indices=[5, 0])
    assert chosen.indices == [5, 0] and len(chosen.labels) == 2
    with pytest.raises(ExplainError, match="out of range"):
        pick_test_sample(image_bundle, indices=[0, 10**6])
    text = pick_test_sample(text_bundle, n=2)
    assert all(isinstance(t, str) for t in text.raw) and len(text.rationales) == 2


def test_background_samples(image_bundle, text_bundle):
    bg = background_samples(image_bundle, n=7)
    assert bg.shape == (7, 3, 32, 32)
    assert background_samples(text_bundle) is None


def test_input_metrics_per_input_and_what_applies(image_bundle):
    s = pick_test_sample(image_bundle, n=2)
    sal = explain(image_bundle, s.raw, method="saliency")
    values, errors = input_metrics(image_bundle, s.raw, sal, masks=s.masks, steps=8)
    assert not errors
    assert set(values) == {"deletion_auc", "insertion_auc", "pointing_game", "energy_in_mask"}
    assert all(len(v) == 2 and all(0.0 <= x <= 1.0 for x in v) for v in values.values())
    ig = explain(image_bundle, s.raw, method="ig", steps=16)
    values, _ = input_metrics(image_bundle, s.raw, ig, steps=8)  # no masks: no ground-truth scores
    assert "pointing_game" not in values and "completeness_gap" in values


def test_compare_methods_table_agreement_sanity_and_progress(image_bundle):
    s = pick_test_sample(image_bundle, n=2)
    seen: list[float] = []
    result = compare_methods(
        image_bundle,
        s,
        ["saliency", "gradcam", "ig"],
        params={"ig": {"steps": 1}},
        steps=8,
        sanity=True,
        sanity_inputs=1,
        sanity_steps=2,
        progress=lambda f, msg: seen.append(f),
    )
    assert "ig" in result.errors and "steps" in result.errors["ig"]  # a bad parameter: reported, the others go on
    assert list(result.metrics.index) == ["saliency", "gradcam"]
    assert {"deletion_auc", "insertion_auc", "pointing_game", "energy_in_mask", "seconds"} <= set(
        result.metrics.columns
    )
    assert (result.metrics["seconds"] >= 0).all()
    assert result.agreement.shape == (2, 2) and np.allclose(np.diag(result.agreement.values), 1.0)
    steps = sorted({r["step"] for r in result.sanity.rows})
    assert steps[0] == 0 and len(steps) == 3
    assert len(result.sanity.maps["saliency"]) == 3
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_compare_methods_on_text_uses_rationales(text_bundle):
    s = pick_test_sample(text_bundle, n=3)
    result = compare_methods(text_bundle, s, ["saliency"], sanity=False)
    row = result.metrics.loc["saliency"]
    assert {"deletion_auc", "insertion_auc", "rationale_pointing", "rationale_energy"} <= set(result.metrics.columns)
    assert not math.isnan(row["deletion_auc"])
    assert result.agreement is None and result.sanity is None


def test_compare_methods_refuses_nothing_or_unsupported(image_bundle):
    s = pick_test_sample(image_bundle, n=1)
    with pytest.raises(ExplainError, match="at least one method"):
        compare_methods(image_bundle, s, [])
    with pytest.raises(ExplainError):
        compare_methods(image_bundle, s, ["attention"])  # a text-only method
