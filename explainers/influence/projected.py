"""TracIn over all parameters, randomly projected (`tracin_projected`): each training sample's full loss gradient
at each checkpoint (per-sample gradients with torch.func), projected to `dim` numbers by a seeded count sketch (every
parameter goes to one of `dim` coordinates with a random sign: an unbiased estimate of the gradients' dot product
that needs no dense projection matrix, so memory stays that of one chunk's gradients); the score is
Σ_checkpoints lr_c · (P g_q)·(P g_t). Slower than the final-layer variant (a backward pass per sample) but it sees
every layer.

By hand rather than captum's TracInCP (no projection) or TracInCPFastRandProj (the final layer only, and it keeps
every training sample's projections in memory in a nearest-neighbour index): here the projections are cached in
chunks per run and checkpoint (cache.py) and reused by every query."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from xaidash.explainers.influence.registry import InfluenceMethodSpec, Snapshot, register
from xaidash.explainers.influence.snapshots import checkpoint_snapshots, tracin_problem
from xaidash.models.runs.store import Run

DIM = 512
SEED = 0
# Per-sample gradients of a chunk are held at once: at most about this many floats (~400 MB), fewer rows per pass.
MAX_FLOATS = 100_000_000


def per_sample_grads(model: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """{parameter name: (N, numel)} each sample's cross-entropy gradient (its own label), in eval mode."""
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = dict(model.named_buffers())

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return F.cross_entropy(out.float(), yi.unsqueeze(0), reduction="sum")

    try:
        grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, labels)
    except Exception:  # noqa: BLE001 - a model vmap cannot batch (data-dependent control flow): one sample at a time
        rows = [grad(loss)(params, x[i], labels[i]) for i in range(len(x))]
        grads = {n: torch.stack([r[n] for r in rows]) for n in params}
    return {n: g.reshape(len(x), -1) for n, g in grads.items()}


class ProjectedTracIn:
    chunk_size = 128
    channels_last = False  # torch.func's vmap has no fast batching rule for some NHWC kernels

    def __init__(self, dim: int = DIM, seed: int = SEED):
        self.dim, self.seed = dim, seed
        self._sketch: dict[tuple[str, int, str], tuple[torch.Tensor, torch.Tensor]] = {}

    def snapshots(self, run: Run) -> tuple[list[Snapshot], list[str]]:
        snaps, notes = checkpoint_snapshots(run)
        return snaps, [
            *notes,
            f"gradients of every parameter, count-sketch projected to {self.dim} dims (seed {self.seed})",
        ]

    def _bucket(self, name: str, numel: int, index: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (name, numel, str(device))
        if key not in self._sketch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
            bucket = torch.randint(0, self.dim, (numel,), generator=g)
            sign = torch.randint(0, 2, (numel,), generator=g).float() * 2 - 1
            self._sketch[key] = (bucket.to(device), sign.to(device))
        return self._sketch[key]

    def features(self, model: nn.Module, layer: nn.Linear, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
        step = max(1, min(len(x), MAX_FLOATS // max(numel, 1)))
        out = torch.zeros(len(x), self.dim, device=x.device)
        for s in range(0, len(x), step):
            grads = per_sample_grads(model, x[s : s + step], labels[s : s + step])
            for i, (name, g) in enumerate(grads.items()):
                bucket, sign = self._bucket(name, g.shape[1], i, g.device)
                out[s : s + step].index_add_(1, bucket, g.float() * sign)
        return {"proj": out}

    def score(self, query: dict[str, torch.Tensor], train: dict[str, torch.Tensor]) -> torch.Tensor:
        return train["proj"] @ query["proj"][0]

    def self_score(self, train: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return train["proj"].pow(2).sum(1)

    def settings(self) -> dict[str, Any]:
        return {"dim": self.dim, "seed": self.seed}


register(
    InfluenceMethodSpec(
        id="tracin_projected",
        label="TracIn (all layers, projected)",
        description="TracIn with the gradients of every parameter (randomly projected to 512 numbers), summed over "
        "the run's epoch checkpoints: sees every layer, slower than the final-layer variant.",
        units="Σ lr · projected gradient dot product (loss units²)",
        featured=None,
        scorer=ProjectedTracIn(),
        check=lambda run: tracin_problem(run, least=2),
        layer="all {params:,} parameters, count-sketch projected to 512 dims",
        self_influence=True,
    )
)
