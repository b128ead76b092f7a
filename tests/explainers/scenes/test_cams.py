"""The scene CAMs against pytorch-grad-cam on the same models and targets, and their promises: one forward pass for
every box, maps at the image's size, one map per target, one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pytorch_grad_cam import AblationCAM, EigenCAM, GradCAM  # type: ignore[import-untyped]
from pytorch_grad_cam.utils.model_targets import (  # type: ignore[import-untyped]
    FasterRCNNBoxScoreTarget,
    SemanticSegmentationTarget,
)

from xaidash.data.errors import ExplainError
from xaidash.explainers.scenes import cams
from xaidash.explainers.scenes.registry import SceneMethodContext, get_scene_method
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget

torch.set_num_threads(1)


def minmax(a: np.ndarray) -> np.ndarray:
    """pytorch-grad-cam's scale_cam_image without the resize."""
    a = a - a.min()
    return a / (1e-7 + a.max())


def library_scaled(upsampled: torch.Tensor, coarse: torch.Tensor) -> np.ndarray:
    """Our map (K, H, W, in its units) scaled as pytorch-grad-cam scales its own: ReLU'd coarse map min-max scaled
    with its 1e-7 in the denominator, resized (bilinear, which commutes with that affine scaling), then min-max
    scaled again. The 1e-7 matters: a random detector's maps are about 1e-5 high."""
    c = torch.relu(coarse)
    span = c.amax(dim=(1, 2)) - c.amin(dim=(1, 2)) + 1e-7
    scaled = (upsampled - c.amin(dim=(1, 2))[:, None, None]) / span[:, None, None]
    return np.stack([minmax(m) for m in scaled.numpy()])


def detections(bundle, image) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return bundle.model(image[None])[0]


def box_targets(bundle, image, n: int = 4) -> list[BoxTarget]:
    out = detections(bundle, image)
    boxes = [(float(b[0]), float(b[1]), float(b[2]), float(b[3])) for b in out["boxes"][:n]]
    return [BoxTarget(b, int(out["labels"][i]), i) for i, b in enumerate(boxes)]


def test_gradcam_per_box_equals_pytorch_grad_cam(detector_bundle, image) -> None:
    targets = box_targets(detector_bundle, image)
    ctx = SceneMethodContext(detector_bundle, image, targets)
    ours = get_scene_method("gradcam").run(ctx, {})
    assert ours.shape == (len(targets), 96, 96)
    scaled = library_scaled(ours, cams.gradient_cams(ctx, detector_bundle.spec.cam_layer))
    layer = detector_bundle.model.get_submodule(detector_bundle.spec.cam_layer)
    with GradCAM(detector_bundle.model, [layer]) as cam:
        refs = [cam(image[None], [FasterRCNNBoxScoreTarget([t.label], [np.array(t.box)])])[0] for t in targets]
    for k, ref in enumerate(refs):
        np.testing.assert_allclose(scaled[k], ref, atol=1e-5)
    # Most boxes' maps are not empty (a box whose weighted activations are all negative has none after ReLU).
    assert sum(float(r.max()) > 0.5 for r in refs) >= 2


def region_targets(bundle, image) -> list[RegionTarget]:
    """The stand-in scene's three rectangles as regions of classes 1, 2, 3 (a random segmenter predicts none)."""
    masks = []
    for x0, y0, s in ((10, 12, 24), (50, 20, 30), (30, 60, 20)):
        m = torch.zeros(96, 96, dtype=torch.bool)
        m[y0 : y0 + s, x0 : x0 + s] = True
        masks.append(m)
    return [RegionTarget(k + 1, m, "a rectangle") for k, m in enumerate(masks)]


def test_seg_gradcam_equals_pytorch_grad_cam(segmenter_bundle, image) -> None:
    targets = region_targets(segmenter_bundle, image)
    assert len(targets) >= 2
    ctx = SceneMethodContext(segmenter_bundle, image, targets)
    ours = get_scene_method("seg_gradcam").run(ctx, {})
    scaled = library_scaled(ours, cams.gradient_cams(ctx, segmenter_bundle.spec.cam_layer))
    layer = segmenter_bundle.model.get_submodule(segmenter_bundle.spec.cam_layer)
    with GradCAM(segmenter_bundle.model, [layer]) as cam:
        refs = [cam(image[None], [SemanticSegmentationTarget(t.label, t.mask.float().numpy())])[0] for t in targets]
    for k, ref in enumerate(refs):
        np.testing.assert_allclose(scaled[k], ref, atol=1e-5)
    assert sum(float(r.max()) > 0.5 for r in refs) >= 1


