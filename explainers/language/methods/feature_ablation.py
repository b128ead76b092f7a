"""Feature ablation of the prompt: each feature's tokens replaced by the baseline token, one row per feature, and
the drop of every step's log-probability (captum's `LLMAttribution(FeatureAblation)` with TextTokenInput's
baseline: f(prompt) - f(prompt with the feature hidden)).

The subtraction is all there is to it, so it is written here over the batched scorer (`scoring.score_rows`: all
rows in shared passes over the cached template prefix) rather than through captum's FeatureAblation, whose
forward function would get the same rows; `tests/explainers/language` checks it against captum's call.
"""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register, total_of
from xaidash.explainers.language.scoring import masked_rows, score_rows
from xaidash.models.language.model import LanguageModel


def ablation_masks(n_features: int) -> torch.Tensor:
    """(n + 1, n) feature masks: every feature shown, then each one hidden in turn."""
    keep = torch.ones(n_features + 1, n_features, dtype=torch.long)
    keep[1:].fill_diagonal_(0)
    return keep


def _compute(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    scores, batch = score_rows(lm, query, masked_rows(lm, query, ablation_masks(query.n_features)))
    per_step = (scores[:1] - scores[1:]).T.double().cpu().numpy()  # (n_steps, n_features)
    return PromptResult(
        attributions=total_of(per_step, query.span),
        per_step=per_step,
        rows=query.n_features + 1,
        batch=batch,
    )


register(
    PromptMethodSpec(
        id="feature_ablation",
        label="Feature ablation",
        compute=_compute,
        passes=lambda params, features, tokens, steps: features + 1,
        output="log_probability",
        family="perturbation",
        description="How much the explained log-probability drops when one prompt token (or word) is replaced by "
        "the baseline token, the others kept: one model row per feature, every generated step read from the "
        "same rows.",
        signed=True,
        per_step=True,
        featured=1,
        reference="captum LLMAttribution(FeatureAblation)",
    )
)
