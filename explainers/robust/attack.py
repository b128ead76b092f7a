"""`attack()`: one registered attack on one image within an L-infinity budget in pixel units, with the prediction
and probabilities before and after, whether the answer flipped, and the perturbation's size.

The model reads normalised images; the attack runs on `pixel_forward`, the model with the normalisation inside,
so epsilon is a change of the raw pixel value (in [0, 1]) and the attacked image is clamped to that range."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.transforms import normalize
from xaidash.explainers.guard import evaluating
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.registry import (
    EPSILON,
    PIXEL_RANGE,
    AttackSpec,
    AttackTask,
    check_epsilon,
    get_attack,
    text_note,
)
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import synchronize


def pixel_forward(bundle: ModelBundle) -> Callable[[torch.Tensor], torch.Tensor]:
    """Logits of raw images in [0, 1]: the normalisation `bundle.prepare` applies, inside the differentiable path."""
    info = bundle.input_info

    def forward(x: torch.Tensor) -> torch.Tensor:
        return bundle.model(normalize(x, info)).float()

    return forward


def raw_image(bundle: ModelBundle, raw: Any) -> torch.Tensor:
    """One image (C, H, W) or (1, C, H, W) in [0, 1] as (1, C, H, W) float on the device; ExplainError for text or
    another shape."""
    if not adapter_of(bundle.modality).attackable:
        raise ExplainError(text_note(bundle.modality))
    x = torch.as_tensor(np.asarray(raw) if not isinstance(raw, torch.Tensor) else raw, dtype=torch.float32)
    x = x.unsqueeze(0) if x.dim() == 3 else x
    if x.dim() != 4 or len(x) != 1 or tuple(x.shape[1:]) != tuple(bundle.info.input_shape):
        raise ExplainError(
            f"Attack one image of shape {tuple(bundle.info.input_shape)} at a time, got {tuple(x.shape)}."
        )
    return x.clamp(*PIXEL_RANGE).to(bundle.device)


def check_gradients(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, target: int) -> None:
    """ExplainError when the model gives no usable gradient with respect to its input (a module that is not
    differentiable, detaches its input, or returns NaN): every attack here follows that gradient."""
    probe = x.detach().clone().requires_grad_(True)
    try:
        with torch.enable_grad():
            out = forward(probe)
            grad = torch.autograd.grad(out[:, target].sum(), probe, allow_unused=True)[0]
    except RuntimeError as err:
        raise ExplainError(
            f"This model gives no gradient with respect to its input ({str(err).splitlines()[0]}), so a gradient "
            "attack cannot run on it; a model with non-differentiable parts cannot be attacked this way."
        ) from None
    if grad is None or not torch.isfinite(grad).all():
        raise ExplainError(
            "This model's output does not depend differentiably on its input (no finite gradient), so a gradient "
            "attack cannot run on it."
        )


def run_attack(spec: AttackSpec, task: AttackTask, params: dict[str, Any]) -> torch.Tensor:
    """`spec.run` with the model's own failures said as one ExplainError."""
    try:
        with torch.enable_grad(), warnings.catch_warnings():
            # captum says each step's fresh input "did not already require gradients": expected, and it sets them.
            warnings.filterwarnings("ignore", message="Input Tensor .* did not already require gradients")
            out = spec.run(task, params)
    except RuntimeError as err:
        raise ExplainError(f"{spec.label} failed on this model: {str(err).splitlines()[0]}") from None
    return out.detach()


@dataclass(frozen=True)
class AttackResult:
    """One attack on one image. Images (C, H, W) in [0, 1]; `perturbation` = perturbed − original (pixel units);
    probabilities over the classes before and after; `target`: the class aimed at (None: away from the
    prediction); `linf` / `l2`: the perturbation's largest pixel change and Euclidean length, in pixel units."""

    attack: str
    label: str
    epsilon: float
    params: dict[str, Any]
    classes: tuple[str, ...]
    original: np.ndarray = field(repr=False)
    perturbed: np.ndarray = field(repr=False)
    probs_before: np.ndarray = field(repr=False)
    probs_after: np.ndarray = field(repr=False)
    target: int | None
    seconds: float
    device: str
    region: tuple[int, int, int, int] | None = None  # (top, left, height, width) the attack was confined to

    @property
    def perturbation(self) -> np.ndarray:
        return (self.perturbed - self.original).astype(np.float32)

    @property
    def pred_before(self) -> int:
        return int(np.argmax(self.probs_before))

    @property
    def pred_after(self) -> int:
        return int(np.argmax(self.probs_after))

    @property
    def flipped(self) -> bool:
        return self.pred_after != self.pred_before

    @property
    def reached(self) -> bool:
        """A targeted attack ended on its class (an untargeted one: it flipped)."""
        return self.flipped if self.target is None else self.pred_after == self.target

    @property
    def linf(self) -> float:
        return float(np.abs(self.perturbation).max())

    @property
    def l2(self) -> float:
        return float(np.linalg.norm(self.perturbation.ravel()))

    def summary(self) -> str:
        """'PGD (ε = 8/255 = 0.0314): circle (97.1%) → square (88.0%), flipped; L∞ 0.0314, L2 1.52, 0.21 s'."""
        c = self.classes
        b, a = self.pred_before, self.pred_after
        verdict = "flipped" if self.flipped else "not flipped"
        if self.target is not None:
            verdict += f", target {c[self.target]} {'reached' if self.reached else 'not reached'}"
        return (
            f"{self.label} (ε = {self.epsilon * 255:.1f}/255 = {self.epsilon:.4f}): {c[b]} ({self.probs_before[b]:.1%}) → "
            f"{c[a]} ({self.probs_after[a]:.1%}), {verdict}; L∞ {self.linf:.4f}, L2 {self.l2:.3f}, {self.seconds:.2f} s"
        )

    def to_json(self) -> dict[str, Any]:
        c = self.classes
        return {
            "attack": self.attack,
            "label": self.label,
            "epsilon": self.epsilon,
            "epsilon_255": self.epsilon * 255,
            "params": self.params,
            "target": None if self.target is None else {"class": self.target, "name": c[self.target]},
            "before": {
                "class": self.pred_before,
                "name": c[self.pred_before],
                "probability": float(self.probs_before[self.pred_before]),
            },
            "after": {
                "class": self.pred_after,
                "name": c[self.pred_after],
                "probability": float(self.probs_after[self.pred_after]),
            },
            "probabilities_before": [float(v) for v in self.probs_before],
            "probabilities_after": [float(v) for v in self.probs_after],
            "flipped": self.flipped,
            "reached": self.reached,
            "linf": self.linf,
            "l2": self.l2,
            "seconds": self.seconds,
            "device": self.device,
            "units": "pixel values in [0, 1] before normalisation",
            "region": None
            if self.region is None
            else dict(zip(("top", "left", "height", "width"), self.region, strict=True)),
        }


