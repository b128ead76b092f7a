"""Attention as a prompt attribution: how much the position that predicts a generated token attends to each prompt
feature, in the last layer (heads averaged) or rolled out through every layer (Abnar & Zuidema, with the causal
mask; `explainers/language/inside.py`). Weights, not an explanation of the output: they are the same whatever token
was generated, never negative, and say nothing about what the attended tokens contributed.

One forward pass over [prompt ; target_ids[:-1]] gives the query rows of every generated step at once: step s is
predicted at position len(prompt) - 1 + s, so the whole prompt x answer matrix costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from xaidash.explainers.language.inside import causal_rollout, decoder_attention
from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register
from xaidash.models.language.model import LanguageModel


def _sequence(query: PromptQuery) -> list[int]:
    return list(query.prompt.ids) + list(query.target_ids[:-1])


def _from_matrix(query: PromptQuery, matrix: np.ndarray) -> PromptResult:
    """PromptResult from a (T, T) query x key matrix: each step's query row summed over each feature's positions;
    the explained output's values are the span's rows averaged (weights of several queries do not add up)."""
    queries = len(query.prompt.ids) - 1 + np.arange(query.n_steps)
    rows = matrix[queries]
    per_step = np.stack([rows[:, list(g)].sum(1) for g in query.features], axis=1)
    start, stop = query.span
    return PromptResult(attributions=per_step[start:stop].mean(0), per_step=per_step, rows=1, batch=1)


def _method(
    combine: Callable[[list[torch.Tensor]], np.ndarray],
) -> Callable[[LanguageModel, PromptQuery, dict[str, Any]], PromptResult]:
    def compute(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
        return _from_matrix(query, combine(decoder_attention(lm, _sequence(query))))

    return compute


def _last_layer(weights: list[torch.Tensor]) -> np.ndarray:
    return weights[-1].mean(0).cpu().numpy()


def _one_pass(params: dict[str, Any], features: int, tokens: int, steps: int) -> int:
    return 1


register(
    PromptMethodSpec(
        id="attention_last",
        label="Attention (last layer)",
        compute=_method(_last_layer),
        passes=_one_pass,
        output="attention",
        family="attention",
        description="The last layer's attention weights, heads averaged, from the position that predicts the "
        "generated token to each prompt feature (a feature's tokens summed; a span's steps averaged). The same "
        "whatever token was generated, and not signed.",
        signed=False,
        per_step=True,
    )
)

register(
    PromptMethodSpec(
        id="attention_rollout",
        label="Attention rollout",
        compute=_method(causal_rollout),
        passes=_one_pass,
        output="attention",
        family="attention",
        description="Attention rollout (Abnar & Zuidema 2020): every layer's attention, heads averaged and mixed "
        "half and half with the identity for the residual connection, multiplied from the first layer up through "
        "the causal mask; the row of the position that predicts the generated token, summed over each feature's "
        "tokens (a span's steps averaged).",
        signed=False,
        per_step=True,
    )
)
