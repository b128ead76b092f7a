"""Model zoo registry: each model is one module that registers a `ModelSpec`.

A spec states the modality and inputs a model accepts and names the layers explainers
care about, as dotted module paths (`model.get_submodule(path)`).

Conventions every zoo model follows:
- image models take normalised float images (N, C, H, W); text models take token ids
  (N, L) with padding id `pad_id` and build their own attention mask from it;
- `forward` returns logits (N, classes);
- models with attention also implement `forward_with_attention(x) -> (logits, [A_l])`,
  each A_l of shape (N, heads, T, T), rows summing to one;
- every nonlinearity, pooling and dropout is its own module instance, never reused, never
  in-place, so captum's DeepLift and shap's DeepExplainer work.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from xaidash.data.errors import XaidashError
from xaidash.data.registry import DatasetInfo
from xaidash.data.specs import Registry, Spec
from xaidash.models.training.recipes import Recipe, recipe_for

# The id of the model's input adapter in xaidash.data.modalities (image, text, ...): a new adapter adds no literal here.
Modality = str


class ModelError(XaidashError):
    """A model cannot be built, loaded or applied; the message says why and what to do."""


@dataclass(frozen=True)
class FeatureLayout:
    """How one layer's output lies on the image when it is not (N, C, h, w) feature maps.

    - "nhwc": (N, h, w, C), channels last (Swin stages in timm and torchvision);
    - "ncl": (N, C, L), a 1-D convolution's feature maps over time (series models), read as (N, C, 1, L);
    - "tokens": (N, T, C), `prefix` leading tokens (class, distillation, register tokens) then the
      patches row by row over a `grid` of (h, w) patches (vision transformers).
    CAM methods read such a layer through `to_maps`, so Grad-CAM works on vision transformers without
    the reshape function pytorch-grad-cam users write by hand.
    """

    kind: Literal["nchw", "nhwc", "ncl", "tokens"] = "nchw"
    prefix: int = 0
    grid: tuple[int, int] = (0, 0)

    def to_maps(self, t: torch.Tensor) -> torch.Tensor:
        """The layer's output as (N, C, h, w) feature maps."""
        if self.kind == "nhwc":
            return t.permute(0, 3, 1, 2)
        if self.kind == "ncl":
            return t.unsqueeze(2)
        if self.kind == "tokens":
            h, w = self.grid
            if t.dim() != 3 or t.shape[1] != self.prefix + h * w:
                raise ModelError(
                    f"expected (N, {self.prefix + h * w}, C) tokens ({self.prefix} + a {h}x{w} patch grid); "
                    f"got {tuple(t.shape)}"
                )
            return t[:, self.prefix :].transpose(1, 2).reshape(t.shape[0], t.shape[2], h, w)
        return t


@dataclass(frozen=True)
class ModelOption:
    """A build option a user may set (`--model-option KEY=VALUE`): its type and range, checked before a run folder is
    written. `maximum_open`: the maximum itself is refused (a dropout of 1 drops everything)."""

    kind: Literal["int", "float", "bool"]
    minimum: float | None = None
    maximum: float | None = None
    maximum_open: bool = False
    none_ok: bool = False  # null means "the model's own choice" (vit_tiny's patch_size)
    help: str = ""

    def problem(self, name: str, value: Any) -> str | None:
        """Why `value` is refused for option `name`, or None when it is fine."""
        if value is None and self.none_ok:
            return None
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{name} must be true or false, not {value!r}"
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (self.kind == "int" and not isinstance(value, int)):
            return f"{name} must be {'a whole number' if self.kind == 'int' else 'a number'}, not {value!r}"
        if not math.isfinite(value):
            return f"{name} must be a finite number, not {value!r}"
        low = self.minimum is not None and value < self.minimum
        high = self.maximum is not None and (value >= self.maximum if self.maximum_open else value > self.maximum)
        if low or high:
            return f"{name} {value} is out of range: it must be in {self.range_text()}"
        return None

    def range_text(self) -> str:
        low = "-∞" if self.minimum is None else f"{self.minimum:g}"
        high = "∞" if self.maximum is None else f"{self.maximum:g}"
        return f"[{low}, {high}{')' if self.maximum_open or self.maximum is None else ']'}"


# The options most zoo models share.
DROPOUT = ModelOption("float", 0.0, 1.0, maximum_open=True, help="dropout probability")


