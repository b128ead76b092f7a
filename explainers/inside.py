"""Gradient views of what a model computes inside.

- Effective receptive field (Luo et al., 2016, "Understanding the Effective Receptive Field in
  Deep Convolutional Neural Networks"): the gradient of one unit of a layer (all channels of
  the centre unit by default) with respect to the input pixels, its absolute value summed over
  input channels and averaged over many inputs. Shown for the trained weights and for the same
  architecture re-initialised at random, beside the theoretical box of `models.inspect`.
  Written by hand: captum attributes outputs of the whole model, not of one unit of an
  inner layer averaged over inputs.
- Explanations across training: one input explained with the weights of every saved epoch,
  each with that epoch's validation accuracy, through `explainers.explain`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.receptive_field import why_not_applicable
from xaidash.models.registry import ModelError
from xaidash.models.runstore import Run, load_bundle, resolve_run

Progress = Callable[[int, int], None]


class _Stop(Exception):
    """Raised by the hook once the chosen layer has run: the rest of the forward pass is not needed."""


# ---- effective receptive field --------------------------------------------------------------
@dataclass
class ERF:
    layer: str
    unit: tuple[int, int]
    output_size: tuple[int, int]
    map: np.ndarray  # (H, W) mean |d unit / d pixel|, summed over input channels
    samples: int
    weights: str  # "trained" | "random"

    def normalized(self) -> np.ndarray:
        top = float(self.map.max())
        return self.map / top if top > 0 else self.map

    def fraction_inside(self, box: tuple[int, int, int, int]) -> float:
        """The share of the summed gradient that falls inside the inclusive pixel box (top, left, bottom, right)."""
        top, left, bottom, right = box
        total = float(self.map.sum())
        return float(self.map[top : bottom + 1, left : right + 1].sum()) / total if total > 0 else 0.0

    def support(self, threshold: float = 0.0) -> tuple[int, int, int, int] | None:
        """(top, left, bottom, right) of the pixels whose normalised gradient exceeds `threshold`; None if none does."""
        rows, cols = np.nonzero(self.normalized() > threshold)
        if rows.size == 0:
            return None
        return int(rows.min()), int(cols.min()), int(rows.max()), int(cols.max())


def effective_receptive_field(
    model: nn.Module,
    x: torch.Tensor,
    layer: str,
    unit: tuple[int, int] | None = None,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]]:
    """(mean |gradient| map (H, W), unit, layer output size) of `layer`'s unit for prepared inputs x (N, C, H, W).

    The objective for each input is the sum over channels of the layer's output at `unit`
    (default: the centre unit); inputs are independent in eval mode, so one backward pass per
    batch gives every input's own gradient.
    """
    if x.dim() != 4:
        raise ExplainError(f"The effective receptive field needs images (N, C, H, W); got shape {tuple(x.shape)}.")
    try:
        module = model.get_submodule(layer)
    except AttributeError:
        raise ExplainError(f"{type(model).__name__} has no layer {layer!r}.") from None
    captured: dict[str, torch.Tensor] = {}

    def hook(mod: nn.Module, inputs: Any, output: Any) -> None:
        captured["out"] = output
        raise _Stop

    was_training = model.training
    model.eval()
    total = torch.zeros(x.shape[-2:], dtype=torch.float64)
    out_hw: tuple[int, int] | None = None
    handle = module.register_forward_hook(hook)
    try:
        for start in range(0, len(x), batch_size):
            xb = x[start : start + batch_size].detach().clone().requires_grad_(True)
            captured.clear()
            try:
                model(xb)
            except _Stop:
                pass
            out = captured.get("out")
            if not isinstance(out, torch.Tensor) or out.dim() != 4:
                raise ExplainError(
                    f"Layer {layer!r} does not output a feature map (N, C, H, W); pick a conv or pooling layer."
                )
            out_hw = (int(out.shape[-2]), int(out.shape[-1]))
            r, c = unit if unit is not None else (out_hw[0] // 2, out_hw[1] // 2)
            if not (0 <= r < out_hw[0] and 0 <= c < out_hw[1]):
                raise ExplainError(f"Unit ({r}, {c}) is outside {layer}'s output of {out_hw[0]}x{out_hw[1]}.")
            (grad,) = torch.autograd.grad(out[:, :, r, c].sum(), xb)
            total += grad.detach().abs().sum(1).sum(0).double().cpu()
            if progress:
                progress(min(start + batch_size, len(x)), len(x))
    finally:
        handle.remove()
        model.train(was_training)
    assert out_hw is not None
    return (total / len(x)).float().numpy(), (r, c), out_hw


def reinitialized(model: nn.Module, seed: int = 0) -> nn.Module:
    """A copy of `model` with every layer's parameters drawn afresh (and BatchNorm statistics reset)."""
    torch.manual_seed(seed)
    fresh = copy.deepcopy(model)
    for m in fresh.modules():
        if hasattr(m, "reset_parameters") and callable(m.reset_parameters):
            m.reset_parameters()
    return fresh.eval()


