"""Gradient attributions of a generated token to the prompt: layer integrated gradients and input x gradient on
the token embeddings, through captum.

The explained output is read teacher-forced in one pass over [prompt ; target_ids[:-1]]: the logits of the last
`n_steps` positions give every generated step's log-probability at once (a causal model's step s sees only the
prompt and the steps before it, so this equals captum's one pass per step).

captum's `LLMGradientAttribution(LayerIntegratedGradients(model, embed_tokens))` integrates along the embedding
layer's output from the baseline ids' embeddings to the prompt's. Here captum's `IntegratedGradients` runs on
`inputs_embeds` directly: the same path and the same Gauss-Legendre points, without the two extra full passes
LayerIntegratedGradients makes only to read the embedding layer's output (an embedding lookup needs no model).
The baseline replaces the embeddings at feature positions only, so the template keeps its own tokens (captum's
TextTokenInput with skip_tokens does the same by token id, not by position). The tests check the result against
captum's own LLMGradientAttribution call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from captum.attr import InputXGradient, IntegratedGradients

from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.language.query import PromptQuery, PromptResult
from xaidash.explainers.language.registry import PromptMethodSpec, register
from xaidash.explainers.language.scoring import explained, step_log_probs
from xaidash.explainers.methods._path import IG_TOLERANCE, RAISE, refined_path, refinement_passes, step_budget
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, STEPS_USED, Completeness, relative_gap
from xaidash.models.language.model import LanguageModel

GAP = "convergence_delta"  # |sum of attributions - (f(prompt) - f(baseline))|
MAX_STEPS = 512


def sequence_ids(lm: LanguageModel, query: PromptQuery) -> torch.Tensor:
    """(1, P + n_steps - 1) ids the target is read from teacher-forced: the prompt, then every generated step but
    the last (whose log-probability is read at the position before it)."""
    ids = list(query.prompt.ids) + list(query.target_ids[:-1])
    return torch.tensor([ids], dtype=torch.long, device=lm.device)


def output_columns(query: PromptQuery, logits: torch.Tensor) -> torch.Tensor:
    """(N, n_steps + 1) from the logits (N, n_steps, V) of the last n_steps positions: each step's log-probability
    of its generated token (with a contrast, the span's step holds log p(target) - log p(contrast), as in
    `scoring.score_rows`), then the explained output (the span's columns summed)."""
    steps = step_log_probs(query, logits)
    return torch.cat([steps, explained(query, steps)[:, None]], dim=1)


def embeddings_forward(lm: LanguageModel, query: PromptQuery) -> Callable[[torch.Tensor], torch.Tensor]:
    """embeddings (N, T, D) -> output columns (N, n_steps + 1) (`output_columns`), only the last n_steps positions'
    logits computed (`logits_to_keep`): the vocabulary projection of the prompt positions is never needed."""
    model, keep = lm.model, query.n_steps

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        out = model(inputs_embeds=embeds, use_cache=False, logits_to_keep=keep)
        return output_columns(query, out.logits)

    return forward


def feature_positions(query: PromptQuery) -> list[int]:
    return sorted({p for group in query.features for p in group})


def embeddings_of(lm: LanguageModel, query: PromptQuery) -> tuple[torch.Tensor, torch.Tensor]:
    """(input, baseline) embeddings (1, T, D): the baseline has the baseline token's embedding at feature positions
    and the input's own everywhere else (template and generated tokens)."""
    layer = lm.embedding()
    ids = sequence_ids(lm, query)
    with torch.no_grad():
        embeds = layer(ids).detach()
        base = embeds.clone()
        positions = torch.tensor(feature_positions(query), device=ids.device)
        base[:, positions] = layer(torch.tensor([query.baseline_id], device=ids.device)).to(base.dtype)
    return embeds, base


def grouped(query: PromptQuery, per_position: torch.Tensor) -> np.ndarray:
    """(K, T) values per sequence position -> (K, n_features): each feature's positions summed."""
    values = per_position.detach().double().cpu().numpy()
    return np.stack([values[:, list(g)].sum(1) for g in query.features], axis=1)


def targets_of(query: PromptQuery, per_step: bool) -> list[int]:
    """The output columns one call attributes: the explained output alone, or every step, from which the explained
    output is then summed (IG and input x gradient are linear in the output)."""
    return list(range(query.n_steps)) if per_step else [query.n_steps]


def explained_of(query: PromptQuery, rows: np.ndarray, per_step: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(attributions of the explained output, per-step matrix or None) from the rows of `targets_of`."""
    if not per_step:
        return rows[0], None
    return rows[query.span[0] : query.span[1]].sum(0), rows


def _attribute(lm: LanguageModel, query: PromptQuery, make: Callable[[int], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """make(rows per pass) with gradients on, under out-of-memory halving. captum asks autograd for the gradient of
    the embeddings alone, so no weight gradient is computed or stored."""
    with torch.enable_grad():
        return run_halving(make, rows_per_pass(query.batch_size, lm.device), what="the prompt's gradients")


# --- Layer integrated gradients -------------------------------------------------------------


def _layer_ig(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    steps, per_step = int(params["steps"]), bool(params["per_step"])
    forward = embeddings_forward(lm, query)
    embeds, base = embeddings_of(lm, query)
    targets = targets_of(query, per_step)
    ig = IntegratedGradients(forward, multiply_by_inputs=True)

    def run(batch: int) -> torch.Tensor:
        k = len(targets)  # one input row per attributed output column, all on the same path
        return ig.attribute(
            embeds.expand(k, -1, -1),
            baselines=base.expand(k, -1, -1),
            target=targets,
            n_steps=steps,
            internal_batch_size=max(batch, k),
        )

    attr, batch = _attribute(lm, query, run)
    rows = grouped(query, attr.float().sum(-1))  # summed over the embedding dimension, then over each feature
    total, matrix = explained_of(query, rows, per_step)
    with torch.no_grad():
        ends = forward(torch.cat([embeds, base]))[:, -1].double().cpu().numpy()
    change = float(ends[0] - ends[1])
    passes = steps * len(targets) + 2
    used = steps
    if params["refine"] and relative_gap(float(total.sum()) - change, change) > IG_TOLERANCE:
        total, used = _refined(lm, query, embeds, base, change, steps, batch)
        passes += sum(refinement_passes(steps, used))
    return PromptResult(
        attributions=total,
        per_step=matrix,
        rows=passes,
        batch=batch,
        diagnostics={GAP: abs(float(total.sum()) - change), OUTPUT_CHANGE: change, STEPS_USED: float(used)},
    )


def _refined(
    lm: LanguageModel,
    query: PromptQuery,
    embeds: torch.Tensor,
    base: torch.Tensor,
    change: float,
    steps: int,
    batch: int,
) -> tuple[np.ndarray, int]:
    """The explained output's IG integrated again on an adaptively split path (`_path.refined_path`, shared with
    the image and text IG): the same straight line, split where the output turns sharply (an attention head
    switching keys), which Gauss-Legendre points spread evenly miss."""
    forward, diff = embeddings_forward(lm, query), embeds - base
    column = query.n_steps

    def run(alphas: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        a = alphas.to(device=diff.device, dtype=diff.dtype).view(-1, 1, 1)
        point = (base + a * diff).requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            out = forward(point)[:, column]
            g = torch.autograd.grad(out.sum(), point)[0] if grad else None
        return out.detach(), None if g is None else (g * diff).sum(-1)

    def integrand(alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, g = run(alphas, True)
        assert g is not None
        return out, g

    attr, used = refined_path(
        integrand, lambda alphas: run(alphas, False)[0], change, steps=steps, tolerance=IG_TOLERANCE, rows=batch
    )
    return grouped(query, attr[None])[0], used


def _ig_rows(params: dict[str, Any], features: int, tokens: int, steps: int) -> int:
    outputs = steps if params.get("per_step") else 1
    return int(params["steps"]) * outputs + 2


def _ig_refinement_rows(params: dict[str, Any], features: int, tokens: int, steps: int) -> int:
    """The most rows the path's refinement adds (none unless the values miss the output's change by more than 1%)."""
    asked = int(params["steps"])
    return sum(refinement_passes(asked, step_budget(asked))) if params.get("refine") else 0


PER_STEP = Param(
    "per_step",
    "bool",
    False,
    "Also attribute every generated step's own log-probability (the prompt x answer matrix): one more backward "
    "pass per step (and per path point for IG).",
)

register(
    PromptMethodSpec(
        id="layer_ig",
        label="Layer integrated gradients",
        compute=_layer_ig,
        passes=_ig_rows,
        output="log_probability",
        family="gradient",
        params=(
            Param(
                "steps",
                "int",
                16,
                "Points on the path from the baseline token's embedding to the prompt's (Gauss-Legendre); more "
                "points close the completeness gap.",
                min=2,
                max=MAX_STEPS,
            ),
            PER_STEP,
            Param(
                "refine",
                "bool",
                True,
                "Where the values miss the output's change by more than 1%, integrate the path again on segments "
                f"split where it turns sharply, up to {RAISE}x the points (the explained output only, not the "
                "per-step rows), rather than show a map whose values miss what they promise; slower when it "
                "happens, and how much is not known before it runs. Off: the points asked, whatever the gap.",
            ),
        ),
        extra_passes=_ig_refinement_rows,
        extra_when="where the values miss the output's change by more than 1% and the path is refined",
        description="Integrated gradients of the explained log-probability along the token embeddings, from the "
        "baseline token's embedding at every feature position (template tokens kept) to the prompt's, summed over "
        "the embedding dimension. The values add up to the change of the explained output between the two "
        f"(diagnostic {GAP}: how far they miss it).",
        signed=True,
        completeness=Completeness(reference="baseline_embedding", unit="token", diagnostic=GAP),
        gradients=True,
        featured=3,
        reference="captum LLMGradientAttribution(LayerIntegratedGradients)",
    )
)


# --- Input x gradient -------------------------------------------------------------------------


def _input_x_gradient(lm: LanguageModel, query: PromptQuery, params: dict[str, Any]) -> PromptResult:
    per_step = bool(params["per_step"])
    embeds, _ = embeddings_of(lm, query)
    targets = targets_of(query, per_step)
    ixg = InputXGradient(embeddings_forward(lm, query))

    def run(batch: int) -> torch.Tensor:
        # One row per attributed column: a single batched forward and backward (captum has no internal batching
        # for input x gradient, so the rows go through in chunks of `batch`).
        out = [
            ixg.attribute(embeds.expand(len(chunk), -1, -1).clone().requires_grad_(), target=chunk)
            for chunk in (targets[i : i + batch] for i in range(0, len(targets), batch))
        ]
        return torch.cat(out)

    attr, batch = _attribute(lm, query, run)
    total, matrix = explained_of(query, grouped(query, attr.float().sum(-1)), per_step)
    return PromptResult(attributions=total, per_step=matrix, rows=len(targets), batch=batch)


def _ixg_rows(params: dict[str, Any], features: int, tokens: int, steps: int) -> int:
    return steps if params.get("per_step") else 1


register(
    PromptMethodSpec(
        id="input_x_gradient",
        label="Input x gradient",
        compute=_input_x_gradient,
        passes=_ixg_rows,
        output="log_probability",
        family="gradient",
        params=(PER_STEP,),
        description="Each prompt token's embedding times the gradient of the explained log-probability with "
        "respect to it, summed over the embedding dimension: one forward and backward pass (a first-order, local "
        "estimate; its values add up to nothing in particular).",
        signed=True,
        gradients=True,
        reference="captum LLMGradientAttribution(LayerGradientXActivation)",
    )
)
