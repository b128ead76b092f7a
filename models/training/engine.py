"""The training engine: one loop for every zoo model and data set.

Small data sets live on the device as tensors (no per-batch DataLoader overhead); image
folders stream through a DataLoader. bf16 autocast on CUDA and on CPUs that compute bf16 natively. Progress goes out as
`TrainEvent`s to any number of callbacks (CLI progress bar, dashboard job); a stop request
is honoured within one step and leaves a valid checkpoint.

`train` composes four steps that can be called (and tested) one by one: `setup_run` (settings,
run folder, data, model, optimizer, schedule; `restore_checkpoint` for a resumed run), `run_epoch`,
`write_checkpoint` and `finish_run`. They share a `TrainingSession`.
"""

from __future__ import annotations

import errno
import itertools
import math
import platform
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, DatasetSource, Split, TextSplit, get_source
from xaidash.data.tokenizer import Tokenizer, WordVocab
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import autocast, device_name
from xaidash.models.registry import ModelError, ModelSpec, get_spec
from xaidash.models.runs import schema as run_schema
from xaidash.models.runs.checkpoint import load_training_state, load_weights, save_training_state, save_weights
from xaidash.models.runs.lock import RunLock
from xaidash.models.runs.store import STATE, VOCAB, WEIGHTS, Run, info_to_json, kept_sentence, resolve_run
from xaidash.models.training.batches import LoaderData, Shard, TensorData, augment_images, image_tensors, text_tensors
from xaidash.models.training.compiled import COMPILE_MODES, Compile, CompiledSteps, uses_channels_last
from xaidash.models.training.distributed import SINGLE, DistContext, check_batch
from xaidash.models.training.finite_guard import FiniteGuard
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

# The choices, for the Train form and the CLI (defined with the recipes that use them).
__all__ = [
    "AUGMENTATIONS",
    "OPTIMIZERS",
    "SCHEDULES",
    "Augment",
    "Optimizer",
    "Schedule",
    "TrainConfig",
    "TrainEvent",
    "TrainResult",
    "train",
]


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
    amp: bool = True  # bf16 autocast while training, on CUDA and on CPUs with native bf16 (models/device.py)
    workers: int = 0
    model_options: dict[str, Any] = field(default_factory=dict)
    # Processes training this run together (DistributedDataParallel, one per GPU; models/training/distributed.py launches
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
        if self.seed < 0:
            problems.append("the seed must be at least 0")
        if not (0 <= self.momentum < 1):
            problems.append("momentum must be in [0, 1)")
        if not (0 <= self.val_fraction < 0.9):
            problems.append("validation fraction must be in [0, 0.9)")
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


@dataclass
class TrainEvent:
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
        from xaidash.models.runs.store import load_bundle

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


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "captum", "shap", "lime", "transformers", "safetensors", "xaidash"):
        with suppress(importlib_metadata.PackageNotFoundError):
            out[name] = importlib_metadata.version(name)
    return out


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


@dataclass
class _Prepared:
    info: DatasetInfo
    train: TensorData | LoaderData
    val: TensorData | LoaderData | None
    test: TensorData | LoaderData
    tokenizer: Any
    test_labels: torch.Tensor


def split_indices(n: int, seed: int, max_train_samples: int, val_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices into a training split of n samples: a seeded shuffle, capped at
    max_train_samples (0: no cap), the first val_fraction of it held out for validation."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    if max_train_samples:
        order = order[: max(2, max_train_samples)]
    n_val = int(len(order) * val_fraction)
    return order[n_val:], order[:n_val]


def _prepare_data(
    cfg: TrainConfig,
    settings: TrainSettings,
    source: DatasetSource,
    device: torch.device,
    run: Run,
    resume_vocab: bool,
    dist: DistContext = SINGLE,
) -> _Prepared:
    info = source.info
    spec = get_spec(cfg.model)
    train_split = source.load("train")
    test_split = source.load("test")
    if len(train_split) == 0:
        raise ModelError(f"Dataset {cfg.dataset} has an empty training split.")
    train_idx, val_idx = split_indices(len(train_split), cfg.seed, settings.max_train_samples, cfg.val_fraction)
    n_val = len(val_idx)

    tokenizer: Tokenizer | None = None
    if isinstance(train_split, TextSplit):
        if spec.tokenizer is not None:
            tokenizer = spec.tokenizer()
        elif resume_vocab and run.file(VOCAB).exists():
            tokenizer = WordVocab.load(run.file(VOCAB))
        else:
            vocab = WordVocab.build([train_split.texts[i] for i in train_idx.tolist()])  # alike on every rank
            if dist.main:
                vocab.save(run.file(VOCAB))
            tokenizer = vocab

    def make(split: Split, idx: torch.Tensor | None) -> TensorData | LoaderData:
        if isinstance(split, TextSplit):
            return text_tensors(split, tokenizer, device, idx)
        if split.in_memory:
            return image_tensors(split, info, device, idx)
        return LoaderData(split, info, device, list(range(len(split))) if idx is None else idx.tolist(), cfg.workers)

    return _Prepared(
        info=info,
        train=make(train_split, train_idx),
        val=make(train_split, val_idx) if n_val else None,
        test=make(test_split, None),
        tokenizer=tokenizer,
        test_labels=test_split.labels,
    )


def _optimizer(
    s: TrainSettings, momentum: float, params: list[nn.Parameter], device: torch.device
) -> torch.optim.Optimizer:
    # On a GPU the fused kernels update every parameter in a couple of launches and keep the step count on the
    # device (the default foreach path launches a few kernels per parameter group and reads the step on the host).
    fused = True if device.type == "cuda" and all(p.is_cuda for p in params) else None
    if s.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=s.lr, momentum=momentum, weight_decay=s.weight_decay, nesterov=momentum > 0, fused=fused
        )
    if s.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay, fused=fused)
    return torch.optim.Adam(params, lr=s.lr, weight_decay=s.weight_decay, fused=fused)


