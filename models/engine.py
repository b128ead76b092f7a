"""The training engine: one loop for every zoo model and data set.

Small data sets live on the device as tensors (no per-batch DataLoader overhead); image
folders stream through a DataLoader. bf16 autocast on CUDA. Progress goes out as
`TrainEvent`s to any number of callbacks (CLI progress bar, dashboard job); a stop request
is honoured within one step and leaves a valid checkpoint.

`train` composes four steps that can be called (and tested) one by one: `setup_run` (settings,
run folder, data, model, optimizer, schedule; `restore_checkpoint` for a resumed run), `run_epoch`,
`write_checkpoint` and `finish_run`. They share a `TrainingSession`.
"""

from __future__ import annotations

import math
import platform
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, DatasetSource, Split, TextSplit, get_source
from xaidash.data.tokenizer import Tokenizer, WordVocab
from xaidash.models.batches import LoaderData, TensorData, augment_images, image_tensors, text_tensors
from xaidash.models.bundle import ModelBundle
from xaidash.models.checkpoint import load_training_state, load_weights, save_training_state, save_weights
from xaidash.models.device import autocast, device_name, pick_device
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runstore import STATE, VOCAB, WEIGHTS, Run, info_to_json, resolve_run

Optimizer = Literal["adam", "adamw", "sgd"]
Schedule = Literal["cosine", "onecycle", "constant"]
Augment = Literal["none", "shift", "flip", "shift+flip"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "adamw", "sgd")
SCHEDULES: tuple[Schedule, ...] = ("cosine", "onecycle", "constant")
AUGMENTATIONS: tuple[Augment, ...] = ("none", "shift", "flip", "shift+flip")


@dataclass
class TrainConfig:
    dataset: str = "shapes"
    model: str = "resnet_small"
    epochs: int = 3
    batch_size: int = 128
    lr: float | None = None  # None: the model's default
    optimizer: Optimizer = "adam"
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: Schedule = "cosine"
    augment: Augment = "none"
    device: str = "auto"
    seed: int = 0
    val_fraction: float = 0.1
    max_train_samples: int | None = None  # cap for quick runs
    amp: bool = True  # bf16 autocast on CUDA
    workers: int = 0
    model_options: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        problems = []
        if self.epochs < 1:
            problems.append("epochs must be at least 1")
        if self.batch_size < 1:
            problems.append("batch size must be at least 1")
        if self.lr is not None and not (0 < self.lr < 10):
            problems.append("learning rate must be in (0, 10)")
        if not (0 <= self.val_fraction < 0.9):
            problems.append("validation fraction must be in [0, 0.9)")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"unknown optimizer {self.optimizer!r} ({', '.join(OPTIMIZERS)})")
        if self.schedule not in SCHEDULES:
            problems.append(f"unknown schedule {self.schedule!r} ({', '.join(SCHEDULES)})")
        if self.augment not in AUGMENTATIONS:
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
    epochs_done: int

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def ok(self) -> bool:
        return self.state in ("completed", "stopped")

    @property
    def bundle(self) -> ModelBundle:
        from xaidash.models.runstore import load_bundle

        return load_bundle(self.run, device="auto")


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


def _prepare_data(
    cfg: TrainConfig, source: DatasetSource, device: torch.device, run: Run, resume_vocab: bool
) -> _Prepared:
    info = source.info
    spec = get_spec(cfg.model)
    train_split = source.load("train")
    test_split = source.load("test")
    if len(train_split) == 0:
        raise ModelError(f"Dataset {cfg.dataset} has an empty training split.")
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    order = torch.randperm(len(train_split), generator=gen)
    if cfg.max_train_samples:
        order = order[: max(2, cfg.max_train_samples)]
    n_val = int(len(order) * cfg.val_fraction)
    val_idx, train_idx = order[:n_val], order[n_val:]

    tokenizer: Tokenizer | None = None
    if isinstance(train_split, TextSplit):
        if spec.tokenizer is not None:
            tokenizer = spec.tokenizer()
        elif resume_vocab and run.file(VOCAB).exists():
            tokenizer = WordVocab.load(run.file(VOCAB))
        else:
            vocab = WordVocab.build([train_split.texts[i] for i in train_idx.tolist()])
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


def _optimizer(cfg: TrainConfig, params, lr: float) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, nesterov=cfg.momentum > 0
        )
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay or 0.01)
    return torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay)


