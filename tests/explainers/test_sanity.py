"""Cascading model-parameter randomisation (Adebayo et al. 2018): the mechanics, and the paper's finding
on a resnet_small trained on shapes in a fixture."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers data sets, models and methods)
from xaidash.data.registry import get_info, load_split
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers.metrics import cascading_randomization, weight_layers
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec

SMALL = get_info("shapes")


def _resnet(seed: int = 0) -> ModelBundle:
    torch.manual_seed(seed)
    return ModelBundle(build_model("resnet_small", SMALL).eval(), get_spec("resnet_small"), SMALL, torch.device("cpu"))


def test_weight_layers_follow_the_forward_pass():
    b = _resnet()
    layers = weight_layers(b.model, torch.zeros(1, 3, 32, 32))
    assert layers[0] == "stem.0" and layers[-1] == "fc"
    assert "layers.1.shortcut.0" in layers and not any("bn" in name for name in layers)  # norm layers left alone
    with_norm = weight_layers(b.model, torch.zeros(1, 3, 32, 32), include_norm=True)
    assert "stem.1" in with_norm and len(with_norm) > len(layers)


def test_cascade_rows_maps_and_original_model_untouched():
    b = _resnet()
    before = {k: v.clone() for k, v in b.model.state_dict().items()}
    x = load_split("shapes", "test").images[:3]
    r = cascading_randomization(b, x, ["saliency", "gradcam", "attention_rollout"], max_steps=3, ssim=True)
    for k, v in b.model.state_dict().items():
        assert torch.equal(v, before[k]), k
    df = r.to_frame()
    assert isinstance(df, pd.DataFrame) and set(df.method) == {"saliency", "gradcam"}
    assert "attention_rollout" in r.errors  # does not apply to a CNN: reported, the others ran
    assert list(df[df.method == "saliency"].step) == [0, 1, 6, 10] and r.layers[0] == "fc"
    step0 = df[df.step == 0]
    np.testing.assert_allclose(step0.spearman, 1.0)
    assert set(df.columns) >= {"method", "layer", "step", "spearman", "ssim"}
    assert df[df.step > 0].ssim.notna().all()
    assert len(r.maps["saliency"]) == 4 and r.maps["saliency"][0].shape == (3, 32, 32)
    # Same seed, same randomised weights: the test is reproducible.
    again = cascading_randomization(b, x, ["saliency"], max_steps=3)
    np.testing.assert_allclose(again.to_frame().spearman, df[df.method == "saliency"].spearman)


def test_signed_and_absolute_comparisons_differ():
    b = _resnet()
    x = load_split("shapes", "test").images[:2]
    a = cascading_randomization(b, x, ["inputxgrad"], max_steps=1, keep_maps=False).rows[-1]["spearman"]
    s = cascading_randomization(b, x, ["inputxgrad"], max_steps=1, keep_maps=False, absolute=False).rows[-1]["spearman"]
    assert a != pytest.approx(s)


def test_text_model_cascade():
    info = get_info("cues")
    spec = get_spec("text_cnn")
    vocab = WordVocab.build(["the movie was good", "the plot was bad and dull"])
    torch.manual_seed(0)
    model = spec.build(info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    b = ModelBundle(model, spec, info, torch.device("cpu"), tokenizer=vocab)
    r = cascading_randomization(b, ["the movie was good", "the plot was dull"], ["saliency"])
    assert r.layers[-1].startswith("embedding") and not r.errors
    assert r.rows[0]["spearman"] == pytest.approx(1.0) and len(r.rows) == 1 + len(r.layers)


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_paper_finding_on_a_trained_model(trained_shapes):
    trained = trained_shapes  # resnet_small trained on shapes by the engine (conftest.py)
    test = load_split("shapes", "test")
    acc = (trained.predict_proba(test.images[:300]).argmax(1) == test.labels[:300]).float().mean().item()
    assert acc > 0.6, f"fixture model did not train (accuracy {acc:.2f})"
    r = cascading_randomization(trained, test.images[:8], ["saliency", "gradcam", "guided_backprop"], keep_maps=False)
    df = r.to_frame()
    rho = {m: df[df.method == m].set_index("step").spearman for m in ("saliency", "gradcam", "guided_backprop")}
    last = len(r.layers)
    top_block = [1, 2, 3, 4]  # fc and the last residual block (shortcut, conv2, conv1)
    assert r.layers[:4] == ["fc", "layers.2.shortcut.0", "layers.2.conv2", "layers.2.conv1"]
    # Gradients and Grad-CAM depend on the weights: their maps change a lot.
    assert rho["saliency"][last] < 0.45 and rho["saliency"][last] < rho["saliency"][1]
    assert rho["gradcam"][top_block].mean() < 0.4
    # Guided backprop barely notices the top of the network being destroyed (the paper's Fig. 2).
    assert rho["guided_backprop"][top_block].mean() > 0.6
    assert rho["guided_backprop"][top_block].mean() > rho["saliency"][top_block].mean() + 0.1
