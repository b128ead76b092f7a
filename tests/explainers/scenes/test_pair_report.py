"""Side by side's HTML report: both models' predictions, per object and method model A's map beside model B's with
their colour bars, a card saying which model has no box of an object, each model's metrics, every text escaped and
no script."""

from __future__ import annotations

import numpy as np
import torch

from xaidash.explainers.scenes.api import SceneExplanation
from xaidash.explainers.scenes.pair_report import ReportObject, ReportSide, scene_pair_report_html
from xaidash.explainers.scenes.targets import BoxTarget
from xaidash.models.scenes.predictions import Detections

CLASSES = ("circle", "square")


def _map(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((48, 48)).astype(np.float32)


def test_the_report_pairs_the_maps_and_says_what_is_missing() -> None:
    image = torch.rand(3, 48, 48, generator=torch.Generator().manual_seed(0))
    box_a, box_b = BoxTarget((4, 4, 20, 20), 1, 0), BoxTarget((5, 4, 21, 20), 1, 0)
    prediction_a = Detections(torch.tensor([[4.0, 4, 20, 20]]), torch.tensor([1]), torch.tensor([0.9]))
    prediction_b = Detections(torch.tensor([[5.0, 4, 21, 20]]), torch.tensor([1]), torch.tensor([0.8]))
    a = [SceneExplanation(m, box_a, _map(k), 0.1, {"pointing_game": 1.0}) for k, m in enumerate(("eigencam", "ig"))]
    b = [SceneExplanation(m, box_b, _map(k + 5), 0.1, {"pointing_game": 0.0}) for k, m in enumerate(("eigencam", "ig"))]
    objects = [ReportObject("true object 1: <circle>", a, b), ReportObject("true object 2: square", a[:1], [])]
    sides = (ReportSide("Model A: <mine>", prediction_a), ReportSide("Model B: theirs", prediction_b))
    html = scene_pair_report_html(image, sides, objects, CLASSES, title="scene 0", subtitle="runs a and b")
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert html.count('class="map"') == 5  # 2 + 2 maps of object 1, model A's one of object 2
    titles = ['class="title">Model A · Eigen-CAM<', 'class="title">Model B · Integrated Gradients<']
    assert [html.count(t) for t in titles] == [2, 1]
    assert "no box of this object" in html  # model B on object 2
    assert "true object 1: &lt;circle&gt;" in html and "Model A: &lt;mine&gt;" in html and "<mine>" not in html
    assert html.count(' predictions" src=') == 2  # both predictions drawn
    assert html.count('class="metrics"') == 3  # object 1: both models' tables; object 2: model A's
