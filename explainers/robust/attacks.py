"""FGSM and PGD, each through captum.robust's own class (no attack is rewritten here), on the pixel forward of
`attack.pixel_forward` so the budget reads in [0, 1] pixel units and captum's bounds clamp to that range."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from captum.robust import FGSM, PGD

from xaidash.explainers.params import Param
from xaidash.explainers.robust.registry import PIXEL_RANGE, AttackSpec, AttackTask, register


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-input loss for captum (its default, -log(output), expects probabilities; the forward gives logits)."""
    return F.cross_entropy(logits.float(), target, reduction="none")


def _fgsm(task: AttackTask, params: dict[str, Any]) -> torch.Tensor:
    lo, hi = PIXEL_RANGE
    attack = FGSM(task.forward, loss_func=cross_entropy, lower_bound=lo, upper_bound=hi)
    return attack.perturb(task.x, task.epsilon, task.target, targeted=task.targeted, mask=task.mask)


def _pgd(task: AttackTask, params: dict[str, Any]) -> torch.Tensor:
    lo, hi = PIXEL_RANGE
    attack = PGD(task.forward, loss_func=cross_entropy, lower_bound=lo, upper_bound=hi)
    step = float(params["step_fraction"]) * task.epsilon
    with torch.random.fork_rng(devices=[task.x.device] if task.x.device.type == "cuda" else []):
        torch.manual_seed(task.seed)  # the random start, when asked, comes from the seed alone
        return attack.perturb(
            task.x,
            radius=task.epsilon,
            step_size=step,
            step_num=int(params["steps"]),
            target=task.target,
            targeted=task.targeted,
            random_start=bool(params["random_start"]),
            norm="Linf",
            mask=task.mask,
        )


register(
    AttackSpec(
        id="fgsm",
        label="FGSM",
        modalities=("image",),
        run=_fgsm,
        library="captum.robust.FGSM(forward, loss_func=cross_entropy, lower_bound=0, upper_bound=1).perturb",
        description="one step of size epsilon along the sign of the loss gradient (Goodfellow et al., 2015)",
    )
)

register(
    AttackSpec(
        id="pgd",
        label="PGD",
        modalities=("image",),
        run=_pgd,
        library="captum.robust.PGD(forward, loss_func=cross_entropy, lower_bound=0, upper_bound=1).perturb",
        description="FGSM steps projected back into the epsilon ball after each one (Madry et al., 2018)",
        params=(
            Param("steps", "int", 10, "gradient steps", min=1, max=500),
            Param("step_fraction", "float", 0.25, "each step's size as a fraction of epsilon", min=0.01, max=1.0),
            Param("random_start", "bool", False, "start from a random point in the epsilon ball (seeded)"),
        ),
        iterative=True,
    )
)
