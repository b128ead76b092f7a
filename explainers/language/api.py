"""`explain_prompt`: which prompt tokens produced a generated token, by every registered prompt method asked for.

lm = load_language_model(run)
prompt = build_prompt(lm, "What is the capital of France?")
answer = generate(lm, prompt)
task = make_task(lm, prompt, answer.ids, span=(5, 6))      # the 6th generated token, e.g. " Paris"
maps = explain_prompt(task, {"feature_ablation": {}, "layer_ig": {"steps": 16}})
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import xaidash.explainers.language.methods  # noqa: F401  (registers every prompt method)
from xaidash.explainers.language.registry import (
    FeatureUnit,
    PromptMethodSpec,
    PromptTask,
    get_prompt_method,
    list_prompt_methods,
)
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import Prompt, word_groups

DEFAULT_BATCH = 32


@dataclass
class PromptExplanation:
    """One method's answer: `attributions` (n_features,) for the explained output, `per_step` (n_steps,
    n_features) when the method made it, the feature `labels`, and what it cost."""

    method: str
    params: dict[str, Any]
    labels: list[str]
    attributions: np.ndarray
    per_step: np.ndarray | None
    seconds: float
    rows: int
    batch: int
    device: str
    diagnostics: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "params": self.params,
            "seconds": round(self.seconds, 4),
            "rows": self.rows,
            "batch": self.batch,
            "device": self.device,
            "diagnostics": {k: float(v) for k, v in self.diagnostics.items()},
        }


def features_of(prompt: Prompt, unit: FeatureUnit = "token", include_template: bool = False) -> list[list[int]]:
    """Prompt positions grouped into features: the user's tokens or words (template and special tokens left out),
    or with `include_template` every prompt token (captum's default)."""
    if include_template:
        return [[p] for p in range(len(prompt.ids))]
    if unit == "word":
        return word_groups(prompt)
    return [[p] for p in prompt.features]


def make_task(
    lm: LanguageModel,
    prompt: Prompt,
    target_ids: Sequence[int],
    *,
    span: tuple[int, int] | None = None,
    contrast: int | None = None,
    unit: FeatureUnit = "token",
    include_template: bool = False,
    baseline_id: int = 0,
    batch_size: int = DEFAULT_BATCH,
    seed: int = 0,
) -> PromptTask:
    """A task explaining steps span=[start, stop) of `target_ids` (default: all of them); only the steps up to
    `stop` are read. ExplainError for a span outside the answer, a contrast on a span of several steps, or a contrast
    equal to the target."""
    ids = tuple(int(i) for i in target_ids)
    if not ids:
        raise ExplainError("There is no generated token to explain: generate an answer first.")
    start, stop = span if span is not None else (0, len(ids))
    if not 0 <= start < stop <= len(ids):
        raise ExplainError(f"Steps {start}-{stop} are outside the answer's {len(ids)} tokens.")
    if contrast is not None:
        if stop - start != 1:
            raise ExplainError("A contrast token compares one generated token with another: pick a single token.")
        if int(contrast) == ids[start]:
            raise ExplainError("The contrast token is the generated token itself: pick another one.")
        if not 0 <= int(contrast) < lm.vocab_size:
            raise ExplainError(f"Contrast token id {contrast} is outside the vocabulary (0-{lm.vocab_size - 1}).")
    if not 0 <= int(baseline_id) < lm.vocab_size:
        raise ExplainError(f"Baseline token id {baseline_id} is outside the vocabulary (0-{lm.vocab_size - 1}).")
    groups = features_of(prompt, unit, include_template)
    labels = ["".join(prompt.tokens[p] for p in g) for g in groups]
    return PromptTask(
        lm=lm,
        prompt=prompt,
        target_ids=ids[:stop],
        span=(int(start), int(stop)),
        features=groups,
        labels=labels,
        contrast=None if contrast is None else int(contrast),
        baseline_id=int(baseline_id),
        batch_size=max(1, int(batch_size)),
        seed=int(seed),
        unit="token" if include_template else unit,
    )


def planned_rows(task: PromptTask, methods: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The model rows each method would run on this task, before running it (the page says it for long prompts)."""
    out = {}
    for method_id, given in methods.items():
        spec = get_prompt_method(method_id)
        out[method_id] = spec.rows_for(spec.resolve_params(given), task.n_features, len(task.prompt), task.n_steps)
    return out


def explain_prompt(task: PromptTask, methods: Mapping[str, Mapping[str, Any]]) -> dict[str, PromptExplanation]:
    """Each method's attributions of the task's target to its features (method id -> explanation, in order)."""
    out: dict[str, PromptExplanation] = {}
    for method_id, given in methods.items():
        spec = get_prompt_method(method_id)
        out[method_id] = run_method(spec, task, spec.resolve_params(given))
    return out


def run_method(spec: PromptMethodSpec, task: PromptTask, params: dict[str, Any]) -> PromptExplanation:
    torch.manual_seed(task.seed)
    np.random.seed(task.seed % 2**32)
    was_training = task.lm.model.training
    task.lm.model.eval()
    started = time.perf_counter()
    try:
        result = spec.compute(task, params)
    finally:
        task.lm.model.train(was_training)
    seconds = time.perf_counter() - started
    values = np.asarray(result.attributions, dtype=np.float32).reshape(-1)
    if values.shape[0] != task.n_features:
        raise ExplainError(f"{spec.label} returned {values.shape[0]} values for {task.n_features} features.")
    per_step = None if result.per_step is None else np.asarray(result.per_step, dtype=np.float32)
    return PromptExplanation(
        method=spec.id,
        params=params,
        labels=list(task.labels),
        attributions=values,
        per_step=per_step,
        seconds=seconds,
        rows=int(result.rows),
        batch=int(result.batch),
        device=str(task.lm.device),
        diagnostics=dict(result.diagnostics),
    )


def method_choices() -> list[PromptMethodSpec]:
    return list_prompt_methods()
