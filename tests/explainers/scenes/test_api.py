"""explain_scene: every method through one session (a failing method is one line, the others go on), maps scored
against the truth, and the helpers that turn predictions into targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.scenes.api import (
    detection_targets,
    explain_scene,
    region_targets,
    truth_object,
)
from xaidash.explainers.scenes.registry import SCENE_METHODS, SceneMethodSpec, register, scene_methods
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.models.scenes.predictions import Detections, Segmentation

torch.set_num_threads(1)
RECTS = ((10, 12, 24), (50, 20, 30), (30, 60, 20))  # the stand-in scene's rectangles (x0, y0, side)


def truth() -> SceneTarget:
    masks = torch.zeros(3, 96, 96, dtype=torch.bool)
    for i, (x0, y0, s) in enumerate(RECTS):
        masks[i, y0 : y0 + s, x0 : x0 + s] = True
    boxes = torch.tensor([[x0, y0, x0 + s, y0 + s] for x0, y0, s in RECTS], dtype=torch.float32)
    return SceneTarget(boxes, torch.tensor([1, 2, 3]), masks)


def predicted(bundle, image) -> Detections:
    with torch.no_grad():
        return Detections.from_output(bundle.model(image[None])[0])


def test_every_method_on_every_box_in_order(detector_bundle, image) -> None:
    targets = detection_targets(predicted(detector_bundle, image), min_score=0.0)[:2]
    seen: list[float] = []
    out = explain_scene(
        detector_bundle, image, targets, ["gradcam", "eigencam"], truth=None, metrics=False,
        progress=lambda f, m: seen.append(f),
    )  # fmt: skip
    assert [(e.method, e.target) for e in out] == [(m, t) for m in ("gradcam", "eigencam") for t in targets]
    for e in out:
        assert e.ok and e.map is not None and e.map.shape == (96, 96) and e.map.dtype == np.float32
        assert e.seconds > 0 and e.metrics == {}
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_a_failing_method_is_one_line_and_the_others_go_on(detector_bundle, image) -> None:
    def broken(ctx, params):
        raise RuntimeError("boom")

    spec = register(SceneMethodSpec(id="x1_broken", label="Broken", tasks=("detect",), compute=broken))
    try:
        targets = detection_targets(predicted(detector_bundle, image), min_score=0.0)[:1]
        out = explain_scene(detector_bundle, image, targets, ["x1_broken", "gradcam"], metrics=False)
    finally:
        SCENE_METHODS.unregister(spec)
    assert out[0].map is None and out[0].error and "\n" not in out[0].error and "Broken" in out[0].error
    assert out[1].ok


def test_a_method_of_the_other_task_fails_alone(segmenter_bundle, image) -> None:
    region = RegionTarget(1, torch.ones(96, 96, dtype=torch.bool))
    out = explain_scene(segmenter_bundle, image, [region], ["gradcam", "seg_gradcam"], metrics=False)
    assert out[0].error is not None and "does not explain a segmenter" in out[0].error
    assert out[1].ok


def test_refusals(detector_bundle, image) -> None:
    box = BoxTarget((10.0, 10.0, 30.0, 30.0), 1)
    with pytest.raises(ExplainError, match="Unknown scene method 'nope'"):
        explain_scene(detector_bundle, image, [box], ["nope"])
    with pytest.raises(ExplainError, match="Nothing to explain"):
        explain_scene(detector_bundle, image, [], ["gradcam"])


def test_regions_are_scored_against_the_truth(segmenter_bundle, image) -> None:
    regions = [RegionTarget(k + 1, truth().masks[k], "a rectangle") for k in range(3)]  # type: ignore[index]
    out = explain_scene(segmenter_bundle, image, regions, ["seg_gradcam"], truth=truth())
    for e in out:
        assert {"pointing_game", "energy", "deletion", "insertion"} <= set(e.metrics) | set(e.metric_errors)
        assert "pointing_game" in e.metrics
        assert 0.0 <= e.metrics.get("energy", 0.0) <= 1.0 and e.metric_errors.get("energy", "no positive") != ""
    assert any("energy" in e.metrics for e in out)  # an empty map (all negative before ReLU) has a line instead
    # The random segmenter's region scores are negative here: the curves say so in a line, the map stays.
    assert all("deletion" in e.metrics or "not positive" in e.metric_errors["deletion"] for e in out)


def test_a_false_detection_gets_a_metric_error_not_a_failure(detector_bundle, image) -> None:
    box = BoxTarget((70.0, 70.0, 90.0, 90.0), 1)  # no true object there
    (e,) = explain_scene(detector_bundle, image, [box], ["eigencam"], truth=truth())
    assert e.ok and "false detection" in e.metric_errors["pointing_game"]


def test_detection_targets_keep_the_confident_boxes_with_their_index() -> None:
    pred = Detections(
        torch.tensor([[0, 0, 10, 10], [5, 5, 20, 20], [1, 1, 3, 3]], dtype=torch.float32),
        torch.tensor([2, 1, 3]),
        torch.tensor([0.9, 0.6, 0.2]),
    )
    targets = detection_targets(pred)
    assert [(t.index, t.label, t.box) for t in targets] == [
        (0, 2, (0.0, 0.0, 10.0, 10.0)),
        (1, 1, (5.0, 5.0, 20.0, 20.0)),
    ]
    assert len(detection_targets(pred, min_score=0.0)) == 3 and detection_targets(pred, min_score=0.95) == []


def test_region_targets_one_per_class_present() -> None:
    mask = torch.zeros(8, 8, dtype=torch.int64)
    mask[:2] = 3
    mask[5:, 5:] = 1
    logits = torch.nn.functional.one_hot(mask, 5).permute(2, 0, 1).float()
    regions = region_targets(Segmentation.from_logits(logits))
    assert [r.label for r in regions] == [1, 3]
    assert torch.equal(regions[1].mask, mask == 3) and int(regions[0].mask.sum()) == 9


def test_truth_object_is_the_same_class_best_overlap() -> None:
    t = truth()
    assert truth_object(BoxTarget((51.0, 21.0, 80.0, 50.0), 2), t) == 1
    assert truth_object(BoxTarget((51.0, 21.0, 80.0, 50.0), 3), t) is None  # right place, wrong class
    assert truth_object(BoxTarget((0.0, 0.0, 8.0, 8.0), 1), t) is None  # nothing there
    assert truth_object(RegionTarget(1, t.masks[0]), t) is None  # type: ignore[index]


def test_every_registered_method_is_listed_by_task() -> None:
    detect = {s.id for s in scene_methods("detect")}
    segment = {s.id for s in scene_methods("segment")}
    assert {"gradcam", "eigencam", "ablationcam", "drise"} <= detect
    assert {"seg_gradcam", "eigencam", "ablationcam"} <= segment and "gradcam" not in segment
