"""Scene methods compared over scenes: which targets a scene gives (matched boxes; false detections and missed
objects counted apart), the per-target values against the truth, the summary's means and clipped 95% intervals, the
best method per metric, the agreement matrix, the JSON, and one line for every bad request."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scene_toys import BrightnessDetector, RegionSegmenter, ToyBundle, toy_image

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneSplit, SceneTarget
from xaidash.explainers.scenes.compare import compare_scene_methods, sample_indices, scene_targets, summarise

BOX = (10.0, 10.0, 40.0, 40.0)  # the toy detector's one box, scored by the brightness of the pixels inside it
FAST = {"occlusion": {"window": 5, "stride": 5}, "ig": {"steps": 8}}  # windows on the box's edges


def square(x0: int, y0: int, x1: int, y1: int, size: int = 96) -> torch.Tensor:
    mask = torch.zeros(size, size, dtype=torch.bool)
    mask[y0:y1, x0:x1] = True
    return mask


def truth(*objects: tuple[tuple[int, int, int, int], int]) -> SceneTarget:
    boxes = torch.tensor([list(b) for b, _ in objects], dtype=torch.float32)
    labels = torch.tensor([label for _, label in objects])
    return SceneTarget(boxes, labels, torch.stack([square(*b) for b, _ in objects]))


@pytest.fixture(scope="module")
def split() -> SceneSplit:
    """Scene 0: the object the toy box finds; scene 1: an object of another class there (a false detection and a
    missed object); scene 2: the found object and a second one far from it (missed)."""
    targets = [
        truth(((10, 10, 40, 40), 1)),
        truth(((10, 10, 40, 40), 2)),
        truth(((10, 10, 40, 40), 1), ((60, 60, 90, 90), 3)),
    ]
    images = [toy_image(seed=i) for i in range(3)]
    return SceneSplit("toy", ("circle", "square", "triangle", "cross"), images, targets, ["a", "b", "c"])


def test_a_scene_gives_its_matched_boxes_and_counts_the_rest(split) -> None:
    bundle = ToyBundle(BrightnessDetector(BOX, 1, (10, 40, 10, 40)))
    found = [scene_targets(bundle, split.images[i], split.targets[i], min_score=0.0) for i in range(3)]
    assert [len(f.targets) for f in found] == [1, 0, 1]
    assert [f.false_detections for f in found] == [0, 1, 0]
    assert [f.missed for f in found] == [0, 1, 1]
    assert found[0].targets[0].box == BOX


def test_the_methods_over_the_scenes_point_at_the_object_the_box_reads(split) -> None:
    bundle = ToyBundle(BrightnessDetector(BOX, 1, (10, 40, 10, 40)))
    result = compare_scene_methods(bundle, split, [0, 1, 2], ["occlusion", "ig"], FAST, min_score=0.0, curves=True)
    assert result.targets == [
        "scene 0 (a) · box 1: circle at (10, 10)-(40, 40)",
        "scene 2 (c) · box 1: circle at (10, 10)-(40, 40)",
    ]
    assert (result.false_detections, result.missed) == (1, 2)
    for method in ("occlusion", "ig"):
        values = result.values[method]
        assert len(values) == 2
        # the score reads only the box's pixels, which are the object's: every map points there and stays there
        assert [v["pointing_game"] for v in values] == [1.0, 1.0]
        assert all(v["off_object"] == pytest.approx(0.0, abs=1e-6) for v in values)
        assert all(v["energy"] > 0.99 for v in values)
        assert {"deletion", "insertion"} <= set(values[0])
    rows = result.summary.set_index(["method", "metric"])
    energy = [v["energy"] for v in result.values["ig"]]
    assert rows.loc[("ig", "energy"), "mean"] == pytest.approx(np.mean(energy))
    assert rows.loc[("ig", "energy"), "high"] <= 1.0 and rows.loc[("ig", "energy"), "n"] == 2
    agreement = result.agreement
    assert agreement is not None and list(agreement.index) == ["occlusion", "ig"]
    assert np.allclose(np.diag(agreement.to_numpy()), 1.0)
    assert agreement.loc["ig", "occlusion"] == pytest.approx(agreement.loc["occlusion", "ig"])
    document = json.loads(json.dumps(result.to_json(), allow_nan=False))  # NaN written as null
    assert document["targets"] == result.targets and document["missed"] == 2
    assert len(document["summary"]) == len(result.summary)


def test_a_segmenters_regions_are_the_classes_the_scene_holds(split) -> None:
    bundle = ToyBundle(RegionSegmenter((10, 40, 10, 40)), task="segment")
    result = compare_scene_methods(bundle, split, [0, 2], ["seg_gradcam"], min_score=0.0)
    # the toy paints class 1 everywhere: scene 0 and 2 hold a class-1 object, so one region each
    assert [t.split(" · ")[1] for t in result.targets] == ["circle, its predicted mask (9216 px)"] * 2
    assert result.agreement is None  # one method
    assert (result.false_detections, result.missed) == (0, 0)


def test_summary_intervals_stay_in_the_metrics_range_and_the_best_follows_its_direction() -> None:
    values = {
        "a": [{"pointing_game": 1.0, "off_object": 0.4}, {"pointing_game": 0.0, "off_object": 0.2}],
        "b": [{"pointing_game": 1.0, "off_object": 0.1}, {"pointing_game": 1.0}],
    }
    summary, best = summarise(values)
    rows = summary.set_index(["method", "metric"])
    assert rows.loc[("a", "pointing_game"), "mean"] == 0.5
    # two values 1 and 0: the t-interval is about +-6.4, clipped to the share's range
    assert (rows.loc[("a", "pointing_game"), "low"], rows.loc[("a", "pointing_game"), "high"]) == (0.0, 1.0)
    assert rows.loc[("b", "off_object"), "valid"] == 1 and rows.loc[("b", "off_object"), "undefined"] == 1
    assert best == {"pointing_game": ["b"], "off_object": ["b"]}  # off_object: lower is better


def test_bad_requests_get_one_line(split) -> None:
    bundle = ToyBundle(BrightnessDetector(BOX, 1, (10, 40, 10, 40)))
    with pytest.raises(ExplainError, match="Seg-Grad-CAM explains a segmenter; this model is a detector"):
        compare_scene_methods(bundle, split, [0], ["seg_gradcam"])
    with pytest.raises(ExplainError, match=r"numbered 0 to 2; got \[5\]"):
        compare_scene_methods(bundle, split, [0, 5], ["occlusion"])
    with pytest.raises(ExplainError, match="Pick at least one method"):
        compare_scene_methods(bundle, split, [0], [])
    with pytest.raises(ExplainError, match="Unknown scene method 'nope'"):
        compare_scene_methods(bundle, split, [0], ["nope"])


def test_the_sample_is_the_first_scenes_or_a_seeded_draw() -> None:
    assert sample_indices(3, 10) == [0, 1, 2]
    assert sample_indices(50, 4) == [0, 1, 2, 3]
    drawn = sample_indices(5, 100, seed=7)
    assert drawn == sorted(drawn) and len(set(drawn)) == 5 and drawn == sample_indices(5, 100, seed=7)
    assert drawn != sample_indices(5, 100, seed=8)
