"""Two models side by side: which runs can stand beside a run (and why the others cannot), a run at an
epoch's checkpoint as a bundle, both models' maps, and colour scales that compare like with like."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from inspect_runs import make_run

from xaidash.data.registry import load_split
from xaidash.explainers.comparison.side_by_side import (
    ModelChoice,
    common_methods,
    disagreements,
    epoch_choices,
    explain_pair,
    incompatibility,
    input_spec,
    load_choice,
    partners,
    row_scale,
    shares_units,
    split_predictions,
    top_classes,
)
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.registry import get_method, list_methods
from xaidash.models.runs.lock import RunLock
from xaidash.models.runs.store import WEIGHTS, Run, load_bundle


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("sbs_runs")
    return {
        "resnet": make_run(root, "shapes", "resnet_small", epochs=3),
        "vit": make_run(root, "shapes", "vit_tiny", epochs=1),
        "mnist": make_run(root, "mnist", "simple_cnn", epochs=1),
        "text_cnn": make_run(root, "cues", "text_cnn", epochs=2),
        "text_tf": make_run(root, "cues", "text_transformer", epochs=1),
    }


def _imported_copy(run: Run, dest: Path, dataset: str | None) -> Run:
    """The run's folder rewritten as an imported model (config 'source'), linked to `dataset` or to none."""
    import shutil

    shutil.copytree(run.path, dest)
    copy = Run(dest)
    config = copy.config()
    config.update(source={"kind": "zoo", "record": {}}, dataset=dataset)
    copy.write_config(config)
    copy.update_summary(state="imported")
    return copy


def test_same_dataset_different_architectures_are_compatible(runs):
    assert incompatibility(runs["resnet"], runs["vit"]) is None
    assert incompatibility(runs["text_cnn"], runs["text_tf"]) is None
    assert input_spec(runs["resnet"]).describe() == "3x32x32 images of shapes"


def test_incompatible_runs_say_why_in_one_line(runs):
    text = incompatibility(runs["resnet"], runs["text_cnn"])
    assert text == "takes texts, not 3x32x32 images"
    shape = incompatibility(runs["resnet"], runs["mnist"])
    assert shape is not None and shape.startswith("takes 1x28x28 images, not 3x32x32 images")
    assert incompatibility(runs["text_cnn"], runs["resnet"]) == "takes 3x32x32 images, not texts"
    for reason in (text, shape):
        assert "\n" not in reason


def test_a_different_dataset_of_the_same_shape_is_refused(runs, tmp_path):
    other = _imported_copy(runs["vit"], tmp_path / "other", "shapes")
    config = other.config()
    config["dataset"] = "digits"
    other.write_config(config)
    assert (
        incompatibility(runs["resnet"], other) == "was trained on digits, not shapes: its classes and test set differ"
    )


def test_imported_models_linked_or_with_the_same_classes_are_compatible(runs, tmp_path):
    linked = _imported_copy(runs["vit"], tmp_path / "linked", "shapes")
    assert incompatibility(runs["resnet"], linked) is None
    unlinked = _imported_copy(runs["vit"], tmp_path / "unlinked", None)
    assert incompatibility(runs["resnet"], unlinked) is None  # same input, same classes
    assert input_spec(unlinked).describe() == "3x32x32 images (no data set)"
    config = unlinked.config()
    config["dataset_info"]["classes"] = ["a", "b", "c", "d"]
    unlinked.write_config(config)
    reason = incompatibility(runs["resnet"], unlinked)
    assert reason is not None and reason.startswith("predicts 4 classes (a, b, c, d), not the same")


