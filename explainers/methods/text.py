"""Attribution methods for text models: Integrated Gradients, saliency, LIME and SHAP over words.

Ids are `ig`, `saliency`, `lime` and `shap_kernel`, the same as the image methods: the registry keys
methods by (id, modality), so `--methods ig,lime` means the right thing for either kind of run.

What is removed or replaced when a word is "absent":
- IG and SHAP replace a word's pieces with the padding id (special tokens such as [CLS] and
  [SEP] stay). Every text model here masks padding out of attention and pooling, and the
  padding embedding is zero, so a padded word is close to a deleted one.
- LIME deletes the word from the string (lime's masking with an empty mask string).
Gradient methods explain the target logit; LIME and SHAP the target probability.

SHAP is captum's KernelShap over words rather than shap's Partition explainer with a
`shap.maskers.Text`: it masks ids directly (the same padding as IG's baseline) and batches the
coalitions on the device, while the shap masker needs a mask string every tokenizer reads as
"absent", which the word vocabulary has none of (unknown words map to <unk>, a word of its own).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from captum.attr import KernelShap, LayerGradientXActivation, LayerIntegratedGradients
from lime.lime_text import LimeTextExplainer

from xaidash.data.tokenizer import split_words, word_spans
from xaidash.explainers.baselines import logits_with_embeddings_of, padding_ids
from xaidash.explainers.methods._common import batch_slices
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import Completeness, MethodContext, MethodOutput, MethodSpec, register
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


def _word_ids(ctx: MethodContext, i: int) -> list[int | None]:
    """Word index of each id position of input i (None for special tokens), cut to the encoded width."""
    return ctx.bundle.tokenizer.word_ids(ctx.raw[i])[: ctx.x.shape[1]]


# --- Integrated Gradients -------------------------------------------------------------------


def _text_ig(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    model, layer, steps = ctx.model, _embedding(ctx), params["steps"]
    base = padding_ids(ctx.bundle, ctx.raw, ctx.x)
    lig = LayerIntegratedGradients(model, layer)
    attrs, deltas = [], []
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
        deltas.append(a.sum(dim=tuple(range(1, a.dim()))).float() - (end - start)[rows, t])
        attrs.append(a)
    delta = torch.cat(deltas).abs().cpu().tolist()
    return MethodOutput(attributions=torch.cat(attrs), diagnostics={"convergence_delta": delta})


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


# --- LIME -----------------------------------------------------------------------------------


def _visible_word_count(ctx: MethodContext, i: int) -> int:
    """How many leading words of input i the model reads (later ones were cut by max_length)."""
    ids = [w for w in _word_ids(ctx, i) if w is not None]
    return max(ids) + 1 if ids else 0


def _text_lime(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    bundle = ctx.bundle

    def classifier(texts: list[str]) -> np.ndarray:
        return bundle.predict_proba(texts, batch_size=ctx.batch_size).numpy()

    scores, words, r2 = [], [], []
    for i, text in enumerate(ctx.raw):
        n_words = _visible_word_count(ctx, i)
        if n_words == 0:
            raise ExplainError(f"Text {i + 1} has no word the model can read.")
        target = int(ctx.targets[i])
        # Features are split_words' words (original case, as lime cuts the string), positions kept
        # apart (bow=False); a removed word is deleted (empty mask string).
        explainer = LimeTextExplainer(
            class_names=list(bundle.info.classes),
            split_expression=lambda s, n=n_words: [s[a:b] for a, b in word_spans(s)][:n],
            bow=False,
            mask_string="",
            random_state=ctx.seed,
        )
        exp = explainer.explain_instance(
            text, classifier, labels=(target,), num_features=n_words, num_samples=params["samples"]
        )
        weights = np.zeros(n_words, dtype=np.float32)
        for feature, weight in exp.local_exp[target]:
            if feature < n_words:  # text after the cut can form one more lime "word": the model never read it
                weights[feature] = weight
        scores.append(weights)
        words.append(split_words(text)[:n_words])
        r2.append(float(exp.score))
    return MethodOutput(attributions=scores, words=words, diagnostics={"surrogate_r2": r2})


# --- SHAP -----------------------------------------------------------------------------------


def _text_shap(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    model = ctx.model

    def proba(ids: torch.Tensor) -> torch.Tensor:
        return torch.softmax(model(ids), dim=-1)

    base_all = padding_ids(ctx.bundle, ctx.raw, ctx.x)
    scores, words, gaps = [], [], []
    for i, text in enumerate(ctx.raw):
        word_ids = _word_ids(ctx, i)
        present = sorted({w for w in word_ids if w is not None})
        if not present:
            raise ExplainError(f"Text {i + 1} has no word the model can read.")
        n_words = present[-1] + 1
        feature_of = {w: k for k, w in enumerate(present)}  # contiguous features, words the tokenizer dropped left out
        x = ctx.x[i : i + 1, : len(word_ids)]
        base = base_all[i : i + 1, : len(word_ids)]
        # Special tokens join feature 0; their baseline equals the input, so that feature only moves its word.
        mask = torch.tensor([[feature_of[w] if w is not None else 0 for w in word_ids]], device=x.device)
        target = int(ctx.targets[i])
        with torch.no_grad():
            ends = proba(torch.cat([x, base]))[:, target]
        gap = float(ends[0] - ends[1])
        if len(present) == 1:
            phi = torch.tensor([gap])  # one player: its Shapley value is the whole difference
        else:
            # captum draws coalitions from torch's global generator: reseeded per input, an input's
            # values depend on the seed alone, not on the inputs explained before it.
            torch.manual_seed(ctx.seed)
            phi = (
                KernelShap(proba)
                .attribute(
                    x,
                    baselines=base,
                    target=target,
                    feature_mask=mask,
                    n_samples=params["samples"],
                    perturbations_per_eval=max(1, min(ctx.batch_size, params["samples"])),
                    return_input_shape=False,
                )[0]
                .detach()
                .cpu()
            )
        values = np.zeros(n_words, dtype=np.float32)
        values[present] = phi.numpy()
        scores.append(values)
        words.append(split_words(text)[:n_words])
        gaps.append(float(values.sum()) - gap)
    return MethodOutput(attributions=scores, words=words, diagnostics={"additivity_gap": [abs(g) for g in gaps]})


register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=("text",),
        compute=_text_ig,
        params=(
            Param("steps", "int", 50, "Points on the path from the padding baseline to the text.", min=2, max=1000),
        ),
        description="Layer Integrated Gradients on the token embeddings, from an all-padding baseline "
        "(special tokens kept), for the target logit. convergence_delta: |sum of attributions - logit change|.",
        applies=_needs_embedding,
        signed=True,
        family="gradient",
        output="logit",
        completeness=Completeness(reference="padding_embedding", unit="word", diagnostic="convergence_delta"),
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
        description="lime's LimeTextExplainer: words deleted at random, a weighted linear surrogate of the target "
        "probability fitted on the results. surrogate_r2: the surrogate's fit on those samples.",
        signed=True,
        family="perturbation",
        output="probability",
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
