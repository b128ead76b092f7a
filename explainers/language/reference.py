"""captum's own call for each prompt method, on the same prompt, features and target as a `PromptQuery`: what the
tests check xaidash's methods against and what `bench/llm_explain_speed.py` times.

captum's `LLMAttribution(<Method>(model), tokenizer)` (feature ablation, Shapley value sampling, LIME, KernelSHAP)
and `LLMGradientAttribution(<Layer method>(model, embedding), tokenizer)` (layer IG, input x gradient) take a
`TextTokenInput`, whose features are every token or the tokens whose ids are not skipped. The query's features are
positions (the user's tokens, template left out) or groups of them (words), so `FeatureInput` is a TextTokenInput
over the query's ids with its interpretable mask set by position (captum's own `to_model_input` then hides them) and,
for words, hides each group's positions together. The explained output of a span starting after step 0 is read
with the generated tokens before it appended to the input (not features), as the query reads it teacher-forced.

captum's default call decodes the target token by token over the model's cache (`forward_in_tokens=True,
use_cached_outputs=True`). Under transformers 5.24 that path is wrong from the second target token on:
`_update_model_kwargs_for_generation` no longer advances `cache_position`, so `prepare_inputs_for_generation`
feeds the whole sequence again on top of the cache (values off by as much as they are large on the tiny test
models). Token by token without the cache (`use_cached_outputs=False`) and in one pass (`forward_in_tokens=False`)
agree with each other and with xaidash to float rounding, so these functions default to the one pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from captum.attr import (
    FeatureAblation,
    KernelShap,
    LayerGradientXActivation,
    LayerIntegratedGradients,
    Lime,
    LLMAttribution,
    LLMGradientAttribution,
    ShapleyValueSampling,
    TextTokenInput,
)

from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel

# method id -> captum class; per-step support as captum's LLMAttribution gives it (token_attr), else one call per step
PERTURBATION = {
    "feature_ablation": FeatureAblation,
    "shapley_sampling": ShapleyValueSampling,
    "lime": Lime,
    "kernel_shap": KernelShap,
}
GRADIENT = {"layer_ig": LayerIntegratedGradients, "input_x_gradient": LayerGradientXActivation}
TOKEN_ATTR = {"feature_ablation", "shapley_sampling", "layer_ig", "input_x_gradient"}


class FeatureInput(TextTokenInput):
    """captum's TextTokenInput over `ids` (1, T) whose interpretable features are the position groups `groups`.
    TextTokenInput's constructor is not called: it would tokenize text again and can only skip tokens by id."""

    def __init__(
        self, ids: Sequence[int], groups: Sequence[Sequence[int]], labels: Sequence[str], tokenizer: Any, baseline: int
    ) -> None:
        self.tokenizer = tokenizer
        self.baselines = int(baseline)
        self.skip_tokens = None
        self.inp_tensor = torch.tensor([list(ids)], dtype=torch.long)
        positions = sorted(p for g in groups for p in g)
        mask = torch.zeros_like(self.inp_tensor, dtype=torch.bool)
        mask[0, positions] = True
        self.itp_mask = mask
        self.itp_tensor = self.inp_tensor[mask].unsqueeze(0)
        self.groups = [list(g) for g in groups]
        self.single = all(len(g) == 1 for g in groups) and [g[0] for g in groups] == positions
        self.values = list(labels)
        self.n_itp_features = len(self.groups)

    def to_tensor(self) -> torch.Tensor:
        return torch.ones(1, self.n_itp_features, dtype=torch.long)

    def to_model_input(self, perturbed_tensor: torch.Tensor | None = None) -> torch.Tensor:
        if perturbed_tensor is None or self.single:
            return super().to_model_input(perturbed_tensor)  # captum's own: one token per feature
        rows = self.inp_tensor.expand(perturbed_tensor.size(0), -1).clone().to(perturbed_tensor.device)
        for f, group in enumerate(self.groups):
            hidden = perturbed_tensor[:, f] != 1
            rows[hidden.nonzero(as_tuple=True)[0][:, None], torch.tensor(group, device=rows.device)] = self.baselines
        return rows


def has_reference(method_id: str) -> bool:
    return method_id in PERTURBATION or method_id in GRADIENT