def _schedule(
    cfg: TrainConfig, opt: torch.optim.Optimizer, lr: float, total_steps: int
) -> torch.optim.lr_scheduler.LRScheduler:
    if cfg.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, total_steps))
    if cfg.schedule == "cosine":
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
) -> dict[str, Any]:
    """Loss, accuracy and (when num_classes is given) the confusion matrix [true][pred]."""
    model.eval()
    loss_sum, correct, n = 0.0, 0, 0
    confusion = torch.zeros(num_classes or 1, num_classes or 1, dtype=torch.long)
    for x, y in data.batches(batch_size, shuffle=False):
        with autocast(device, amp):
            logits = model(x.to(device))
        y = y.to(device)
        loss_sum += float(nn.functional.cross_entropy(logits.float(), y, reduction="sum"))
        pred = logits.argmax(1)
        correct += int((pred == y).sum())
        n += len(y)
        if num_classes:
            confusion += torch.bincount((y * num_classes + pred).cpu(), minlength=num_classes**2).view(
                num_classes, num_classes
            )
    out: dict[str, Any] = {"loss": loss_sum / max(n, 1), "acc": correct / max(n, 1), "n": n}
    if num_classes:
        out["confusion"] = confusion.tolist()
    return out


# ---- the run, step by step: set up (or resume), one epoch, checkpoint, finish -------------------------------------


@dataclass
class TrainingSession:
    """Everything one call of `train` works with: settings, run folder, data, model, optimizer, progress."""

    cfg: TrainConfig
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
    start_epoch: int = 0  # epochs already done when this session began
    step: int = 0  # optimizer steps taken, counting those of earlier sessions
    samples_seen: int = 0  # training samples this session (for the rate)
    started: float = field(default_factory=time.perf_counter)

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.cfg.epochs

    def event(self, kind: Literal["start", "step", "epoch", "end"], **fields: Any) -> TrainEvent:
        return TrainEvent(kind=kind, run_id=self.run.id, epochs=self.cfg.epochs, total_steps=self.total_steps, **fields)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def rate(self, elapsed: float) -> float | None:
        return self.samples_seen / elapsed if elapsed > 0 else None

    def eta(self, rate: float | None) -> float | None:
        return (self.total_steps - self.step) * self.cfg.batch_size / rate if rate else None


@dataclass
class EpochResult:
    """One epoch's outcome: its `epoch` event (training and validation metrics) and whether a stop cut it short."""

    event: TrainEvent
    stopped: bool


def setup_run(cfg: TrainConfig, resume: str | Path | None = None) -> TrainingSession:
    """Check the settings, then create the run folder (or reopen run `resume`), data, model, optimizer and
    schedule, restore a resumed run's state, and write config.json and a 'running' summary.

    Bad settings raise ModelError/DatasetError before any run folder is written.
    """
    cfg.validate()
    resumed = resolve_run(resume) if resume is not None else None
    if resumed is not None:  # the run's own settings, with the new epoch total and device
        cfg = TrainConfig(**{**resumed.config()["train"], "epochs": cfg.epochs, "device": cfg.device})
    spec = get_spec(cfg.model)
    source = get_source(cfg.dataset)
    spec.check_fits(source.info)
    device = pick_device(cfg.device)
    run = resumed or Run.create(cfg.dataset, cfg.model)

    generator = seed_everything(cfg.seed)
    data = _prepare_data(cfg, source, device, run, resume_vocab=resumed is not None)
    options = dict(cfg.model_options)
    if data.tokenizer is not None and spec.tokenizer is None:
        options.update(vocab_size=len(data.tokenizer), pad_id=data.tokenizer.pad_id)
    model = spec.build(data.info, **options).to(device)
    lr = cfg.lr if cfg.lr is not None else spec.default_lr
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = _optimizer(cfg, params, lr)
    steps_per_epoch = math.ceil(len(data.train) / cfg.batch_size)
    session = TrainingSession(
        cfg=cfg,
        run=run,
        device=device,
        data=data,
        model=model,
        params=params,
        optimizer=optimizer,
        schedule=_schedule(cfg, optimizer, lr, steps_per_epoch * cfg.epochs),
        lr=lr,
        options=options,
        steps_per_epoch=steps_per_epoch,
        generator=generator,
        records=run.metrics() if resumed is not None else [],
        resumed=resumed is not None,
        note=getattr(model, "xai_note", None) or spec.note(),
    )
    if resumed is not None:
        restore_checkpoint(session)
    _write_config(session)
    return session


