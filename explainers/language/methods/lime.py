"""LIME on the prompt's features: captum's `Lime` with its defaults, as captum's `LLMAttribution(Lime)` runs it
(each feature kept with probability 1/2, hidden ones replaced by the baseline token; samples weighted by an
exponential kernel of their cosine distance to the full prompt, width 1; a Lasso fit, alpha 0.01), with every
sample scored in shared batched passes (`scoring.captum_sampled`: captum's own draws, kernel and fit from the query's
seed, so the same draws give the same values as captum's call).

The per-step matrix fits one more Lasso per generated step on the same samples (a fit takes milliseconds; the
model rows are shared).
"""

from __future__ import annotations

from typing import Any

from captum.attr import Lime

from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register
from xaidash.explainers.language.scoring import fitted
from xaidash.explainers.params import Param
from xaidash.models.language.model import LanguageModel

DEFAULT_SAMPLES = 50


def _compute(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    out, total, per_step = fitted(lm, query, Lime, int(params["n_samples"]))
    return PromptResult(
        attributions=total,
        per_step=per_step,
        rows=out.rows,
        batch=out.batch,
    )


register(
    PromptMethodSpec(
        id="lime",
        label="LIME",
        compute=_compute,
        passes=lambda params, features, tokens, steps: int(params["n_samples"]),
        output="log_probability",
        family="perturbation",
        params=(
            Param(
                "n_samples",
                "int",
                DEFAULT_SAMPLES,
                "Random prompts with about half the features hidden, one model row each; the sparse linear "
                "surrogate is fitted on them.",
                min=2,
                max=10000,
            ),
        ),
        description="Weights of a sparse linear surrogate (Lasso) fitted to the explained log-probability of "
        "random prompts with some features hidden by the baseline token, samples nearer the full prompt weighted "
        "more.",
        signed=True,
        per_step=True,
        featured=5,
        reference="captum LLMAttribution(Lime)",
    )
)