def bundle_erf(
    bundle: ModelBundle,
    images01: torch.Tensor,
    layer: str,
    unit: tuple[int, int] | None = None,
    random_weights: bool = False,
    seed: int = 0,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> ERF:
    """The effective receptive field of `layer` over images (N, C, H, W) in [0, 1], with the
    bundle's weights or (random_weights) a randomly re-initialised copy of the model."""
    reason = why_not_applicable(bundle.model, bundle.modality, bool(bundle.spec.attention))
    if reason:
        raise ExplainError(f"No receptive field for {bundle.spec.name}: {reason}.")
    images01 = torch.as_tensor(images01, dtype=torch.float32)
    if images01.dim() == 3:
        images01 = images01.unsqueeze(0)
    if len(images01) == 0:
        raise ExplainError("The effective receptive field needs at least one input image.")
    model = reinitialized(bundle.model, seed) if random_weights else bundle.model
    x = bundle.prepare(images01)
    grad_map, unit, out_hw = effective_receptive_field(model, x, layer, unit, batch_size, progress)
    return ERF(layer, unit, out_hw, grad_map, len(x), "random" if random_weights else "trained")


# ---- explanations across training ---------------------------------------------------------
@dataclass
class EpochExplanations:
    epoch: int
    val_acc: float | None
    predicted: int
    probability: float  # of the explained target class
    explanations: dict[str, Explanation]


@dataclass
class TrainingExplanations:
    target: int
    epochs: list[EpochExplanations] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it does not apply to this model

    def methods(self) -> list[str]:
        return list(self.epochs[0].explanations) if self.epochs else []

    def scale(self, method: str) -> float:
        """The largest |value| of one method over every epoch: one colour scale for its row."""
        return max((e.explanations[method].max_abs() for e in self.epochs if method in e.explanations), default=0.0)


def default_methods(modality: str) -> tuple[str, ...]:
    return ("gradcam", "ig") if modality == "image" else ("ig",)


def epoch_validation(run: Run) -> dict[int, float]:
    """epoch -> validation accuracy from the run's epoch records (the last record of an epoch wins)."""
    out: dict[int, float] = {}
    for r in run.metrics():
        if r.get("kind") == "epoch" and r.get("val_acc") is not None:
            out[int(r["epoch"])] = float(r["val_acc"])
    return out


def explanations_across_training(
    run: str | Run,
    raw: torch.Tensor | str,
    methods: Sequence[str] | None = None,
    target: int | None = None,
    device: str = "auto",
    method_params: dict[str, dict[str, Any]] | None = None,
    epochs: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> TrainingExplanations:
    """One input (an image (C, H, W) in [0, 1] or a text) explained with the weights of every saved
    epoch (or the `epochs` given). The target is the same class at every epoch: `target`, else the
    final model's prediction. Methods that do not apply to the model are listed in `skipped`."""
    r = run if isinstance(run, Run) else resolve_run(run)
    saved = [e for e, _ in r.checkpoints()]
    if not saved:
        raise ExplainError(f"Run {r.id} has no per-epoch checkpoints: train it with this version to get one per epoch.")
    wanted = list(saved if epochs is None else epochs)
    missing = sorted(set(wanted) - set(saved))
    if missing:
        raise ExplainError(f"Run {r.id} has no checkpoint for epoch {', '.join(map(str, missing))} (has {saved}).")
    try:
        final = load_bundle(r, device=device)
    except ModelError as e:
        raise ExplainError(str(e)) from e
    methods = list(methods or default_methods(final.modality))
    params = method_params or {}
    usable, skipped = [], {}
    for m in methods:
        spec = get_method(m, final.modality)
        reason = None
        try:
            spec.check(final)
        except ExplainError as e:
            reason = str(e)
        if reason:
            skipped[m] = reason
        else:
            usable.append(m)
    if target is None:
        target = int(final.predict_proba([raw] if isinstance(raw, str) else raw).argmax(1)[0])
    elif not 0 <= int(target) < final.info.num_classes:
        raise ExplainError(f"Target class must lie in 0..{final.info.num_classes - 1}.")
    val = epoch_validation(r)
    out = TrainingExplanations(target=int(target), skipped=skipped)
    for i, epoch in enumerate(wanted):
        bundle = load_bundle(r, device=device, epoch=epoch)
        proba = bundle.predict_proba([raw] if isinstance(raw, str) else raw)[0]
        explanations = {m: explain(bundle, raw, int(target), method=m, **params.get(m, {})) for m in usable}
        out.epochs.append(
            EpochExplanations(epoch, val.get(epoch), int(proba.argmax()), float(proba[int(target)]), explanations)
        )
        if progress:
            progress(i + 1, len(wanted))
    return out


# ---- attention of one input, ready to draw ---------------------------------------------------
@dataclass
class AttentionView:
    """Every layer's and head's attention for one input, as numpy, with what the tokens are.

    weights: (layers, heads, T, T), rows (queries) summing to one. tokens: one label per position.
    grid: (rows, cols) of the image patches behind tokens 1.. (vision) or None (text).
    query: the row the model's prediction reads — the class token (vision, BERT's [CLS]) or,
    for text_transformer which pools the mean of its tokens, None (the mean over rows is used).
    """

    weights: np.ndarray
    tokens: list[str]
    grid: tuple[int, int] | None
    query: int | None

    @property
    def layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def heads(self) -> int:
        return int(self.weights.shape[1])

    def matrix(self, layer: int, head: int | None = None) -> np.ndarray:
        """(T, T): one head, or the mean over heads (head None)."""
        w = self.weights[layer]
        return w.mean(0) if head is None else w[head]

    def read_row(self, matrix: np.ndarray) -> np.ndarray:
        """(T,) the attention the prediction reads from a (T, T) matrix: the query token's row or the mean row."""
        return matrix[self.query] if self.query is not None else matrix.mean(0)

    def patch_map(self, matrix: np.ndarray) -> np.ndarray:
        """Vision: (rows, cols) attention from the class token to each patch."""
        if self.grid is None:
            raise ExplainError("Patch maps exist for vision transformers only.")
        row = self.read_row(matrix)
        patches = row[1:] if self.query is not None else row
        return patches.reshape(self.grid)

    def rollout(self) -> np.ndarray:
        """(T, T) attention rollout (mean over heads, residual mixed in) through all layers."""
        from xaidash.explainers.attention import rollout

        fused = [torch.from_numpy(self.weights[i].mean(0))[None] for i in range(self.layers)]
        return rollout(fused, residual=True)[0].numpy()


def attention_view(bundle: ModelBundle, raw: torch.Tensor | str) -> AttentionView:
    """The attention of every layer and head of `bundle` for one image (C, H, W) in [0, 1] or one text."""
    from xaidash.explainers.attention import collect_attention, has_attention

    if not has_attention(bundle.model):
        raise ExplainError(
            f"{bundle.spec.name} has no attention to show: only transformer models (vit_tiny, text_transformer, minilm) do."
        )
    x = bundle.prepare([raw] if isinstance(raw, str) else raw)[:1]
    weights = np.stack([a[0].cpu().numpy() for a in collect_attention(bundle.model, x)])  # (L, H, T, T)
    t = weights.shape[-1]
    if bundle.modality == "text":
        tokens = list(bundle.tokenizer.tokens(raw))
        if len(tokens) != t:
            raise ExplainError(f"The attention covers {t} tokens but the tokenizer shows {len(tokens)}.")
        word_ids = bundle.tokenizer.word_ids(raw)
        query = 0 if word_ids and word_ids[0] is None else None  # a leading [CLS] is what the head reads
        return AttentionView(weights, tokens, None, query)
    grid = getattr(bundle.model, "grid", None)
    if grid is None:
        raise ExplainError(f"{bundle.spec.name} does not say how its tokens lie on the image (no `grid`).")
    gh, gw = int(grid[0]), int(grid[1])
    if t == gh * gw + 1:
        tokens, query = ["[CLS]"] + [f"patch ({r},{c})" for r in range(gh) for c in range(gw)], 0
    elif t == gh * gw:
        tokens, query = [f"patch ({r},{c})" for r in range(gh) for c in range(gw)], None
    else:
        raise ExplainError(f"{t} attention tokens do not fit a {gh}x{gw} patch grid.")
    return AttentionView(weights, tokens, (gh, gw), query)
