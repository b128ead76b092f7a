"""Registry of explanation methods.

A method is one module in `explainers/methods/` that calls `register(MethodSpec(...))`.
Its `compute(ctx, params)` gets the prepared inputs and targets and returns a
`MethodOutput`; `explainers.api.explain` does the rest (validation, timing, resizing to the
input, merging word pieces) so every method stays small.

Every fact other code needs about a method lives on its spec, declared where it registers:
which model output it explains, whether it needs background samples, what its attributions
add up to, and how many model passes one call makes. Nothing else decides these by id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from xaidash.data.modalities import modality_of
from xaidash.data.specs import LayerChoices, Registry, Spec
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
    diagnostics: Mapping[str, Sequence[float]] = field(default_factory=dict)
    # Text methods that score words themselves (lime_text) return words here and per-word scores above.
    words: list[list[str]] | None = None
    # Superpixel methods: the (N, H, W) labels their per-superpixel values were painted over.
    segments: Any = None


Applies = Callable[[ModelBundle], "str | None"]
# What a map explains: the target's logit, its softmax probability, or no output at all, the same whatever the
# target: attention weights read from the model, or a layer's own activations (Eigen-CAM's principal component).
# "prediction": a mask learnt to keep the model's own prediction (PGExplainer's), whatever target is asked.
Output = Literal["logit", "probability", "attention", "activations", "prediction"]
NO_OUTPUT: tuple[str, ...] = ("attention", "activations", "prediction")
# Resolved params -> whether the method compares against background samples of the training split.
NeedsBackground = Callable[[dict[str, Any]], bool]
# (resolved params, inputs, background samples, (H, W)) -> (forward+backward, forward-only) model passes
# of one `explain` call whose inputs share one target, counted in rows (bench/explain_speed.py times them).
Passes = Callable[[dict[str, Any], int, int, tuple[int, int]], tuple[int, int]]
# The same with the model first, for a method whose passes depend on it (Score-CAM, Ablation-CAM: one pass per
# channel of the explained layer).
ModelPasses = Callable[[ModelBundle, dict[str, Any], int, int, tuple[int, int]], tuple[int, int]]

# What the attributions add up to, f(x) - f(reference) of the explained output:
# - baseline: the `baseline` param's image (IG, DeepLift);
# - background: the mean output over the background samples the method used (SHAP's gradient/deep explainers);
# - hidden: the image with every superpixel hidden by the `hide` fill (image KernelSHAP);
# - padding_embedding: the text with every word piece's embedding replaced by the padding embedding,
#   ids (and so the model's padding mask) kept: the start of text IG's path;
# - padding_tokens: the text with every word piece replaced by the padding id (text KernelSHAP);
# - masked_prompt: a language model's prompt with every feature token replaced by the baseline token (prompt
#   Shapley values, KernelSHAP; explainers/language);
# - baseline_embedding: the prompt with every feature token's embedding replaced by the baseline token's
#   (prompt layer IG);
# - reference_rows: a table row with every column replaced by the `baseline` param's reference row (the training
#   split's mean or median row), or the mean output over several background rows (tables' IG and KernelSHAP);
# - series_baseline: the series' `baseline` param's baseline series (series IG and DeepLift);
# - series_hidden: the series with every segment hidden by the `baseline` param's fill (series KernelSHAP);
# - zero: no input, f(reference) = 0: the attributions add up to the output itself (LRP's conservation).
Reference = Literal[
    "baseline",
    "background",
    "hidden",
    "padding_embedding",
    "padding_tokens",
    "masked_prompt",
    "baseline_embedding",
    "reference_rows",
    "series_baseline",
    "series_hidden",
    "zero",
]
# What the values add up to at each reference, as every legend, caption, warning and `xaidash methods` words it
# (f: the explained output; x: the input, or a language model's prompt). `Completeness.total` reads it.
TOTALS: dict[str, str] = {
    "baseline": "f(x) − f(baseline)",
    "background": "f(x) − E[f(background)] (the mean output over the background samples)",
    "hidden": "f(x) − f(every superpixel hidden)",
    "padding_embedding": "f(x) − f(every word piece's embedding set to padding)",
    "padding_tokens": "f(x) − f(every word piece replaced by padding)",
    "masked_prompt": "f(prompt) − f(every feature replaced by the baseline token)",
    "baseline_embedding": "f(prompt) − f(every feature's embedding set to the baseline token's)",
    "reference_rows": "f(x) − f(reference row) (with the background baseline: the mean over its rows)",
    "series_baseline": "f(x) − f(baseline series)",
    "series_hidden": "f(x) − f(every segment hidden)",
    "zero": "f(x)",
}
# The granularity of one attribution: the map repeats a superpixel's (a series' segment's) value over its pixels
# (steps), so a per-superpixel (per-segment) sum takes each value once.
Unit = Literal["pixel", "superpixel", "word", "token", "column", "step", "segment"]
GROUPED_UNITS = ("superpixel", "segment")


# Diagnostics a method that declares completeness reports beside its gap diagnostic, one value per input:
OUTPUT_CHANGE = "output_change"  # f(x) - f(reference) of the explained output, at the reference it used
STEPS_USED = "steps"  # path methods: the points the attributions were integrated over (raised when needed)
COMPLETENESS_TOLERANCE = 0.01  # the default: the promise holds when the gap is at most 1% of the change
CHANGE_FLOOR = 1e-3  # a change smaller than this counts as this much: a gap relative to ~0 says nothing


def relative_gap(gap: float, change: float) -> float:
    """|sum - (f(x) - f(reference))| relative to |f(x) - f(reference)| (to CHANGE_FLOOR when it is smaller): the
    one measure a completeness check and a path method's refinement hold against the tolerance."""
    return abs(gap) / max(abs(change), CHANGE_FLOOR)


