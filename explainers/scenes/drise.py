"""D-RISE: black-box saliency for one detected box (Petsiuk et al., CVPR 2021, "Black-box explanation of object
detectors via saliency maps").

Written here by hand: captum and pytorch-grad-cam have no D-RISE (xplique's is TensorFlow). The masks are RISE's
(`explainers/methods/rise.py`: N seeded s x s binary grids, each cell kept with probability p, bilinearly upsampled
and cropped at a random shift), so the classifier RISE and D-RISE share one mask generator. Each masked image
(the image in [0, 1] times the mask: hidden parts are black) goes through the detector, and every explained box t
gets the mask's weight

    w_t(M) = max_j  IoU(L_t, L_j) * O_j * cos(P_t, P_j)

over the detections j on the masked image (the paper's equation 1, with L a box, O objectness, P class
probabilities). What is computed with torchvision's outputs, exactly:

- L_j: the detection's box (torchvision's per-class regressed box after its score threshold and per-class NMS).
- O_j = 1: torchvision's two-stage detectors have no objectness for a final detection (the paper sets it to 1 for
  Faster R-CNN too).
- class agreement: torchvision returns, per detection, one label c_j and its softmax probability s_j, not the whole
  probability vector P_j. We compute the dot product of the target's one-hot class vector with that partial vector:
  s_j when c_j is the box's label, else 0. The paper's cosine divides by |P_j| <= 1 as well, which these outputs do
  not allow; the dot product is the target class's probability, so a detection the model is unsure of counts less.
  (Detections under the model's `box_score_thresh` are missing from the outputs: they would add at most
  IoU x that threshold.)

The map is sum_i w(M_i) M_i / (N p) (RISE's normalisation: the expected weight given that a pixel was shown) minus
the mean weight over all masks, as xaidash's RISE shows it: red where showing the pixels raises the box's
similarity, blue where it lowers it, 0 where they do not matter. The paper's map (sum_i w_i M_i) is this times
N p plus a constant per box: the same pixel order, pointing game and deletion curve. The masked images of every box share one stream of
detector passes of `ctx.batch_size` images, halved on out-of-memory (`explainers/batching.run_halving`); every
box's weight comes from the same passes.
"""

from __future__ import annotations

from typing import Any

import torch
from torchvision.ops import box_iou

from xaidash.data.specs import Param
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods.rise import MaskSet, draw_masks, rise_map
from xaidash.explainers.params import ExplainError
from xaidash.explainers.scenes.registry import SceneMethodContext, SceneMethodSpec, box_targets, register
from xaidash.explainers.scenes.targets import BoxTarget


def drise_similarity(boxes: torch.Tensor, labels: torch.Tensor, output: dict[str, torch.Tensor]) -> torch.Tensor:
    """(K,) weights of K target boxes (K, 4) xyxy with labels (K,) against one image's detections `output`
    (torchvision's dict of boxes, labels, scores): max over detections of IoU x 1 x (score if same label else 0);
    0 where there is no detection."""
    det = output["boxes"].float()
    if det.numel() == 0:
        return boxes.new_zeros(len(boxes), dtype=torch.float32)
    ious = box_iou(boxes.float().to(det.device), det)  # (K, D)
    agree = labels[:, None].to(det.device) == output["labels"][None].to(det.device)
    weights = ious * agree * output["scores"][None].float()
    return weights.max(dim=1).values


@torch.no_grad()
def drise_weights(
    model: torch.nn.Module,
    image: torch.Tensor,
    targets: list[BoxTarget],
    masks: MaskSet,
    batch: int,
    progress: Any = None,
) -> torch.Tensor:
    """(K, N) D-RISE weights: every mask's masked image through `model`, `batch` images per pass."""
    device = image.device
    boxes = torch.tensor([t.box for t in targets], dtype=torch.float32, device=device)
    labels = torch.tensor([t.label for t in targets], dtype=torch.int64, device=device)
    n = len(masks)
    out = torch.zeros(len(targets), n, device=device)
    for start in range(0, n, batch):
        index = torch.arange(start, min(start + batch, n), device=device)
        masked = image[None] * masks.masks(index)[:, None].to(image.dtype)
        for k, output in zip(index.tolist(), model(list(masked)), strict=True):
            out[:, k] = drise_similarity(boxes, labels, output)
        if progress is not None:
            progress(min(1.0, (start + len(index)) / n), f"{start + len(index)} of {n} masked images")
    return out


def drise_maps(weights: torch.Tensor, masks: MaskSet, p: float) -> torch.Tensor:
    """(K, H, W) maps from (K, N) weights: RISE's weighted mean of the masks minus the mean weight."""
    return rise_map(weights, masks, p, weights.device) - weights.float().mean(1)[:, None, None]


def _compute(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    targets = box_targets(ctx.targets)
    h, w = ctx.size
    grid, p, count = int(params["grid"]), float(params["p"]), int(params["masks"])
    if grid > min(h, w):
        raise ExplainError(f"D-RISE grid {grid} is finer than the {h}x{w} image; pick at most {min(h, w)} cells.")
    masks = draw_masks(count, grid, p, (h, w), ctx.seed)
    image = ctx.image.float()
    weights, _ = run_halving(
        lambda b: drise_weights(ctx.model, image, targets, masks, b, ctx.tell),
        rows_per_pass(ctx.batch_size, image.device),
        what="D-RISE",
    )
    return drise_maps(weights, masks, p).cpu()


register(
    SceneMethodSpec(
        id="drise",
        label="D-RISE",
        tasks=("detect",),
        params=(
            Param(
                "masks",
                "int",
                2000,
                "Random masks N (one masked image and one detector pass each); the map's noise falls as 1/sqrt(N).",
                min=1,
                max=100000,
            ),
            Param("grid", "int", 16, "Cells per side of the coarse random grid (the paper's s = 16).", min=2, max=64),
            Param("p", "float", 0.5, "Probability that a grid cell is shown (the paper's 0.5).", min=0.05, max=0.95),
        ),
        compute=_compute,
        description=(
            "Shows the image through random smooth masks, finds on each masked image the detection most like the "
            "explained box (IoU x the box class's probability) and averages the masks weighted by that similarity, "
            "relative to the mean: red where showing the pixels keeps the box found."
        ),
        reference="Petsiuk et al. 2021 (D-RISE), masks as RISE; written here: no installed library has it",
        units="Δ similarity (IoU x class probability)",
        featured=4,
    )
)
