"""Training configuration and outcomes: what to train (`TrainConfig`), the progress events a run emits
(`TrainEvent`), what a run ended with (`TrainResult`) and the error a run fails with (`TrainingFailed`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_source
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import check_device
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runs.store import Run, load_bundle
from xaidash.models.training.compiled import COMPILE_MODES, Compile
from xaidash.models.training.recipes import (
    AUGMENTATIONS,
    OPTIMIZERS,
    SCHEDULES,
    SETTINGS,
    Augment,
    Optimizer,
    Recipe,
    Schedule,
    TrainSettings,
    scale_lr,
    scales_lr,
)

# Seeds go to numpy (0 .. 2**32 - 1) and torch; one more is refused by numpy.
MAX_SEED = 2**32 - 1


@dataclass
class TrainConfig:
    """What to train on what, and how. Every setting left None comes from the model's recipe for the data set
    (`with_recipe()`, done once when a run is set up; see models/training/recipes.py); any of them can be given instead."""

    dataset: str = "shapes"
    model: str = "resnet_small"
    # ---- None: from the model's recipe for this data --------------------------------------------------------------
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    optimizer: Optimizer | None = None
    weight_decay: float | None = None
    schedule: Schedule | None = None
    augment: Augment | None = None
    label_smoothing: float | None = None
    max_train_samples: int | None = None  # train on a random subset of this many samples; 0: all of them
    # ---- not part of a recipe ------------------------------------------------------------------------------------
    momentum: float = 0.9  # SGD only
    device: str = "auto"
    seed: int = 0
    val_fraction: float = 0.1
    # Fraction of the training samples (validation excluded) whose label is flipped to another class, seeded by
    # `seed`: a run with known label errors, to test their detection (explainers/influence; data.flip_labels).
    label_noise: float = 0.0
    amp: bool = True  # bf16 autocast while training, on CUDA and on CPUs with native bf16 (models/device.py)
    workers: int = 0
    model_options: dict[str, Any] = field(default_factory=dict)
    # Processes training this run together (DistributedDataParallel, one per GPU; models/training/launcher.py launches
    # them); --batch-size stays the global batch, split evenly over them.
    nproc: int = 1
    # Launch overhead on a GPU (models/training/compiled.py): torch.compile ("on"), plus CUDA graphs ("graphs"); NHWC layout.
    compile: Compile = "off"
    channels_last: bool = False

    def recipe(self) -> tuple[str, Recipe]:
        """(key, recipe): the model's recipe for this data set (ModelError / DatasetError for unknown names)."""
        return get_spec(self.model).recipe(get_source(self.dataset).info)

    def with_recipe(self) -> TrainConfig:
        """A copy with every setting left None taken from the recipe: what a run trains with, and what the Train
        form pre-fills when the model or data set changes. A batch size larger than the recipe's, given without
        a learning rate, gets the recipe's learning rate scaled to it (`scale_lr`), so a larger batch (fewer
        steps, fewer launches on a GPU) keeps training well."""
        _, recipe = self.recipe()
        filled = {k: getattr(recipe, k) for k in SETTINGS if getattr(self, k) is None}
        if self.lr is None and scales_lr(recipe, self.batch_size):
            assert self.batch_size is not None
            optimizer = self.optimizer or recipe.optimizer
            filled["lr"] = scale_lr(recipe.lr, recipe.batch_size, self.batch_size, optimizer)
        if not self.model_options and recipe.model_options:
            filled["model_options"] = dict(recipe.model_options)
        return replace(self, **filled)

    def settings(self) -> TrainSettings:
        """The resolved settings, typed; ModelError while one is still open (call with_recipe() first)."""
        missing = [k for k in SETTINGS if getattr(self, k) is None]
        if missing:
            raise ModelError(f"Training settings not resolved: {', '.join(missing)} (call with_recipe() first).")
        return TrainSettings(**{k: getattr(self, k) for k in SETTINGS})

    def validate(self) -> None:
        """Refuse impossible settings (those left None are the recipe's, checked once resolved)."""
        problems = []
        if self.epochs is not None and self.epochs < 1:
            problems.append("epochs must be at least 1")
        if self.batch_size is not None and self.batch_size < 1:
            problems.append("batch size must be at least 1")
        if (self.epochs or 0) > 100_000 or (self.batch_size or 0) > 1_000_000:  # as run_schema reads them back
            problems.append("epochs must be at most 100000 and the batch size at most 1000000")
        if self.lr is not None and not (0 < self.lr < 10):
            problems.append("learning rate must be in (0, 10)")
        if self.weight_decay is not None and not (0 <= self.weight_decay <= 10):  # also refuses nan and inf
            problems.append("weight decay must be at least 0 (and at most 10)")
        if self.label_smoothing is not None and not (0 <= self.label_smoothing < 1):
            problems.append("label smoothing must be in [0, 1)")
        if self.max_train_samples is not None and self.max_train_samples < 0:
            problems.append("the training-sample cap must be at least 0 (0: all samples)")
        if not (1 <= self.nproc <= 64):
            problems.append("the number of training processes must be between 1 and 64")
        if not (0 <= self.workers <= 64):
            problems.append("DataLoader workers must be between 0 and 64")
        if not isinstance(self.seed, int) or not (0 <= self.seed <= MAX_SEED):  # what numpy's seed accepts
            problems.append(f"the seed must be a whole number between 0 and {MAX_SEED}")
        if not (0 <= self.momentum < 1):
            problems.append("momentum must be in [0, 1)")
        if not (0 <= self.val_fraction < 0.9):
            problems.append("validation fraction must be in [0, 0.9)")
        if not (0 <= self.label_noise < 0.5):  # also refuses nan: at 0.5 the flipped labels could outvote the rest
            problems.append("label noise must be in [0, 0.5)")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            problems.append(f"unknown optimizer {self.optimizer!r} ({', '.join(OPTIMIZERS)})")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            problems.append(f"unknown schedule {self.schedule!r} ({', '.join(SCHEDULES)})")
        if self.compile not in COMPILE_MODES:
            problems.append(f"unknown compile mode {self.compile!r} ({', '.join(COMPILE_MODES)})")
        if self.augment is not None and self.augment not in AUGMENTATIONS:
            problems.append(f"unknown augmentation {self.augment!r} ({', '.join(AUGMENTATIONS)})")
        if problems:
            raise ModelError("Invalid training settings: " + "; ".join(problems) + ".")
        # The CLI and the Train form both reach here before any folder exists: names, options and the device too.
        spec = get_spec(self.model)
        spec.check_options(self.model_options)
        check_device(self.device)
        if self.augment not in (None, "none"):  # shifts and flips are for pictures: the data's adapter says
            adapter = modality_of(get_source(self.dataset).info.modality)
            if self.augment not in adapter.augmentations:
                raise ModelError(
                    f"Augmentation {self.augment!r} does not apply to the {adapter.label} of {self.dataset}; "
                    f"choose {' or '.join(adapter.augmentations)}."
                )


