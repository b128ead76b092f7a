"""A trained (or fresh) model together with everything needed to feed and explain it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.modalities import Modality, modality_of
from xaidash.data.registry import DatasetInfo, RegressionTarget
from xaidash.models.registry import ModelError, ModelSpec


@dataclass
class ModelBundle:
    """model + its spec + the data set it was trained on (+ tokenizer for text) + device.

    `prepare` turns raw inputs (images in [0, 1], or strings) into the tensor the model
    reads; explainers and pages go through it so normalisation lives in one place.
    """

    model: nn.Module
    spec: ModelSpec
    info: DatasetInfo
    device: torch.device
    tokenizer: Any = None
    run_dir: Path | None = None
    # False for an imported model with no data set linked: `info` then only describes its inputs and
    # classes, and inputs come from uploads or typed text (no gallery, no training images).
    has_dataset: bool = True

    @property
    def modality(self) -> str:
        return self.spec.modality

    @property
    def regression(self) -> RegressionTarget | None:
        """The number the model predicts (its one output, in the target's units), or None for a classifier."""
        return self.info.regression

    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        """What a page shows of a prediction, from the model's outputs (N, K): class probabilities (softmax), or the
        predicted number itself (N, 1) for a regression model; explained as a probability, a regression output is
        explained as its value."""
        return outputs if self.info.regression is not None else torch.softmax(outputs, dim=1)

    def no_dataset_reason(self, needs: str) -> str | None:
        """None when the model has a data set; else one line on why what `needs` it is unavailable and how to link one."""
        if self.has_dataset:
            return None
        return (
            f"{self.spec.name} is an imported model with no data set linked, so {needs} is unavailable: "
            "import it again with --dataset NAME (or pick a data set on the Import page) to link one."
        )

    @property
    def adapter(self) -> Modality:
        """What the model's inputs are (data/modalities): how they are batched, prepared, described."""
        return modality_of(self.modality)

    def prepare(self, inputs: torch.Tensor | Sequence[str]) -> torch.Tensor:
        return self.adapter.prepare(inputs, self.input_info, self.tokenizer, self.device)

    @property
    def input_info(self) -> DatasetInfo:
        """The data set's info with the model's own normalisation where it declares one."""
        if self.spec.input_mean:
            return replace(self.info, mean=self.spec.input_mean, std=self.spec.input_std)
        return self.info

    @torch.no_grad()
    def logits(self, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """Float logits (N, classes) on the device for prepared inputs `x` (what `prepare` returns),
        `batch_size` rows per forward pass, without gradients. The one batched forward pass every
        layer uses (predictions, metrics, SHAP expectations), so batching lives in one place."""
        step = max(1, int(batch_size))
        rows, select = self.adapter.rows(x), self.adapter.select
        out = [self.model(select(x, slice(i, i + step))).float() for i in range(0, rows, step)]
        return torch.cat(out) if out else torch.empty(0, self.info.num_classes, device=self.device)

    def predicted(self, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """The predicted class of each prepared input, (N,) long on the device. A model that predicts numbers has no
        class to pick: its first output (a forecast's next step), not the largest value."""
        logits = self.logits(x, batch_size)
        if self.regression is not None:
            return torch.zeros(len(logits), dtype=torch.long, device=logits.device)
        return logits.argmax(1)

    def predict_proba(
        self, inputs: torch.Tensor | Sequence[str], batch_size: int = 256, temperature: float | None = None
    ) -> torch.Tensor:
        """Class probabilities (N, classes) on the CPU for raw inputs, computed in batches on the device; for a
        regression model its predicted values (N, 1) in the target's units (`scores`).
        `temperature`: softmax(logits / T), the run's calibrated probabilities (models/calibration_run.py fits T);
        None is the plain softmax. T never changes the predicted class."""
        self.model.eval()
        logits = self.logits(self.prepare(inputs), batch_size)
        if self.info.regression is not None:
            return logits.cpu()
        if temperature is not None:
            if not temperature > 0:
                raise ModelError(f"A temperature must be positive, not {temperature}.")
            logits = logits / temperature
        return torch.softmax(logits, dim=1).cpu()

    def layer(self, path: str) -> nn.Module:
        return self.model.get_submodule(path)
