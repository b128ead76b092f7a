"""Attribution methods for text models: Integrated Gradients, saliency, LIME and SHAP over words.

Ids are `ig`, `saliency`, `lime` and `shap_kernel`, the same as the image methods: the registry keys
methods by (id, modality), so `--methods ig,lime` means the right thing for either kind of run.

What is removed or replaced when a word is "absent":
- IG and SHAP replace a word's pieces with the padding id (special tokens such as [CLS] and
  [SEP] stay). Every text model here masks padding out of attention and pooling, and the
  padding embedding is zero, so a padded word is close to a deleted one.
- LIME deletes the word (lime's masking with an empty mask string), done on the ids: the word's
  pieces are dropped and the rest moved left (`text_perturb.deleted_rows`, the ids re-tokenizing the
  shortened string gives, but for the cases listed there).
Gradient methods explain the target logit; LIME and SHAP the target probability.

LIME and SHAP build their perturbations as id rows on the device, and every input's share one stream
of batched model passes (`text_perturb`); the surrogates are the libraries': lime's `LimeBase` with
lime_text's sampling, kernel and distance, and captum KernelShap's coalitions and fit. The libraries'
own per-input calls are kept in `text_reference` (tests and bench/text_explain_speed.py compare).

SHAP is KernelShap over words rather than shap's Partition explainer with a
`shap.maskers.Text`: it masks ids directly (the same padding as IG's baseline), while the shap masker
needs a mask string every tokenizer reads as "absent", which the word vocabulary has none of (unknown
words map to <unk>, a word of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

from xaidash.explainers.baselines import logits_with_embeddings_of, padding_ids
from xaidash.explainers.methods._common import batch_slices, kernel_coalitions, kernel_shap_fit, scored_rows
from xaidash.explainers.methods._path import IG_TOLERANCE, refined_path
from xaidash.explainers.methods.text_perturb import (
    deleted_rows,
    deletion_samples,
    kept_lengths,
    padded_rows,
    shown_positions,
    stacked,
    trim_padding,
    word_layout,
)
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import (
    OUTPUT_CHANGE,
    STEPS_USED,
    Completeness,
    MethodContext,
    MethodOutput,
    MethodSpec,
    register,
    relative_gap,
)
from xaidash.models.bundle import ModelBundle


def _needs_embedding(bundle: ModelBundle) -> str | None:
    if not bundle.spec.embedding:
        return "the model declares no token embedding layer"
    return None


def _embedding(ctx: MethodContext) -> torch.nn.Module:
    name = ctx.bundle.spec.embedding
    if not name:
        raise ExplainError(f"{ctx.bundle.spec.name} declares no token embedding layer.")
    return ctx.bundle.layer(name)


# (inputs i, (R,) long; the features each row shows, (R, K) 0/1) -> the (R, L') id rows the model scores.
RowsOf = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# --- Integrated Gradients -------------------------------------------------------------------


def _text_ig(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    model, layer, steps = ctx.model, _embedding(ctx), int(params["steps"])
    base = padding_ids(ctx.bundle, ctx.raw, ctx.x)
    lig = LayerIntegratedGradients(model, layer)
    attrs, changes = [], []
    # Chunks of inputs so that one forward pass holds about batch_size rows (inputs x steps).
    for s in batch_slices(len(ctx.x), max(1, ctx.batch_size // steps)):
        x, b, t = ctx.x[s], base[s], ctx.targets[s]
        a = lig.attribute(
            x, baselines=b, target=t, n_steps=steps, internal_batch_size=max(ctx.batch_size, len(x))
        ).detach()
        # captum's own delta runs the model on the baseline ids, whose padding mask differs from
        # the input's; the path integrated here keeps the input's ids (and mask) and moves only
        # the embeddings, so completeness is checked against that path's end points.
        end = ctx.bundle.logits(x, ctx.batch_size)
        start = logits_with_embeddings_of(ctx.bundle, x, b, ctx.batch_size)
        rows = torch.arange(len(x), device=x.device)
        changes.append((end - start)[rows, t].float())
        attrs.append(a.float().sum(-1) if a.dim() == 3 else a.float())  # one value per token
    attr, change = torch.cat(attrs), torch.cat(changes)
    used = [steps] * len(attr)
    for i in range(len(attr)):
        if relative_gap(float(attr[i].sum() - change[i]), float(change[i])) > IG_TOLERANCE:
            attr[i], used[i] = _refined_text_path(ctx, layer, base, i, float(change[i]), steps)
    delta = (attr.sum(1) - change).abs().cpu().tolist()
    return MethodOutput(
        attributions=attr,
        diagnostics={"convergence_delta": delta, OUTPUT_CHANGE: change.cpu().tolist(), STEPS_USED: used},
    )


def _refined_text_path(
    ctx: MethodContext, layer: torch.nn.Module, base: torch.Tensor, i: int, change: float, steps: int
) -> tuple[torch.Tensor, int]:
    """Input i's IG integrated again on an adaptively split path (`_path.refined_path`): the same straight line
    from the padding embedding to the words' embeddings, the input's ids (and so its padding mask) kept."""
    model, ids, target = ctx.model, ctx.x[i : i + 1], int(ctx.targets[i])
    with torch.no_grad():
        start, end = layer(base[i : i + 1]).float(), layer(ids).float()
    diff = end - start

    def run(alphas: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        a = alphas.to(device=diff.device, dtype=diff.dtype).view(-1, 1, 1)
        emb = (start + a * diff).requires_grad_(grad)
        handle = layer.register_forward_hook(lambda module, inputs, output: emb.to(output.dtype))
        try:
            with torch.set_grad_enabled(grad):
                out = model(ids.expand(len(a), -1)).float()[:, target]
                g = torch.autograd.grad(out.sum(), emb)[0] if grad else None
        finally:
            handle.remove()
        return out.detach(), None if g is None else (g * diff).sum(-1)

    def integrand(alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, g = run(alphas, True)
        assert g is not None
        return out, g

    attr, used = refined_path(
        integrand,
        lambda alphas: run(alphas, False)[0],
        change,
        steps=steps,
        tolerance=IG_TOLERANCE,
        rows=ctx.batch_size,
    )
    return attr, used


# --- Saliency -------------------------------------------------------------------------------


def _text_saliency(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    # multiply_by_inputs=False: captum returns the plain gradient of the target logit w.r.t. the
    # embedding output; its L2 norm over the embedding dimension is the token's saliency.
    method = LayerGradientXActivation(ctx.model, _embedding(ctx), multiply_by_inputs=False)
    norms = [
        method.attribute(ctx.x[s], target=ctx.targets[s]).detach().norm(dim=-1)
        for s in batch_slices(len(ctx.x), ctx.batch_size)
    ]
    return MethodOutput(attributions=torch.cat(norms))


# --- LIME and KernelSHAP: word perturbations as id rows on the device (text_perturb) ------------


def _scores(
    ctx: MethodContext, on: torch.Tensor, rows: RowsOf, what: str, lengths: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """The target probability of every perturbation of every input, (N, samples) float64 on the CPU, through
    one stream of batched passes. on: (N, samples, K) 0/1 on the device, the features each sample shows;
    rows(i, shown) builds the id rows of inputs i showing those features. lengths: (N, samples) ids each
    row keeps, when they differ: the rows then run shortest first, so each pass pads its rows little."""
    n, samples = on.shape[:2]
    order = None if lengths is None else torch.as_tensor(np.argsort(lengths.ravel(), kind="stable"))
    order = None if order is None else order.to(ctx.x.device)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * samples + s: input i perturbed by its sample s.
        row = index if order is None else order[index]
        i, s = row // samples, row % samples
        return rows(i, on[i, s]), ctx.targets[i]

    probs, used = scored_rows(ctx, n * samples, build, probability=True, what=what)
    if order is not None:
        probs = torch.empty_like(probs).index_copy_(0, order, probs)  # back to row order
    return probs.view(n, samples).cpu().double().numpy(), used


def _lime_fit(data: np.ndarray, probs: np.ndarray, seed: int) -> tuple[np.ndarray, float]:
    """lime_text's surrogate of one input: lime's LimeBase with lime_text's kernel (width 25) on its distance
    (cosine to the unperturbed text, times 100), ridge regression. Returns (a weight per word, weighted R^2)."""
    from lime.lime_text import LimeTextExplainer
    from sklearn.metrics import pairwise_distances

    d = data.shape[1]
    distances = pairwise_distances(data, data[:1], metric="cosine").ravel() * 100
    base = LimeTextExplainer(random_state=seed).base
    # lime_text's feature_selection 'auto' with num_features = every word keeps every word: 'none' fits the
    # same model without forward selection's refits.
    _, coefs, score, _ = base.explain_instance_with_data(
        data, probs[:, None], distances, 0, d, feature_selection="none"
    )
    weights = np.zeros(d, dtype=np.float32)
    for feature, weight in coefs:
        weights[int(feature)] = weight
    return weights, float(score)


def _text_lime(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    layout, samples, pad = word_layout(ctx), int(params["samples"]), ctx.bundle.tokenizer.pad_id
    # Features are split_words' words up to the last one the model reads, positions kept apart (lime's
    # bow=False); a removed word is deleted.
    on = stacked([deletion_samples(samples, len(words), ctx.seed) for words in layout.words])
    empty = ctx.bundle.tokenizer.encode([""])[0].to(ctx.x.device)

    def rows(i: torch.Tensor, shown: torch.Tensor) -> torch.Tensor:
        word = layout.word[i]
        return trim_padding(deleted_rows(ctx.x[i], shown_positions(word, shown), word >= 0, pad, empty), pad)

    lengths = kept_lengths(layout, ctx.x, on, pad)
    probs, used = _scores(ctx, torch.as_tensor(on, device=ctx.x.device), rows, "LIME", lengths)
    fits = [_lime_fit(on[i, :, : len(words)], probs[i], ctx.seed) for i, words in enumerate(layout.words)]
    return MethodOutput(
        attributions=[weights for weights, _ in fits],
        words=layout.words,
        diagnostics={"surrogate_r2": [r2 for _, r2 in fits], "batch_size": [float(used)] * len(fits)},
    )


def _text_shap(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    layout, samples, pad = word_layout(ctx), int(params["samples"]), ctx.bundle.tokenizer.pad_id
    # Players are the words with ids; special tokens and padding are none and keep their ids.
    player = layout.players()
    draws = [kernel_coalitions(samples, len(have), ctx.seed) for have in layout.present]
    on = stacked([coalitions for coalitions, _ in draws])

    def rows(i: torch.Tensor, shown: torch.Tensor) -> torch.Tensor:
        return trim_padding(padded_rows(ctx.x[i], shown_positions(player[i], shown), pad), pad)

    f, used = _scores(ctx, torch.as_tensor(on, device=ctx.x.device), rows, "KernelSHAP")
    scores, gaps, changes = [], [], []
    for i, (have, (coalitions, weights)) in enumerate(zip(layout.present, draws, strict=True)):
        values = np.zeros(len(layout.words[i]), dtype=np.float32)  # a word the tokenizer dropped scores 0
        values[have] = kernel_shap_fit(coalitions, f[i], weights)
        scores.append(values)
        changes.append(float(f[i, 0] - f[i, 1]))  # rows 0 and 1: the text, all words padded
        gaps.append(abs(float(values.sum()) - changes[-1]))
    return MethodOutput(
        attributions=scores,
        words=layout.words,
        diagnostics={"additivity_gap": gaps, OUTPUT_CHANGE: changes, "batch_size": [float(used)] * len(scores)},
    )


register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=("text",),
        compute=_text_ig,
        params=(
            Param(
                "steps",
                "int",
                50,
                "Points on the path from the padding baseline to the text; raised automatically (up to 8x) for a "
                "text whose attributions miss the logit change by more than 1%.",
                min=2,
                max=1000,
            ),
        ),
        description="Layer Integrated Gradients on the token embeddings, from an all-padding baseline "
        "(special tokens kept), for the target logit. Where the sum misses the logit change by more than 1%, the "
        "path is integrated again on segments split where it turns sharply (diagnostic steps: the points used). "
        "convergence_delta: |sum of attributions - logit change|.",
        applies=_needs_embedding,
        signed=True,
        family="gradient",
        output="logit",
        completeness=Completeness(
            reference="padding_embedding", unit="word", diagnostic="convergence_delta", tolerance=IG_TOLERANCE
        ),
        featured=1,
    )
)

register(
    MethodSpec(
        id="saliency",
        label="Saliency",
        modalities=("text",),
        compute=_text_saliency,
        description="L2 norm of the gradient of the target logit with respect to each token's embedding "
        "(how sensitive the score is to that word; unsigned).",
        applies=_needs_embedding,
        signed=False,
        family="gradient",
        output="logit",
        featured=2,
    )
)

register(
    MethodSpec(
        id="lime",
        label="LIME",
        modalities=("text",),
        compute=_text_lime,
        params=(
            Param(
                "samples",
                "int",
                500,
                "Perturbed texts (random word deletions) the surrogate is fitted on.",
                min=10,
                max=20000,
            ),
        ),
        description="LIME over words, as lime's LimeTextExplainer: words deleted at random, a weighted linear "
        "surrogate of the target probability fitted on the results (lime's LimeBase). "
        "surrogate_r2: the surrogate's fit on those samples.",
        signed=True,
        family="perturbation",
        output="probability",
        featured=3,
    )
)

register(
    MethodSpec(
        id="shap_kernel",
        label="SHAP",
        modalities=("text",),
        compute=_text_shap,
        params=(Param("samples", "int", 200, "Word coalitions evaluated by Kernel SHAP.", min=10, max=20000),),
        description="Kernel SHAP (captum) over words, absent words replaced by padding, for the target "
        "probability. additivity_gap: |sum of values - (p(text) - p(all padding))|.",
        signed=True,
        family="shap",
        output="probability",
        completeness=Completeness(reference="padding_tokens", unit="word", diagnostic="additivity_gap"),
    )
)
