"""How well a scene map finds the explained object, against the scenes' exact ground truth, and how faithful it is
to the model's score.

The object is the true object the target explains: for a box, the true object of the same class with the best
IoU >= 0.5 (`truth_object`), its instance mask (its box when the annotations have no masks); for a region, the
class's true semantic mask. "Other objects" are every other true object's pixels (a box: the other instances,
minus this one's pixels; a region: the other classes' pixels).

- pointing game (Zhang et al. 2018): 1 when the map's maximum lies on the object grown by `POINTING_TOLERANCE`
  pixels; tied maxima share the hit (`explainers/metrics/ground_truth.pointing_game`).
- energy inside (Wang et al. 2020, Score-CAM's energy-based pointing game): the share of the map's positive
  attribution on the object (`ground_truth.energy_in_mask`).
- off-object share: the share of positive attribution on other objects: does the model look at the neighbour?
- deletion / insertion (Petsiuk et al. 2018): pixels moved in the map's order (highest first) `steps` chunks at a
  time from the image to black (deletion) or from a blurred copy into the image (insertion), the target's score read
  after each chunk as a share of its score on the unchanged image, and the area under that curve. Written here by
  hand: the classifier curves (`perturbation_curves`) read a softmax probability, and no installed library scores a
  box or a region; every step's image goes through the model in shared passes, halved on out-of-memory.

`score_map` computes them all for one map; `SCENE_METRICS` holds each metric's declared facts for the pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torchvision.ops import box_iou

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneTarget
from xaidash.data.specs import Registry, Spec
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.metrics.ground_truth import energy_in_mask, pointing_game
from xaidash.explainers.perturbation_curves import CURVE_STEPS, ranks
from xaidash.explainers.scenes.attribution import target_scores
from xaidash.explainers.scenes.registry import SceneModelLike
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.explainers.segmentation import blur

# Pixels the object is grown by for the pointing game. Zhang et al. grow by 15 px at 224 px (7 % of the side); the
# scenes' objects are 12-40 px in 96 px images, and 7 % (about 7 px) would often reach the next object, so 2 px:
# enough to forgive the half-pixel blur at a mask's edge of an upsampled CAM, not enough to reach a neighbour.
POINTING_TOLERANCE = 2
MATCH_IOU = 0.5  # a box explains the true object of its class it overlaps most, when by at least this much


@dataclass(frozen=True)
class SceneMetricSpec(Spec):
    """One scene metric's facts, for the pages' tables and legends. `better`: 'higher is better' / 'lower is better'
    (or 'neither' for a descriptive share); `needs`: 'truth' (the ground truth's masks) or 'model' (forward passes)."""

    id: str
    title: str
    better: str
    meaning: str
    value_range: tuple[float | None, float | None] = (0.0, 1.0)
    needs: str = "truth"

    @property
    def lower_is_better(self) -> bool:
        return self.better.startswith("lower")


SCENE_METRICS: Registry[SceneMetricSpec] = Registry("scene metric", error=ExplainError)
for _spec in (
    SceneMetricSpec(
        "pointing_game",
        "Pointing game",
        "higher is better",
        f"1 when the map's highest pixel lies on the explained object (grown by {POINTING_TOLERANCE} px), 0 when it "
        "does not; tied highest pixels share the hit.",
    ),
    SceneMetricSpec(
        "energy",
        "Energy inside",
        "higher is better",
        "The share of the map's positive attribution that lies on the explained object's true mask.",
    ),
    SceneMetricSpec(
        "off_object",
        "On other objects",
        "lower is better",
        "The share of the map's positive attribution on other objects' masks: how much the model looks at the "
        "neighbours.",
    ),
    SceneMetricSpec(
        "deletion",
        "Deletion AUC",
        "lower is better",
        "Area under the target's score (as a share of its score on the image) while the map's highest pixels are "
        "blacked out first: low when the map found what the score needs. A region's summed logits can fall below 0, "
        "so its AUC can be negative.",
        (None, None),
        "model",
    ),
    SceneMetricSpec(
        "insertion",
        "Insertion AUC",
        "higher is better",
        "Area under the target's score (as a share of its score on the image) while the map's highest pixels are "
        "put back first into a blurred copy: high when the map found what the score needs.",
        (None, None),
        "model",
    ),
):
    SCENE_METRICS.register(_spec)


def truth_object(target: BoxTarget, truth: SceneTarget, min_iou: float = MATCH_IOU) -> int | None:
    """The index of the true object a box explains: same class, best IoU, at least `min_iou`; None when none."""
    same = (truth.labels == target.label).nonzero().flatten()
    if len(same) == 0:
        return None
    ious = box_iou(torch.tensor([target.box], dtype=torch.float32), truth.boxes[same].float())[0]
    best = int(ious.argmax())
    return int(same[best]) if float(ious[best]) >= min_iou else None


def _instance_mask(truth: SceneTarget, i: int, size: tuple[int, int]) -> torch.Tensor:
    if truth.masks is not None:
        return truth.masks[i].bool()
    out = torch.zeros(size, dtype=torch.bool)
    x0, y0, x1, y1 = (round(float(v)) for v in truth.boxes[i])
    out[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = True
    return out


def object_masks(
    target: BoxTarget | RegionTarget, truth: SceneTarget, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(object, others): the (H, W) bool masks of the explained object and of every other object's pixels.
    ExplainError when a box matches no true object (the sentence says why)."""
    if isinstance(target, RegionTarget):
        semantic = truth.semantic(*size)
        own = semantic == target.label
        if not bool(own.any()):
            raise ExplainError("The scene has no true object of this class: nothing to score the map against.")
        return own, (semantic != 0) & ~own
    index = truth_object(target, truth)
    if index is None:
        raise ExplainError(
            f"No true object of this class overlaps the box by IoU >= {MATCH_IOU}: it is a false detection."
        )
    own = _instance_mask(truth, index, size)
    others = torch.zeros(size, dtype=torch.bool)
    for i in range(len(truth)):
        if i != index:
            others |= _instance_mask(truth, i, size)
    return own, others & ~own


def positive_share(attribution: np.ndarray | torch.Tensor, mask: np.ndarray | torch.Tensor) -> float:
    """The share of the map's positive values inside `mask` (NaN when none is positive)."""
    return float(energy_in_mask(np.asarray(attribution, dtype=np.float32)[None], np.asarray(mask)[None])[0])


def truth_metrics(
    attribution: torch.Tensor, own: torch.Tensor, others: torch.Tensor, tolerance: int = POINTING_TOLERANCE
) -> dict[str, float]:
    """Pointing game, energy inside and off-object share of one (H, W) map."""
    a = attribution.detach().float().cpu().numpy()
    return {
        "pointing_game": float(pointing_game(a[None], own.cpu().numpy()[None], tolerance=tolerance)[0]),
        "energy": positive_share(a, own.cpu().numpy()),
        "off_object": positive_share(a, others.cpu().numpy()),
    }


@torch.no_grad()
def score_curves(
    model: torch.nn.Module,
    image: torch.Tensor,
    target: BoxTarget | RegionTarget,
    attribution: torch.Tensor,
    *,
    steps: int = CURVE_STEPS,
    batch_size: int = 32,
) -> tuple[np.ndarray, np.ndarray, float]:
    """(deletion curve, insertion curve) of `steps` + 1 points each, as shares of the unchanged image's score, and
    that score. ExplainError when the score on the unchanged image is not positive (nothing to lose)."""
    h, w = int(image.shape[-2]), int(image.shape[-1])
    steps = int(max(1, min(steps, h * w)))
    order = ranks(attribution.to(image.device).float()[None])[0].view(h, w)
    counts = torch.round(torch.linspace(0.0, 1.0, steps + 1, device=image.device) * (h * w)).long()
    black, blurred = torch.zeros_like(image), blur(image[None])[0]
    rows = 2 * (steps + 1)  # deletion points, then insertion points

    def build(index: torch.Tensor) -> torch.Tensor:
        insertion, k = index >= steps + 1, index % (steps + 1)
        moved = (order[None] < counts[k][:, None, None])[:, None]  # (B, 1, H, W)
        deleted = torch.where(moved, black, image)
        inserted = torch.where(moved, image, blurred)
        return torch.where(insertion[:, None, None, None], inserted, deleted)

    def run(size: int) -> torch.Tensor:
        chunks = [
            target_scores(model, build(torch.arange(s, min(s + size, rows), device=image.device)), target)
            for s in range(0, rows, size)
        ]
        return torch.cat(chunks).float()

    scores, _ = run_halving(run, rows_per_pass(batch_size, image.device), what="the deletion and insertion curves")
    base = float(scores[0])
    if not base > 0:
        raise ExplainError("The target's score on the unchanged image is not positive: no deletion or insertion curve.")
    curves = (scores / base).cpu().numpy()
    return curves[: steps + 1], curves[steps + 1 :], base


def curve_auc(curve: np.ndarray) -> float:
    """Trapezoid area under a curve sampled at evenly spaced fractions 0..1."""
    return float(np.trapezoid(curve, np.linspace(0.0, 1.0, len(curve))))


def score_map(
    bundle: SceneModelLike,
    image: torch.Tensor,
    target: BoxTarget | RegionTarget,
    attribution: torch.Tensor | np.ndarray,
    truth: SceneTarget | None,
    *,
    steps: int = CURVE_STEPS,
    batch_size: int = 32,
    curves: bool = True,
) -> tuple[dict[str, float], dict[str, str]]:
    """Every scene metric of one (H, W) map of `target` on `image` (3, H, W): (values by metric id, one sentence by
    metric id for those that could not be scored). The truth metrics need `truth`; the curves run `bundle.model`
    (skipped when `curves` is False)."""
    values: dict[str, float] = {}
    errors: dict[str, str] = {}
    amap = (
        torch.as_tensor(np.asarray(attribution, dtype=np.float32))
        if not isinstance(attribution, torch.Tensor)
        else attribution
    )
    size = (int(image.shape[-2]), int(image.shape[-1]))
    truth_ids = [m.id for m in SCENE_METRICS.all(lambda m: m.needs == "truth")]
    if truth is None:
        errors.update(dict.fromkeys(truth_ids, "No ground truth for this image."))
    else:
        try:
            own, others = object_masks(target, truth, size)
            values.update(truth_metrics(amap, own, others))
        except ExplainError as err:
            errors.update({k: str(err) for k in truth_ids})
    if curves:
        try:
            deletion, insertion, _ = score_curves(
                bundle.model, image.to(bundle.device).float(), target, amap, steps=steps, batch_size=batch_size
            )
            values["deletion"], values["insertion"] = curve_auc(deletion), curve_auc(insertion)
        except ExplainError as err:
            errors.update({"deletion": str(err), "insertion": str(err)})
    for key in [k for k, v in values.items() if not np.isfinite(v)]:
        del values[key]
        errors[key] = "The map has no positive values." if key in ("energy", "off_object") else "Not a number."
    return values, errors
