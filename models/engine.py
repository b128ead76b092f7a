"""The training engine: one loop for every zoo model and data set.

Small data sets live on the device as tensors (no per-batch DataLoader overhead); image
folders stream through a DataLoader. bf16 autocast on CUDA. Progress goes out as
`TrainEvent`s to any number of callbacks (CLI progress bar, dashboard job); a stop request
is honoured within one step and leaves a valid checkpoint.
"""

from __future__ import annotations

import math
import platform
import random
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, DatasetSource, ImageSplit, get_source
from xaidash.data.tokenizer import WordVocab
from xaidash.models.batches import LoaderData, TensorData, augment_images, image_tensors, text_tensors
from xaidash.models.bundle import ModelBundle
from xaidash.models.checkpoint import load_training_state, load_weights, save_training_state, save_weights
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runstore import STATE, VOCAB, WEIGHTS, Run, info_to_json, pick_device, resolve_run

Optimizer = Literal["adam", "adamw", "sgd"]
Schedule = Literal["cosine", "onecycle", "constant"]
Augment = Literal["none", "shift", "flip", "shift+flip"]


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
        if self.optimizer not in ("adam", "adamw", "sgd"):
            problems.append(f"unknown optimizer {self.optimizer!r} (adam, adamw, sgd)")
        if self.schedule not in ("cosine", "onecycle", "constant"):
            problems.append(f"unknown schedule {self.schedule!r} (cosine, onecycle, constant)")
        if self.augment not in ("none", "shift", "flip", "shift+flip"):
            problems.append(f"unknown augmentation {self.augment!r} (none, shift, flip, shift+flip)")
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
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            pass
    return out


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


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

    tokenizer = None
    if info.modality == "text":
        if spec.tokenizer is not None:
            tokenizer = spec.tokenizer()
        elif resume_vocab and run.file(VOCAB).exists():
            tokenizer = WordVocab.load(run.file(VOCAB))
        else:
            tokenizer = WordVocab.build([train_split.texts[i] for i in train_idx.tolist()])
            tokenizer.save(run.file(VOCAB))
        make = lambda split, idx: text_tensors(split, tokenizer, device, idx)  # noqa: E731
    elif isinstance(train_split, ImageSplit) and train_split.in_memory:
        make = lambda split, idx: image_tensors(split, info, device, idx)  # noqa: E731
    else:
        make = lambda split, idx: LoaderData(  # noqa: E731
            split, info, device, list(range(len(split))) if idx is None else idx.tolist(), cfg.workers
        )
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


