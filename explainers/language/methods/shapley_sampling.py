"""Shapley value sampling of the prompt's features: captum's `ShapleyValueSampling` (random permutations of the
features, each added in turn to the prompt with every feature hidden by the baseline token; a feature's value is
its mean marginal change of the log-probability), as captum's `LLMAttribution(ShapleyValueSampling)` runs it, with
every row scored in shared batched passes (`scoring.captum_sampled`: captum's own permutations and sums, from the
query's seed, so the same draws give the same values as captum's call).

Each permutation's marginal changes add up to f(prompt) - f(every feature hidden) exactly, so the values keep the
efficiency promise at any number of samples (diagnostic `additivity_gap`: float rounding only).
"""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import ShapleyValueSampling

from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register, total_of
from xaidash.explainers.language.scoring import EXPLAINED, captum_sampled
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness
from xaidash.models.language.model import LanguageModel

GAP = "additivity_gap"  # |sum of attributions - (f(prompt) - f(every feature hidden))|
DEFAULT_SAMPLES = 25  # captum's default
EVAL_ROWS = 4096  # masks per forward call captum makes (only looked up: the model passes are batched elsewhere)


def _compute(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    n, samples = query.n_features, int(params["n_samples"])

    def attribute(forward: Any) -> torch.Tensor:
        return ShapleyValueSampling(forward).attribute(
            torch.ones(1, n, dtype=torch.long), n_samples=samples, perturbations_per_eval=EVAL_ROWS
        )

    out = captum_sampled(lm, query, attribute, [None])
    per_step = out.attributions[0].reshape(query.n_steps, n).double().numpy()
    total = total_of(per_step, query.span)
    assert out.full is not None and out.empty is not None  # every permutation starts from the empty prompt
    change = float(out.full[EXPLAINED] - out.empty[EXPLAINED])
    return PromptResult(
        attributions=total,
        per_step=per_step,
        rows=out.rows,
        batch=out.batch,
        diagnostics={GAP: abs(float(total.sum()) - change), OUTPUT_CHANGE: change},
    )


def _rows(params: dict[str, Any], features: int, tokens: int, steps: int) -> int:
    """Distinct rows at most: each permutation's rows but its last (the prompt), plus the prompt and the empty one."""
    return int(params["n_samples"]) * max(features - 1, 0) + 2


register(
    PromptMethodSpec(
        id="shapley_sampling",
        label="Shapley value sampling",
        compute=_compute,
        passes=_rows,
        output="log_probability",
        family="shap",
        params=(
            Param(
                "n_samples",
                "int",
                DEFAULT_SAMPLES,
                "Random orders of the features; each costs one model row per feature.",
                min=1,
                max=1000,
            ),
        ),
        description="Each feature's mean change of the explained log-probability when it is added back, over "
        "random orders in which the features are added to the prompt with all of them hidden by the baseline "
        "token. The values add up to the change from that hidden prompt to the full one.",
        signed=True,
        completeness=Completeness(reference="masked_prompt", unit="token", diagnostic=GAP),
        per_step=True,
        featured=2,
        reference="captum LLMAttribution(ShapleyValueSampling)",
    )
)