def restore_checkpoint(session: TrainingSession) -> None:
    """Continue where the run's last checkpoint ended: weights, optimizer and CPU RNG state, the epoch's
    shuffling generator, and the schedule fast-forwarded to that step. ModelError when no epoch is left."""
    run, cfg = session.run, session.cfg
    load_weights(session.model, run.file(WEIGHTS))
    extra = load_training_state(run.file(STATE), session.optimizer) if run.file(STATE).exists() else {}
    session.start_epoch = int(extra.get("epoch", 0))
    session.step = session.start_epoch * session.steps_per_epoch
    session.generator = torch.Generator().manual_seed(cfg.seed + session.start_epoch)
    with warnings.catch_warnings():  # fast-forwarding the schedule, not skipping an optimizer step
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(session.step):
            session.schedule.step()
    if session.start_epoch >= cfg.epochs:
        raise ModelError(
            f"Run {run.id} already has {session.start_epoch} epochs: ask for more (--epochs N > {session.start_epoch})."
        )


def _write_config(session: TrainingSession) -> None:
    cfg, run, data, model = session.cfg, session.run, session.data, session.model
    config = {
        "model": cfg.model,
        "model_note": session.note,
        "dataset": cfg.dataset,
        "modality": data.info.modality,
        "classes": list(data.info.classes),
        "dataset_info": info_to_json(data.info),
        "model_options": session.options,
        "train": asdict(cfg),
        "lr": session.lr,
        "device": device_name(session.device),
        "versions": library_versions(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in session.params),
        "train_samples": len(data.train),
        "val_samples": len(data.val) if data.val else 0,
        "test_samples": len(data.test),
        "created": run.config()["created"] if session.resumed else time.time(),
    }
    run.write_config(config)
    run.update_summary(state="running", error=None, epochs_done=session.start_epoch, epochs=cfg.epochs)


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


