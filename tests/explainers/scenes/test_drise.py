"""D-RISE: the similarity against hand-computed detections, the map against the paper's formula computed one mask at a
time, the batched passes (any batch size gives the same map; out-of-memory halves the batch), and a scripted detector
whose box depends on one patch only (the map peaks there)."""

from __future__ import annotations

import pytest
import torch
from scene_toys import BrightnessDetector, ToyBundle, toy_image
from torchvision.ops import box_iou

from xaidash.data.errors import ExplainError
from xaidash.explainers.methods.rise import draw_masks
from xaidash.explainers.scenes.drise import drise_maps, drise_similarity, drise_weights
from xaidash.explainers.scenes.registry import SceneMethodContext, get_scene_method
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget


def _dets(boxes: list[list[float]], labels: list[int], scores: list[float]) -> dict[str, torch.Tensor]:
    return {"boxes": torch.tensor(boxes), "labels": torch.tensor(labels), "scores": torch.tensor(scores)}


def test_similarity_is_iou_times_the_target_class_probability() -> None:
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    labels = torch.tensor([1, 2])
    output = _dets(
        [[0, 0, 10, 10], [0, 0, 10, 5], [0, 0, 10, 10], [20, 20, 30, 30]],
        [2, 1, 1, 3],
        [0.9, 0.8, 0.3, 0.7],
    )
    # Box 1: same place but class 2 counts 0; (0,0,10,5) has IoU 0.5 x 0.8 = 0.4; (0,0,10,10) class 1: 1 x 0.3.
    # Box 2: the only detection there is class 3: 0.
    assert drise_similarity(boxes, labels, output).tolist() == pytest.approx([0.4, 0.0])
    empty = _dets([], [], [])
    empty["boxes"] = torch.zeros(0, 4)
    assert drise_similarity(boxes, labels, empty).tolist() == [0.0, 0.0]


def _reference_map(model: torch.nn.Module, image: torch.Tensor, target: BoxTarget, count: int, grid: int, p: float):
    """The paper's D-RISE, one masked image per pass: w_i = max_j IoU(L_t, L_j) * 1 * [c_j = c_t] s_j, then
    sum_i w_i M_i / (N p) minus the mean weight."""
    masks = draw_masks(count, grid, p, (int(image.shape[-2]), int(image.shape[-1])), seed=0)
    all_masks = masks.masks(torch.arange(count))
    weights = []
    with torch.no_grad():
        for i in range(count):
            out = model([image * all_masks[i]])[0]
            best = 0.0
            for box, label, score in zip(out["boxes"], out["labels"], out["scores"], strict=True):
                iou = float(box_iou(torch.tensor([target.box]), box[None])[0, 0])
                best = max(best, iou * (float(score) if int(label) == target.label else 0.0))
            weights.append(best)
    w = torch.tensor(weights)
    return (w[:, None, None] * all_masks).sum(0) / (count * p) - w.mean()


def test_map_equals_the_paper_formula_one_mask_at_a_time(detector_bundle, image) -> None:
    with torch.no_grad():
        out = detector_bundle.model([image])[0]
    target = BoxTarget(tuple(out["boxes"][0].tolist()), int(out["labels"][0]), 0)
    ctx = SceneMethodContext(detector_bundle, image, [target], batch_size=7, seed=0)
    got = get_scene_method("drise").run(ctx, {"masks": 24, "grid": 8})
    want = _reference_map(detector_bundle.model, image, target, 24, 8, 0.5)
    assert got.shape == (1, 96, 96)
    assert torch.allclose(got[0], want, atol=1e-5)
    assert float(want.abs().max()) > 0  # the reference is not trivially zero


