"""Adaptive occlusion: the shrinking search finds the region (a rectangle of pixels, a span of words) that changes
the prediction, its passes are the ones it declares, it runs through the one session (the CLI), and on a trained
shapes model its map finds the true object (the data set's ground-truth masks) far better than a random map."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from inspect_runs import make_run

from xaidash.data.registry import DatasetInfo, load_split
from xaidash.explainers import explain, list_methods
from xaidash.explainers.methods.adaptive_occlusion import box_masks, candidates
from xaidash.explainers.metrics import pointing_game
from xaidash.explainers.registry import get_method
from xaidash.models import ModelBundle, get_spec

INFO = DatasetInfo("toy", "image", ("patch", "other"), (1, 24, 24), (0.0,), (1.0,))
PATCH = (6, 14, 10, 20)  # rows 6..13, cols 10..19: the only pixels the toy model reads


class PatchModel(torch.nn.Module):
    """Class 0's logit grows with the brightness of PATCH (8 at full brightness), class 1's is 4: hiding more than
    about half of the patch with black takes 'patch' below half its probability."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, b, left, r = PATCH
        z = x[:, 0, t:b, left:r].mean((1, 2))
        return torch.stack([8 * z, torch.full_like(z, 4.0)], 1)


def toy_bundle() -> ModelBundle:
    return ModelBundle(PatchModel().eval(), get_spec("simple_cnn"), INFO, torch.device("cpu"))


def test_boxes_and_their_shrunk_candidates():
    box = torch.tensor([[0, 8, 2, 6]])
    mask = box_masks(box, (10, 10))[0]
    assert mask.sum() == 8 * 4 and mask[0, 2] == 1 and mask[8, 2] == 0 and mask[0, 6] == 0
    shrunk, valid = candidates(box, torch.tensor([0.5]))
    assert shrunk[0].tolist() == [[4, 8, 2, 6], [0, 4, 2, 6], [0, 8, 4, 6], [0, 8, 2, 4]] and valid.all()
    _, valid = candidates(torch.tensor([[3, 4, 0, 9]]), torch.tensor([0.1]))  # one row high: no top/bottom cut
    assert valid[0].tolist() == [False, False, True, True]


def test_the_search_ends_on_the_smallest_rectangle_that_changes_the_prediction():
    x = torch.zeros(2, 1, 24, 24)
    t, b, left, r = PATCH
    x[:, :, t:b, left:r] = 1.0
    e = explain(toy_bundle(), x, [0, 0], "adaptive_occlusion", fill="zero")
    assert e.diagnostics["changed"] == [1.0, 1.0]
    patch = np.zeros((24, 24), bool)
    patch[t:b, left:r] = True
    m = e.item(0)
    top = m >= m.max() - 1e-9
    assert patch[top].all(), "the brightest region lies inside the patch the model reads"
    covered = top.sum() / patch.sum()
    assert 0.5 <= covered <= 0.75, covered  # just over half the patch: hiding less would not change it
    assert e.diagnostics["region_share"][0] == pytest.approx(top.sum() / 24**2)
    assert e.diagnostics["probability_hidden"][0] <= 0.5 * torch.sigmoid(torch.tensor(4.0)).item()
    assert (m[~patch] < m.max()).all() and (m >= 0).all()  # the rectangles the search passed through fade out


def test_no_rectangle_changes_the_prediction_is_said_and_the_map_is_flat():
    x = torch.zeros(1, 1, 24, 24)  # a dark patch: hiding it with black changes nothing
    e = explain(toy_bundle(), x, [1], "adaptive_occlusion", fill="zero", steps=3)
    assert e.diagnostics["changed"] == [0.0] and e.diagnostics["region_share"] == [1.0]
    assert np.ptp(e.item(0)) == 0