def test_eigencam_is_the_library_map_renormalised_in_each_box(detector_bundle, image) -> None:
    targets = box_targets(detector_bundle, image, 3)
    ours = get_scene_method("eigencam").run(SceneMethodContext(detector_bundle, image, targets), {})
    layer = detector_bundle.model.get_submodule(detector_bundle.spec.cam_layer)
    with EigenCAM(detector_bundle.model, [layer]) as cam:
        full = cam(image[None], [lambda out: out["scores"].sum()])[0]
    for k, t in enumerate(targets):
        # The tutorial's renormalize_cam_in_bounding_boxes with this one box.
        x0, y0, x1, y1 = np.array(t.box).astype(np.int32)
        ref = np.zeros_like(full)
        ref[y0:y1, x0:x1] = minmax(full[y0:y1, x0:x1])
        np.testing.assert_allclose(ours[k].numpy(), minmax(ref), atol=1e-4)
        assert float(ours[k].max()) > 0.99 and float(ours[k][: max(y0, 1) - 1].abs().sum()) == 0.0


def count_forwards(model: torch.nn.Module) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    calls: list[int] = []
    return calls, model.register_forward_hook(lambda m, i, o: calls.append(1))


@pytest.mark.parametrize("method", ["gradcam", "eigencam"])
def test_every_box_from_one_forward_pass(detector_bundle, image, method: str) -> None:
    targets = box_targets(detector_bundle, image, 5)
    calls, handle = count_forwards(detector_bundle.model)
    try:
        maps = get_scene_method(method).run(SceneMethodContext(detector_bundle, image, targets), {})
    finally:
        handle.remove()
    assert len(calls) == 1 and maps.shape == (5, 96, 96) and maps.dtype == torch.float32


def test_ablation_cam_batches_channels_and_matches_one_at_a_time(segmenter_bundle, image) -> None:
    targets = region_targets(segmenter_bundle, image)
    spec = get_scene_method("ablationcam")
    calls, handle = count_forwards(segmenter_bundle.model)
    try:
        batched = spec.run(SceneMethodContext(segmenter_bundle, image, targets, batch_size=6), {})
    finally:
        handle.remove()
    assert len(calls) == 1 + 3  # the unablated pass, then 16 channels in batches of 6
    single = spec.run(SceneMethodContext(segmenter_bundle, image, targets, batch_size=1), {})
    torch.testing.assert_close(batched, single, rtol=1e-4, atol=1e-6)
    assert float(batched.max()) > 0


def test_ablation_cam_weights_are_pytorch_grad_cams(segmenter_bundle, image) -> None:
    """Its weights are the library's times the unablated score (we keep score units): the same map once scaled, for a
    target with a positive score (the library's division by a negative score would flip its weights' signs)."""
    targets = [RegionTarget(4, region_targets(segmenter_bundle, image)[1].mask)]
    with torch.no_grad():
        assert float(targets[0].score(segmenter_bundle.model(image[None])[0])) > 0
    ctx = SceneMethodContext(segmenter_bundle, image, targets, batch_size=8)
    ours = get_scene_method("ablationcam").run(ctx, {})
    acts, drops = cams.ablation_weights(ctx, segmenter_bundle.spec.cam_layer)
    coarse = torch.einsum("kc,chw->khw", drops, acts[0])
    layer = segmenter_bundle.model.get_submodule(segmenter_bundle.spec.cam_layer)
    with AblationCAM(segmenter_bundle.model, [layer], batch_size=8) as cam:
        ref = cam(image[None], [SemanticSegmentationTarget(targets[0].label, targets[0].mask.float().numpy())])[0]
    np.testing.assert_allclose(library_scaled(ours, coarse)[0], ref, atol=1e-4)


