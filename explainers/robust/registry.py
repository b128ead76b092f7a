"""The attack registry: each attack declares its facts (id, label, modalities, parameters with bounds, whether it
can be aimed at a class, the library call behind it); the CLI and the Explain page list attacks from here, never by
name. An attack is one `register(AttackSpec(...))` in a module imported by this package (`attacks.py`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from xaidash.data.modalities import modality_of
from xaidash.data.specs import Registry, Spec
from xaidash.explainers.params import ExplainError, Param

# The budget is an L-infinity radius in the raw image's own units: a pixel value in [0, 1] before normalisation.
EPSILON = Param(
    "epsilon",
    "float",
    8 / 255,
    "largest change of any pixel value, in [0, 1] pixel units (8/255 ≈ 0.031)",
    min=0.0,
    max=1.0,
)
PIXEL_RANGE = (0.0, 1.0)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """The budget as a float in (0, 1]; ExplainError saying what is allowed for 0, a negative, > 1 or not a number."""
    try:
        eps = float(value)
    except (TypeError, ValueError):
        raise ExplainError(
            f"{name} must be a number in (0, 1] (pixel units, e.g. 0.03 ≈ 8/255), got {value!r}."
        ) from None
    if not math.isfinite(eps) or eps <= 0 or eps > 1:
        raise ExplainError(
            f"{name}={value}: the budget must be above 0 and at most 1, in [0, 1] pixel units "
            "(e.g. 0.03 ≈ 8/255 lets every pixel move by up to 8 grey levels); "
            + ("0 allows no change at all." if math.isfinite(eps) and eps == 0 else "pixels only span 0..1.")
        )
    return eps


@dataclass(frozen=True)
class AttackTask:
    """What an attack gets: `forward` maps raw images in [0, 1] (N, C, H, W) to logits (normalisation inside, so
    the budget is in pixel units); `x` the raw images on the device; `target` (N,) long: the class to move away
    from (untargeted) or towards (`targeted`); `epsilon` the L-infinity budget; `seed` for random starts; `mask`
    (shaped like `x`, 0 or 1): where the attack may change pixels (None: everywhere), e.g. one patch."""

    forward: Callable[[torch.Tensor], torch.Tensor]
    x: torch.Tensor
    target: torch.Tensor
    epsilon: float
    targeted: bool = False
    seed: int = 0
    mask: torch.Tensor | None = None


@dataclass(frozen=True)
class AttackSpec(Spec):
    """One attack. `run(task, params)` returns the perturbed images (N, C, H, W) within `task.epsilon` of
    `task.x` (L-infinity) and inside the pixel range; `params` are the attack's own (the budget is `EPSILON`,
    shared by all). `library`: the call it makes, named for the docs and the equivalence tests."""

    id: str
    label: str
    modalities: tuple[str, ...]
    run: Callable[[AttackTask, dict[str, Any]], torch.Tensor]
    library: str
    description: str = ""
    params: tuple[Param, ...] = field(default_factory=tuple)
    targeted: bool = True  # can be aimed at a chosen class (the counterfactual needs that)
    iterative: bool = False  # several gradient steps (what a counterfactual search prefers)

    names_params_by: ClassVar[str] = "label"  # refusals name the attack or projection as people know it


def _unknown(attack_id: Hashable, known: list[str]) -> str:
    return f"Unknown attack {attack_id!r}; choose one of {', '.join(s.id for s in ATTACKS) or 'none'}."


ATTACKS: Registry[AttackSpec] = Registry("attack", error=ExplainError, unknown=_unknown)


def register(spec: AttackSpec) -> AttackSpec:
    return ATTACKS.register(spec)


def list_attacks(modality: str | None = None) -> list[AttackSpec]:
    """Every registered attack (for `modality` only: those that apply to it), in registration order."""
    return ATTACKS.all(None if modality is None else lambda s: modality in s.modalities)


def get_attack(attack_id: str, modality: str | None = None) -> AttackSpec:
    """The attack `attack_id`; ExplainError naming the ones there are, or saying it does not apply to `modality`
    (text models: the counterfactual's word edits are their option)."""
    spec = ATTACKS.get(str(attack_id))
    if modality is not None and modality not in spec.modalities:
        raise ExplainError(
            f"{spec.label} applies to {'/'.join(spec.modalities)} models, not {modality}. {text_note(modality)}"
        )
    return spec


def text_note(modality: str = "text") -> str:
    """What models whose inputs cannot be perturbed within a pixel budget get instead of an attack: the one sentence
    the CLI and the page say (texts: word edits; a table's rows: changed columns)."""
    adapter = modality_of(modality)
    if adapter.tokenized:
        return (
            "Words are not continuous, so gradient attacks (FGSM, PGD) do not apply to text; "
            "use the counterfactual: the fewest word deletions or substitutions that change the prediction."
        )
    return (
        f"Gradient attacks (FGSM, PGD) move every value within one pixel budget, which means nothing for {adapter.label} "
        f"whose {adapter.units} have units of their own; use the counterfactual: the fewest changed {adapter.units} "
        "that change the prediction."
    )