def test_declared_facts_and_passes():
    spec = get_method("adaptive_occlusion", "image")
    assert spec in list_methods("image") and spec.family == "perturbation" and spec.output == "probability"
    assert spec.modalities == ("image",)  # rectangles; the text search is its own registration
    assert spec.count_passes(toy_bundle(), {"steps": 5}, 3, 0) == (0, 3 * (2 + 4 * 5))
    seen = []
    bundle = toy_bundle()
    handle = bundle.model.register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].shape[0]))
    try:
        explain(bundle, torch.rand(3, 1, 24, 24), [0, 1, 0], "adaptive_occlusion", steps=5)
    finally:
        handle.remove()
    assert sum(seen) == 3 * (2 + 4 * 5)


def test_cli_explains_with_adaptive_occlusion(tmp_path, monkeypatch):
    from xaidash.dashboard.cli import main

    run = make_run(tmp_path / "runs", "shapes", "resnet_small", epochs=1)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "out"
    args = ["explain", "--run", run.id, "--input", "dataset:0", "--methods", "adaptive_occlusion,occlusion"]
    assert main([*args, "--param", "adaptive_occlusion.steps=4", "--out", str(out), "--device", "cpu"]) == 0
    report = json.loads((out / "report.json").read_text())
    entries = {e["method"]: e for e in report["explanations"]}
    assert set(entries) == {"adaptive_occlusion", "occlusion"}, entries.keys()
    assert not entries["adaptive_occlusion"].get("error")


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_on_shapes_the_map_finds_the_true_object(trained_shapes):
    test = load_split("shapes", "test")
    probs = trained_shapes.predict_proba(test.images[:48])
    correct = (probs.argmax(1) == test.labels[:48]).nonzero().flatten()[:16]
    images, labels, masks = test.images[correct], test.labels[correct], test.masks[correct].numpy()
    e = explain(trained_shapes, images, labels, "adaptive_occlusion")
    maps = e.attributions
    rng = np.random.default_rng(0)
    random_maps = rng.random(maps.shape).astype(np.float32)
    point, random_point = pointing_game(maps, masks).mean(), pointing_game(random_maps, masks).mean()
    top = maps >= maps.reshape(len(maps), -1).max(1)[:, None, None] - 1e-9  # the smallest region found
    iou = ((top & masks).sum((1, 2)) / (top | masks).sum((1, 2))).mean()
    random_top = random_maps >= np.quantile(random_maps.reshape(len(maps), -1), 1 - top.mean(), axis=1)[:, None, None]
    random_iou = ((random_top & masks).sum((1, 2)) / (random_top | masks).sum((1, 2))).mean()
    print({"pointing": point, "random": random_point, "iou": iou, "random_iou": random_iou})
    assert np.mean(e.diagnostics["changed"]) >= 0.75
    assert point > random_point + 0.4, (point, random_point)
    assert iou > random_iou + 0.1, (iou, random_iou)


def test_on_text_the_search_finds_the_words_the_model_reads():
    from xaidash.data.registry import get_info
    from xaidash.data.tokenizer import WordVocab

    texts = ["a b c good d e f", "x y good z"]
    vocab = WordVocab.build(texts)
    good = vocab.encode(["good"])[0][0].item()

    class GoodWord(torch.nn.Module):
        """'pos' is 4 logits ahead when the word 'good' is read, else 4 behind."""

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            z = (ids == good).any(1).float()
            return torch.stack([8 * z - 4, torch.zeros_like(z)], 1)

    info = get_info("cues")
    bundle = ModelBundle(GoodWord().eval(), get_spec("text_cnn"), info, torch.device("cpu"), tokenizer=vocab)
    e = explain(bundle, texts, [0, 0], "adaptive_occlusion", steps=12)
    assert get_method("adaptive_occlusion", "text").modalities == ("text",)
    assert e.diagnostics["changed"] == [1.0, 1.0]
    for i in range(len(texts)):
        values = e.item(i)
        assert e.tokens[i][int(np.argmax(values))] == "good", (e.tokens[i], values)
        assert (values == values.max()).sum() == 1  # the shortest span: that one word
    assert e.diagnostics["region_share"] == pytest.approx([1 / 7, 1 / 4])