@dataclass(frozen=True)
class CompletenessCheck:
    """Whether one explained input keeps its method's completeness promise, by the method's own diagnostics:
    `gap` = |sum - (f(x) - f(reference))| / |f(x) - f(reference)| (CHANGE_FLOOR at least below), held against
    `tolerance`. `steps_asked` / `steps_used`: a path method's points as asked and as integrated (None for
    other methods)."""

    gap: float
    tolerance: float
    change: float
    steps_asked: int | None = None
    steps_used: int | None = None
    adds_up_to: str = "f(x) − f(reference)"  # the declared total before any absorbed share (`Completeness`)
    absorbed: str = ""  # what takes a share of it on the way (LRP: "the biases"); "" for none

    @property
    def holds(self) -> bool:
        """The promise holds: the gap is within the tolerance, or (a total less an absorbed share) is finite, since
        the gap then is that share, not a miss."""
        if self.absorbed:
            return math.isfinite(self.gap)
        return math.isfinite(self.gap) and self.gap <= self.tolerance

    @property
    def total(self) -> str:
        return f"{self.adds_up_to} less what {self.absorbed} absorb" if self.absorbed else self.adds_up_to

    @property
    def raised(self) -> bool:
        """Whether the method raised its points to reach (or approach) the tolerance."""
        return self.steps_asked is not None and self.steps_used is not None and self.steps_used > self.steps_asked


@dataclass(frozen=True)
class Completeness:
    """Completeness (efficiency for Shapley values): one value per `unit` summed equals
    f(x) - f(reference) for the spec's `output` (`total`: the words every caption uses). `diagnostic` names the
    method's own report of that gap, |sum - (f(x) - f(reference))|, when it makes one; a method with one also
    reports OUTPUT_CHANGE, and the promise is taken to hold for an input when the gap is at most `tolerance`
    of that change (`check`). `absorbed`: what takes a share of the output on the way back (LRP: "the biases",
    which keep the relevance their term carries): the values then add up to f(x) less that share, and the gap
    diagnostic measures the share, said beside the map rather than warned about."""

    reference: Reference
    unit: Unit
    diagnostic: str | None = None
    tolerance: float = COMPLETENESS_TOLERANCE
    absorbed: str = ""

    @property
    def total(self) -> str:
        """What the values add up to, in words: 'f(x) − f(baseline)', 'f(x) less what the biases absorb'."""
        base = TOTALS[self.reference]
        return f"{base} less what {self.absorbed} absorb" if self.absorbed else base

    def check(
        self, diagnostics: Mapping[str, Sequence[float]], index: int, params: Mapping[str, Any] | None = None
    ) -> CompletenessCheck | None:
        """Input `index`'s check from its explanation's diagnostics; None when they do not tell (no gap
        diagnostic declared, or an explanation that did not report its output change, e.g. a stored one)."""
        if self.diagnostic is None:
            return None
        gaps, changes = diagnostics.get(self.diagnostic), diagnostics.get(OUTPUT_CHANGE)
        if gaps is None or changes is None or index >= min(len(gaps), len(changes)):
            return None
        change = float(changes[index])
        gap = relative_gap(float(gaps[index]), change)
        used = diagnostics.get(STEPS_USED)
        asked = (params or {}).get("steps")
        return CompletenessCheck(
            gap=gap if math.isfinite(gap) else math.inf,
            tolerance=self.tolerance,
            change=change,
            steps_asked=None if used is None or asked is None else int(asked),
            steps_used=None if used is None or index >= len(used) else int(used[index]),
            adds_up_to=TOTALS[self.reference],
            absorbed=self.absorbed,
        )


