"""Faithfulness, ground-truth, completeness, robustness and agreement metrics on models whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import xaidash.explainers  # noqa: F401  (registers methods)
from xaidash.data.registry import DatasetInfo
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import explain
from xaidash.explainers import metrics as M
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelSpec, build_model, get_spec

REGION = (slice(2, 4), slice(5, 7))  # the 2x2 pixels the hand-made model reads


class RegionReader(nn.Module):
    """Class 1's logit grows with the mean brightness of one 2x2 region; nothing else matters."""

    def forward(self, x):
        s = x[:, 0, REGION[0], REGION[1]].mean((1, 2)) * 10 - 5
        return torch.stack([-s, s], 1)


def _bundle(model: nn.Module, info: DatasetInfo) -> ModelBundle:
    return ModelBundle(
        model.eval(), ModelSpec(info.name, info.modality, build=lambda i: model), info, torch.device("cpu")
    )


@pytest.fixture
def region_bundle() -> ModelBundle:
    return _bundle(RegionReader(), DatasetInfo("toy", "image", ("off", "on"), (1, 8, 8), (0.0,), (1.0,)))


@pytest.fixture
def images() -> torch.Tensor:
    return 0.6 + 0.4 * torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))


def _maps(kind: str, n: int = 6) -> np.ndarray:
    perfect = np.zeros((n, 8, 8), dtype=np.float32)
    perfect[:, REGION[0], REGION[1]] = 1.0
    if kind == "perfect":
        return perfect
    if kind == "inverted":
        return -perfect
    return np.random.default_rng(1).random((n, 8, 8)).astype(np.float32)


def test_deletion_orders_perfect_random_inverted(region_bundle, images):
    aucs = {
        k: M.deletion_auc(region_bundle, images, _maps(k), targets=1, steps=16).mean_auc()
        for k in ("perfect", "random", "inverted")
    }
    assert aucs["perfect"] < aucs["random"] < aucs["inverted"]
    assert aucs["perfect"] < 0.15 and aucs["inverted"] > 0.8


def test_insertion_is_the_reverse(region_bundle, images):
    aucs = {
        k: M.insertion_auc(region_bundle, images, _maps(k), targets=1, steps=16, substrate="black").mean_auc()
        for k in ("perfect", "random", "inverted")
    }
    assert aucs["perfect"] > aucs["random"] > aucs["inverted"]


def test_curves_start_and_end_where_they_should(region_bundle, images):
    r = M.deletion_auc(region_bundle, images, _maps("random"), steps=8)
    probs = region_bundle.predict_proba(images)
    assert r.curves.shape == (6, 9) and r.fractions[0] == 0 and r.fractions[-1] == 1
    np.testing.assert_allclose(r.curves[:, 0], probs[np.arange(6), r.targets].numpy(), rtol=1e-5)
    black = region_bundle.predict_proba(torch.zeros_like(images))
    np.testing.assert_allclose(r.curves[:, -1], black[np.arange(6), r.targets].numpy(), rtol=1e-5)
    np.testing.assert_allclose(r.aucs, np.trapezoid(r.curves, r.fractions, axis=1), rtol=1e-6)
    assert r.to_dict()["mean_auc"] == pytest.approx(r.mean_auc())


def test_batching_does_not_change_the_curves(region_bundle, images):
    a = M.deletion_auc(region_bundle, images, _maps("random"), steps=16, batch_size=7, substrate="blur")
    b = M.deletion_auc(region_bundle, images, _maps("random"), steps=16, batch_size=10_000, substrate="blur")
    np.testing.assert_allclose(a.curves, b.curves, rtol=1e-6)


def test_deletion_refuses_mismatched_maps(region_bundle, images):
    with pytest.raises(ExplainError, match="shape"):
        M.deletion_auc(region_bundle, images, np.zeros((6, 4, 4)))
    with pytest.raises(ExplainError, match="substrate"):
        M.deletion_auc(region_bundle, images, _maps("random"), substrate="purple")


# ---- ground truth ------------------------------------------------------------