def _class(bundle: ModelBundle, target: int | None) -> int | None:
    if target is None:
        return None
    k = int(target)
    if not 0 <= k < bundle.info.num_classes:
        raise ExplainError(f"Target class {k} is out of range: the model has classes 0..{bundle.info.num_classes - 1}.")
    return k


def attack(
    bundle: ModelBundle,
    raw: Any,
    target: int | None = None,
    attack_id: str = "pgd",
    params: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    region: tuple[int, int, int, int] | None = None,
) -> AttackResult:
    """Attack one image (C, H, W) in [0, 1]: away from its predicted class (`target` None), or towards `target`.
    `params`: `epsilon` (the L-infinity budget in pixel units, default 8/255) and the attack's own parameters.
    `region` (top, left, height, width): only the pixels inside it may change (None: every pixel)."""
    given = dict(params or {})
    eps = check_epsilon(given.pop("epsilon", EPSILON.default))
    spec = get_attack(attack_id, bundle.modality)
    resolved = spec.resolve_params(given)
    k = _class(bundle, target)
    if k is not None and not spec.targeted:
        raise ExplainError(f"{spec.label} cannot be aimed at a class; leave the target out.")
    x = raw_image(bundle, raw)
    forward = pixel_forward(bundle)
    with evaluating(bundle.model):
        with torch.no_grad():
            before = torch.softmax(forward(x), 1)[0]
        pred = int(before.argmax())
        if k is not None and k == pred:
            raise ExplainError(
                f"The model already predicts {bundle.info.classes[k]}: pick another class to aim the attack at."
            )
        check_gradients(forward, x, pred)
        label = torch.tensor([pred if k is None else k], device=x.device)
        synchronize(x.device)
        start = time.perf_counter()
        mask = None if region is None else region_mask(x, region)
        task = AttackTask(forward, x, label, eps, targeted=k is not None, seed=seed, mask=mask)
        adv = run_attack(spec, task, resolved)
        synchronize(x.device)
        seconds = time.perf_counter() - start
        with torch.no_grad():
            after = torch.softmax(forward(adv), 1)[0]
    return AttackResult(
        attack=spec.id,
        label=spec.label,
        epsilon=eps,
        params={"epsilon": eps, **resolved},
        classes=tuple(str(c) for c in bundle.info.classes),
        original=x[0].cpu().numpy(),
        perturbed=adv[0].cpu().numpy(),
        probs_before=before.cpu().numpy(),
        probs_after=after.cpu().numpy(),
        target=k,
        seconds=seconds,
        device=str(x.device),
        region=region,
    )


def region_mask(x: torch.Tensor, region: tuple[int, int, int, int]) -> torch.Tensor:
    """1 inside `region` (top, left, height, width) of images `x` (N, C, H, W), 0 elsewhere; ExplainError for a
    region that does not lie inside the image."""
    top, left, h, w = (int(v) for v in region)
    height, width = x.shape[-2:]
    if h < 1 or w < 1 or top < 0 or left < 0 or top + h > height or left + w > width:
        raise ExplainError(
            f"Region {region} (top, left, height, width) does not lie inside the {height}×{width} image."
        )
    mask = torch.zeros_like(x)
    mask[..., top : top + h, left : left + w] = 1.0
    return mask


def class_index(bundle: ModelBundle, name: str | int, what: str = "--to") -> int:
    """A class given by index or name (as the CLI and the page take it); ExplainError listing the classes."""
    classes: Sequence[str] = list(bundle.info.classes)
    if isinstance(name, str) and name in classes:
        return classes.index(name)
    try:
        k = int(name)
    except (TypeError, ValueError):
        raise ExplainError(
            f"{what} {name!r}: give a class index 0..{len(classes) - 1} or one of {', '.join(classes)}."
        ) from None
    if not 0 <= k < len(classes):
        raise ExplainError(f"{what} {k} is out of range: the model has classes 0..{len(classes) - 1}.")
    return k
