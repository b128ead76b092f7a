"""Similar examples (`similar`): the training samples nearest to the input by cosine similarity of the final model's
penultimate activations (the input of its final linear layer). Needs no checkpoints and no training labels: what
applies to a run with one checkpoint or an imported model with a linked data set. Similarity is not influence: it
says what the model sees as alike, not what taught it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.explainers.influence.layer import activations_and_logits
from xaidash.explainers.influence.registry import InfluenceMethodSpec, Snapshot, register
from xaidash.explainers.influence.snapshots import final_snapshot, similar_problem
from xaidash.models.runs.store import Run


class Similar:
    chunk_size = 512
    channels_last = True  # forward passes only: NHWC convolutions are several times faster on CPUs

    def snapshots(self, run: Run) -> tuple[list[Snapshot], list[str]]:
        snap = final_snapshot(run)
        if not snap.path.exists() and run.checkpoints():
            epoch, path = run.checkpoints()[-1]
            snap = Snapshot(f"epoch_{epoch:03d}", epoch, path, 1.0)
        return ([snap] if snap.path.exists() else []), [
            "cosine similarity of the final weights' penultimate activations"
        ]

    def features(self, model: nn.Module, layer: nn.Linear, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        acts, _ = activations_and_logits(model, layer, x)
        return {"unit": acts / acts.norm(dim=1, keepdim=True).clamp_min(1e-12)}

    def score(self, query: dict[str, torch.Tensor], train: dict[str, torch.Tensor]) -> torch.Tensor:
        return train["unit"] @ query["unit"][0]

    def self_score(self, train: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return None

    def settings(self) -> dict[str, Any]:
        return {}


register(
    InfluenceMethodSpec(
        id="similar",
        label="Similar examples",
        description="The training samples the final model sees as most alike (cosine similarity of its penultimate "
        "activations); works without checkpoints, for imported models too.",
        units="cosine similarity (−1 to 1)",
        featured=2,
        scorer=Similar(),
        check=similar_problem,
        layer="input of the final linear layer `{layer}` ({inputs} penultimate activations)",
        self_influence=False,
    )
)
