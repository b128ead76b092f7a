"""Training recipes: the settings that train each zoo model well on each kind of data.

A model declares its recipes where it registers (`ModelSpec.recipes`), keyed by the kind of data
they were tested on: a data set's name (`shapes`, `mnist`, `cues`, ...), a user-data prefix
(`imagefolder`, `csv`), or a modality (`image`, `text`) as the model's own fallback. `recipe_for`
picks the most specific one, else a generic recipe for the modality. The CLI and the Train form
start from the recipe; every field can still be overridden.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo

Optimizer = Literal["adam", "adamw", "sgd"]
Schedule = Literal["cosine", "onecycle", "constant"]
Augment = Literal["none", "shift", "flip", "shift+flip"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "adamw", "sgd")
SCHEDULES: tuple[Schedule, ...] = ("cosine", "onecycle", "constant")
AUGMENTATIONS: tuple[Augment, ...] = ("none", "shift", "flip", "shift+flip")


@dataclass(frozen=True)
class TrainSettings:
    """The training settings a recipe fixes; `TrainConfig.with_recipe()` fills every one the user left open.

    max_train_samples: train on at most this many samples (a random subset), 0 for all: what keeps a run
    affordable where one pass over the data costs minutes (a pretrained encoder on the CPU).
    """

    epochs: int
    batch_size: int
    lr: float
    optimizer: Optimizer = "adamw"
    schedule: Schedule = "onecycle"
    augment: Augment = "none"
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    max_train_samples: int = 0


@dataclass(frozen=True)
class Recipe(TrainSettings):
    """Training settings for one model on one kind of data.

    expected_acc: the test accuracy this recipe reached on that data where it was measured (None for
    an untested fallback); runs far below it are flagged. expected_r2: the same for a number to predict (test R²). recommended: preselect this model for the data.
    model_options: build options the recipe needs (e.g. minilm fine-tunes its encoder on sst2), used when the
    user gives none; pairs, so the recipe stays hashable.
    """

    expected_acc: float | None = None
    expected_r2: float | None = None
    recommended: bool = False
    model_options: tuple[tuple[str, Any], ...] = ()

    def settings(self) -> dict[str, Any]:
        """The fields a training config takes from the recipe."""
        return {f.name: getattr(self, f.name) for f in fields(TrainSettings)}


SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(TrainSettings))


def describe(s: TrainSettings) -> str:
    """The settings in one line: '3 epochs, batch 128, lr 0.003, adamw, onecycle, augment shift, weight decay 0.05'."""
    extra = [f"weight decay {s.weight_decay:g}"] if s.weight_decay else []
    extra += [f"label smoothing {s.label_smoothing:g}"] if s.label_smoothing else []
    extra += [f"at most {s.max_train_samples:,} training samples"] if s.max_train_samples else []
    epochs = f"{s.epochs} epoch" + ("s" if s.epochs != 1 else "")
    augment = [f"augment {s.augment}"] if s.augment != "none" else []
    return ", ".join([f"{epochs}, batch {s.batch_size}, lr {s.lr:g}, {s.optimizer}, {s.schedule}", *augment, *extra])


def scale_lr(lr: float, from_batch: int, to_batch: int, optimizer: Optimizer) -> float:
    """The learning rate for batches of `to_batch` from one tuned at `from_batch`: in proportion to the batch
    for SGD (the linear scaling rule, Goyal et al. 2017), to its square root for Adam and AdamW, whose updates
    are normalised per coordinate (Malladi et al. 2022). Three significant figures, as a person would type it."""
    ratio = to_batch / from_batch
    scaled = lr * (ratio if optimizer == "sgd" else math.sqrt(ratio))
    return float(f"{scaled:.3g}")


def scales_lr(recipe: Recipe, batch_size: int | None) -> bool:
    """Whether a batch size given without a learning rate gets the recipe's rate scaled: only above the recipe's
    batch. A smaller batch takes more steps per epoch at the recipe's rate, which trains as well or better (a
    square-root-lowered rate cost resnet_small on 3,000 shapes samples 8 points after 3 epochs at batch 64)."""
    return batch_size is not None and batch_size > recipe.batch_size


def lr_note(recipe: Recipe, batch_size: int, optimizer: Optimizer) -> str:
    """How the learning rate was derived when the batch differs from the recipe's (for the CLI and the form)."""
    rule = "in proportion, for SGD" if optimizer == "sgd" else f"by the square root, for {optimizer}"
    return (
        f"learning rate {scale_lr(recipe.lr, recipe.batch_size, batch_size, optimizer):g}: the recipe's "
        f"{recipe.lr:g} at batch {recipe.batch_size}, scaled to batch {batch_size} ({rule})"
    )


def generic_recipe(info: DatasetInfo) -> Recipe:
    """The untested fallback for a model that declares nothing for this kind of data: the moderate, stable settings
    its modality declares (`Modality.generic_training`)."""
    return Recipe(**dict(modality_of(info.modality).generic_training))


def data_keys(info: DatasetInfo) -> tuple[str, ...]:
    """Recipe keys for a data set, most specific first: its name, its user-data prefix, its modality."""
    prefix = info.name.split(":", 1)[0] if ":" in info.name else None
    return tuple(k for k in (info.name, prefix, info.modality) if k)


def recipe_for(recipes: Mapping[str, Recipe], info: DatasetInfo) -> tuple[str, Recipe]:
    """(key, recipe) of the most specific recipe for this data; ('generic', ...) when none is declared."""
    for key in data_keys(info):
        if key in recipes:
            return key, recipes[key]
    return "generic", generic_recipe(info)
