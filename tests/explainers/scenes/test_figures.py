"""Scene figures: the map over its image with the explained box solid (or the region outlined), the other boxes
faint, the colour bar below; the predictions picture; the self-contained HTML report."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from xaidash.explainers.figures.render import SCALE_TAG
from xaidash.explainers.scenes.api import SceneExplanation, explain_scene
from xaidash.explainers.scenes.figures import SOLID, boxes_png, scene_figure, scene_report_html
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.models.scenes.predictions import Detections, Segmentation

torch.set_num_threads(1)
CLASSES = ("circle", "square", "triangle", "cross")
PRED = Detections(
    torch.tensor([[10.0, 12.0, 34.0, 36.0], [50.0, 20.0, 80.0, 50.0]]), torch.tensor([1, 2]), torch.tensor([0.9, 0.8])
)


def picture(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def ramp_map() -> np.ndarray:
    return np.tile(np.linspace(0.0, 2.0, 96, dtype=np.float32), (96, 1))


def test_the_explained_box_is_solid_and_the_others_faint(image) -> None:
    target = BoxTarget(tuple(PRED.boxes[0].tolist()), 1, 0)
    e = SceneExplanation("gradcam", target, ramp_map(), 0.5, {"pointing_game": 1.0})
    fig = scene_figure(image, e, PRED, CLASSES)
    assert fig.png is not None and fig.value_range == (0.0, 2.0)
    img = Image.open(io.BytesIO(fig.png))
    assert img.width == 288 and img.height > 288 + 30  # 3x enlarged, the colour bar below
    px = picture(fig.png)
    assert tuple(px[12 * 3 + 20, 10 * 3]) == SOLID  # the left edge of the explained box, below its label
    other = px[20 * 3 + 40, 50 * 3]  # the left edge of the other box: lighter than the map beside it
    beside = px[20 * 3 + 40, 50 * 3 + 6]
    assert int(other.sum()) > int(beside.sum()) and tuple(other) != SOLID
    assert "Grad-CAM" in fig.caption and "circle" in fig.caption and "Pointing game 1" in fig.caption
    assert fig.scale is not None and not fig.scale.signed and "gradient-weighted" in fig.scale.label


def test_the_region_is_outlined(image) -> None:
    mask = torch.zeros(96, 96, dtype=torch.bool)
    mask[30:60, 40:70] = True
    e = SceneExplanation("seg_gradcam", RegionTarget(3, mask), ramp_map(), 0.1)
    px = picture(scene_figure(image, e, None, CLASSES).png or b"")
    assert tuple(px[45 * 3, 40 * 3]) == SOLID and tuple(px[45 * 3, 55 * 3]) != SOLID  # edge, not inside


def test_a_failed_map_has_its_line_and_no_picture(image) -> None:
    e = SceneExplanation("gradcam", BoxTarget((1.0, 1.0, 9.0, 9.0), 1), None, 0.0, error="It failed: boom.")
    fig = scene_figure(image, e, PRED, CLASSES)
    assert fig.png is None and "boom" in fig.caption and fig.error == "It failed: boom."


def test_a_signed_map_gets_a_diverging_scale(image) -> None:
    values = ramp_map() - 1.0
    e = SceneExplanation("x_signed", BoxTarget((1.0, 1.0, 9.0, 9.0), 1), values, 0.0)
    from xaidash.explainers.scenes.registry import SCENE_METHODS, SceneMethodSpec, register

    spec = register(SceneMethodSpec(id="x_signed", label="Signed", compute=lambda c, p: torch.zeros(0), units="u"))
    try:
        fig = scene_figure(image, e, None, CLASSES)
    finally:
        SCENE_METHODS.unregister(spec)
    assert fig.scale is not None and fig.scale.signed and fig.scale.low == pytest.approx(-1.0)


def test_boxes_png_draws_each_prediction(image) -> None:
    px = picture(boxes_png(image, PRED, CLASSES))
    assert px.shape[:2] == (288, 288)
    assert tuple(px[20 * 3 + 20, 10 * 3]) == (31, 119, 180) and tuple(px[30 * 3 + 20, 50 * 3]) == (255, 127, 14)
    seg = torch.zeros(5, 96, 96)
    seg[2, 10:40, 10:40] = 5.0
    mask_png = picture(boxes_png(image, Segmentation.from_logits(seg), CLASSES))
    assert mask_png.shape[0] > 288  # the key below


def test_the_report_is_self_contained_and_escaped(detector_bundle, image) -> None:
    with torch.no_grad():
        pred = Detections.from_output(detector_bundle.model(image[None])[0])
    classes = ("<b>circle</b>", "square", "triangle", "cross")
    targets = [BoxTarget(tuple(pred.boxes[i].tolist()), int(pred.labels[i]), i) for i in range(2)]
    out = explain_scene(detector_bundle, image, targets, ["gradcam", "eigencam"], metrics=True)
    html = scene_report_html(image, out, pred, classes, title="Scene 3 <test>")
    assert html.startswith("<!doctype html>") and "<script" not in html and "http" not in html.replace("http-equiv", "")
    assert html.count("data:image/png;base64,") == 1 + 4  # the predictions, 2 boxes x 2 methods
    assert "<b>circle</b>" not in html and "&lt;b&gt;circle&lt;/b&gt;" in html and "Scene 3 &lt;test&gt;" in html
    assert "Deletion AUC" in html and "Grad-CAM" in html and "Eigen-CAM" in html


def test_the_drawn_figure_says_it_has_a_colour_bar(image) -> None:
    from xaidash.explainers.figures.render import with_colour_bar  # the bar is render's, tagged as every page's

    e = SceneExplanation("eigencam", BoxTarget((1.0, 1.0, 9.0, 9.0), 1), ramp_map(), 0.0)
    fig = scene_figure(image, e, None, CLASSES)
    assert fig.scale is not None and SCALE_TAG in with_colour_bar(Image.new("RGB", (8, 8)), fig.scale).info


def test_the_report_puts_equal_targets_in_one_section(image) -> None:
    """A page's cached maps carry equal targets that are different objects: still one section per box."""
    one, same = (BoxTarget((10.0, 12.0, 34.0, 36.0), 1, 0) for _ in range(2))
    assert one is not same
    items = [SceneExplanation("gradcam", one, ramp_map(), 0.1), SceneExplanation("eigencam", same, ramp_map(), 0.1)]
    html = scene_report_html(image, items, PRED, CLASSES)
    assert html.count("<section>") == 1 + 1 and html.count('class="card"') == 2
