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
from xaidash.explainers.comparison.compare import compare_methods
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
    # The Explain page's metrics: the curves, the ground truth and the cheap complexity scores (metric registry).
    assert set(values) == {
        "deletion_auc",
        "insertion_auc",
        "pointing_game",
        "energy_in_mask",
        "sparseness",
        "complexity",
    }
    assert all(len(v) == 2 for v in values.values())
    assert all(0.0 <= x <= 1.0 for k, v in values.items() if k != "complexity" for x in v)
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


def test_compare_counts_constant_maps_and_says_why_cells_are_na(image_bundle):
    """A model whose output ignores its input: every saliency map is all zeros. Those maps are counted, and the
    metrics they leave undefined are n/a with a reason, not NaN that a table prints as None."""
    import copy

    from xaidash.explainers.comparison.compare import Comparison

    dead = copy.deepcopy(image_bundle)
    with torch.no_grad():
        dead.model.fc.weight.zero_()
    s = pick_test_sample(dead, n=4, seed=3)
    result: Comparison = compare_methods(
        dead, s, ["saliency", "ig"], params={"ig": {"steps": 4}}, steps=4, sanity=False
    )
    assert result.constant_maps == {"saliency": 4, "ig": 4}
    reason = result.reason("saliency", "energy_in_mask")
    assert reason.startswith("n/a") and "no positive attribution" in reason and "4 of 4 maps constant" in reason
    # Completeness does not apply to saliency: n/a with the reason, whereas IG has a value.
    assert result.reason("saliency", "completeness_gap") == "n/a: no declared total"
    assert result.reason("ig", "completeness_gap") == "" or not result.reason("ig", "completeness_gap").startswith(
        "n/a: the method"
    )


def test_compare_summary_spread_and_best_method(image_bundle):
    s = pick_test_sample(image_bundle, n=5, seed=1)
    result = compare_methods(image_bundle, s, ["saliency", "gradcam"], steps=4, sanity=True, sanity_steps=1)
    summ = result.summary
    row = summ[(summ.method == "saliency") & (summ.metric == "deletion_auc")].iloc[0]
    values = result.per_input["saliency"]["deletion_auc"]
    assert row["n"] == 5 and row["valid"] == 5 and math.isclose(row["mean"], float(np.mean(values)), rel_tol=1e-6)
    assert row["low"] <= row["mean"] <= row["high"] and row["minimum"] == pytest.approx(min(values))
    # The best deletion AUC is the lowest, the best insertion AUC the highest.
    means = result.metrics["deletion_auc"]
    assert result.best["deletion_auc"] == [means.idxmin()]
    assert result.best["insertion_auc"] == [result.metrics["insertion_auc"].idxmax()]
    # The sanity check ran on every input by default (reusing the trained maps) and reports its spread.
    rows = [r for r in result.sanity.rows if r["step"] > 0]
    assert all(r["n"] == 5 and len(r["values"]) == 5 and "constant" in r for r in rows)
    assert all(r["spearman_min"] <= r["spearman"] <= r["spearman_max"] for r in rows if r["constant"] < 5)
