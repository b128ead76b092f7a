"""The training samples the influence methods score: exactly those the run trained on, with the labels it trained
with (models/training/data.training_samples: validation excluded, the sample cap and any label noise applied), read
in chunks as model inputs. An imported model with a linked data set gets that set's whole train split (what similar
examples search; its own training data is unknown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import DatasetError
from xaidash.data.modalities import Modality, modality_of
from xaidash.data.registry import Split, get_source
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run
from xaidash.models.training.data import TrainingSamples, training_samples


@dataclass
class TrainingData:
    """The training samples of a run (`samples`: positions 0..n-1 of the run's training set, each with its index in
    the data set's train split and its labels) and the split they come from."""

    samples: TrainingSamples
    split: Split
    adapter: Modality
    note: str = ""

    def __len__(self) -> int:
        return len(self.samples)

    def raw(self, positions: list[int]) -> Any:
        """The raw inputs at these positions, as the data set's adapter reads them (images (n, C, H, W) in [0, 1],
        texts, table rows (n, F))."""
        return self.adapter.items(self.split, [int(self.samples.indices[p]) for p in positions])

    def inputs(self, bundle: ModelBundle, start: int, stop: int) -> torch.Tensor:
        """Positions start..stop-1 as the model reads them (prepared, on the bundle's device)."""
        return bundle.prepare(self.raw(list(range(start, stop))))

    def labels(self, start: int, stop: int) -> torch.Tensor:
        return self.samples.labels[start:stop]


def training_data(run: Run) -> TrainingData:
    """The run's training samples; ExplainError when they cannot be known or loaded."""
    config = run.config()
    name = config.get("dataset")
    if not name:
        raise ExplainError(f"Run {run.id} has no training data set, so no training samples to score.")
    try:
        source = get_source(str(name))
        split = source.load("train")
    except DatasetError as e:
        raise ExplainError(f"Cannot load the training split of {name}: {e}") from None
    if len(split) == 0:
        raise ExplainError(f"The training split of {name} is empty.")
    adapter = modality_of(source.info.modality)
    if run.kind == "imported":  # its training data is unknown; the linked set's train split stands in
        labels = split.labels.long()
        samples = TrainingSamples(torch.arange(len(split)), labels, labels)
        note = f"imported model: the whole train split of {name} (not its training data)"
        return TrainingData(samples, split, adapter, note)
    try:
        return TrainingData(training_samples(run, split), split, adapter)
    except ModelError as e:
        raise ExplainError(str(e)) from None