@dataclass
class TrainEvent:
    """One step of a run's progress, sent to the callbacks: its start, a step record, an epoch, its end."""

    kind: Literal["start", "step", "epoch", "end"]
    run_id: str
    epoch: int = 0
    epochs: int = 0
    step: int = 0
    total_steps: int = 0
    train_loss: float | None = None
    train_acc: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None
    val_r2: float | None = None  # a number to predict: R² on the validation share (it has no accuracy)
    lr: float | None = None
    samples_per_s: float | None = None
    interval_steps: int | None = None  # step events: train_loss/acc are the means over this many steps
    elapsed_s: float = 0.0
    eta_s: float | None = None
    state: str = "running"  # running | completed | stopped | failed
    message: str = ""

    @property
    def progress(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0


Callback = Callable[[TrainEvent], None]


@dataclass
class TrainResult:
    """How a run ended: its state and error, its test figures, and which weights it kept."""

    run: Run
    state: str
    error: str | None
    test_acc: float | None
    test_loss: float | None
    epochs_done: int  # complete epochs
    partial_steps: int = 0  # steps of the unfinished epoch whose weights were kept
    kept: str = ""  # which weights the run holds, in one sentence

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def ok(self) -> bool:
        return self.state in ("completed", "stopped")

    @property
    def bundle(self) -> ModelBundle:
        return load_bundle(self.run, device="auto")

    def to_message(self) -> dict[str, Any]:
        """Plain values to send from a training process to its parent (the Run goes as its path)."""
        out = {k: v for k, v in asdict(self).items() if k != "run"}
        return {"path": str(self.run.path), **out}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> TrainResult:
        """The result `to_message` described."""
        fields = dict(message)
        return cls(run=Run(Path(fields.pop("path"))), **fields)


class TrainingFailed(Exception):
    """A run stopped on an error the user can act on (NaN loss, out of memory)."""
