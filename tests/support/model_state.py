"""A snapshot of everything an explanation could leave changed on a model, for before/after comparisons."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.modules.module as torch_module


def model_state(model: torch.nn.Module) -> dict[str, Any]:
    """Hooks (per module and global), the attributes each module holds, train/eval flags, which
    parameters require grad, and torch's grad mode. Parameter values are compared separately."""
    modules = list(model.named_modules())
    global_hooks = (
        torch_module._global_forward_hooks,
        torch_module._global_forward_pre_hooks,
        torch_module._global_backward_hooks,
        torch_module._global_backward_pre_hooks,
    )
    return {
        "hooks": {
            name: tuple(
                dict(h) for h in (m._forward_hooks, m._forward_pre_hooks, m._backward_hooks, m._backward_pre_hooks)
            )
            for name, m in modules
        },
        "global_hooks": [len(h) for h in global_hooks],
        "attributes": {name: sorted(m.__dict__) for name, m in modules},
        "training": {name: m.training for name, m in modules},
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grad_enabled": torch.is_grad_enabled(),
    }