def test_runs_without_settled_weights_are_refused(runs, tmp_path):
    running = _imported_copy(runs["vit"], tmp_path / "running", "shapes")
    running.update_summary(state="running")
    # No live process writes it: interrupted, its last weights stay put, usable as the sidebar's runs (Run.usable).
    assert incompatibility(runs["resnet"], running) is None
    lock = RunLock.acquire(running.path, heartbeat=False)  # a live trainer
    try:
        assert incompatibility(runs["resnet"], running) == "is still training"
        running.file(WEIGHTS).unlink()
        assert incompatibility(runs["resnet"], running) == "has no weights yet (state: running)"
    finally:
        lock.release()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    reason = incompatibility(runs["resnet"], Run(broken))
    assert reason is not None and reason.startswith("is unreadable")


def test_partners_lists_epochs_compatible_and_incompatible_runs(runs):
    all_runs = list(runs.values())
    found = partners(runs["resnet"], all_runs)
    assert [c.run.id for c in found.runs] == [runs["vit"].id]
    assert {r.id for r, _ in found.incompatible} == {runs["mnist"].id, runs["text_cnn"].id, runs["text_tf"].id}
    # epochs 2 and 1, newest first; epoch 3 is the final weights and is not offered twice
    assert [(c.run.id, c.epoch) for c in found.epochs] == [(runs["resnet"].id, 2), (runs["resnet"].id, 1)]
    assert found.epochs[0].note == "val acc 60.0%"
    assert found.choices == [*found.runs, *found.epochs]
    assert len({c.key for c in found.choices}) == len(found.choices)
    assert epoch_choices(runs["vit"]) == []  # one epoch: its checkpoint is the final weights


def test_a_run_stopped_inside_an_epoch_offers_its_last_complete_epoch(runs, tmp_path):
    stopped = _imported_copy(runs["text_cnn"], tmp_path / "stopped", "cues")
    config = stopped.config()
    del config["source"]
    stopped.write_config(config)
    stopped.update_summary(state="stopped", epochs_done=2, partial_steps=5)
    assert [c.epoch for c in epoch_choices(stopped)] == [2, 1]


def test_epoch_bundles_hold_that_epochs_weights(runs):
    run = runs["resnet"]
    final = load_bundle(run, device="cpu")
    first = load_choice(ModelChoice(run, 1), device="cpu")
    again = load_choice(ModelChoice(run, None), device="cpu")
    sd_final, sd_first, sd_again = (b.model.state_dict() for b in (final, first, again))
    assert any(not torch.equal(sd_final[k], sd_first[k]) for k in sd_final if sd_final[k].is_floating_point())
    assert all(torch.equal(sd_final[k], sd_again[k]) for k in sd_final)
    with pytest.raises(Exception, match="no checkpoint for epoch 9"):
        load_choice(ModelChoice(run, 9), device="cpu")
    # the same run at two epochs, explained with Grad-CAM: both maps finite, of input size, and different
    images = load_split("shapes", "test").batch(range(2))
    pair = explain_pair(final, first, images, "gradcam", target=0)
    assert pair.a is not None and pair.b is not None
    a, b = np.asarray(pair.a.attributions), np.asarray(pair.b.attributions)
    assert a.shape == b.shape == (2, 32, 32) and np.isfinite(a).all() and np.isfinite(b).all()
    assert not np.allclose(a, b)


def test_both_models_maps_are_finite_and_of_input_size(runs):
    a = load_bundle(runs["resnet"], device="cpu")
    b = load_bundle(runs["vit"], device="cpu")
    images = load_split("shapes", "test").batch(range(2))
    both, skipped = common_methods(a, b)
    ids = [m.id for m in both]
    assert {"saliency", "ig", "occlusion"} <= set(ids)
    assert "attention_rollout" not in ids and skipped["Attention rollout"].startswith("A: ")  # resnet has none
    assert "gradcam" not in ids and skipped["Grad-CAM"].startswith("B: ")  # nor vit_tiny conv feature maps
    for method in ("saliency", "ig"):
        pair = explain_pair(a, b, images, method, params={"steps": 8} if method == "ig" else None)
        assert pair.error_a is None and pair.error_b is None
        for e in (pair.a, pair.b):
            assert e is not None
            maps = np.asarray(e.attributions)
            assert maps.shape == (2, 32, 32) and np.isfinite(maps).all()
    # one model failing keeps the other's maps and the failure's message
    pair = explain_pair(a, b, images, "ig", params={"steps": -1})
    assert pair.a is None and pair.b is None and pair.error_a and pair.error_b


