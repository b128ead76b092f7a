"""`explain_prompt`: which prompt tokens produced a generated token, by every registered prompt method asked for.

lm = load_language_model(run)
prompt = build_prompt(lm, "What is the capital of France?")
answer = generate(lm, prompt)
query = make_query(lm, prompt, answer.ids, span=(5, 6))   # the 6th generated token, e.g. " Paris"
maps = explain_prompt(lm, query, {"feature_ablation": {}, "layer_ig": {"steps": 16}})

The query (explainers/language/query.py) holds no model: it is built once and is a cache key; each method runs on
(lm, query) in the one guarded call (`explainers.guard.guarded`: eval mode, every module's train/eval flag and the
caller's random states restored, seeded with the query's seed), and several methods run as one session
(`explainers.session.run_session`: a method that fails is reported and the others go on).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import xaidash.explainers.language.methods  # noqa: F401  (registers every prompt method)
from xaidash.explainers.guard import guarded
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.registry import PromptMethodSpec, get_prompt_method, list_prompt_methods
from xaidash.explainers.params import ExplainError
from xaidash.explainers.session import Cache, Lease, Outcome, Progress, own, run_session
from xaidash.models.language.model import LanguageModel


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


def planned_rows(query: PromptQuery, methods: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The model rows each method would run on this query, before running it (the page says it for long prompts)."""
    out = {}
    for method_id, given in methods.items():
        spec = get_prompt_method(method_id)
        out[method_id] = spec.rows_for(spec.resolve_params(given), query.n_features, len(query.prompt), query.n_steps)
    return out


def planned_extra_rows(query: PromptQuery, methods: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The most rows each method's adaptive step may add to `planned_rows` (0 for most methods)."""
    out = {}
    for method_id, given in methods.items():
        spec = get_prompt_method(method_id)
        out[method_id] = spec.extra_rows_for(
            spec.resolve_params(given), query.n_features, len(query.prompt), query.n_steps
        )
    return out


def prompt_session(
    lm: LanguageModel,
    query: PromptQuery,
    methods: Mapping[str, Mapping[str, Any]],
    *,
    lease: Lease[LanguageModel] | None = None,
    cache: Cache | None = None,
    key: Callable[[str], Hashable] | None = None,
    progress: Progress | None = None,
    done: Callable[[Outcome[PromptExplanation]], None] | None = None,
) -> list[Outcome[PromptExplanation]]:
    """Each method (id -> its parameters) on the query, in order, as a `run_session`: a method that fails is
    reported in its `Outcome` and the others go on. A computed method runs on `lease(method)` when given (a page's
    leased replica of `lm`), else on `lm`."""
    held = lease or own(lm)

    def compute(method_id: str) -> PromptExplanation:
        with held(method_id) as model:
            return run_method(model, query, method_id, methods[method_id])

    return run_session(
        list(methods),
        compute,
        label=lambda m: get_prompt_method(m).label,
        cache=cache,
        key=key,
        progress=progress,
        done=done,
    )


def explain_prompt(
    lm: LanguageModel, query: PromptQuery, methods: Mapping[str, Mapping[str, Any]]
) -> dict[str, PromptExplanation]:
    """Each method's attributions of the query's target to its features (method id -> explanation, in order); the
    first method that failed raises its error (`prompt_session` keeps the others' answers)."""
    outcomes = prompt_session(lm, query, methods)
    for outcome in outcomes:
        if outcome.exception is not None:
            raise outcome.exception
    return {o.method: o.value for o in outcomes if o.value is not None}


def run_method(lm: LanguageModel, query: PromptQuery, method_id: str, given: Mapping[str, Any]) -> PromptExplanation:
    """One method on the query, its parameters checked, in the guarded call seeded with the query's seed."""
    spec = get_prompt_method(method_id)
    params = spec.resolve_params(given)
    started = time.perf_counter()
    with guarded(lm.model, query.seed, lm.device):
        result = spec.compute(lm, query, params)
    seconds = time.perf_counter() - started
    values = np.asarray(result.attributions, dtype=np.float32).reshape(-1)
    if values.shape[0] != query.n_features:
        raise ExplainError(f"{spec.label} returned {values.shape[0]} values for {query.n_features} features.")
    per_step = None if result.per_step is None else np.asarray(result.per_step, dtype=np.float32)
    return PromptExplanation(
        method=spec.id,
        params=params,
        labels=list(query.labels),
        attributions=values,
        per_step=per_step,
        seconds=seconds,
        rows=int(result.rows),
        batch=int(result.batch),
        device=str(lm.device),
        diagnostics=dict(result.diagnostics),
    )


def method_choices() -> list[PromptMethodSpec]:
    return list_prompt_methods()