def test_pointing_game_and_energy():
    mask = np.zeros((2, 8, 8), dtype=bool)
    mask[:, 2:5, 2:5] = True
    inside = np.zeros((8, 8), np.float32)
    inside[3, 3] = 1.0
    outside = np.zeros((8, 8), np.float32)
    outside[3, 6] = 1.0  # one pixel right of the mask's edge
    np.testing.assert_array_equal(M.pointing_game(np.stack([inside, outside]), mask), [1.0, 0.0])
    np.testing.assert_array_equal(M.pointing_game(np.stack([inside, outside]), mask, tolerance=2), [1.0, 1.0])
    flat = np.zeros((1, 8, 8), np.float32)  # no peak: the hit rate of a random guess (mask share)
    assert M.pointing_game(flat, mask[:1])[0] == pytest.approx(9 / 64)
    negative_peak = -inside * 5 + outside  # the most positive pixel is outside; the largest |value| inside
    assert M.pointing_game(negative_peak[None], mask[:1])[0] == 0.0
    assert M.pointing_game(negative_peak[None], mask[:1], absolute=True)[0] == 1.0

    half = inside + outside
    half[7, 0] = half[3, 2] = -3.0  # negative values (inside and outside) are ignored by energy
    energy = M.energy_in_mask(np.stack([inside, half, -inside]), np.stack([mask[0]] * 3))
    assert energy[0] == pytest.approx(1.0) and energy[1] == pytest.approx(0.5) and np.isnan(energy[2])
    with pytest.raises(ExplainError, match="Masks"):
        M.pointing_game(np.stack([inside, outside]), mask[:, :4])


def test_rationale_pointing_and_energy():
    scores = [np.array([0.1, 0.9, 0.2, -1.0]), np.array([0.5, 0.1, 0.5]), np.array([1.0, 2.0])]
    rationales = [[1], [0], []]
    pointing = M.rationale_pointing(scores, rationales)
    assert pointing[0] == 1.0 and pointing[1] == 0.5 and np.isnan(pointing[2])  # tied tops share the hit
    energy = M.rationale_energy(scores, [[1], [0, 2], [0]])
    np.testing.assert_allclose(energy, [0.9 / 1.2, 1.0 / 1.1, 1.0 / 3.0], rtol=1e-6)
    assert (
        M.rationale_pointing([np.array([0.0, 1.0])], [[7]])[0] != M.rationale_pointing([np.array([0.0, 1.0])], [[1]])[0]
    )


# ---- completeness / infidelity / sensitivity ---------------------------------


@pytest.fixture
def linear_bundle() -> ModelBundle:
    torch.manual_seed(0)
    lin = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    with torch.no_grad():
        lin[1].weight.abs_()  # positive weights: |gradient| == gradient, so saliency is the exact local model
    return _bundle(lin, DatasetInfo("lin", "image", ("a", "b", "c"), (3, 8, 8), (0.5,) * 3, (0.25,) * 3))


def test_completeness_gap_of_ig_on_a_linear_model_is_zero(linear_bundle):
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    for baseline in ("black", "mean", "blur"):
        e = explain(linear_bundle, x, method="ig", baseline=baseline, steps=64)
        assert M.completeness_gap(linear_bundle, x, e).max() < 1e-4
    sal = explain(linear_bundle, x, method="saliency")
    assert M.completeness_gap(linear_bundle, x, sal, baselines="black").min() > 0.05  # gradients alone are not complete


def test_completeness_gap_against_background_and_given_scores(linear_bundle):
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(4))
    bg = linear_bundle.prepare(torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(5)))
    logits = linear_bundle.model(linear_bundle.prepare(x)).detach()
    ref = linear_bundle.model(bg).detach().mean(0)
    t = logits.argmax(1)
    # Exact Shapley values of a linear model against a background: w * (x - mean(bg)).
    w = linear_bundle.model[1].weight.detach()[t].view(-1, 3, 8, 8)
    exact = (w * (linear_bundle.prepare(x) - bg.mean(0))).sum(1).numpy()
    assert M.completeness_gap(linear_bundle, x, exact, t, background=bg).max() < 1e-4
    assert M.completeness_gap(linear_bundle, x, exact, t, reference_scores=ref[t].numpy()).max() < 1e-4
    assert M.completeness_gap(linear_bundle, x, exact * 2, t, background=bg).min() == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(ExplainError, match="reference"):
        M.completeness_gap(linear_bundle, x, exact, t)


