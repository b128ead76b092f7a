"""KernelSHAP on the prompt's features: captum's `KernelShap`, as captum's `LLMAttribution(KernelShap)` runs it
(the full and the empty prompt first, then coalitions whose size is drawn from the Shapley kernel and whose members
are uniform, hidden features replaced by the baseline token; a linear regression weighted 1e6 on the first two),
with every coalition scored in shared batched passes (`scoring.captum_sampled`: captum's own draws and fit from the
query's seed, so the same draws give the same values as captum's call).

The heavy weights on the full and empty prompts make the values add up to f(prompt) - f(every feature hidden)
nearly exactly (diagnostic `additivity_gap`). The per-step matrix fits one more regression per generated step on
the same coalitions (milliseconds; the model rows are shared).
"""

from __future__ import annotations

from typing import Any

from captum.attr import KernelShap

from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register
from xaidash.explainers.language.scoring import EXPLAINED, fitted
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness
from xaidash.models.language.model import LanguageModel

GAP = "additivity_gap"  # |sum of attributions - (f(prompt) - f(every feature hidden))|
DEFAULT_SAMPLES = 50


def _compute(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    out, total, per_step = fitted(lm, query, KernelShap, int(params["n_samples"]))
    assert out.full is not None and out.empty is not None  # KernelShap's second sample is the empty prompt
    change = float(out.full[EXPLAINED] - out.empty[EXPLAINED])
    return PromptResult(
        attributions=total,
        per_step=per_step,
        rows=out.rows,
        batch=out.batch,
        diagnostics={GAP: abs(float(total.sum()) - change), OUTPUT_CHANGE: change},
    )


register(
    PromptMethodSpec(
        id="kernel_shap",
        label="KernelSHAP",
        compute=_compute,
        passes=lambda params, features, tokens, steps: int(params["n_samples"]),
        output="log_probability",
        family="shap",
        params=(
            Param(
                "n_samples",
                "int",
                DEFAULT_SAMPLES,
                "Coalitions of features evaluated (the full and the empty prompt among them), one model row each.",
                min=2,
                max=10000,
            ),
        ),
        description="Shapley values of the prompt's features estimated by a weighted linear regression on random "
        "coalitions (hidden features replaced by the baseline token), weighted by the Shapley kernel through how "
        "they are drawn. The values add up to the change from the prompt with every feature hidden to the full one.",
        signed=True,
        completeness=Completeness(reference="masked_prompt", unit="token", diagnostic=GAP),
        per_step=True,
        featured=4,
        reference="captum LLMAttribution(KernelShap)",
    )
)
