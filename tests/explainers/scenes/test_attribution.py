"""IG and Occlusion on a box's or a region's score: against captum's own call, against scripted models whose score is
a known function of a few pixels, the out-of-memory halving, and both tasks through the registry."""

from __future__ import annotations

import pytest
import torch
from captum.attr import IntegratedGradients, Occlusion
from scene_toys import BrightnessDetector, RegionSegmenter, toy_image

from xaidash.explainers.scenes.attribution import integrated_gradients, occlusion, target_scores
from xaidash.explainers.scenes.registry import SceneMethodContext, get_scene_method
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget


def _region(y0: int, y1: int, x0: int, x1: int, size: int = 96) -> torch.Tensor:
    mask = torch.zeros(size, size, dtype=torch.bool)
    mask[y0:y1, x0:x1] = True
    return mask


def test_target_scores_read_a_box_and_a_region() -> None:
    image = toy_image()
    box = BoxTarget((10.0, 10.0, 40.0, 40.0), 1, 0)
    detector = BrightnessDetector()
    # IoU 1 + the detection's score (the patch's mean brightness).
    assert float(target_scores(detector, image[None], box)[0]) == pytest.approx(
        1 + float(image[:, 10:40, 10:40].mean())
    )
    assert float(target_scores(detector, image[None], BoxTarget((10.0, 10.0, 40.0, 40.0), 2))[0]) == 0.0
    region = RegionTarget(1, _region(0, 10, 0, 10))
    level = 4 * float(image[:, 10:40, 10:40].mean())
    assert float(target_scores(RegionSegmenter(), image[None], region)[0]) == pytest.approx(100 * level, rel=1e-5)


def test_ig_on_a_region_is_exact_for_a_linear_score() -> None:
    # score = 100 px x 4 x mean brightness of the 30x30 patch: linear, so IG from black is x * gradient exactly.
    image = toy_image()
    region = RegionTarget(1, _region(0, 10, 0, 10))
    attr, delta = integrated_gradients(RegionSegmenter(), image, region, steps=8)
    want = torch.zeros(96, 96)
    want[10:40, 10:40] = image[:, 10:40, 10:40].sum(0) * 400 / (3 * 900)
    assert torch.allclose(attr, want, atol=1e-4)
    assert abs(delta) < 1e-3


def test_ig_and_occlusion_match_captums_own_calls(detector_bundle, segmenter_bundle, image) -> None:
    with torch.no_grad():
        out = detector_bundle.model([image])[0]
    box = BoxTarget(tuple(out["boxes"][0].tolist()), int(out["labels"][0]), 0)
    region = RegionTarget(2, _region(20, 50, 30, 70))
    for bundle, target in ((detector_bundle, box), (segmenter_bundle, region)):

        def f(x: torch.Tensor, bundle=bundle, target=target) -> torch.Tensor:
            outs = bundle.model(list(x)) if isinstance(target, BoxTarget) else bundle.model(x)
            return torch.stack([target.score(o) for o in outs]) + 0 * x.sum(dim=(1, 2, 3))

        ref = IntegratedGradients(f).attribute(image[None].clone().requires_grad_(), n_steps=8, internal_batch_size=8)
        got, _ = integrated_gradients(bundle.model, image, target, steps=8, batch_size=3)
        assert torch.allclose(got, ref[0].sum(0), atol=1e-6 * float(ref.abs().max()) + 1e-6)
        with torch.no_grad():
            ref = Occlusion(f).attribute(image[None], sliding_window_shapes=(3, 24, 24), strides=(3, 16, 16))
        got = occlusion(bundle.model, image, target, window=24, stride=16)
        # Summed logits of 1,200 pixels (a score near 100): batched passes round differently by about 1e-5.
        assert torch.allclose(got, ref[0, 0], atol=1e-4)
        assert float(got.abs().max()) > 0


def test_occlusion_sees_only_the_pixels_the_box_depends_on() -> None:
    detector = BrightnessDetector(source=(40, 52, 40, 52))
    box = BoxTarget((10.0, 10.0, 40.0, 40.0), 1, 0)
    got = occlusion(detector, toy_image(), box, window=8, stride=4)
    assert float(got[40:52, 40:52].min()) > 0  # hiding any of them lowers the score
    # Windows of 8 px reach at most 7 px beyond the patch; further out nothing changes the score.
    far = torch.ones(96, 96, dtype=torch.bool)
    far[33:59, 33:59] = False
    assert float(got[far].abs().max()) == 0.0


def test_out_of_memory_halves_captums_batches() -> None:
    detector = BrightnessDetector()
    real = detector.forward

    def small_only(images):
        if len(images) > 5:
            raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 GB (out of memory)")
        return real(images)

    detector.forward = small_only  # type: ignore[method-assign]
    box = BoxTarget((10.0, 10.0, 40.0, 40.0), 1, 0)
    halved = occlusion(detector, toy_image(), box, window=12, stride=12, batch_size=40)
    assert max(detector.calls) <= 5
    plain = occlusion(BrightnessDetector(), toy_image(), box, window=12, stride=12, batch_size=40)
    assert torch.allclose(halved, plain, atol=1e-6)


@pytest.mark.parametrize("method", ["ig", "occlusion"])
def test_both_tasks_through_the_registry(method, detector_bundle, segmenter_bundle, image) -> None:
    spec = get_scene_method(method)
    assert set(spec.tasks) == {"detect", "segment"}
    boxes = [BoxTarget((10.0, 12.0, 34.0, 36.0), 1), BoxTarget((50.0, 20.0, 80.0, 50.0), 2)]
    maps = spec.run(
        SceneMethodContext(detector_bundle, image, boxes, batch_size=16),
        {"steps": 4} if method == "ig" else {"window": 32, "stride": 32},
    )
    assert maps.shape == (2, 96, 96) and maps.dtype == torch.float32 and bool(torch.isfinite(maps).all())
    regions = [RegionTarget(1, _region(10, 40, 10, 40))]
    maps = spec.run(
        SceneMethodContext(segmenter_bundle, image, regions),
        {"steps": 4} if method == "ig" else {"window": 32, "stride": 32},
    )
    assert maps.shape == (1, 96, 96) and float(maps.abs().max()) > 0
