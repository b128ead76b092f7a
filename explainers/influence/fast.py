"""TracIn, final-layer variant (`tracin_fast`, the default): Pruthi et al. 2020, as captum's `TracInCPFast`.

The gradient of the loss with respect to the final linear layer's weights is the outer product of the layer's
input a (the penultimate activation) and the loss gradient at its output g = softmax(logits) - one_hot(label)
(cross-entropy), and with its bias it is g itself; so the dot product of two samples' final-layer gradients is
(a_q·a_t + 1)(g_q·g_t), and the influence of training sample t on query q is

    Σ_checkpoints lr_c · (a_q·a_t + 1) · (g_q·g_t)

with q's loss that of the class explained and t's that of the label it was trained with. Positive: a step on t
lowered q's loss (a proponent); negative: raised it (an opponent). Self-influence: Σ lr_c (|a_t|² + 1) |g_t|².

Written by hand, not through captum, because captum recomputes every training sample's activations for every
query batch; here they are cached per run and checkpoint (cache.py) and a query costs one forward pass per
checkpoint. captum's TracInCPFast leaves the bias out (its layer input only): `bias=False` gives its scores, and
tests/explainers/influence/test_captum_equivalence.py checks both against captum's own call (the reference kept
here, `captum_reference`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from xaidash.explainers.influence.layer import activations_and_logits
from xaidash.explainers.influence.registry import InfluenceMethodSpec, Snapshot, register
from xaidash.explainers.influence.snapshots import checkpoint_snapshots, tracin_problem
from xaidash.models.runs.store import Run


class FinalLayerTracIn:
    chunk_size = 512
    channels_last = True  # forward passes only: NHWC convolutions are several times faster on CPUs

    def __init__(self, bias: bool = True):
        self.bias = bias

    def snapshots(self, run: Run) -> tuple[list[Snapshot], list[str]]:
        snaps, notes = checkpoint_snapshots(run)
        if len(snaps) == 1:
            notes.append(
                "one checkpoint: the final-layer gradients of those weights alone (TracIn's sum over training has "
                "one term, so this ranks by gradient similarity at the end of training)"
            )
        return snaps, notes

    def features(self, model: nn.Module, layer: nn.Linear, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        acts, logits = activations_and_logits(model, layer, x)
        probs = torch.softmax(logits, dim=1)
        grads = probs - F.one_hot(labels.long(), logits.shape[1]).float()
        if self.bias and layer.bias is not None:  # the bias's gradient is g itself: a constant 1 beside a
            acts = torch.cat([acts, torch.ones(len(acts), 1, device=acts.device)], dim=1)
        # probs: the predictions under these weights (the self-influence table's, when they are the final ones)
        return {"acts": acts, "grads": grads, "probs": probs}

    def score(self, query: dict[str, torch.Tensor], train: dict[str, torch.Tensor]) -> torch.Tensor:
        return (train["acts"] @ query["acts"][0]) * (train["grads"] @ query["grads"][0])

    def self_score(self, train: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return train["acts"].pow(2).sum(1) * train["grads"].pow(2).sum(1)

    def settings(self) -> dict[str, Any]:
        return {"bias": self.bias}


def captum_reference(
    model: nn.Module,
    layer: nn.Linear,
    checkpoints: list[tuple[str, float]],
    train: tuple[torch.Tensor, torch.Tensor],
    query: tuple[torch.Tensor, torch.Tensor],
    batch_size: int = 256,
) -> torch.Tensor:
    """captum's own TracInCPFast scores (queries, training samples) for prepared `train` and `query` (inputs,
    labels): `checkpoints` are (safetensors path, learning rate). Kept for the tests and the benchmark."""
    from captum.influence import TracInCPFast
    from torch.utils.data import TensorDataset

    from xaidash.models.runs.checkpoint import load_weights

    rates = dict(checkpoints)

    def load(m: nn.Module, path: str) -> float:
        load_weights(m, Path(path))
        m.eval()
        return rates[path]

    tracin = TracInCPFast(
        model,
        layer,
        TensorDataset(*train),
        [p for p, _ in checkpoints],
        checkpoints_load_func=load,
        loss_fn=nn.CrossEntropyLoss(reduction="sum"),
        batch_size=batch_size,
    )
    return tracin.influence(query, k=None)


register(
    InfluenceMethodSpec(
        id="tracin_fast",
        label="TracIn (final layer)",
        description="How much training on each sample lowered (proponents) or raised (opponents) the loss of this "
        "prediction, summed over the run's epoch checkpoints, through the final linear layer's gradients.",
        units="Σ lr · final-layer gradient dot product (loss units²)",
        featured=1,
        scorer=FinalLayerTracIn(bias=True),
        check=lambda run: tracin_problem(run, least=1),
        layer="weights and bias of the final linear layer `{layer}` ({inputs} → {outputs})",
        self_influence=True,
    )
)