def _schedule(s: TrainSettings, opt: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    lr = s.lr
    if s.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, total_steps))
    if s.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total_steps), eta_min=lr * 0.01)
    return torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: TensorData | LoaderData,
    device: torch.device,
    amp: bool,
    batch_size: int = 1024,
    num_classes: int | None = None,
    dist: DistContext = SINGLE,
) -> dict[str, Any]:
    """Loss, accuracy and (when num_classes is given) the confusion matrix [true][pred]. With several processes
    each evaluates its share and the sums are reduced: every rank gets the figures over the whole data."""
    model.eval()
    dist.sync_buffers(model)
    # Sums stay on the device until the end: one host read for the whole pass, not one per batch.
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    n = 0
    bins = (num_classes or 1) ** 2
    confusion = torch.zeros(bins, dtype=torch.long, device=device)
    shard = Shard(dist.rank, dist.world_size, pad=False) if dist.active else None
    for x, y in data.batches(batch_size, shuffle=False, shard=shard):
        # float32 on the CPU: the accuracy reported is that of the model as the pages and explainers run it
        with autocast(device, amp and device.type != "cpu"):
            logits = model(x.to(device))
        y = y.to(device)
        loss_sum += nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        pred = logits.argmax(1)
        correct += (pred == y).sum()
        n += len(y)
        if num_classes:
            confusion += torch.bincount(y * num_classes + pred, minlength=bins)
    if dist.active:
        summed = dist.sum([loss_sum, correct, n], device)
        loss, hits, n = summed[0], int(summed[1]), int(summed[2])
    else:  # read as they are (dist.sum works in float64, which MPS lacks)
        loss, hits = float(loss_sum), int(correct)
    out: dict[str, Any] = {"loss": loss / max(n, 1), "acc": hits / max(n, 1), "n": n}
    if num_classes:
        out["confusion"] = dist.sum_tensor(confusion).view(num_classes, num_classes).cpu().tolist()
    return out


# ---- the run, step by step: set up (or resume), one epoch, checkpoint, finish -------------------------------------


@dataclass
class _Interval:
    """Sums of the training loss and hits over the steps since the last step record (epochs do not reset it)."""

    loss_sum: torch.Tensor | float = 0.0  # tensors stay on the device: no extra synchronisation per step
    correct: torch.Tensor | int = 0
    seen: int = 0
    steps: int = 0

    def add(self, loss_sum: torch.Tensor, correct: torch.Tensor, seen: int) -> None:
        self.loss_sum += loss_sum
        self.correct += correct
        self.seen += seen
        self.steps += 1

    def means(self, dist: DistContext = SINGLE, device: torch.device | None = None) -> tuple[float, float, int]:
        """(mean loss, accuracy, steps) over every rank's samples, and a fresh start for the next interval."""
        sums = [float(self.loss_sum), float(self.correct), float(self.seen)]
        if dist.active:
            sums = dist.sum([self.loss_sum, self.correct, self.seen], device or torch.device("cpu"))
        loss_sum, correct, seen = sums
        out = (loss_sum / max(seen, 1), correct / max(seen, 1), self.steps)
        self.loss_sum, self.correct, self.seen, self.steps = 0.0, 0, 0, 0
        return out