def test_every_batch_size_gives_the_same_weights_and_out_of_memory_halves(detector_bundle, image) -> None:
    with torch.no_grad():
        out = detector_bundle.model([image])[0]
    targets = [BoxTarget(tuple(out["boxes"][k].tolist()), int(out["labels"][k]), k) for k in range(2)]
    masks = draw_masks(20, 8, 0.5, (96, 96), seed=3)
    one = drise_weights(detector_bundle.model, image, targets, masks, 1)
    many = drise_weights(detector_bundle.model, image, targets, masks, 16)
    assert one.shape == (2, 20)
    assert torch.allclose(one, many, atol=1e-5)

    scripted = BrightnessDetector()
    real_forward = scripted.forward

    def small_only(images):
        if len(images) > 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_forward(images)

    scripted.forward = small_only  # type: ignore[method-assign]
    bundle = ToyBundle(scripted)
    target = BoxTarget((10.0, 10.0, 40.0, 40.0), 1, 0)
    ctx = SceneMethodContext(bundle, toy_image(), [target], batch_size=32)
    halved = get_scene_method("drise").run(ctx, {"masks": 30, "grid": 8})
    assert scripted.calls and max(scripted.calls) == 4  # 32 -> 16 -> 8 -> 4
    plain = BrightnessDetector()
    ctx = SceneMethodContext(ToyBundle(plain), toy_image(), [target], batch_size=32)
    assert torch.allclose(halved, get_scene_method("drise").run(ctx, {"masks": 30, "grid": 8}), atol=1e-6)
    assert max(plain.calls) == 30


def test_the_map_peaks_on_the_pixels_the_box_depends_on() -> None:
    # The box's score is the brightness of pixels 36..48 x 36..48 alone; its box is elsewhere (D-RISE reads the
    # model, not the box's place).
    scripted = BrightnessDetector(box=(5.0, 5.0, 30.0, 30.0), source=(36, 48, 36, 48))
    target = BoxTarget((5.0, 5.0, 30.0, 30.0), 1, 0)
    ctx = SceneMethodContext(ToyBundle(scripted), toy_image(seed=1), [target], batch_size=64, seed=0)
    got = get_scene_method("drise").run(ctx, {"masks": 400, "grid": 8})[0]
    peak = divmod(int(got.argmax()), 96)
    assert 30 <= peak[0] < 54 and 30 <= peak[1] < 54
    inside = got[36:48, 36:48].mean()
    outside = torch.cat([got[:24].flatten(), got[60:].flatten()]).abs().mean()
    assert inside > 5 * outside


def test_maps_of_several_boxes_come_from_one_stream_of_passes() -> None:
    scripted = BrightnessDetector()
    targets = [BoxTarget((10.0, 10.0, 40.0, 40.0), 1, 0), BoxTarget((12.0, 10.0, 40.0, 40.0), 1, None)]
    ctx = SceneMethodContext(ToyBundle(scripted), toy_image(), targets, batch_size=64)
    maps = get_scene_method("drise").run(ctx, {"masks": 50, "grid": 8})
    assert maps.shape == (2, 96, 96)
    assert sum(scripted.calls) == 50  # both boxes' weights from the same 50 masked images
    # The second box overlaps the detection with IoU 28/30: its weights, and so its map, are that times the first's.
    masks = draw_masks(50, 8, 0.5, (96, 96), 0)
    w = drise_weights(BrightnessDetector(), toy_image(), targets, masks, 64)
    assert torch.allclose(w[1], w[0] * 28 / 30, atol=1e-6)
    assert torch.allclose(maps[1], drise_maps(w, masks, 0.5)[1], atol=1e-6)


def test_refusals(detector_bundle, segmenter_bundle, image) -> None:
    spec = get_scene_method("drise")
    assert spec.tasks == ("detect",)
    box = BoxTarget((0.0, 0.0, 10.0, 10.0), 1)
    with pytest.raises(ExplainError, match="finer than the 32x32 image"):
        spec.run(SceneMethodContext(detector_bundle, image[:, :32, :32], [box]), {"grid": 40, "masks": 1})
    region = RegionTarget(1, torch.ones(96, 96, dtype=torch.bool))
    with pytest.raises(ExplainError, match="does not explain a segmenter"):
        spec.run(SceneMethodContext(segmenter_bundle, image, [region]), {})
