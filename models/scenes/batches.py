"""The training batches of a scene model: the split's order per epoch, flips, and the loss of one batch.

Each epoch's order and flips are drawn from a generator seeded by (seed, epoch) alone, so a run resumed inside an
epoch sees the same batches it would have seen without the stop."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from xaidash.data.scenes.types import SceneSplit, SceneTarget
from xaidash.models.scenes.zoo import SceneTask


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's image order and which images are flipped left to right."""

    order: list[int]
    flips: list[bool]
    batch_size: int

    @property
    def steps(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def batch(self, step: int) -> list[tuple[int, bool]]:
        lo = step * self.batch_size
        return list(zip(self.order[lo : lo + self.batch_size], self.flips[lo : lo + self.batch_size], strict=True))


def epoch_plan(count: int, batch_size: int, seed: int, epoch: int, flip: bool) -> EpochPlan:
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(count, generator=g).tolist()
    flips = (torch.rand(count, generator=g) < 0.5).tolist() if flip else [False] * count
    return EpochPlan(order, [bool(f) for f in flips], batch_size)


def steps_per_epoch(count: int, batch_size: int) -> int:
    return math.ceil(count / batch_size)


def flipped_target(target: SceneTarget, width: int) -> SceneTarget:
    """`target` mirrored left to right in an image `width` px wide (x1 is an exclusive edge: x -> width - x)."""
    boxes = target.boxes.clone()
    boxes[:, 0], boxes[:, 2] = width - target.boxes[:, 2], width - target.boxes[:, 0]
    masks = None if target.masks is None else target.masks.flip(-1)
    return SceneTarget(boxes, target.labels.clone(), masks)


def batch_loss(
    model: nn.Module, task: SceneTask, split: SceneSplit, items: list[tuple[int, bool]], device: torch.device
) -> torch.Tensor:
    """The training loss of one batch: torchvision's summed detection losses (RPN objectness and boxes, RoI classes
    and boxes), or the segmenter's per-pixel cross-entropy (images of several sizes: the mean over same-size groups,
    weighted by their pixels)."""
    images, targets = [], []
    for index, flip in items:
        image, target = split.images[index], split.targets[index]
        if flip:
            image, target = image.flip(-1), flipped_target(target, int(image.shape[-1]))
        images.append(image.to(device, torch.float32))
        targets.append(target)
    if task == "detect":
        wanted = [{"boxes": t.boxes.float().to(device), "labels": t.labels.long().to(device)} for t in targets]
        losses = model(images, wanted)
        return sum(losses.values(), torch.zeros((), device=device))
    truths = [
        t.semantic(int(im.shape[-2]), int(im.shape[-1])).to(device) for im, t in zip(images, targets, strict=True)
    ]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, image in enumerate(images):
        groups.setdefault(tuple(image.shape), []).append(i)
    total, pixels = torch.zeros((), device=device), 0
    for members in groups.values():
        logits = model(torch.stack([images[i] for i in members]))
        truth = torch.stack([truths[i] for i in members])
        weight = truth.numel()
        total = total + weight * (nn.functional.cross_entropy(logits, truth) + soft_dice_loss(logits, truth))
        pixels += weight
    return total / max(pixels, 1)


def soft_dice_loss(logits: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """1 - the soft Dice coefficient of the softmax and the one-hot truth, averaged over the object classes present
    in the truth or the prediction (the background's share of pixels would otherwise swamp it). Added to the
    cross-entropy, as nnU-Net does: the rare object pixels then weigh as much as the background from the first steps.
    Written here because neither torch nor torchvision has a Dice loss."""
    probs = logits.softmax(dim=1)[:, 1:]
    onehot = nn.functional.one_hot(truth, logits.shape[1]).permute(0, 3, 1, 2)[:, 1:].to(probs.dtype)
    dims = (0, 2, 3)
    inter = (probs * onehot).sum(dims)
    sizes = probs.sum(dims) + onehot.sum(dims)
    present = (onehot.sum(dims) > 0) | (probs.detach().amax(dim=dims) > 0.5)
    dice = (2 * inter + 1.0) / (sizes + 1.0)
    if not bool(present.any()):
        return logits.new_zeros(())
    return 1 - dice[present].mean()


def lr_at(step: int, total: int, peak: float, warmup: float) -> float:
    """Linear warm-up over the first `warmup` share of the steps, then a cosine to zero; a function of the step
    alone, so a resumed run needs no scheduler state."""
    if total <= 0:
        return peak
    frac = step / total
    if warmup > 0 and frac < warmup:
        return peak * (step + 1) / max(1.0, warmup * total)
    rest = (frac - warmup) / max(1e-9, 1 - warmup)
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, rest)))