@dataclass
class TrainingSession:
    """Everything one call of `train` works with: settings, run folder, data, model, optimizer, progress."""

    cfg: TrainConfig  # resolved: no setting left None
    settings: TrainSettings  # the same settings, typed
    recipe: tuple[str, Recipe]  # (key, recipe) the open settings came from
    run: Run
    device: torch.device
    data: _Prepared
    model: nn.Module
    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    lr: float
    options: dict[str, Any]
    steps_per_epoch: int
    generator: torch.Generator
    records: list[dict[str, Any]]  # metrics.jsonl so far (a resumed run's earlier records included)
    note: str | None = None  # the model's note to the user (e.g. pretrained weights missing)
    resumed: bool = False
    start_epoch: int = 0  # complete epochs already done when this session began
    skip_steps: int = 0  # steps of epoch start_epoch + 1 an earlier session took before a stop (resumed there)
    step: int = 0  # optimizer steps taken, counting those of earlier sessions
    interval: _Interval = field(default_factory=lambda: _Interval())  # training metrics since the last step record
    samples_seen: int = 0  # training samples this session (for the rate)
    lock: RunLock | None = None  # held from setup_run to the end of train()
    started: float = field(default_factory=time.perf_counter)
    dist: DistContext = SINGLE  # this process's rank among those training the run (rank 0 writes the run folder)
    train_model: nn.Module | None = None  # what training steps call: the model, or its DistributedDataParallel wrapper
    guard: FiniteGuard | None = None  # non-finite losses, read at the step records (run_epoch makes it)
    augment_generator: torch.Generator | None = None  # on a GPU, the augmentations' own (else `generator`)
    compiled: CompiledSteps | None = None  # --compile on|graphs: the steps run through torch.compile
    channels_last: bool = False  # image batches and weights in NHWC (--channels-last, on a convolution network)

    @property
    def rank_batch(self) -> int:
        """This process's share of the (global) batch size."""
        return self.settings.batch_size // self.dist.world_size

    def shard(self, epoch: int) -> Shard | None:
        """This process's share of epoch `epoch`'s training samples (None: one process takes them all)."""
        if not self.dist.active:
            return None
        return Shard(self.dist.rank, self.dist.world_size, epoch=epoch, seed=self.cfg.seed)

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.settings.epochs

    def event(self, kind: Literal["start", "step", "epoch", "end"], **fields: Any) -> TrainEvent:
        return TrainEvent(
            kind=kind, run_id=self.run.id, epochs=self.settings.epochs, total_steps=self.total_steps, **fields
        )

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def rate(self, elapsed: float) -> float | None:
        return self.samples_seen / elapsed if elapsed > 0 else None

    def eta(self, rate: float | None) -> float | None:
        return (self.total_steps - self.step) * self.settings.batch_size / rate if rate else None

    def kept(self, epochs_done: int, partial_steps: int) -> str:
        return kept_sentence(epochs_done, partial_steps, self.steps_per_epoch, self.settings.epochs)


@dataclass
class EpochResult:
    """One epoch's outcome: its `epoch` event (training and validation metrics) and whether a stop cut it short."""

    event: TrainEvent
    stopped: bool
    steps: int = 0  # steps of this epoch taken (those of an earlier session included)


def _own_settings(config: dict[str, Any]) -> dict[str, Any]:
    """A run's training settings from its config.json, for resuming it. Runs written before recipes left some
    open or lacked them: those get what the engine did then, not today's recipe."""
    own = dict(config["train"])
    if "recipe" not in config:
        own["lr"] = own.get("lr") or config.get("lr")
        own.setdefault("label_smoothing", 0.0)
        own["max_train_samples"] = own.get("max_train_samples") or 0
        if own.get("optimizer") == "adamw" and not own.get("weight_decay"):
            own["weight_decay"] = 0.01  # what AdamW got then
    return own


def _recorded_recipe(config: dict[str, Any]) -> tuple[str, Recipe]:
    """(key, recipe) as a run's config.json recorded it: a resumed run is judged against its own recipe."""
    recorded = dict(config["recipe"])
    names = {f.name for f in dataclass_fields(Recipe)}
    return str(recorded.pop("key")), Recipe(**{k: v for k, v in recorded.items() if k in names})


