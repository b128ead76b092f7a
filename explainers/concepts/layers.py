"""Which layers TCAV may read: the model spec's conv/block layers (input to output), the last one by default."""

from __future__ import annotations

from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


def layer_choices(bundle: ModelBundle) -> tuple[str, ...]:
    """The layers offered: the spec's conv_layers, else its attention modules or embedding (text models)."""
    spec = bundle.spec
    if spec.conv_layers:
        return spec.conv_layers
    if spec.attention:
        return spec.attention
    return (spec.embedding,) if spec.embedding else ()


def default_layer(bundle: ModelBundle) -> str | None:
    """The last conv block, or the one before it when the last feeds a linear head through global average
    pooling (`gap_classifier`): there the class logit's gradient is the same for every input (the head's weights
    over the map's area), so every input agrees and each TCAV score is exactly 0 or 1."""
    choices = list(layer_choices(bundle))
    last = bundle.spec.last_conv if bundle.spec.last_conv in choices else (choices[-1] if choices else None)
    if last is not None and bundle.spec.gap_classifier and choices.index(last) > 0:
        return choices[choices.index(last) - 1]
    return last


def check_layers(bundle: ModelBundle, layers: list[str] | None) -> list[str]:
    """The layers to test (the default when none is given); an ExplainError naming a layer the model lacks."""
    choices = layer_choices(bundle)
    if not layers:
        layer = default_layer(bundle)
        if layer is None:
            raise ExplainError(
                f"{bundle.spec.name} declares no conv or block layers for TCAV; name one with --layers "
                "(a module path of the model, as the Model page lists them)."
            )
        return [layer]
    names = dict(bundle.model.named_modules())
    missing = [layer for layer in layers if layer not in names or layer == ""]
    if missing:
        offered = ", ".join(choices) if choices else "none declared"
        raise ExplainError(f"{bundle.spec.name} has no layer {', '.join(map(repr, missing))}; its layers: {offered}.")
    return list(dict.fromkeys(layers))
