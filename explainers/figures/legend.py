"""How to read a method's map, from its declared facts alone: units, the group of maps in the same units (which
may share a colour scale), and what red, blue and bright mean, in the words of the map's modality adapter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from xaidash.explainers.modalities import adapter_of

if TYPE_CHECKING:
    from xaidash.data.registry import RegressionTarget
    from xaidash.explainers.registry import Completeness


@dataclass(frozen=True)
class MapLegend:
    """How to read one method's map, derived from its spec.

    units: what one value is (e.g. 'logit contribution per pixel'); group: maps with equal groups are
    in the same units and may share a colour scale; meaning: one line on red, blue and bright."""

    units: str
    group: str
    signed: bool
    meaning: str

    def to_json(self) -> dict[str, Any]:
        return {"signed": self.signed, "units": self.units, "meaning": self.meaning, "group": self.group}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MapLegend:
        return cls(str(d["units"]), str(d["group"]), bool(d["signed"]), str(d["meaning"]))


class LegendFacts(Protocol):
    """The declared facts of a method that its legend reads: a `MethodSpec` (images, text classifiers) or a
    `PromptMethodSpec` (explainers/language: prompts of a generative model)."""

    @property
    def id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def output(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def signed(self) -> bool: ...
    @property
    def completeness(self) -> Completeness | None: ...


# How an output is named in legends: 'log_probability' (a generated token's, explainers/language) reads
# 'log-probability'.
OUTPUT_WORDS = {"log_probability": "log-probability"}


def _regression_legend(legend: MapLegend, out: str, target: RegressionTarget) -> MapLegend:
    """A classifier's legend in the words of a number to predict: its output is the predicted value itself (the
    model ends in the target's units), so 'the target's logit' reads 'the predicted disease progression'."""
    name = f"predicted {target.name}" + (f" ({target.unit})" if target.unit else "")

    def say(text: str) -> str:
        text = text.replace(f"{out} contribution per", f"contribution to the {name} per")
        text = text.replace(f"the target's {out}", f"the {name}").replace(f"Δ {out}", f"Δ {name}")
        return text.replace(f"{out} relevance", f"relevance to the {name}").replace(f"∂ {out}", f"∂ {name}")

    return MapLegend(say(legend.units), legend.group, legend.signed, say(legend.meaning))


def _classless_legend(spec: LegendFacts, region: str, target: str) -> MapLegend:
    """The legend of a map that explains no one class: a layer's dominant activations (Eigen-CAM) or a mask of what
    keeps the model's own prediction (PGExplainer)."""
    if spec.output == "activations":
        return MapLegend(
            "projection on the activations' first principal component (relative units)",
            f"{spec.family}|{spec.id}|activations",
            spec.signed,
            "bright = the layer's dominant activation pattern is strong here; the same for every class",
        )
    return MapLegend(
        f"mask weight per {region} (0-1, kept to preserve the model's prediction)",
        f"{spec.family}|{spec.id}|prediction",
        spec.signed,
        f"bright = the model's prediction needs this {region}; the same for every {target}",
    )


def map_legend(
    spec: LegendFacts, modality: str = "image", unit: str | None = None, target: RegressionTarget | None = None
) -> MapLegend:
    """Units, scale group and colour meaning of a method's maps, from its declared facts only
    (signed, family, output, completeness), never from its id.

    Maps share units when their values add up to the same quantity per the same unit (methods that
    declare completeness for one output and unit, e.g. IG, DeepLift and GradientSHAP: logit per pixel),
    or when both are attention weights; any other method's map is in units of its own. `unit`: what one
    value scores when the caller chose it (a prompt's 'token' or 'word'); by default the modality adapter's unit
    (a pixel, a word), and the adapter's words for what a perturbation hides, what a gradient is taken with respect
    to and what a map explains. `target`: the model predicts this number (its one output, in its units): the
    legend names it ('contribution to the predicted disease progression per column'), never a logit."""
    words = adapter_of(modality)
    out = OUTPUT_WORDS.get(spec.output, spec.output)
    if target is not None and spec.output in ("logit", "probability"):
        return _regression_legend(map_legend(spec, modality, unit), out, target)
    per_given = unit  # a prompt's features are the tokens or words the user chose: the legend says which
    unit = unit or words.unit
    c = spec.completeness
    if spec.output == "attention":
        return MapLegend(
            "attention weight (share of attention, 0-1)",
            "attention",
            spec.signed,
            f"bright = attended to more; read from the model, the same for every target {words.target}",
        )
    if spec.output in ("activations", "prediction"):
        return _classless_legend(spec, words.region or unit, words.target)
    if c is not None:
        per = per_given or c.unit
        units = f"{out} contribution per {per}"
        group = f"{out}|{per}|sum"
        meaning = (
            f"red = raises the target's {out}, blue = lowers it, white = no effect; "
            f"the values add up to {c.total} (f: the target's {out})"
        )
    elif spec.family == "mask":  # GNNExplainer: a soft mask fitted to keep the target's output, not a change of it
        region = words.region or unit
        units = f"mask weight per {region} (0-1, fitted to keep the target's {out})"
        group = f"{spec.family}|{spec.id}|{out}"
        meaning = f"bright = the target's {out} needs this {region}; dark = it can be masked out"
    elif spec.family == "perturbation":
        region = words.region or unit
        units = f"Δ {out} per {region}"
        group = f"{spec.family}|{spec.id}|{out}"
        meaning = f"red = the {region} raises the target's {out} (hiding it lowers it), blue = it lowers it"
    elif spec.family == "cam":
        units = f"relevance from weighted activations ({out}, relative units)"
        group = f"{spec.family}|{spec.id}|{out}"
        meaning = (
            f"red = features here raise the target's {out}, blue = lower it"
            if spec.signed
            else f"bright = features here raise the target's {out} most; dark = no positive evidence"
        )
    elif spec.family == "gradient" and not spec.signed:
        units = f"|∂ {out} / ∂ {words.gradient_unit}|"
        group = f"{spec.family}|{spec.id}|{out}"
        meaning = f"bright = the target's {out} changes most when this {unit} changes (either way); dark = insensitive"
    else:
        units = f"{out} relevance ({spec.family}, relative units)"
        group = f"{spec.family}|{spec.id}|{out}"
        meaning = (
            f"red = raises the target's {out}, blue = lowers it (a local estimate)"
            if spec.signed
            else f"bright = more relevant to the target's {out}"
        )
    if not spec.signed and "red" in meaning:  # an unsigned map is never read in red and blue
        meaning = f"bright = more relevant to the target's {out}; dark = not relevant"
    return MapLegend(units, group, spec.signed, meaning)