def setup_run(cfg: TrainConfig, resume: str | Path | None = None, dist: DistContext = SINGLE) -> TrainingSession:
    """Check the settings and fill those left open from the model's recipe, then create the run folder (or
    reopen run `resume`), data, model, optimizer and schedule, restore a resumed run's state, and write
    config.json and a 'running' summary.

    A resumed run keeps its own resolved settings; only the epoch total (when given) and the device change.
    Bad settings raise ModelError/DatasetError before any run folder is written. With several processes (`dist`)
    every one sets up alike; rank 0 alone creates (and locks) the run folder, the others learn its path.
    """
    cfg.validate()
    resumed = resolve_run(resume) if resume is not None else None
    if resumed is not None:
        config = resumed.config()
        own = _own_settings(config)
        cfg = TrainConfig(**{**own, "epochs": cfg.epochs or own["epochs"], "device": cfg.device, "nproc": cfg.nproc})
    recipe = _recorded_recipe(config) if resumed is not None and config.get("recipe") else cfg.recipe()
    cfg = cfg.with_recipe()
    if resumed is not None:  # the model is rebuilt as it was: no recipe options added to a resumed run
        cfg = replace(cfg, model_options=own.get("model_options") or {})
    cfg.validate()
    check_batch(cfg.batch_size, dist.world_size)
    settings = cfg.settings()
    spec = get_spec(cfg.model)
    source = get_source(cfg.dataset)
    spec.check_fits(source.info)
    device = dist.device(cfg.device)
    run, lock = _open_run(cfg, resumed, dist)
    try:
        session = _open_session(cfg, settings, recipe, run, resumed, spec, source, device, dist)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    session.lock = lock
    return session


def _open_run(cfg: TrainConfig, resumed: Run | None, dist: DistContext) -> tuple[Run, RunLock | None]:
    """The run folder and its lock: created (or reopened) and locked by rank 0; the other ranks get its path, or
    the error rank 0 met (a run trained elsewhere is refused on every rank alike)."""
    run, lock, refusal, error = None, None, None, None
    if dist.main:
        try:
            run = resumed or Run.create(cfg.dataset, cfg.model)
            lock = RunLock.acquire(run.path, run.id)  # a second writer of the same run is refused here
        except ModelError as e:
            refusal, error = str(e), e
    path, refusal = dist.from_main((str(run.path) if run is not None else None, refusal))
    if error is not None:
        raise error  # rank 0 (or a one-process run): the error as it was met, RunLocked included
    if refusal is not None:
        raise ModelError(refusal)
    return (run or Run(Path(path))), lock


