"""Registry of explanation methods.

A method is one module in `explainers/methods/` that calls `register(MethodSpec(...))`.
Its `compute(ctx, params)` gets the prepared inputs and targets and returns a
`MethodOutput`; `explainers.api.explain` does the rest (validation, timing, resizing to the
input, merging word pieces) so every method stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from xaidash.explainers.params import ExplainError, Param
from xaidash.models.bundle import ModelBundle


@dataclass
class MethodContext:
    """What a method computes on.

    x: prepared model input on the device ((N, C, H, W) normalised images or (N, L) token ids).
    targets: (N,) long on the device. raw: the inputs as given (images in [0, 1] or strings).
    batch_size: how many samples (perturbations, IG steps, noisy copies) go through the
    model in one forward pass.
    """

    bundle: ModelBundle
    x: torch.Tensor
    targets: torch.Tensor
    raw: Any
    batch_size: int = 256
    background: torch.Tensor | None = None  # prepared samples of the training split (SHAP, baselines)
    seed: int = 0

    @property
    def model(self) -> torch.nn.Module:
        return self.bundle.model


@dataclass
class MethodOutput:
    """Per-input attributions: images (N, C, H, W), (N, H, W) or a coarser (N, h, w) map that is upsampled;
    text (N, L) per token or (N, L, D) summed over D. diagnostics: name -> one value per input."""

    attributions: torch.Tensor | Any
    diagnostics: dict[str, Sequence[float]] = field(default_factory=dict)
    # Text methods that score words themselves (lime_text) return words here and per-word scores above.
    words: list[list[str]] | None = None


Applies = Callable[[ModelBundle], "str | None"]


@dataclass(frozen=True)
class MethodSpec:
    id: str
    label: str
    modalities: tuple[str, ...]
    compute: Callable[[MethodContext, dict[str, Any]], MethodOutput]
    params: tuple[Param, ...] = ()
    description: str = ""
    applies: Applies = field(default=lambda bundle: None)  # None when usable on the model, else why not
    signed: bool = True  # False for methods whose maps are non-negative by construction (Grad-CAM, saliency, attention)
    family: str = "gradient"  # gradient | cam | perturbation | shap | attention

    def check(self, bundle: ModelBundle) -> None:
        if bundle.modality not in self.modalities:
            raise ExplainError(f"{self.label} works on {'/'.join(self.modalities)} models, not {bundle.modality}.")
        reason = self.applies(bundle)
        if reason:
            raise ExplainError(f"{self.label} does not apply to {bundle.spec.name}: {reason}")

    def resolve_params(self, bundle: ModelBundle, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in and every value checked; unknown names are refused."""
        known = {p.name: p for p in self.params}
        unknown = set(given) - set(known)
        if unknown:
            raise ExplainError(
                f"{self.id} has no parameter {', '.join(sorted(unknown))}; it takes: {', '.join(known) or 'none'}."
            )
        out = {}
        for name, p in known.items():
            value = given.get(name, p.default)
            if p.kind == "layer":
                value = value or bundle.spec.last_conv
                layers = layer_choices(bundle)
                if value not in layers:
                    raise ExplainError(
                        f"Layer {value!r} is not a conv layer of {bundle.spec.name}; pick one of {', '.join(layers)}."
                    )
            else:
                value = p.coerce(value)
            out[name] = value
        return out

    def supports(self, bundle: ModelBundle) -> bool:
        try:
            self.check(bundle)
            return True
        except ExplainError:
            return False


def layer_choices(bundle: ModelBundle) -> list[str]:
    return list(bundle.spec.conv_layers)


# One id may have an image and a text implementation (e.g. 'ig'): keyed by (id, modality).
_REGISTRY: dict[tuple[str, str], MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    for modality in spec.modalities:
        if (spec.id, modality) in _REGISTRY:
            raise ValueError(f"method {spec.id!r} registered twice for {modality}")
        _REGISTRY[(spec.id, modality)] = spec
    return spec


def get_method(method_id: str, modality: str | None = None) -> MethodSpec:
    """The method registered under this id (for this modality when given)."""
    found = [s for (i, m), s in _REGISTRY.items() if i == method_id and (modality is None or m == modality)]
    if not found:
        known = sorted({i for (i, m) in _REGISTRY if modality is None or m == modality})
        where = f" for {modality} models" if modality else ""
        raise ExplainError(f"Unknown method {method_id!r}{where}. Known: {', '.join(known)}.")
    return found[0]


def list_methods(modality: str | None = None) -> list[MethodSpec]:
    """Registered methods (each spec once), in registration order."""
    out: list[MethodSpec] = []
    for (_, m), s in _REGISTRY.items():
        if (modality is None or m == modality) and s not in out:
            out.append(s)
    return out


def methods_for(bundle: ModelBundle) -> list[MethodSpec]:
    """Methods usable on this model, in registration order."""
    return [m for m in list_methods(bundle.modality) if m.supports(bundle)]
