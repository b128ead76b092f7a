"""Registry of prompt attribution methods: which prompt tokens (or words) produced a generated token.

A method is one module in `explainers/language/` that calls `register(PromptMethodSpec(...))`; its
`compute(lm, query, params)` returns a `PromptResult` (explainers/language/query.py), and
`explainers/language/api.explain_prompt` does the rest (validation, the guarded call, timing, the prompt x
generated-token matrix). Every fact other code needs (its unit, what its
values add up to, how many model passes it makes for a prompt of n features) is declared on the spec, as for the
image and text methods in `explainers/registry.py`, so the Generate page, `xaidash generate --explain` and the
contract tests pick a new method up with no code of their own.

The explained output is the log-probability of the target (one generated token, or a span's tokens summed, read
teacher-forced after the prompt), or with a contrast token the difference log p(target) - log p(contrast).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from xaidash.data.modalities import PROMPT
from xaidash.data.specs import Registry, Spec
from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import Completeness
from xaidash.models.language.model import LanguageModel

# (resolved params, features, prompt tokens, target steps) -> model rows one call runs (forward-only for
# perturbations, forward+backward for gradients): what the page says before running a method on a long prompt.
Passes = Callable[[dict[str, Any], int, int, int], int]
Output = Literal["log_probability", "attention"]


@dataclass(frozen=True)
class PromptMethodSpec(Spec):
    id: str
    label: str
    compute: Callable[[LanguageModel, PromptQuery, dict[str, Any]], PromptResult]
    passes: Passes
    output: Output = field(kw_only=True)
    family: str = "perturbation"  # perturbation | shap | gradient | attention (the legend's wording)
    params: tuple[Param, ...] = ()
    description: str = ""
    signed: bool = True
    completeness: Completeness | None = None
    per_step: bool = False  # its passes give every step's row of the prompt x generated-token matrix at no extra cost
    gradients: bool = False  # needs backward passes (a model that is only run forward cannot use it)
    featured: int | None = None
    # the most rows an adaptive step may add to `passes` (layer IG's path refinement), not known before it runs
    extra_passes: Passes | None = None
    extra_when: str = ""  # when those rows run, worded for the page ("where its path is refined ...")
    reference: str = (
        ""  # the library call it is checked against (tests, bench): e.g. "captum LLMAttribution(FeatureAblation)"
    )

    @property
    def modalities(self) -> tuple[str, ...]:
        return (PROMPT.id,)

    @property
    def target_dependent(self) -> bool:
        return self.output != "attention"

    def rows_for(self, params: Mapping[str, Any], features: int, tokens: int, steps: int) -> int:
        return int(self.passes(dict(params), features, tokens, steps))

    def extra_rows_for(self, params: Mapping[str, Any], features: int, tokens: int, steps: int) -> int:
        """At most this many rows beyond `rows_for`, when an adaptive step runs (0: none)."""
        return 0 if self.extra_passes is None else int(self.extra_passes(dict(params), features, tokens, steps))


def _check_facts(spec: PromptMethodSpec) -> None:
    if spec.completeness is not None and spec.output == "attention":
        raise ValueError(f"prompt method {spec.id!r} explains no output, so its values cannot add up to one")


def _unknown(method_id: Hashable, known: list[str]) -> str:
    return f"Unknown prompt method {method_id!r}. Known: {', '.join(s.id for s in PROMPT_METHODS)}."


PROMPT_METHODS: Registry[PromptMethodSpec] = Registry(
    "prompt method", error=ExplainError, unknown=_unknown, check=_check_facts
)


def register(spec: PromptMethodSpec) -> PromptMethodSpec:
    return PROMPT_METHODS.register(spec)


def list_prompt_methods() -> list[PromptMethodSpec]:
    """Registered methods, in registration order (`explainers.language.api` imports every method module)."""
    return PROMPT_METHODS.all()


def get_prompt_method(method_id: str) -> PromptMethodSpec:
    return PROMPT_METHODS.get(method_id)


def featured_prompt_methods(limit: int | None = None, among: Iterable[str] | None = None) -> list[str]:
    return [s.id for s in PROMPT_METHODS.featured(among=among, limit=limit)]


def total_of(per_step: np.ndarray, span: Sequence[int]) -> np.ndarray:
    """The explained output's attributions from a per-step matrix (n_steps, n_features): the span's rows summed
    (log-probabilities of a span's tokens add up)."""
    start, stop = int(span[0]), int(span[1])
    return np.asarray(per_step[start:stop]).sum(axis=0)
