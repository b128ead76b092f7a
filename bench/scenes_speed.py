"""Scene explanation speed: per-box Grad-CAM from one forward pass against pytorch-grad-cam's own call per box, and
D-RISE with 2,000 masks on a 128 px scene.

On the zoo's `fasterrcnn_small` (torchvision's Faster R-CNN on our light backbone, random weights: the cost does not
depend on them) and one generated scene (`scenes_hard` at 128 px when the data set is registered, else noise), it
- takes the model's top `--boxes` detections as the boxes to explain;
- times xaidash's Grad-CAM of every box (`explainers/scenes/cams.py`: one forward pass; per box, a backward down
  to the pooled RoI features with the graph kept, then RoIAlign's backward for that box's own proposal only) and pytorch-grad-cam's `GradCAM(model, [cam layer])` called once per box with that box's
  `FasterRCNNBoxScoreTarget` (its documented Faster R-CNN use: a forward and a backward per call), the GradCAM object
  built once outside the timing;
- checks that the maps are equal once scaled as pytorch-grad-cam scales its own (largest |difference|, maps in
  [0, 1]) and prints the ratio pytorch-grad-cam / xaidash;
- times D-RISE with `--masks` masks for the same boxes (one stream of detector passes of `--batch-size` masked images,
  halved on out-of-memory), and Eigen-CAM and Ablation-CAM of every box, for the record.

Every path runs once to warm up, then the best of `--repeats` is kept (D-RISE: one timed run); CUDA is synchronised.

    python bench/scenes_speed.py --device cpu --threads 1
    python bench/scenes_speed.py --device cuda --boxes 10 --batch-size 256
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

from xaidash.explainers.scenes.api import explain_scene
from xaidash.explainers.scenes.cams import gradient_cams
from xaidash.explainers.scenes.registry import SceneMethodContext, get_scene_method, scene_methods
from xaidash.explainers.scenes.targets import BoxTarget
from xaidash.models.device import best_time, device_label, pick_device
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.zoo import scene_model

CLASSES = ("circle", "square", "triangle", "cross")


def scene_image(size: int) -> torch.Tensor:
    """The first test scene of `scenes_hard` cut or padded to `size`, or smooth noise when the data set is missing."""
    try:
        from xaidash.data.scenes.registry import load_scene_set

        image = load_scene_set("scenes_hard", "test", count=1).images[0]
        out = torch.zeros(3, size, size)
        h, w = min(size, int(image.shape[1])), min(size, int(image.shape[2]))
        out[:, :h, :w] = image[:, :h, :w]
        return out
    except Exception:  # noqa: BLE001 - the benchmark runs on any scene; the cost does not depend on it
        g = torch.Generator().manual_seed(0)
        coarse = torch.rand(1, 3, 8, 8, generator=g)
        return torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")[0]


def detector(size: int, device: torch.device) -> SceneBundle:
    spec = scene_model("fasterrcnn_small")
    torch.manual_seed(0)
    model = spec.make(len(CLASSES), size).eval().to(device)
    return SceneBundle(model, spec, CLASSES, size, device)


def top_boxes(bundle: SceneBundle, image: torch.Tensor, n: int) -> list[BoxTarget]:
    with torch.no_grad():
        out = bundle.model(image[None])[0]
    boxes = [(float(b[0]), float(b[1]), float(b[2]), float(b[3])) for b in out["boxes"][:n].tolist()]
    return [BoxTarget(b, int(out["labels"][i]), i) for i, b in enumerate(boxes)]


def library_scaled(ours: torch.Tensor, coarse: torch.Tensor) -> np.ndarray:
    """Our maps scaled as pytorch-grad-cam scales its own (see tests/explainers/scenes/test_cams.py)."""
    c = torch.relu(coarse.cpu())
    lo = c.amin(dim=(1, 2))[:, None, None]
    scaled = ((ours - lo) / (c.amax(dim=(1, 2))[:, None, None] - lo + 1e-7)).numpy()
    out = []
    for m in scaled:
        m = m - m.min()
        out.append(m / (1e-7 + m.max()))
    return np.stack(out)


def gradcam_row(bundle: SceneBundle, image: torch.Tensor, targets: list[BoxTarget], repeats: int) -> dict[str, Any]:
    from pytorch_grad_cam import GradCAM  # type: ignore[import-untyped]
    from pytorch_grad_cam.utils.model_targets import FasterRCNNBoxScoreTarget  # type: ignore[import-untyped]

    spec = get_scene_method("gradcam")
    ctx = SceneMethodContext(bundle, image, targets)
    ours = spec.run(ctx, {})
    ours_s = best_time(lambda: spec.run(ctx, {}), bundle.device, repeats)
    cam = GradCAM(bundle.model, [bundle.cam_module()])
    wanted = [[FasterRCNNBoxScoreTarget([t.label], [np.array(t.box)])] for t in targets]

    def library() -> list[np.ndarray]:
        return [cam(image[None], w)[0] for w in wanted]

    refs = library()
    lib_s = best_time(library, bundle.device, repeats)
    cam.activations_and_grads.release()
    scaled = library_scaled(ours, gradient_cams(ctx, bundle.spec.cam_layer))
    diff = float(np.abs(scaled - np.stack(refs)).max())
    return {"xaidash_s": ours_s, "library_s": lib_s, "max_diff": diff}


def method_time(
    bundle: SceneBundle, image: torch.Tensor, targets: list[BoxTarget], method: str, repeats: int, **kw: Any
) -> float:
    params = {method: kw.pop("params", {})}

    def run() -> None:
        (first, *_) = explain_scene(bundle, image, targets, [method], params, metrics=False, **kw)
        if first.error:
            raise SystemExit(f"{method}: {first.error}")

    return best_time(run, bundle.device, repeats)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--boxes", type=int, default=5, help="boxes explained (the model's top detections)")
    p.add_argument("--size", type=int, default=96, help="the Grad-CAM scene's side in px")
    p.add_argument("--drise-size", type=int, default=128, help="the D-RISE scene's side in px")
    p.add_argument("--masks", type=int, default=2000, help="D-RISE masks (0: skip D-RISE)")
    p.add_argument("--batch-size", type=int, default=None, help="masked images per pass (default 32 cpu, 256 cuda)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    batch = args.batch_size or (256 if device.type == "cuda" else 32)
    print(f"device: {device_label(device)}")

    bundle = detector(args.size, device)
    image = scene_image(args.size).to(device)
    targets = top_boxes(bundle, image, args.boxes)
    row = gradcam_row(bundle, image, targets, args.repeats)
    ratio = row["library_s"] / row["xaidash_s"]
    # every detector CAM through explain_scene, for the record: the registry's methods pytorch-grad-cam also has
    for spec in scene_methods("detect"):
        if "pytorch_grad_cam" not in spec.reference:
            continue
        t = method_time(bundle, image, targets, spec.id, args.repeats, batch_size=batch)
        print(f"{spec.label} ({len(targets)} boxes, {args.size} px): {t:.3f} s")
    if args.masks:
        big = detector(args.drise_size, device)
        big_image = scene_image(args.drise_size).to(device)
        big_targets = top_boxes(big, big_image, args.boxes)
        t = method_time(big, big_image, big_targets, "drise", 1, batch_size=batch, params={"masks": args.masks})
        print(
            f"D-RISE ({len(big_targets)} boxes, {args.masks} masks, {args.drise_size} px, batch {batch}): {t:.2f} s, "
            f"{args.masks / t:.0f} masked images/s"
        )
    print(
        f"Grad-CAM per box (fasterrcnn_small, {args.size} px, {len(targets)} boxes): xaidash {row['xaidash_s']:.3f} s, "
        f"pytorch-grad-cam {row['library_s']:.3f} s, ratio {ratio:.2f}x, equal after its scaling "
        f"(max diff {row['max_diff']:.1e})"
    )


if __name__ == "__main__":
    main()