def _autocast(device: torch.device, enabled: bool):
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


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
        with _autocast(device, amp):
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
    callbacks = callbacks or []
    stop = stop or threading.Event()
    cfg.validate()
    resumed = resolve_run(resume) if resume is not None else None
    if resumed is not None:  # the run's own settings, with the new epoch total and device
        cfg = TrainConfig(**{**resumed.config()["train"], "epochs": cfg.epochs, "device": cfg.device})
    spec = get_spec(cfg.model)
    source = get_source(cfg.dataset)
    spec.check_fits(source.info)
    device = pick_device(cfg.device)
    run = resumed or Run.create(cfg.dataset, cfg.model)

    start_epoch = 0
    gen = seed_everything(cfg.seed)
    data = _prepare_data(cfg, source, device, run, resume_vocab=resumed is not None)
    options = dict(cfg.model_options)
    if data.tokenizer is not None and spec.tokenizer is None:
        options.update(vocab_size=len(data.tokenizer), pad_id=data.tokenizer.pad_id)
    model = spec.build(data.info, **options).to(device)
    lr = cfg.lr if cfg.lr is not None else spec.default_lr
    params = [p for p in model.parameters() if p.requires_grad]
    opt = _optimizer(cfg, params, lr)
    steps_per_epoch = math.ceil(len(data.train) / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    sched = _schedule(cfg, opt, lr, total_steps)
    records = run.metrics() if resumed is not None else []

    if resumed is not None:
        load_weights(model, run.file(WEIGHTS))
        extra = load_training_state(run.file(STATE), opt) if run.file(STATE).exists() else {}
        start_epoch = int(extra.get("epoch", 0))
        gen = torch.Generator().manual_seed(cfg.seed + start_epoch)
        with warnings.catch_warnings():  # fast-forwarding the schedule, not skipping an optimizer step
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(start_epoch * steps_per_epoch):
                sched.step()
        if start_epoch >= cfg.epochs:
            raise ModelError(
                f"Run {run.id} already has {start_epoch} epochs: ask for more (--epochs N > {start_epoch})."
            )

    model_note = getattr(model, "xai_note", None) or spec.note()
    config = {
        "model": cfg.model,
        "model_note": model_note,
        "dataset": cfg.dataset,
        "modality": data.info.modality,
        "classes": list(data.info.classes),
        "dataset_info": info_to_json(data.info),
        "model_options": options,
        "train": asdict(cfg),
        "lr": lr,
        "device": _device_name(device),
        "versions": library_versions(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in params),
        "train_samples": len(data.train),
        "val_samples": len(data.val) if data.val else 0,
        "test_samples": len(data.test),
        "created": run.config()["created"] if resumed is not None else time.time(),
    }
    run.write_config(config)
    run.update_summary(state="running", error=None, epochs_done=start_epoch, epochs=cfg.epochs)

    def emit(event: TrainEvent) -> None:
        for cb in callbacks:
            cb(event)

    base = dict(run_id=run.id, epochs=cfg.epochs, total_steps=total_steps)
    emit(
        TrainEvent(
            kind="start", epoch=start_epoch, step=start_epoch * steps_per_epoch, message=model_note or "", **base
        )
    )
    log_every = max(1, steps_per_epoch // 20)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    step = start_epoch * steps_per_epoch
    samples_seen = 0
    state, error, epoch = "completed", None, start_epoch
    shift = 2 if "shift" in cfg.augment else 0
    flip = "flip" in cfg.augment

    try:
        for epoch in range(start_epoch + 1, cfg.epochs + 1):
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
                with _autocast(device, cfg.amp):
                    logits = model(x)
                    loss = loss_fn(logits.float(), y)
                if not torch.isfinite(loss):
                    raise TrainingFailed(
                        f"Loss became {loss.item()} at epoch {epoch}, step {step + 1}: the learning rate ({lr:g}) is "
                        "probably too high; try a lower one (e.g. --lr {:g}).".format(lr / 10)
                    )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                step += 1
                seen += len(y)
                samples_seen += len(y)
                loss_sum += loss.detach() * len(y)
                correct += (logits.argmax(1) == y).sum()
                if step % log_every == 0 or step == total_steps:
                    elapsed = time.perf_counter() - t0
                    rate = samples_seen / elapsed if elapsed > 0 else None
                    remaining = (total_steps - step) * cfg.batch_size
                    event = TrainEvent(
                        kind="step",
                        epoch=epoch,
                        step=step,
                        train_loss=float(loss_sum) / seen,
                        train_acc=float(correct) / seen,
                        lr=opt.param_groups[0]["lr"],
                        samples_per_s=rate,
                        elapsed_s=elapsed,
                        eta_s=remaining / rate if rate else None,
                        **base,
                    )
                    records.append(
                        {k: v for k, v in asdict(event).items() if v is not None and k not in ("run_id", "message")}
                    )
                    emit(event)
            stopped = stop.is_set()
            if seen == 0 and stopped:
                epoch -= 1
                state = "stopped"
                break
            val = evaluate(model, data.val, device, cfg.amp) if data.val is not None else {}
            elapsed = time.perf_counter() - t0
            rate = samples_seen / elapsed if elapsed > 0 else None
            event = TrainEvent(
                kind="epoch",
                epoch=epoch,
                step=step,
                train_loss=float(loss_sum) / max(seen, 1),
                train_acc=float(correct) / max(seen, 1),
                val_loss=val.get("loss"),
                val_acc=val.get("acc"),
                lr=opt.param_groups[0]["lr"],
                samples_per_s=rate,
                elapsed_s=elapsed,
                eta_s=(total_steps - step) * cfg.batch_size / rate if rate else None,
                **base,
                message="stopped during this epoch" if stopped else "",
            )
            records.append({k: v for k, v in asdict(event).items() if v is not None and k != "run_id"})
            run.write_metrics(records)
            meta = {"epoch": str(epoch), "partial": str(stopped)}
            save_weights(model, run.checkpoint_path(epoch), meta)
            save_weights(model, run.file(WEIGHTS), meta)
            save_training_state(run.file(STATE), opt, {"epoch": epoch if not stopped else epoch - 1, "step": step})
            run.update_summary(epochs_done=epoch, val_acc=val.get("acc"), val_loss=val.get("loss"))
            emit(event)
            if stopped:
                state = "stopped"
                break
    except TrainingFailed as e:
        state, error = "failed", str(e)
    except torch.cuda.OutOfMemoryError:
        state = "failed"
        error = (
            f"Out of memory on {_device_name(device)} at batch size {cfg.batch_size}: lower the batch size "
            "(--batch-size) or train on another device."
        )
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            raise
        state, error = "failed", f"Out of memory at batch size {cfg.batch_size}: lower the batch size. ({e})"

    if state == "failed" and not run.file(WEIGHTS).exists():
        save_weights(model, run.file(WEIGHTS), {"epoch": "0", "partial": "True"})

    test: dict[str, Any] = {}
    if state != "failed":
        test = evaluate(model, data.test, device, cfg.amp, num_classes=data.info.num_classes)
    elapsed = time.perf_counter() - t0
    run.write_metrics(
        records + ([{"kind": "test", "test_loss": test["loss"], "test_acc": test["acc"]}] if test else [])
    )
    run.update_summary(
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        confusion=test.get("confusion"),
        train_seconds=round(elapsed, 2),
        samples_per_s=samples_seen / elapsed if elapsed else None,
    )
    emit(
        TrainEvent(
            kind="end",
            epoch=epoch,
            step=step,
            state=state,
            message=error or "",
            elapsed_s=elapsed,
            val_acc=None,
            **base,
        )
    )
    return TrainResult(
        run=run,
        state=state,
        error=error,
        test_acc=test.get("acc"),
        test_loss=test.get("loss"),
        epochs_done=run.summary().get("epochs_done", 0),
    )