def run_epoch(session: TrainingSession, epoch: int, stop: threading.Event, emit: Callback) -> EpochResult | None:
    """Train epoch `epoch` (emitting step events), then validate; its result, or None when a stop came
    before its first step (the epoch did not happen).

    A stop request is honoured within one step. Raises TrainingFailed for a non-finite loss or out of memory.
    """
    cfg, data, device, model, gen = session.cfg, session.data, session.device, session.model, session.generator
    log_every = max(1, session.steps_per_epoch // 20)
    shift = 2 if "shift" in cfg.augment else 0
    flip = "flip" in cfg.augment
    loss_fn = nn.CrossEntropyLoss()
    with _out_of_memory_fails(session):
        model.train()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        seen = 0
        for x, y in data.train.batches(cfg.batch_size, shuffle=True, generator=gen):
            if stop.is_set():
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if data.info.modality == "image" and (shift or flip):
                x = augment_images(x, shift, flip, gen)
            with autocast(device, cfg.amp):
                logits = model(x)
                loss = loss_fn(logits.float(), y)
            if not torch.isfinite(loss):
                raise TrainingFailed(
                    f"Loss became {loss.item()} at epoch {epoch}, step {session.step + 1}: the learning rate "
                    f"({session.lr:g}) is probably too high; try a lower one (e.g. --lr {session.lr / 10:g})."
                )
            session.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            session.optimizer.step()
            session.schedule.step()
            session.step += 1
            seen += len(y)
            session.samples_seen += len(y)
            loss_sum += loss.detach() * len(y)
            correct += (logits.argmax(1) == y).sum()
            if session.step % log_every == 0 or session.step == session.total_steps:
                elapsed = session.elapsed()
                rate = session.rate(elapsed)
                event = session.event(
                    "step",
                    epoch=epoch,
                    step=session.step,
                    train_loss=float(loss_sum) / seen,
                    train_acc=float(correct) / seen,
                    lr=session.optimizer.param_groups[0]["lr"],
                    samples_per_s=rate,
                    elapsed_s=elapsed,
                    eta_s=session.eta(rate),
                )
                session.records.append(_step_record(event, ("run_id", "message")))
                emit(event)
        stopped = stop.is_set()
        if seen == 0 and stopped:
            return None
        val = evaluate(model, data.val, device, cfg.amp) if data.val is not None else {}
    elapsed = session.elapsed()
    rate = session.rate(elapsed)
    event = session.event(
        "epoch",
        epoch=epoch,
        step=session.step,
        train_loss=float(loss_sum) / max(seen, 1),
        train_acc=float(correct) / max(seen, 1),
        val_loss=val.get("loss"),
        val_acc=val.get("acc"),
        lr=session.optimizer.param_groups[0]["lr"],
        samples_per_s=rate,
        elapsed_s=elapsed,
        eta_s=session.eta(rate),
        message="stopped during this epoch" if stopped else "",
    )
    return EpochResult(event=event, stopped=stopped)


def write_checkpoint(session: TrainingSession, result: EpochResult) -> None:
    """After an epoch: its record in metrics.jsonl, its weights (per-epoch and latest), the training state
    to resume from, and the summary. A stopped epoch's weights are marked partial and resuming repeats it."""
    run, event = session.run, result.event
    epoch, stopped = event.epoch, result.stopped
    session.records.append(_step_record(event, ("run_id",)))
    run.write_metrics(session.records)
    meta = {"epoch": str(epoch), "partial": str(stopped)}
    save_weights(session.model, run.checkpoint_path(epoch), meta)
    save_weights(session.model, run.file(WEIGHTS), meta)
    save_training_state(
        run.file(STATE), session.optimizer, {"epoch": epoch if not stopped else epoch - 1, "step": session.step}
    )
    run.update_summary(epochs_done=epoch, val_acc=event.val_acc, val_loss=event.val_loss)


def finish_run(session: TrainingSession, state: str, error: str | None, epoch: int, emit: Callback) -> TrainResult:
    """End the run: weights even when it failed before its first checkpoint, the test evaluation (unless it
    failed), the test record, the final summary and the `end` event."""
    run, cfg, data = session.run, session.cfg, session.data
    if state == "failed" and not run.file(WEIGHTS).exists():
        save_weights(session.model, run.file(WEIGHTS), {"epoch": "0", "partial": "True"})
    test: dict[str, Any] = {}
    if state != "failed":
        test = evaluate(session.model, data.test, session.device, cfg.amp, num_classes=data.info.num_classes)
    elapsed = session.elapsed()
    run.write_metrics(
        session.records + ([{"kind": "test", "test_loss": test["loss"], "test_acc": test["acc"]}] if test else [])
    )
    run.update_summary(
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        confusion=test.get("confusion"),
        train_seconds=round(elapsed, 2),
        samples_per_s=session.samples_seen / elapsed if elapsed else None,
    )
    emit(session.event("end", epoch=epoch, step=session.step, state=state, message=error or "", elapsed_s=elapsed))
    return TrainResult(
        run=run,
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        epochs_done=run.summary().get("epochs_done", 0),
    )


def train(
    cfg: TrainConfig,
    callbacks: list[Callback] | None = None,
    stop: threading.Event | None = None,
    resume: str | Path | None = None,
) -> TrainResult:
    """Train `cfg.model` on `cfg.dataset` into a new run folder (or continue run `resume`).

    Never raises for NaN loss or out-of-memory: the run is marked failed with the reason,
    which the result carries. Bad settings (unknown model, wrong data) raise ModelError/DatasetError
    before any run folder is written.
    """
    listeners = list(callbacks or [])
    stop = stop or threading.Event()

    def emit(event: TrainEvent) -> None:
        for cb in listeners:
            cb(event)

    session = setup_run(cfg, resume)
    emit(session.event("start", epoch=session.start_epoch, step=session.step, message=session.note or ""))
    session.started = time.perf_counter()
    state, error, epoch = "completed", None, session.start_epoch
    try:
        for epoch in range(session.start_epoch + 1, session.cfg.epochs + 1):
            result = run_epoch(session, epoch, stop, emit)
            if result is None:  # stopped before this epoch's first step: it does not count
                epoch -= 1
                state = "stopped"
                break
            write_checkpoint(session, result)
            emit(result.event)
            if result.stopped:
                state = "stopped"
                break
    except TrainingFailed as e:
        state, error = "failed", str(e)
    return finish_run(session, state, error, epoch, emit)
