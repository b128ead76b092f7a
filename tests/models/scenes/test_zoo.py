"""The scene model zoo: what each model takes and returns, its CAM layer, and the house rule on nonlinearities."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from xaidash.models.registry import ModelError
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, Segmentation
from xaidash.models.scenes.zoo import SCENE_MODELS, SceneBackbone, scene_model


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_registry_holds_a_detector_and_a_segmenter() -> None:
    tasks = {s.id: s.task for s in SCENE_MODELS if s.trainable}
    assert tasks == {"fasterrcnn_small": "detect", "unet_small": "segment"}
    for spec in SCENE_MODELS:
        assert spec.description and spec.label
        if spec.trainable:
            recipe = spec.training_recipe()
            assert recipe.epochs >= 1 and recipe.lr > 0 and recipe.batch_size >= 1


def test_unknown_model_is_one_line_naming_the_known() -> None:
    with pytest.raises(ModelError) as e:
        scene_model("yolo")
    assert "fasterrcnn_small" in str(e.value) and "unet_small" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ModelError, match="object classes"):
        scene_model("unet_small").make(0, 96)


def _own_modules_rule(model: nn.Module) -> None:
    """Every ReLU and pooling of our modules is its own instance and not in place."""
    seen: set[int] = set()
    for _, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, (nn.ReLU, nn.MaxPool2d)):
            assert id(module) not in seen, "a nonlinearity or pooling module is used twice"
            seen.add(id(module))
            assert not getattr(module, "inplace", False)
    assert seen


def test_detector_takes_a_batch_or_a_list_and_returns_torchvision_dicts() -> None:
    spec = scene_model("fasterrcnn_small")
    model = spec.make(4, 96).eval()
    images = torch.rand(2, 3, 96, 96)
    with torch.no_grad():
        from_batch = model(images)
        from_list = model(list(images))
    assert len(from_batch) == 2 and set(from_batch[0]) == {"boxes", "labels", "scores"}
    assert torch.equal(from_batch[1]["boxes"], from_list[1]["boxes"])
    transform: Any = model.transform
    assert transform.min_size == (96,) and transform.max_size == 96  # never upscaled to 800 px
    cam = model.get_submodule(spec.cam_layer)
    assert isinstance(model.backbone, SceneBackbone) and cam is model.backbone.stage4
    _own_modules_rule(model.backbone)
    model.train()
    target = {"boxes": torch.tensor([[10.0, 10.0, 40.0, 40.0]]), "labels": torch.tensor([2])}
    losses = model(images[:1], [target])
    assert {"loss_classifier", "loss_box_reg", "loss_objectness", "loss_rpn_box_reg"} <= set(losses)


def test_unet_gives_logits_per_class_and_background_at_any_size() -> None:
    spec = scene_model("unet_small")
    model = spec.make(3, 96).eval()
    for h, w in ((96, 96), (90, 77)):
        out = model(torch.rand(2, 3, h, w))
        assert out.shape == (2, 4, h, w)
    captured: list[torch.Tensor] = []
    model.get_submodule(spec.cam_layer).register_forward_hook(lambda m, i, o: captured.append(o))
    model(torch.rand(1, 3, 96, 96))
    assert captured[0].shape[-2:] == (12, 12)  # the bottleneck: three poolings
    _own_modules_rule(model)


def test_bundle_predicts_detections_and_segmentations() -> None:
    det = scene_model("fasterrcnn_small")
    seg = scene_model("unet_small")
    classes = ("a", "b")
    images = [torch.rand(3, 96, 96) for _ in range(3)]
    d = SceneBundle(det.make(2, 96).eval(), det, classes, 96, torch.device("cpu"))
    s = SceneBundle(seg.make(2, 96).eval(), seg, classes, 96, torch.device("cpu"))
    boxes = d.predict(images, batch_size=2)
    masks = s.predict([*images, torch.rand(3, 64, 80)])
    assert d.task == "detect" and s.task == "segment" and d.num_classes == 2
    assert len(boxes) == 3 and all(isinstance(p, Detections) for p in boxes)
    assert all(bool((p.scores[:-1] >= p.scores[1:]).all()) for p in boxes if isinstance(p, Detections))
    assert len(masks) == 4 and isinstance(masks[3], Segmentation) and masks[3].mask.shape == (64, 80)
    assert masks[0].logits.shape == (3, 96, 96)  # type: ignore[union-attr]
    assert torch.equal(masks[0].mask, masks[0].logits.argmax(0))  # type: ignore[union-attr]


def test_detections_helpers() -> None:
    out = {
        "boxes": torch.tensor([[0.0, 0, 5, 5], [1, 1, 9, 9]]),
        "labels": torch.tensor([1, 2]),
        "scores": torch.tensor([0.3, 0.9]),
    }
    d = Detections.from_output(out)
    assert d.scores.tolist() == pytest.approx([0.9, 0.3]) and d.labels.tolist() == [2, 1]
    assert len(d.above(0.5)) == 1
    seg = Segmentation.from_logits(torch.tensor([[[5.0, 0.0]], [[0.0, 5.0]]]))
    assert seg.classes_present() == [1] and seg.region(1).tolist() == [[False, True]]
