"""On a trained shapes model, Grad-CAM and IG beat a random attribution on deletion AUC and on the
pointing game against the shapes' ground-truth masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.registry import load_split
from xaidash.explainers import explain
from xaidash.explainers.metrics import deletion_auc, energy_in_mask, insertion_auc, pointing_game


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_gradcam_and_ig_beat_random(trained_shapes):
    test = load_split("shapes", "test")
    probs = trained_shapes.predict_proba(test.images[:64])
    correct = (probs.argmax(1) == test.labels[:64]).nonzero().flatten()[:24]
    images, masks = test.images[correct], test.masks[correct].numpy()
    rng = np.random.default_rng(0)
    random_maps = rng.random((len(images), 32, 32)).astype(np.float32)
    # Blurring (not blackening) deleted pixels keeps the images in-distribution: a random order of black
    # pixels already destroys the prediction, which leaves no room to tell methods apart.
    random_del = deletion_auc(trained_shapes, images, random_maps, substrate="blur").mean_auc()
    random_ins = insertion_auc(trained_shapes, images, random_maps).mean_auc()
    random_point = pointing_game(random_maps, masks).mean()
    for method, params in (("gradcam", {}), ("ig", {"baseline": "black", "steps": 32})):
        e = explain(trained_shapes, images, method=method, **params)
        maps = e.attributions
        deletion = deletion_auc(trained_shapes, images, maps, substrate="blur").mean_auc()
        insertion = insertion_auc(trained_shapes, images, maps).mean_auc()
        # IG is signed: evidence for the class is the positive part; rank by |IG| for the pointing game
        point = pointing_game(maps, masks, absolute=method == "ig").mean()
        assert deletion < random_del - 0.1, (method, deletion, random_del)
        assert insertion > random_ins + 0.1, (method, insertion, random_ins)
        assert point > random_point + 0.3, (method, point, random_point)
        assert energy_in_mask(np.abs(maps), masks).mean() > energy_in_mask(random_maps, masks).mean()
    assert torch.equal(test.labels[:64], load_split("shapes", "test").labels[:64])  # deterministic data