def _open_session(
    cfg: TrainConfig,
    settings: TrainSettings,
    recipe: tuple[str, Recipe],
    run: Run,
    resumed: Run | None,
    spec: ModelSpec,
    source: DatasetSource,
    device: torch.device,
    dist: DistContext = SINGLE,
) -> TrainingSession:
    """The rest of setup_run, under the run's lock: data, model, optimizer, schedule, restored state, config."""
    generator = seed_everything(cfg.seed)  # alike on every rank: the same initial weights
    data = _prepare_data(cfg, settings, source, device, run, resume_vocab=resumed is not None, dist=dist)
    options = dict(cfg.model_options)
    if data.tokenizer is not None and spec.tokenizer is None:
        options.update(vocab_size=len(data.tokenizer), pad_id=data.tokenizer.pad_id)
    model = spec.build(data.info, **options).to(device)
    channels_last = cfg.channels_last and uses_channels_last(model, data.info.modality)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = _optimizer(settings, cfg.momentum, params, device)
    # Several processes: each takes ceil(n / world) samples (padded shares) in batches of batch_size / world.
    share = math.ceil(len(data.train) / dist.world_size)
    steps_per_epoch = math.ceil(share / (settings.batch_size // dist.world_size))
    session = TrainingSession(
        cfg=cfg,
        settings=settings,
        recipe=recipe,
        run=run,
        device=device,
        data=data,
        model=model,
        params=params,
        optimizer=optimizer,
        schedule=_schedule(settings, optimizer, steps_per_epoch * settings.epochs),
        lr=settings.lr,
        options=options,
        steps_per_epoch=steps_per_epoch,
        generator=generator,
        records=run.metrics() if resumed is not None else [],
        resumed=resumed is not None,
        note=getattr(model, "xai_note", None) or spec.note(),
        dist=dist,
        channels_last=channels_last,
    )
    if resumed is not None:
        restore_checkpoint(session)
    session.generator = _rank_generator(session.generator, cfg.seed + session.start_epoch, dist)
    if device.type == "cuda":  # augmentations drawn on the GPU: no host-to-device copy per step
        session.augment_generator = torch.Generator(device=device).manual_seed(
            cfg.seed + session.start_epoch + 7919 * dist.rank
        )
    session.train_model = _wrap(model, device, dist)
    if cfg.compile != "off":
        session.compiled = CompiledSteps(session.train_model, cfg.compile)
    if dist.main:
        _write_config(session)
    return session


def _rank_generator(generator: torch.Generator, seed: int, dist: DistContext) -> torch.Generator:
    """The generator of the random augmentations: each rank its own (the sample order comes from Shard, alike)."""
    return torch.Generator().manual_seed(seed + 7919 * dist.rank) if dist.active else generator


def _wrap(model: nn.Module, device: torch.device, dist: DistContext) -> nn.Module:
    """DistributedDataParallel around the model when several processes train it (gradients all-reduced in the
    backward pass; rank 0's weights broadcast at the start); checkpoints and evaluation use the model itself."""
    if not dist.active:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def restore_checkpoint(session: TrainingSession) -> None:
    """Continue where the run's last checkpoint ended: weights, optimizer state, the schedule fast-forwarded
    to that step, and, after a stop inside an epoch, the rest of that epoch (its first steps are not repeated).
    ModelError when no epoch is left."""
    run, cfg = session.run, session.cfg
    if not run.file(WEIGHTS).exists():  # interrupted or stopped before its first checkpoint: nothing to go on from
        raise ModelError(
            f"Run {run.id} has no checkpoint to resume from (it ended before its first one): delete it "
            f"(xaidash runs --delete {run.id}) or train again with its settings."
        )
    load_weights(session.model, run.file(WEIGHTS))
    extra = load_training_state(run.file(STATE), session.optimizer) if run.file(STATE).exists() else {}
    run_schema.check(extra, run_schema.TRAIN_STATE, run.file(STATE))  # a negative epoch would loop forever
    session.start_epoch = int(extra.get("epoch", 0))
    session.skip_steps = min(int(extra.get("partial_steps", 0)), session.steps_per_epoch - 1)
    session.records = [r for r in session.records if not (r.get("kind") == "epoch" and r.get("partial_steps"))]
    session.step = session.start_epoch * session.steps_per_epoch + session.skip_steps
    session.generator = torch.Generator().manual_seed(cfg.seed + session.start_epoch)
    with warnings.catch_warnings():  # fast-forwarding the schedule, not skipping an optimizer step
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(session.step):
            session.schedule.step()
    if session.start_epoch >= session.settings.epochs:
        raise ModelError(
            f"Run {run.id} already has {session.start_epoch} epochs: ask for more (--epochs N > {session.start_epoch})."
        )


def _write_config(session: TrainingSession) -> None:
    cfg, run, data, model = session.cfg, session.run, session.data, session.model
    key, recipe = session.recipe
    config = {
        "model": cfg.model,
        "model_note": session.note,
        "dataset": cfg.dataset,
        "modality": data.info.modality,
        "classes": list(data.info.classes),
        "dataset_info": info_to_json(data.info),
        "model_options": session.options,
        "train": asdict(cfg),
        # The recipe the open settings came from, as declared: what the run's accuracy is judged against.
        "recipe": {"key": key, **recipe.settings(), "expected_acc": recipe.expected_acc},
        "lr": session.lr,
        "device": device_name(session.device),
        "memory_format": "channels_last" if session.channels_last else "contiguous",  # what --channels-last did
        **({"distributed": session.dist.describe()} if session.dist.active else {}),
        "versions": library_versions(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in session.params),
        "train_samples": len(data.train),
        "val_samples": len(data.val) if data.val else 0,
        "test_samples": len(data.test),
        "created": run.config()["created"] if session.resumed else time.time(),
    }
    run.write_config(config)
    done, partial = session.start_epoch, session.skip_steps
    run.update_summary(
        state="running",
        error=None,
        epochs_done=done,
        partial_steps=partial,
        steps_per_epoch=session.steps_per_epoch,
        epochs=session.settings.epochs,
        kept=session.kept(done, partial) if session.resumed else "nothing yet",
    )


@contextmanager
def _out_of_memory_fails(session: TrainingSession) -> Iterator[None]:
    """Turn an out-of-memory error into TrainingFailed with advice; every other error passes unchanged."""
    batch_size = session.cfg.batch_size
    try:
        yield
    except torch.cuda.OutOfMemoryError as e:
        raise TrainingFailed(
            f"Out of memory on {device_name(session.device)} at batch size {batch_size}: lower the batch size "
            "(--batch-size) or train on another device."
        ) from e
    except RuntimeError as e:  # CPU and MPS allocators say so in a plain RuntimeError
        if "out of memory" not in str(e).lower():
            raise
        raise TrainingFailed(f"Out of memory at batch size {batch_size}: lower the batch size. ({e})") from e


def _step_record(event: TrainEvent, drop: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in asdict(event).items() if v is not None and k not in drop}


def _log_step(session: TrainingSession, epoch: int, emit: Callback) -> None:
    """A step record and event: the training loss and accuracy averaged over the steps since the last one."""
    loss, acc, steps = session.interval.means(session.dist, session.device)
    elapsed = session.elapsed()
    rate = session.rate(elapsed)
    event = session.event(
        "step",
        epoch=epoch,
        step=session.step,
        train_loss=loss,
        train_acc=acc,
        interval_steps=steps,
        lr=session.optimizer.param_groups[0]["lr"],
        samples_per_s=rate,
        elapsed_s=elapsed,
        eta_s=session.eta(rate),
    )
    session.records.append(_step_record(event, ("run_id", "message")))
    emit(event)


def _forward_backward(
    model: Callable[..., torch.Tensor],
    session: TrainingSession,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: nn.Module,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step's gradients (reset first), its logits and its loss; the optimizer step is the caller's."""
    session.optimizer.zero_grad(set_to_none=True)
    with autocast(session.device, session.cfg.amp):
        logits = model(x)
        loss = loss_fn(logits.float(), y)
    loss.backward()
    return logits, loss


def _check_finite(session: TrainingSession) -> None:
    """Raise TrainingFailed, the weights put back to the last good check, when a loss since the last check was
    not finite (FiniteGuard: one host read here instead of one per step)."""
    guard, dist, device = session.guard, session.dist, session.device
    if guard is None or guard.good_step == session.step:
        return
    found = guard.check(session.step, lambda bad: dist.any(bad, device))
    if found is None:
        return
    session.step = found.restored_step  # the weights the run holds now are those after this step
    where = (
        f"at epoch {(found.step - 1) // session.steps_per_epoch + 1}, step {found.step}"
        if found.step > 0
        else "in another training process"
    )
    value = f"{found.loss}" if found.step > 0 else "not finite"
    kept = f"those after step {found.restored_step}" if found.restored_step else "those the run started from"
    raise TrainingFailed(
        f"Loss became {value} {where}: the learning rate ({session.lr:g}) is probably too high; try a lower one "
        f"(e.g. --lr {session.lr / 10:g}). The weights kept are the last finite ones checked, {kept}."
    )


def run_epoch(session: TrainingSession, epoch: int, stop: threading.Event, emit: Callback) -> EpochResult | None:
    """Train epoch `epoch` (emitting step events), then validate; its result, or None when a stop came
    before its first step (the epoch did not happen). A resumed run whose last session stopped inside this
    epoch takes only the epoch's remaining steps.

    Step records come every ~1/20 epoch (counted in steps since the run began, so they run on across epoch
    boundaries), each with the mean training loss and accuracy since the previous one. A stop request is
    honoured within one step. Raises TrainingFailed for a non-finite loss (found at the next step record, the
    weights put back to the last good one: `_check_finite`) or out of memory.

    With several processes each takes its shard of the epoch (`session.shard`) in batches of its share of the batch
    size, through the DistributedDataParallel wrapper; the metrics are summed over all ranks, and the stop
    request is agreed on (any rank's, reduced) at the epoch's first step and at each step record: every rank stops
    after the same step, with no host synchronisation in between.
    """
    cfg, s, data, device, dist = session.cfg, session.settings, session.data, session.device, session.dist
    model = session.train_model or session.model
    gen = session.generator
    log_every = max(1, session.steps_per_epoch // 20)
    shift = 2 if "shift" in s.augment else 0
    flip = "flip" in s.augment
    loss_fn = nn.CrossEntropyLoss(label_smoothing=s.label_smoothing)
    skip, session.skip_steps = (session.skip_steps, 0) if epoch == session.start_epoch + 1 else (0, 0)
    if session.guard is None or session.guard.model is not session.model:
        session.guard = FiniteGuard(session.model, device, session.step)
    guard = session.guard
    with _out_of_memory_fails(session):
        model.train()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        seen = 0
        stopped = False
        shard = session.shard(epoch)
        batches = itertools.islice(
            data.train.batches(session.rank_batch, shuffle=True, generator=gen, shard=shard), skip, None
        )
        for x, y in batches:
            if not dist.active:
                stopped = stop.is_set()
            elif seen == 0 or session.step % log_every == 0:  # the same steps on every rank
                stopped = dist.any(stop.is_set(), device)
            if stopped:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if data.info.modality == "image" and (shift or flip):
                x = augment_images(x, shift, flip, session.augment_generator or gen)
            if session.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            if session.compiled is not None:
                logits, loss = session.compiled.step(_forward_backward, session, x, y, loss_fn)
            else:
                logits, loss = _forward_backward(model, session, x, y, loss_fn)
            guard.watch(loss, session.step + 1)  # read at the step records: no host synchronisation per step
            session.optimizer.step()
            session.schedule.step()
            session.step += 1
            seen += len(y)
            session.samples_seen += len(y) * dist.world_size  # equal shares: the same on every rank
            batch_loss, batch_correct = loss.detach() * len(y), (logits.argmax(1) == y).sum()
            loss_sum += batch_loss
            correct += batch_correct
            session.interval.add(batch_loss, batch_correct, len(y))
            if session.step % log_every == 0 or session.step == session.total_steps:
                _check_finite(session)
                _log_step(session, epoch, emit)
        if not dist.active:  # several processes: only the agreed decision counts
            stopped = stop.is_set()
        _check_finite(session)  # the epoch's last steps, before its weights are validated and kept
        if stopped and session.interval.steps:  # the curve reaches the weights that are kept
            _log_step(session, epoch, emit)
        if seen == 0 and stopped:
            session.skip_steps = skip  # nothing happened: a later resume still starts where the last one stopped
            return None
        val = evaluate(session.model, data.val, device, cfg.amp, dist=dist) if data.val is not None else {}
        epoch_loss, epoch_correct, epoch_seen = dist.sum([loss_sum, correct, seen], device)
    elapsed = session.elapsed()
    rate = session.rate(elapsed)
    epoch_steps = session.step - (epoch - 1) * session.steps_per_epoch  # this epoch's steps, earlier sessions' too
    event = session.event(
        "epoch",
        epoch=epoch,
        step=session.step,
        train_loss=epoch_loss / max(epoch_seen, 1),
        train_acc=epoch_correct / max(epoch_seen, 1),
        val_loss=val.get("loss"),
        val_acc=val.get("acc"),
        lr=session.optimizer.param_groups[0]["lr"],
        samples_per_s=rate,
        elapsed_s=elapsed,
        eta_s=session.eta(rate),
        message=f"stopped after {epoch_steps} of {session.steps_per_epoch} steps of this epoch" if stopped else "",
    )
    return EpochResult(event=event, stopped=stopped, steps=epoch_steps)


def write_checkpoint(session: TrainingSession, result: EpochResult) -> None:
    """After an epoch: its record in metrics.jsonl, its weights (latest, and per epoch when the epoch is
    complete), the training state to resume from, and the summary saying what was kept.

    A stopped epoch's weights are marked partial, get no per-epoch checkpoint (there is no epoch to file them
    under), and resuming runs the rest of that epoch. With several processes only rank 0 writes (the weights of
    the model itself, not of its DistributedDataParallel wrapper: the run loads like a one-process run)."""
    run, event = session.run, result.event
    epoch, stopped = event.epoch, result.stopped
    done, partial = (epoch - 1, result.steps) if stopped else (epoch, 0)
    record = _step_record(event, ("run_id",))
    if stopped:  # validation of a partial epoch's weights; a resumed run replaces it with the whole epoch's
        record["partial_steps"] = partial
    session.records.append(record)
    if not session.dist.main:
        return
    run.write_metrics(session.records)
    meta = {"epoch": str(epoch), "partial": str(stopped), "steps": str(result.steps)}
    if not stopped:
        save_weights(session.model, run.checkpoint_path(epoch), meta)
    save_weights(session.model, run.file(WEIGHTS), meta)
    save_training_state(
        run.file(STATE), session.optimizer, {"epoch": done, "step": session.step, "partial_steps": partial}
    )
    run.update_summary(
        epochs_done=done,
        partial_steps=partial,
        steps_per_epoch=session.steps_per_epoch,
        kept=session.kept(done, partial),
        val_acc=event.val_acc,
        val_loss=event.val_loss,
    )


def finish_run(session: TrainingSession, state: str, error: str | None, epoch: int, emit: Callback) -> TrainResult:
    """End the run: weights even when it failed before its first checkpoint, the test evaluation of the kept
    weights (none when it failed or nothing was kept), the test record, the final summary and the `end` event.

    With several processes every rank evaluates its share of the test data (the sums reduced) and rank 0 writes;
    a failed run reaches here on rank 0 only (other ranks raise), so nothing collective happens then."""
    run, dist = session.run, session.dist
    if not dist.main:
        rank_test = _test(session) if dist.from_main(None) else {}
        return TrainResult(
            run=run,
            state=state,
            error=error,
            test_acc=rank_test.get("acc"),
            test_loss=rank_test.get("loss"),
            epochs_done=session.start_epoch,
            kept="",
        )
    summary = run.summary()
    if state == "failed" and not run.file(WEIGHTS).exists():
        # For a look at what went wrong; the summary says they are the weights at the failure.
        save_weights(session.model, run.file(WEIGHTS), {"epoch": str(epoch), "partial": "True", "failed": "True"})
        partial = session.step - max(epoch - 1, 0) * session.steps_per_epoch
        summary["kept"] = (
            f"the last weights before the failure, after {partial} of {session.steps_per_epoch} steps of epoch "
            f"{max(epoch, 1)}; no epoch completed"
        )
    if state == "stopped" and not run.file(WEIGHTS).exists():
        summary["kept"] = "nothing: stopped before the first training step"
    test: dict[str, Any] = {}
    has_weights = state != "failed" and run.file(WEIGHTS).exists()
    if state != "failed":
        dist.from_main(has_weights)  # the other ranks wait for this answer in finish_run
    if has_weights:
        test = _test(session)
    elapsed = session.elapsed()
    run.write_metrics(
        session.records + ([{"kind": "test", "test_loss": test["loss"], "test_acc": test["acc"]}] if test else [])
    )
    summary = run.update_summary(
        state=state,
        error=error,
        kept=summary.get("kept"),
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        confusion=test.get("confusion"),
        train_seconds=round(elapsed, 2),
        samples_per_s=session.samples_seen / elapsed if elapsed else None,
        **({"compiled": session.compiled.describe()} if session.compiled is not None else {}),
    )
    emit(
        session.event(
            "end", epoch=epoch, step=session.step, state=state, message=error or summary["kept"], elapsed_s=elapsed
        )
    )
    return TrainResult(
        run=run,
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        epochs_done=summary.get("epochs_done", 0),
        partial_steps=summary.get("partial_steps", 0),
        kept=summary["kept"],
    )


def _test(session: TrainingSession) -> dict[str, Any]:
    data = session.data
    return evaluate(
        session.model,
        data.test,
        session.device,
        session.cfg.amp,
        num_classes=data.info.num_classes,
        dist=session.dist,
    )


def train(
    cfg: TrainConfig,
    callbacks: list[Callback] | None = None,
    stop: threading.Event | None = None,
    resume: str | Path | None = None,
    dist: DistContext = SINGLE,
) -> TrainResult:
    """Train `cfg.model` on `cfg.dataset` into a new run folder (or continue run `resume`).

    Never raises for NaN loss or out-of-memory: the run is marked failed with the reason,
    which the result carries. Bad settings (unknown model, wrong data) raise ModelError/DatasetError
    before any run folder is written.

    `dist`: this process's place among several training the run together (models/training/distributed.py starts them
    and passes it; `cfg.nproc` alone does not launch them). Rank 0 writes the run folder and emits the events;
    on any other rank a failure is re-raised after marking the run failed (its launcher ends the others).
    """
    listeners = list(callbacks or []) if dist.main else []
    stop = stop or threading.Event()

    def emit(event: TrainEvent) -> None:
        for cb in listeners:
            cb(event)

    session = setup_run(cfg, resume, dist)
    try:
        emit(session.event("start", epoch=session.start_epoch, step=session.step, message=session.note or ""))
        session.started = time.perf_counter()
        state, error, epoch = "completed", None, session.start_epoch
        try:
            for epoch in range(session.start_epoch + 1, session.settings.epochs + 1):
                result = run_epoch(session, epoch, stop, emit)
                if result is None:  # stopped before this epoch's first step: it does not count
                    epoch -= 1
                    state = "stopped"
                    break
                try:
                    write_checkpoint(session, result)
                except OSError as e:  # disk full, folder gone: the last good checkpoint stays (atomic writes)
                    raise TrainingFailed(_save_failed(e)) from None
                emit(result.event)
                if result.stopped:
                    state = "stopped"
                    break
        except TrainingFailed as e:
            if dist.active and not dist.main:  # rank 0 cannot end the run for it: its crash does
                dist.mark_failed(session.run, e)
                raise
            state, error = "failed", str(e)
        except Exception as e:
            if dist.active:  # a rank's crash (or a lost peer): the run says failed, not running
                dist.mark_failed(session.run, e)
            raise
        try:
            return finish_run(session, state, error, epoch, emit)
        except OSError as e:  # the end could not be written either: say so wherever still possible
            return _finish_unsaved(session, epoch, _save_failed(e), emit)
    finally:
        if session.lock is not None:
            session.lock.release()


def _save_failed(e: OSError) -> str:
    reason = "the disk is full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
    where = f" ({e.filename})" if e.filename else ""
    return f"Saving the run failed: {reason}{where}. The last checkpoint written before it is kept."


def _finish_unsaved(session: TrainingSession, epoch: int, error: str, emit: Callback) -> TrainResult:
    """The run's end when its files cannot be written: a best-effort 'failed' summary and the end event."""
    with suppress(OSError):
        session.run.update_summary(state="failed", error=error)
    emit(session.event("end", epoch=epoch, step=session.step, state="failed", message=error))
    summary: dict[str, Any] = {}
    with suppress(Exception):
        summary = session.run.summary()
    return TrainResult(
        run=session.run,
        state="failed",
        error=error,
        test_acc=None,
        test_loss=None,
        epochs_done=summary.get("epochs_done", 0),
        partial_steps=summary.get("partial_steps", 0),
        kept=summary.get("kept", ""),
    )
