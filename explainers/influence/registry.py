"""The training-data influence methods: one `InfluenceMethodSpec` each, registered by its module
(`fast.py`, `projected.py`, `similar.py`); the CLI and the pages list them from here, never by name.

A method declares what it caches per training sample and snapshot of the model (`Scorer.features`), how a query's
features score against a chunk of training samples (`Scorer.score`) and a sample against itself (`Scorer.self_score`),
and which snapshots it sums over (`Scorer.snapshots`): the run's epoch checkpoints weighted by their learning rate
(TracIn) or the final weights alone (similar examples)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from xaidash.data.specs import Registry, Spec
from xaidash.explainers.params import ExplainError
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run


@dataclass(frozen=True)
class Snapshot:
    """One state of the model a method reads: an epoch checkpoint (`epoch`) or the final weights (epoch None),
    weighted by `weight` (the learning rate of the epoch that ended there, for TracIn; 1 otherwise)."""

    tag: str  # the cache folder's name: "epoch_003" or "final"
    epoch: int | None
    path: Path
    weight: float


class Scorer(Protocol):
    """What a method computes; the cache (`cache.FeatureCache`) streams training samples through it."""

    chunk_size: int  # training samples per cached chunk (memory stays about this many rows of features)
    channels_last: bool  # whether the cache may run convolution models in the NHWC layout

    def snapshots(self, run: Run) -> tuple[list[Snapshot], list[str]]:
        """The snapshots to sum over and notes on them (which learning rates, what was left out)."""
        ...

    def features(self, model: nn.Module, layer: nn.Linear, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        """Per-sample features of prepared inputs `x` under `model` for the loss of `labels` (float32 tensors, N rows)."""
        ...

    def score(self, query: dict[str, torch.Tensor], train: dict[str, torch.Tensor]) -> torch.Tensor:
        """(N,) one snapshot's unweighted score of each training row for the one query row."""
        ...

    def self_score(self, train: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """(N,) one snapshot's unweighted self-influence of each row; None when the method has none."""
        ...

    def settings(self) -> dict[str, Any]:
        """What the cached features depend on besides the snapshots (kept in the cache's fingerprint)."""
        ...


@dataclass(frozen=True)
class InfluenceMethodSpec(Spec):
    id: str
    label: str
    description: str
    units: str
    featured: int | None = field(kw_only=True)  # required: every method says whether it is picked by default
    scorer: Scorer = field(compare=False, repr=False)
    # Why it does not apply to a run (None: it does); see `applies`.
    check: Callable[[Run], str | None] = field(compare=False, repr=False, default=lambda run: None)
    # Whose gradients or activations it reads, in words; formatted with layer, inputs, outputs (of the final linear
    # layer) and params (trainable parameters).
    layer: str = "the final linear layer `{layer}`"
    self_influence: bool = False  # whether it ranks the training set by self-influence

    def applies(self, run: Run) -> str | None:
        """None when the method works on `run`, else one sentence on why not and what does."""
        return _classes_only(run) or self.check(run)


def _classes_only(run: Run) -> str | None:
    """Why no influence method applies to a run that predicts a number: they all score training samples through a
    classifier's loss (its cross-entropy over the classes, its final layer's per-class gradient)."""
    try:
        regression = run.info.regression
    except ModelError:  # an unreadable run: the method's own check says what is wrong
        return None
    if regression is None:
        return None
    return (
        f"the influence methods score training samples through a classifier's loss; this run predicts a number "
        f"({regression.name})"
    )


def _unknown(method_id: Hashable, known: list[str]) -> str:
    return f"Unknown influence method {method_id!r}; known: {', '.join(s.id for s in list_influence_methods())}."


INFLUENCE_METHODS: Registry[InfluenceMethodSpec] = Registry("influence method", error=ExplainError, unknown=_unknown)


def register(spec: InfluenceMethodSpec) -> InfluenceMethodSpec:
    return INFLUENCE_METHODS.register(spec)


def list_influence_methods() -> list[InfluenceMethodSpec]:
    """Every method, featured first (by rank), then by id."""
    rest = sorted(INFLUENCE_METHODS.all(lambda s: s.featured is None), key=lambda s: s.id)
    return [*INFLUENCE_METHODS.featured(), *rest]


def get_influence_method(id: str) -> InfluenceMethodSpec:
    return INFLUENCE_METHODS.get(id)


def influence_methods_for(run: Run) -> list[tuple[InfluenceMethodSpec, str | None]]:
    """Every method with None where it applies to `run`, else why not."""
    return [(spec, spec.applies(run)) for spec in list_influence_methods()]