def test_infidelity_exact_map_beats_random(linear_bundle):
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(6))
    sal = explain(linear_bundle, x, method="saliency")  # the model's own weights, summed over channels
    exact = M.infidelity_score(linear_bundle, x, sal)
    noise = M.infidelity_score(linear_bundle, x, np.random.default_rng(0).random((4, 8, 8)), targets=sal.targets)
    assert exact.shape == (4,) and exact.max() < 1e-6 and noise.min() > 1e-4
    via_method = M.infidelity_score(linear_bundle, x, method="saliency")
    np.testing.assert_allclose(via_method, exact, atol=1e-6)


def test_sensitivity_max(linear_bundle):
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(7))
    flat = M.sensitivity_max_score(linear_bundle, x, "saliency", n_perturb_samples=4)  # gradient is constant
    moving = M.sensitivity_max_score(linear_bundle, x, "inputxgrad", n_perturb_samples=4)
    assert flat.shape == (2,) and flat.max() < 1e-6
    assert moving.min() > 1e-3


# ---- agreement ----------------------------------------------------------------


def test_agreement_matrix_is_symmetric_with_unit_diagonal():
    info = DatasetInfo("s", "image", ("a", "b", "c", "d"), (3, 16, 16), (0.5,) * 3, (0.25,) * 3)
    torch.manual_seed(0)
    bundle = ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))
    x = torch.rand(3, 3, 16, 16, generator=torch.Generator().manual_seed(8))
    ex = {m: explain(bundle, x, method=m) for m in ("saliency", "gradcam", "inputxgrad")}
    df = M.agreement_matrix(ex)
    assert list(df.index) == list(df.columns) == ["saliency", "gradcam", "inputxgrad"]
    np.testing.assert_allclose(df.values, df.values.T)
    np.testing.assert_allclose(np.diag(df.values), 1.0)
    assert (df.values <= 1.0 + 1e-9).all() and (df.values >= -1.0 - 1e-9).all()


def test_agreement_of_identical_and_opposite_maps():
    a = np.random.default_rng(2).normal(size=(3, 8, 8))
    df = M.agreement_matrix({"a": a, "same": a * 3, "neg": -a}, absolute=False)
    assert df.loc["a", "same"] == pytest.approx(1.0) and df.loc["a", "neg"] == pytest.approx(-1.0)
    assert M.agreement_matrix({"a": a, "neg": -a}).loc["a", "neg"] == pytest.approx(1.0)  # same |ranks|
    with pytest.raises(ExplainError, match="same inputs"):
        M.agreement_matrix({"a": a, "b": a[:2]})


# ---- text deletion ----------------------------------------------------------


class CueReader(nn.Module):
    """Positive when the word 'good' occurs; the other words do nothing."""

    def __init__(self, good_id: int):
        super().__init__()
        self.good_id = good_id

    def forward(self, ids):
        s = (ids == self.good_id).float().sum(1) * 6 - 3
        return torch.stack([-s, s], 1)


def test_text_deletion_and_insertion():
    vocab = WordVocab(["the", "movie", "was", "good", "long"])
    info = DatasetInfo("cue", "text", ("neg", "pos"))
    bundle = _bundle(CueReader(vocab.stoi["good"]), info)
    bundle.tokenizer = vocab
    texts = ["the movie was good and long", "good the movie was long"]
    words = [t.split() for t in texts]
    right = [np.array([w == "good" for w in ws], dtype=np.float32) for ws in words]
    wrong = [-r for r in right]
    d_right = M.text_perturbation_curve(bundle, texts, right, targets=1, steps=6, mode="deletion")
    d_wrong = M.text_perturbation_curve(bundle, texts, wrong, targets=1, steps=6, mode="deletion")
    i_right = M.text_perturbation_curve(bundle, texts, right, targets=1, steps=6, mode="insertion")
    i_wrong = M.text_perturbation_curve(bundle, texts, wrong, targets=1, steps=6, mode="insertion")
    assert d_right.curves.shape == (2, 7)
    assert (d_right.aucs < d_wrong.aucs).all() and (i_right.aucs > i_wrong.aucs).all()
    assert d_right.curves[0, 0] > 0.9 and d_right.curves[0, -1] < 0.1