def test_ablation_cam_on_boxes_is_one_pass_per_batch(detector_bundle, image) -> None:
    targets = box_targets(detector_bundle, image, 3)
    calls, handle = count_forwards(detector_bundle.model)
    try:
        maps = get_scene_method("ablationcam").run(
            SceneMethodContext(detector_bundle, image, targets, batch_size=16), {}
        )
    finally:
        handle.remove()
    assert len(calls) == 1 + 2 and maps.shape == (3, 96, 96)


def test_refusals_are_one_line(detector_bundle, segmenter_bundle, image) -> None:
    box = box_targets(detector_bundle, image, 1)
    with pytest.raises(ExplainError, match="does not explain a segmenter"):
        get_scene_method("gradcam").run(SceneMethodContext(segmenter_bundle, image, box), {})
    with pytest.raises(ExplainError, match="Nothing to explain"):
        get_scene_method("gradcam").run(SceneMethodContext(detector_bundle, image, []), {})
    with pytest.raises(ExplainError, match="not a conv layer"):
        get_scene_method("gradcam").run(SceneMethodContext(detector_bundle, image, box), {"layer": "nope"})
    with pytest.raises(ExplainError, match="segmenter's regions"):
        get_scene_method("ablationcam").run(SceneMethodContext(segmenter_bundle, image, box), {})


def test_a_box_no_detection_matches_has_an_empty_map(detector_bundle, image) -> None:
    lost = BoxTarget((0.0, 0.0, 2.0, 2.0), 1)
    maps = get_scene_method("gradcam").run(SceneMethodContext(detector_bundle, image, [lost]), {})
    assert float(maps.abs().max()) == 0.0


def test_gradcam_equals_pytorch_grad_cam_on_the_zoos_detector(image) -> None:
    """The same check on the project's own fasterrcnn_small (random weights) through its `SceneBundle`."""
    from xaidash.models.scenes.bundle import SceneBundle
    from xaidash.models.scenes.zoo import scene_model

    spec = scene_model("fasterrcnn_small")
    torch.manual_seed(0)
    bundle = SceneBundle(spec.make(4, 96).eval(), spec, ("a", "b", "c", "d"), 96, torch.device("cpu"))
    targets = box_targets(bundle, image, 3)
    ctx = SceneMethodContext(bundle, image, targets)
    scaled = library_scaled(get_scene_method("gradcam").run(ctx, {}), cams.gradient_cams(ctx, spec.cam_layer))
    with GradCAM(bundle.model, [bundle.cam_module()]) as cam:
        refs = [cam(image[None], [FasterRCNNBoxScoreTarget([t.label], [np.array(t.box)])])[0] for t in targets]
    for k, ref in enumerate(refs):
        np.testing.assert_allclose(scaled[k], ref, atol=1e-5)
    assert sum(float(r.max()) > 0.5 for r in refs) >= 1


def test_eigencam_of_a_region_lies_inside_it(segmenter_bundle, image) -> None:
    targets = region_targets(segmenter_bundle, image)
    maps = get_scene_method("eigencam").run(SceneMethodContext(segmenter_bundle, image, targets), {})
    for m, t in zip(maps, targets, strict=True):
        assert float(m[~t.mask].abs().max()) == 0.0 and float(m[t.mask].max()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("zoo", [False, True])
def test_through_the_rois_is_the_same_gradient(detector_bundle, image, zoo: bool) -> None:
    """On a torchvision two-stage detector each box's gradient goes back through RoIAlign for its own proposal only:
    the same maps as the plain backward through every proposal."""
    bundle = detector_bundle
    if zoo:
        from xaidash.models.scenes.bundle import SceneBundle
        from xaidash.models.scenes.zoo import scene_model

        spec = scene_model("fasterrcnn_small")
        torch.manual_seed(1)
        bundle = SceneBundle(spec.make(4, 96).eval(), spec, ("a", "b", "c", "d"), 96, torch.device("cpu"))
    assert cams.roi_pool_of(bundle.model) is not None
    ctx = SceneMethodContext(bundle, image, box_targets(bundle, image, 5))
    fast = cams.gradient_cams(ctx, bundle.spec.cam_layer)
    plain = cams.gradient_cams(ctx, bundle.spec.cam_layer, through_rois=False)
    assert float(plain.abs().max()) > 0
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6 * float(plain.abs().max()))