@dataclass(frozen=True)
class ModelSpec(Spec):
    name: str
    modality: Modality
    build: Callable[..., nn.Module]  # build(info: DatasetInfo, **options) -> nn.Module
    description: str = ""
    # Returns None when the model fits the data set, else a one-line reason shown to users.
    fits: Callable[[DatasetInfo], str | None] = field(default=lambda info: None)
    input_note: str = ""  # e.g. "any 3-channel image >= 32x32"
    last_conv: str | None = None  # module whose output is the last conv feature map (Grad-CAM default)
    conv_layers: tuple[str, ...] = ()  # conv feature maps a user may pick for Grad-CAM, input to output
    embedding: str | None = None  # text: token embedding layer (layer IG / saliency)
    attention: tuple[str, ...] = ()  # modules whose attention weights are readable, one per layer
    gap_classifier: str | None = None  # linear layer right after global average pooling (CAM)
    recurrent: str | None = None  # series: the nn.GRU / nn.LSTM whose hidden states and gates the inside view reads
    pretrained: bool = False  # carries weights of its own (minilm, resnet18)
    deeplift_ok: bool = True  # DeepLift / DeepExplainer apply (False for third-party graphs)
    # Why backpropagation cannot reach the model's input ("" when it can): methods of the gradient and CAM families
    # are then refused with this reason (a scikit-learn pipeline imported for side-by-side comparison).
    no_gradients: str = ""
    tokenizer: Callable[[], Any] | None = None  # pretrained tokenizer factory (text models not trained here)
    # A caveat to show before training, e.g. resnet18 starting from random weights offline; None when all is well.
    note: Callable[[], str | None] = field(default=lambda: None)
    # Pretrained image models read inputs normalised their own way (ImageNet's); empty: the data set's.
    input_mean: tuple[float, ...] = ()
    input_std: tuple[float, ...] = ()
    # Tested training settings per kind of data (see models/training/recipes.py); the generic one applies elsewhere.
    recipes: Mapping[str, Recipe] = field(default_factory=dict)
    # Layers among conv_layers whose output is not (N, C, h, w): how CAM methods read them as feature maps.
    feature_layouts: Mapping[str, FeatureLayout] = field(default_factory=dict)
    # The build options a user may set, with their ranges (check_options); any other key is refused.
    options: Mapping[str, ModelOption] = field(default_factory=dict)

    def feature_layout(self, path: str) -> FeatureLayout:
        """How CAM methods read `path`'s output (plain (N, C, h, w) feature maps unless declared)."""
        return self.feature_layouts.get(path, FeatureLayout())

    def recipe(self, info: DatasetInfo) -> tuple[str, Recipe]:
        """(key, recipe) this model trains with on this data: the most specific declared, else the generic one."""
        return recipe_for(self.recipes, info)

    def options_text(self) -> str:
        """The options and their ranges in words: 'dropout [0, 1), patch_size [1, 4096]' ('' when none)."""
        return ", ".join(f"{k} {o.range_text() if o.kind != 'bool' else 'true/false'}" for k, o in self.options.items())

    def check_options(self, options: Mapping[str, Any]) -> None:
        """ModelError naming every option this model does not take or whose value is out of its declared range."""
        problems = []
        for key, value in options.items():
            declared = self.options.get(key)
            if declared is None:
                takes = self.options_text()
                problems.append(
                    f"{self.name} has no option {key!r} ({'it takes: ' + takes if takes else 'it takes none'})"
                )
            elif (problem := declared.problem(key, value)) is not None:
                problems.append(problem)
        if problems:
            raise ModelError("Invalid model option: " + "; ".join(problems) + ".")

    def check_fits(self, info: DatasetInfo) -> None:
        if info.modality != self.modality:
            raise ModelError(f"{self.name} is a {self.modality} model; dataset {info.name} is {info.modality}.")
        reason = self.fits(info)
        if reason:
            raise ModelError(f"{self.name} does not fit dataset {info.name}: {reason}")


def _unknown(name: Hashable, known: list[str]) -> str:
    return f"Unknown model {name!r}. Known: {', '.join(s.name for s in MODELS)}."


MODELS: Registry[ModelSpec] = Registry("model", keys=lambda s: (s.name,), error=ModelError, unknown=_unknown)


def register(spec: ModelSpec) -> ModelSpec:
    return MODELS.register(spec)


def list_models() -> list[ModelSpec]:
    return MODELS.all()


def get_spec(name: str) -> ModelSpec:
    return MODELS.get(name)


def models_for(info: DatasetInfo) -> list[ModelSpec]:
    """The models that can be trained on this data set."""
    return MODELS.all(lambda s: s.modality == info.modality and not s.fits(info))


def build_model(name: str, info: DatasetInfo, **options: Any) -> nn.Module:
    """Build a fresh model for a data set, after checking that it fits."""
    spec = get_spec(name)
    spec.check_fits(info)
    return spec.build(info, **options)


def recommended_model(info: DatasetInfo) -> ModelSpec | None:
    """The model to preselect for a data set: the fitting one whose recipe for it is marked recommended, else
    the first fitting model with a measured recipe for it, else the first fitting model (None when none fits)."""
    fitting = models_for(info)
    for spec in fitting:
        if spec.recipe(info)[1].recommended:
            return spec
    tested = [s for s in fitting if s.recipe(info)[0] != "generic" and s.recipe(info)[1].expected_acc is not None]
    candidates = tested or fitting
    return candidates[0] if candidates else None