def never(params: dict[str, Any]) -> bool:
    return False


def always(params: dict[str, Any]) -> bool:
    return True


def with_mean_baseline(params: dict[str, Any]) -> bool:
    """The 'mean' baseline is the per-channel mean of the background samples."""
    return params.get("baseline") == "mean"


def _never_raises(applies: Applies) -> Applies:
    """`applies` answering with a reason instead of raising: some checks run the model once (Score-CAM's map size,
    HiResCAM's blank-map probe), and a run whose model does not fit its data set's inputs must still list every
    method with why it does not apply rather than break the page that lists them."""
    if getattr(applies, "never_raises", False):
        return applies

    def guarded(bundle: ModelBundle) -> str | None:
        try:
            return applies(bundle)
        except Exception as e:  # noqa: BLE001 - the reason is the answer
            return f"the model does not run on {bundle.info.name}'s inputs ({' '.join(str(e).split())[:160]})"

    guarded.never_raises = True  # type: ignore[attr-defined]
    return guarded


# Families whose methods backpropagate to the input: refused on a model that declares it has no gradients.
GRADIENT_FAMILIES = ("gradient", "cam")


@dataclass(frozen=True)
class MethodSpec(Spec):
    id: str
    label: str
    modalities: tuple[str, ...]
    compute: Callable[[MethodContext, dict[str, Any]], MethodOutput]
    params: tuple[Param, ...] = ()
    description: str = ""
    applies: Applies = field(default=lambda bundle: None)  # None when usable on the model, else why not
    signed: bool = True  # False for methods whose maps are non-negative by construction (Grad-CAM, saliency, attention)
    family: str = "gradient"  # gradient | cam | perturbation | shap | attention | mask (a fitted soft mask)
    output: Output = field(kw_only=True)  # no default: every method says what it explains
    needs_background: NeedsBackground = never
    completeness: Completeness | None = None  # None: the attributions add up to nothing in particular
    passes: Passes | None = None  # declared by every image method (the speed benchmark times them)
    passes_on_model: ModelPasses | None = None  # instead of `passes`, where the count depends on the model
    # Default choice: rank among the methods the pages, the data-set report, the across-training view and the
    # quick benchmark pick when the user has not chosen (lower first); None: never picked by default.
    featured: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "applies", _never_raises(self.applies))

    @property
    def target_dependent(self) -> bool:
        """Whether the map changes with the target class (attention and Eigen-CAM explain no output)."""
        return self.output not in NO_OUTPUT

    def count_passes(self, bundle: ModelBundle, params: dict[str, Any], n: int, background: int) -> tuple[int, int]:
        """(forward+backward, forward-only) model passes of one `explain` call on n inputs sharing one target."""
        resolved = self.resolve_for(bundle, params)
        shape = tuple(bundle.info.input_shape)
        hw = (int(shape[1]), int(shape[2])) if len(shape) >= 3 else (1, int(shape[-1]) if shape else 1)
        if self.passes_on_model is not None:
            return self.passes_on_model(bundle, resolved, n, background, hw)
        if self.passes is None:
            raise ValueError(f"method {self.id!r} declares no pass count")
        return self.passes(resolved, n, background, hw)

    def check(self, bundle: ModelBundle) -> None:
        if bundle.modality not in self.modalities:
            raise ExplainError(f"{self.label} works on {'/'.join(self.modalities)} models, not {bundle.modality}.")
        if self.family in GRADIENT_FAMILIES and bundle.spec.no_gradients:
            raise ExplainError(f"{self.label} does not apply to {bundle.spec.name}: {bundle.spec.no_gradients}")
        reason = self.applies(bundle)
        if reason:
            raise ExplainError(f"{self.label} does not apply to {bundle.spec.name}: {reason}")

    def resolve_for(self, bundle: ModelBundle, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`resolve_params` on one model: defaults filled in and every value checked, a 'layer' against the model's
        conv layers (`layer_choices`); unknown names are refused."""
        return self.resolve_params(given, layer_choices(bundle))

    def supports(self, bundle: ModelBundle) -> bool:
        try:
            self.check(bundle)
            return True
        except ExplainError:
            return False


def layer_choices(bundle: ModelBundle) -> LayerChoices:
    """The layers a 'layer' parameter may take on this model: its conv feature maps, the last one by default."""
    return LayerChoices(tuple(bundle.spec.conv_layers), bundle.spec.last_conv, bundle.spec.name)


# A declared reference reads these params of the method.
_REFERENCE_PARAMS: dict[str, str] = {
    "baseline": "baseline",
    "background": "background_size",
    "hidden": "hide",
    "reference_rows": "baseline",
}


def _check_facts(spec: MethodSpec) -> None:
    """Facts that contradict each other are a programming error, caught when the method registers."""
    where = f"method {spec.id!r}"
    if any(modality_of(m).spatial for m in spec.modalities) and spec.passes is None and spec.passes_on_model is None:
        raise ValueError(f"{where} must declare its model passes (every method on images is benchmarked)")
    c = spec.completeness
    if c is None:
        return
    if not spec.target_dependent:
        raise ValueError(f"{where} explains no output, so its attributions cannot add up to one")
    if not 0 < c.tolerance < 1:
        raise ValueError(f"{where}: completeness tolerance {c.tolerance} is not a share of the change in (0, 1)")
    if c.reference not in TOTALS:
        raise ValueError(f"{where}: reference {c.reference!r} has no words for what the values add up to (TOTALS)")
    needed = _REFERENCE_PARAMS.get(c.reference)
    if needed and needed not in {p.name for p in spec.params}:
        raise ValueError(f"{where}: reference {c.reference!r} needs a {needed!r} parameter")


def _unknown(key: Hashable, known: list[str]) -> str:
    method_id, modality = key if isinstance(key, tuple) else (key, None)
    where = f" for {modality} models" if modality else ""
    names = sorted({s.id for s in list_methods(modality)})
    return f"Unknown method {method_id!r}{where}. Known: {', '.join(names)}."


# One id may have an image and a text implementation (e.g. 'ig'): found under (id, modality) for each.
METHODS: Registry[MethodSpec] = Registry(
    "method",
    keys=lambda s: ((s.id, m) for m in s.modalities),
    error=ExplainError,
    unknown=_unknown,
    check=_check_facts,
)


def register(spec: MethodSpec) -> MethodSpec:
    return METHODS.register(spec)


def get_method(method_id: str, modality: str | None = None) -> MethodSpec:
    """The method registered under this id (for this modality when given)."""
    if modality is not None:
        return METHODS.get((method_id, modality))
    found = METHODS.all(lambda s: s.id == method_id)
    if not found:
        raise ExplainError(METHODS.unknown_message(method_id))
    return found[0]


def list_methods(modality: str | None = None) -> list[MethodSpec]:
    """Registered methods (each spec once), in registration order."""
    return METHODS.all(None if modality is None else lambda s: modality in s.modalities)


def featured_methods(modality: str, *, among: Iterable[str] | None = None, limit: int | None = None) -> list[str]:
    """Ids of the featured methods for this modality, by `featured` rank (lowest first): the default choice
    wherever methods are picked for the user. among: only these ids (e.g. those usable on a model or on two);
    limit: at most this many."""
    return [s.id for s in METHODS.featured(lambda s: modality in s.modalities, among=among, limit=limit)]


def methods_for(bundle: ModelBundle) -> list[MethodSpec]:
    """Methods usable on this model, in registration order."""
    return [m for m in list_methods(bundle.modality) if m.supports(bundle)]