def captum_input(lm: LanguageModel, query: PromptQuery, context: Sequence[int] = ()) -> FeatureInput:
    """The query's prompt (then `context`, generated tokens read before the target, not features) as captum's input."""
    ids = list(query.prompt.ids) + [int(i) for i in context]
    return FeatureInput(ids, query.features, query.labels, lm.tokenizer, query.baseline_id)


def _kwargs(method_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if method_id in ("shapley_sampling", "lime", "kernel_shap") and "n_samples" in params:
        return {"n_samples": int(params["n_samples"])}
    if method_id == "layer_ig" and "steps" in params:
        return {"n_steps": int(params["steps"])}
    return {}


def _attribute(
    lm: LanguageModel,
    query: PromptQuery,
    method_id: str,
    params: Mapping[str, Any],
    context: Sequence[int],
    target: Sequence[int],
    forward_in_tokens: bool,
    use_cached_outputs: bool,
) -> Any:
    """captum's LLMAttributionResult for `target` read after the prompt and `context`, from the query's seed."""
    inp = captum_input(lm, query, context)
    target_ids = torch.tensor([int(t) for t in target], dtype=torch.long)
    kwargs = _kwargs(method_id, params)
    torch.manual_seed(query.seed)
    if method_id in PERTURBATION:
        attr = LLMAttribution(PERTURBATION[method_id](lm.model), lm.tokenizer)
        return attr.attribute(
            inp, target=target_ids, forward_in_tokens=forward_in_tokens, use_cached_outputs=use_cached_outputs, **kwargs
        )
    if method_id in GRADIENT:
        grad = LLMGradientAttribution(GRADIENT[method_id](lm.model, lm.embedding()), lm.tokenizer)
        return grad.attribute(inp, target=target_ids, **kwargs)
    raise ExplainError(f"No captum reference call for prompt method {method_id!r}.")


def _by_feature(query: PromptQuery, values: torch.Tensor, method_id: str) -> np.ndarray:
    """(..., n) captum values per feature; gradient methods give one per feature position: summed per group."""
    out = values.detach().double().cpu().numpy()
    if method_id not in GRADIENT or all(len(g) == 1 for g in query.features):
        return out
    positions = sorted(p for g in query.features for p in g)
    column = {p: i for i, p in enumerate(positions)}
    return np.stack([out[..., [column[p] for p in g]].sum(-1) for g in query.features], axis=-1)


def reference_attributions(
    lm: LanguageModel,
    query: PromptQuery,
    method_id: str,
    params: Mapping[str, Any] | None = None,
    *,
    forward_in_tokens: bool = False,
    use_cached_outputs: bool = False,
) -> np.ndarray:
    """(n_features,) captum's attributions of the query's explained output (its span's log-probabilities summed);
    by default in one pass per row (captum's forward_in_tokens=False; see the module's note on its cached default).
    A contrast has no captum call."""
    if query.contrast is not None:
        raise ExplainError("captum's LLMAttribution has no contrast target: compare two targets' calls instead.")
    start, stop = query.span
    result = _attribute(
        lm,
        query,
        method_id,
        params or {},
        query.target_ids[:start],
        query.target_ids[start:stop],
        forward_in_tokens,
        use_cached_outputs,
    )
    return _by_feature(query, result.seq_attr, method_id)


def reference_per_step(
    lm: LanguageModel,
    query: PromptQuery,
    method_id: str,
    params: Mapping[str, Any] | None = None,
    *,
    forward_in_tokens: bool = False,
    use_cached_outputs: bool = False,
) -> np.ndarray:
    """(n_steps, n_features) captum's attributions of each generated step's log-probability: its token_attr where
    the method makes one (feature ablation, Shapley sampling, gradients), else one call per step (LIME, KernelSHAP),
    each from the query's seed."""
    if query.contrast is not None:
        raise ExplainError("captum's LLMAttribution has no contrast target: compare two targets' calls instead.")
    params = params or {}
    ids = query.target_ids
    if method_id in TOKEN_ATTR:
        result = _attribute(lm, query, method_id, params, (), ids, forward_in_tokens, use_cached_outputs)
        return _by_feature(query, result.token_attr, method_id)
    rows = [
        _attribute(
            lm, query, method_id, params, ids[:j], ids[j : j + 1], forward_in_tokens, use_cached_outputs
        ).seq_attr
        for j in range(len(ids))
    ]
    return _by_feature(query, torch.stack(rows), method_id)
