"""Steering: add a direction to a language model's activations at one (layer, site) while it answers, and show the
plain and the steered answers side by side.

The direction is an SAE feature's decoder row (what the feature writes into the site when it fires) or the
difference of the mean activations of two sets of prompts (e.g. texts about love minus texts about hate). It is
scaled to unit length and added at every token, prompt and answer alike, with `strength` in units of the prompt's
typical activation norm at that site (the median over its tokens), so one strength means about the same push at any
layer: 1 adds a vector as long as a typical activation there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from xaidash.models.language.generate import Generation, generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import Prompt
from xaidash.models.language.sae.store import load_sae
from xaidash.models.language.sites import check_layer, d_model, editing, reading, site_of
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run

MAX_STRENGTH = 100.0


@dataclass(frozen=True)
class Direction:
    """A unit vector (d_model,) to add at (layer, site), and where it came from in words."""

    vector: torch.Tensor
    layer: int
    site: str
    source: str


@dataclass(frozen=True)
class SteeringResult:
    """The plain and the steered answers to one prompt; `added_norm` is the length of the vector added per token."""

    direction: Direction
    strength: float
    added_norm: float
    plain: Generation
    steered: Generation


def _unit(v: torch.Tensor, what: str) -> torch.Tensor:
    v = v.detach().float().flatten()
    norm = float(v.norm())
    if not norm > 1e-8 or not torch.isfinite(v).all():
        raise ModelError(f"{what} is zero: there is no direction to steer along.")
    return v / norm


def feature_direction(run: Run, sae_id: str, feature: int) -> Direction:
    """SAE `sae_id`'s feature `feature`: its decoder row, at the SAE's own (layer, site)."""
    loaded = load_sae(run, sae_id)
    if isinstance(feature, bool) or not isinstance(feature, int) or not 0 <= feature < loaded.width:
        raise ModelError(f"Feature {feature!r} is out of range: SAE {sae_id} has features 0 to {loaded.width - 1}.")
    row = loaded.sae.W_dec[feature]
    return Direction(_unit(row, f"Feature {feature}'s decoder row"), loaded.layer, loaded.site, f"{sae_id} #{feature}")


def _mean_activation(lm: LanguageModel, layer: int, site: str, texts: Sequence[str]) -> torch.Tensor:
    """The mean over prompts of each prompt's mean activation over its tokens (every prompt counts the same)."""
    means = []
    with torch.no_grad(), reading(lm, layer, site) as seen:
        for text in texts:
            ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"][: lm.context]
            seen.clear()
            lm.logits(torch.tensor([ids]))
            means.append(seen[0][0].float().mean(dim=0))
    return torch.stack(means).mean(dim=0)


def mean_difference(
    lm: LanguageModel, layer: int, site: str, positive: Sequence[str], negative: Sequence[str]
) -> Direction:
    """The mean activation of the `positive` prompts minus that of the `negative` ones at (layer, site)."""
    check_layer(lm, layer)
    site_of(site)
    pos = [t for t in positive if t.strip()]
    neg = [t for t in negative if t.strip()]
    if not pos or not neg:
        raise ModelError("Give at least one prompt on each side (one per line) for a difference of means.")
    diff = _mean_activation(lm, layer, site, pos) - _mean_activation(lm, layer, site, neg)
    source = f"mean of {len(pos)} prompt(s) minus mean of {len(neg)}"
    return Direction(_unit(diff, "The difference of the two sets' mean activations"), layer, site, source)


def typical_norm(lm: LanguageModel, prompt: Prompt, layer: int, site: str) -> float:
    """The median activation norm over the prompt's tokens at (layer, site)."""
    with torch.no_grad(), reading(lm, layer, site) as seen:
        lm.logits(torch.tensor([prompt.ids]))
    return float(seen[0][0].float().norm(dim=-1).median())


def steer(
    lm: LanguageModel,
    prompt: Prompt,
    direction: Direction,
    strength: float,
    max_new_tokens: int = 24,
) -> SteeringResult:
    """Greedy answers to `prompt` without and with `strength` x (typical norm) x `direction` added at every token."""
    if not -MAX_STRENGTH <= float(strength) <= MAX_STRENGTH:
        raise ModelError(f"The strength must be between -{MAX_STRENGTH:g} and {MAX_STRENGTH:g}, not {strength}.")
    if direction.vector.numel() != d_model(lm):
        raise ModelError(
            f"The direction has {direction.vector.numel()} values but {lm.name}'s activations have {d_model(lm)}: "
            "it was made for another model."
        )
    plain = generate(lm, prompt, max_new_tokens=max_new_tokens)
    scale = float(strength) * typical_norm(lm, prompt, direction.layer, direction.site)
    added = direction.vector.to(lm.device) * scale

    def push(out: torch.Tensor) -> torch.Tensor:
        return out + added.to(out.dtype)

    with editing(lm, direction.layer, direction.site, push):
        steered = generate(lm, prompt, max_new_tokens=max_new_tokens)
    return SteeringResult(direction, float(strength), abs(scale), plain, steered)