def test_text_models_side_by_side(runs):
    a = load_bundle(runs["text_cnn"], device="cpu")
    b = load_bundle(runs["text_tf"], device="cpu")
    texts = ["the plot was not bad", "a dull and clumsy film"]
    pair = explain_pair(a, b, texts, "ig", target=1)
    for e in (pair.a, pair.b):
        assert e is not None and e.tokens is not None
        assert [len(t) for t in e.tokens] == [5, 5]
        assert all(np.isfinite(e.item(i)).all() and e.item(i).shape == (5,) for i in range(2))
        assert list(e.targets) == [1, 1]


def test_scales_are_shared_only_within_a_unit():
    ig, gradcam, saliency = (get_method(m, "image") for m in ("ig", "gradcam", "saliency"))
    assert shares_units(ig) and shares_units(saliency) and shares_units(get_method("occlusion", "image"))
    assert shares_units(get_method("attention", "text")) and shares_units(get_method("lime", "text"))
    assert not shares_units(gradcam) and not shares_units(get_method("guided_backprop", "image"))
    a, b = np.array([[0.5, -2.0]]), np.array([[0.1, 0.2]])
    shared = row_scale(ig, a, b, want_shared=True)
    assert (shared.a, shared.b, shared.shared) == (2.0, 2.0, True)
    assert shared.statement == (
        "one scale for both models (logit contribution per pixel, ±2); "
        "model B's map reaches 10% of it (per model shows its pattern)"
    )
    assert row_scale(ig, a, 1.5 * a, want_shared=True).statement.endswith("per pixel, ±3)")
    assert "|∂ logit / ∂ pixel|, ±2" in row_scale(saliency, a, a, want_shared=True).statement
    text = row_scale(get_method("ig", "text"), a, a, want_shared=True, modality="text")
    assert "logit contribution per word" in text.statement
    own = row_scale(gradcam, a, b, want_shared=True)
    assert (own.a, own.b, own.shared) == (2.0, 0.2, False)
    assert own.statement.startswith("each model on its own scale (relevance from weighted activations")
    assert own.statement.endswith("not comparable between models)")
    assert row_scale(ig, a, b, want_shared=False).statement == "each model on its own scale"
    assert row_scale(ig, a, None, want_shared=True).a == 2.0  # a failed map on one side
    for spec in list_methods():  # shared exactly where the Explain page's legend gives absolute units
        for modality in spec.modalities:
            assert shares_units(spec) == ("relative units" not in map_legend(spec, modality).units), spec.id
    # the 99th percentile, as on the Explain page: one extreme value does not set the scale
    spiky = np.concatenate([np.full(999, 0.1), [50.0]])
    assert row_scale(ig, spiky, spiky, want_shared=False).a == pytest.approx(0.1)


def test_split_predictions_of_both_modalities(runs):
    images = load_bundle(runs["resnet"], device="cpu")
    probs = split_predictions(images, load_split("shapes", "test"), limit=5)
    assert probs.shape == (5, 4) and np.allclose(probs.sum(1), 1, atol=1e-5)
    texts = load_bundle(runs["text_tf"], device="cpu")
    assert split_predictions(texts, load_split("cues", "test"), limit=3).shape == (3, 2)


def test_predictions_top_classes_and_disagreements():
    pa = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
    pb = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1]])
    assert disagreements(pa, pb).tolist() == [False, True]
    assert top_classes(pb[1], ["x", "y", "z"], 2) == [("x", 0.5), ("y", 0.4)]
