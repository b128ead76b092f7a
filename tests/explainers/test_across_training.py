"""Explanations across training: one input explained with every saved epoch's weights."""

from __future__ import annotations

import numpy as np
import pytest

import xaidash.explainers  # noqa: F401  (registers the methods)
from xaidash.data.registry import load_split
from xaidash.explainers.api import explain
from xaidash.explainers.comparison.across_training import epoch_validation, explanations_across_training
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import load_bundle
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

pytestmark = pytest.mark.slow  # every test trains a run with checkpoints per epoch


@pytest.fixture(scope="module")
def two_epoch_run(tmp_path_factory):
    import os

    old = os.environ.get("XAIDASH_RUNS")
    os.environ["XAIDASH_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    try:
        result = train(
            TrainConfig(
                dataset="digits",
                model="resnet_small",
                epochs=2,
                batch_size=64,
                lr=3e-3,
                max_train_samples=400,
                device="cpu",
            )
        )
    finally:
        if old is None:
            os.environ.pop("XAIDASH_RUNS", None)
        else:
            os.environ["XAIDASH_RUNS"] = old
    assert result.state == "completed", result.error
    return result.run


def test_explanations_across_training(two_epoch_run):
    run = two_epoch_run
    image = load_split("digits", "test").image(3)
    seen = []
    result = explanations_across_training(
        run, image, device="cpu", method_params={"ig": {"steps": 8}}, progress=lambda d, t: seen.append(d)
    )
    assert [e.epoch for e in result.epochs] == [1, 2] and seen == [1, 2]
    assert result.methods() == ["gradcam", "ig"] and not result.skipped
    val = epoch_validation(run)
    records = [r for r in run.metrics() if r["kind"] == "epoch"]
    assert [e.val_acc for e in result.epochs] == [val[1], val[2]] == [r["val_acc"] for r in records]
    final = load_bundle(run, device="cpu")
    assert result.target == int(final.predict_proba(image).argmax(1)[0])
    for e in result.epochs:
        for expl in e.explanations.values():
            assert expl.attributions.shape == (1, 8, 8) and int(expl.targets[0]) == result.target
    # the last epoch's weights are the run's final weights: same maps as explaining the final model
    again = explain(final, image, result.target, method="ig", steps=8)
    np.testing.assert_allclose(result.epochs[-1].explanations["ig"].item(0), again.item(0), rtol=1e-4, atol=1e-6)
    # and the weights changed between the epochs
    assert not np.allclose(result.epochs[0].explanations["ig"].item(0), result.epochs[1].explanations["ig"].item(0))
    assert result.scale("ig") >= max(e.explanations["ig"].max_abs() for e in result.epochs) > 0
    # The page's colour scale: the 99th percentile of |value| over every epoch's map, as on the Explain page.
    every = np.concatenate([np.abs(e.explanations["ig"].item(0)).ravel() for e in result.epochs])
    assert result.shared_scale("ig") == pytest.approx(float(np.percentile(every, 99, method="higher")))
    assert result.clipped("ig") == (result.scale("ig") > result.shared_scale("ig"))
    one = explanations_across_training(run, image, methods=["gradcam"], target=0, epochs=[2], device="cpu")
    assert [e.epoch for e in one.epochs] == [2] and one.target == 0
    with pytest.raises(ExplainError, match="no checkpoint for epoch 5"):
        explanations_across_training(run, image, epochs=[5], device="cpu")


def test_across_training_skips_gradcam_without_convolutions(tmp_path, monkeypatch):
    result = train(
        TrainConfig(dataset="digits", model="mlp", epochs=1, batch_size=64, max_train_samples=200, device="cpu")
    )
    image = load_split("digits", "test").image(0)
    out = explanations_across_training(result.run, image, device="cpu", method_params={"ig": {"steps": 4}})
    assert out.methods() == ["ig"] and "gradcam" in out.skipped and "convolution" in out.skipped["gradcam"]
