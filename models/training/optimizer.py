"""The optimizer and learning-rate schedule a run's settings name."""

from __future__ import annotations

import torch
from torch import nn

from xaidash.models.training.recipes import TrainSettings


def make_optimizer(
    s: TrainSettings, momentum: float, params: list[nn.Parameter], device: torch.device
) -> torch.optim.Optimizer:
    """The optimizer `s` names (SGD with Nesterov momentum, Adam or AdamW) over `params`."""
    # On a GPU the fused kernels update every parameter in a couple of launches and keep the step count on the
    # device (the default foreach path launches a few kernels per parameter group and reads the step on the host).
    fused = True if device.type == "cuda" and all(p.is_cuda for p in params) else None
    if s.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=s.lr, momentum=momentum, weight_decay=s.weight_decay, nesterov=momentum > 0, fused=fused
        )
    if s.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay, fused=fused)
    return torch.optim.Adam(params, lr=s.lr, weight_decay=s.weight_decay, fused=fused)


def make_schedule(
    s: TrainSettings, opt: torch.optim.Optimizer, total_steps: int
) -> torch.optim.lr_scheduler.LRScheduler:
    """The learning-rate schedule `s` names (one-cycle, cosine, or constant) over `total_steps` steps."""
    lr = s.lr
    if s.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, total_steps))
    if s.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total_steps), eta_min=lr * 0.01)
    return torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)


def lr_at(s: TrainSettings, total_steps: int, step: int) -> float:
    """The learning rate of `s`'s schedule planned over `total_steps` steps, after `step` of them: where a resumed
    or extended run goes on (what the Train page tells before it resumes one)."""
    import warnings

    params = [nn.Parameter(torch.zeros(1))]
    optimizer = make_optimizer(s, 0.9, params, torch.device("cpu"))
    schedule = make_schedule(s, optimizer, total_steps)
    with warnings.catch_warnings():  # stepping the schedule alone, no optimizer step: the point is its value
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(min(step, total_steps)):
            schedule.step()
    return float(optimizer.param_groups[0]["lr"])
