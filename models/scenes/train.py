"""Training a scene model (detector or segmenter) on a scene set, into a run folder, with Stop and resume.

`train_scene_model(settings)` checks everything a user can get wrong first (unknown set or model, a segmenter on a set
without masks) and refuses it in one line before any folder exists. It then writes the run (run_files.py describes
the files) while holding the run's lock (models/runs/lock.py), validates after every epoch, tests at the end, and
calls `on_event` with a `SceneEvent` at the start, after every step, after every epoch and at the end. `should_stop()`
is asked before every step: a stop saves the weights and the optimizer's state where it stands (state `stopped`), and
`train_scene_model(None, resume=run)` continues to the planned epochs with the same batches as an unbroken run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from xaidash.data.errors import plain_message
from xaidash.data.scenes.registry import load_scene_set, scene_set
from xaidash.data.scenes.types import SceneSplit
from xaidash.models.device import pick_device
from xaidash.models.registry import ModelError
from xaidash.models.runs.lock import RunLock
from xaidash.models.runs.store import Run, kept_sentence
from xaidash.models.scenes import run_files
from xaidash.models.scenes.batches import batch_loss, epoch_plan, lr_at, steps_per_epoch
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.evaluate import HEADLINE, evaluate_scene_model
from xaidash.models.scenes.run_files import Position
from xaidash.models.scenes.zoo import SceneModelSpec, scene_model

EVAL_MAX = 200  # validation (every epoch) and test images at most: a user's large set would make every epoch wait
MAX_IMAGE_SIDE = 512  # a user's larger images are scaled down to this side by the detector


@dataclass(frozen=True)
class SceneTrainSettings:
    """What to train. None takes the model's recipe (`SceneModelSpec.recipe`); `train_count` cuts the training
    split to its first images, `eval_count` the validation and test splits (default and most: EVAL_MAX); `name` is
    added to the run folder's name."""

    dataset: str
    model: str
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    seed: int = 0
    train_count: int | None = None
    device: str = "auto"
    name: str | None = None
    eval_count: int | None = None

    def resolved(self, spec: SceneModelSpec) -> SceneTrainSettings:
        """Every None filled from the recipe, and the numbers checked (ModelError, one line)."""
        recipe = spec.training_recipe()
        out = replace(
            self,
            epochs=recipe.epochs if self.epochs is None else self.epochs,
            batch_size=recipe.batch_size if self.batch_size is None else self.batch_size,
            lr=recipe.lr if self.lr is None else self.lr,
            train_count=recipe.train_count if self.train_count is None else self.train_count,
        )
        for what, value, low in (("epochs", out.epochs, 1), ("batch size", out.batch_size, 1), ("seed", out.seed, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ModelError(f"The {what} must be a whole number of at least {low}, not {value!r}.")
        for what, count in (("training", out.train_count), ("evaluation", out.eval_count)):
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
                raise ModelError(f"The {what} image count must be a whole number of at least 1, not {count!r}.")
        if not isinstance(out.lr, (int, float)) or not 0 < float(out.lr) < 10:
            raise ModelError(f"The learning rate must be a number between 0 and 10, not {out.lr!r}.")
        return out

    @property
    def eval_limit(self) -> int:
        return EVAL_MAX if self.eval_count is None else min(self.eval_count, EVAL_MAX)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SceneTrainSettings:
        known = {k: obj[k] for k in cls.__dataclass_fields__ if k in obj}
        return cls(**known)


Phase = Literal["start", "step", "epoch", "end"]


@dataclass(frozen=True)
class SceneEvent:
    """Progress: `phase` start | step | epoch | end; `epoch` counts from 1 (the epoch in progress, or just done);
    `step` the steps done of `total_steps`; `loss` the step's loss (step) or the epoch's mean (epoch); `metrics` the
    validation metrics (epoch) or the test metrics (end); `state` at the end: completed, stopped or failed."""

    phase: Phase
    run_id: str
    epoch: int
    epochs: int
    step: int
    total_steps: int
    loss: float | None = None
    lr: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    state: str = "running"
    message: str = ""

    @property
    def progress(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0


OnEvent = Callable[[SceneEvent], None]


@dataclass
class _Session:
    run: Run
    spec: SceneModelSpec
    settings: SceneTrainSettings
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    train: SceneSplit
    val: SceneSplit
    device: torch.device
    facts: dict[str, Any]
    where: Position
    on_event: OnEvent | None
    started: float = field(default_factory=time.monotonic)
    records: list[dict[str, Any]] = field(default_factory=list)
    before: float = 0.0  # seconds trained before a resume (summary's elapsed_s)

    def elapsed_s(self) -> float:
        """Seconds of training in all, every leg of a resumed run included."""
        return round(self.before + time.monotonic() - self.started, 1)

    @property
    def epochs(self) -> int:
        return int(self.settings.epochs or 1)

    @property
    def steps_per_epoch(self) -> int:
        return steps_per_epoch(len(self.train), int(self.settings.batch_size or 1))

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    def emit(self, phase: Phase, **fields: Any) -> None:
        if self.on_event is None:
            return
        going = phase in ("start", "step") or self.where.partial_steps > 0  # an epoch in progress, else the last done
        epoch = min(self.where.epochs_done + going, self.epochs)
        self.on_event(
            SceneEvent(
                phase, self.run.id, epoch, self.epochs, self.where.step, self.total_steps,
                elapsed=time.monotonic() - self.started, **fields,
            )
        )  # fmt: skip

    def bundle(self) -> SceneBundle:
        return SceneBundle(
            self.model, self.spec, tuple(self.train.classes), int(self.facts["image_size"]), self.device,
            self.run, self.settings.dataset,
        )  # fmt: skip


def train_scene_model(
    settings: SceneTrainSettings | None,
    *,
    root: Path | None = None,
    on_event: OnEvent | None = None,
    should_stop: Callable[[], bool] | None = None,
    resume: Run | None = None,
) -> Run:
    """Train (or, with `resume`, go on training) a scene model; returns its run. With `resume`, `settings` may be None
    (the run's own), or give `epochs` to change the planned total. Errors a user can cause are one-line ModelError or
    DatasetError, raised before any folder is made; a failure during training is recorded in the run's summary
    (state `failed`) and raised."""
    session, lock = _open(settings, root, on_event, resume)
    try:
        _train_epochs(session, should_stop or (lambda: False))
    except BaseException as e:
        session.run.update_summary(state="failed", error=plain_message(e, first_line=True))
        session.emit("end", state="failed", message=plain_message(e, first_line=True))
        raise
    finally:
        lock.release()
    return session.run


def _prepare(settings: SceneTrainSettings) -> tuple[SceneModelSpec, SceneTrainSettings, dict[str, Any]]:
    """The spec, the resolved settings and the run's `scene_model` facts, or the one-line refusal."""
    spec = scene_model(settings.model)
    resolved = settings.resolved(spec)
    facts = scene_set(settings.dataset)
    if spec.task == "segment" and not facts.has_masks:
        raise ModelError(
            f"{settings.dataset} has no masks, so {spec.id} (a segmenter) cannot learn from it: pick a set with masks "
            "or a detector."
        )
    return (
        spec,
        resolved,
        {"task": spec.task, "model": spec.id, "dataset": settings.dataset, "classes": list(facts.classes)},
    )


def _open(
    settings: SceneTrainSettings | None, root: Path | None, on_event: OnEvent | None, resume: Run | None
) -> tuple[_Session, RunLock]:
    if resume is None and settings is None:
        raise ModelError("Nothing to train: give the settings, or a run to resume.")
    if resume is not None:
        facts = run_files.scene_facts(resume)
        if not isinstance(facts.get("settings"), dict):  # an imported run: trained elsewhere, nothing to go on with
            raise ModelError(f"Run {resume.id} was imported, not trained here: it cannot be resumed.")
        saved = SceneTrainSettings.from_json(facts["settings"])
        settings = saved if settings is None or settings.epochs is None else replace(saved, epochs=settings.epochs)
    assert settings is not None
    spec, resolved, facts_new = _prepare(settings)
    train = load_scene_set(resolved.dataset, "train", resolved.train_count)
    val = load_scene_set(resolved.dataset, "val", resolved.eval_limit)
    if len(train) == 0:
        raise ModelError(f"{resolved.dataset} has no training images.")
    device = pick_device(resolved.device)
    torch.manual_seed(resolved.seed)
    if resume is None:
        image_size = min(MAX_IMAGE_SIDE, max(int(s) for s in train.images[0].shape[-2:]))
        facts = {
            **facts_new,
            "image_size": image_size,
            "settings": resolved.to_json(),
            "recipe": asdict(spec.training_recipe()),
        }
        run = Run.create(f"{resolved.dataset}-{resolved.name}" if resolved.name else resolved.dataset, spec.id, root)
    else:
        facts = {**run_files.scene_facts(resume), "settings": resolved.to_json()}
        run = resume
    lock = RunLock.acquire(run.path, run.id)
    try:
        model = spec.make(len(facts["classes"]), int(facts["image_size"])).to(device)
        optimizer = _optimizer(spec, model, float(resolved.lr or 0))
        where = run_files.restore(run, model, optimizer) if resume is not None else Position()
        created = run.config().get("created") if resume is not None else None
        run_files.write_config(run, facts, str(device), created)
        records = run.metrics() if resume is not None else []
        session = _Session(run, spec, resolved, model, optimizer, train, val, device, facts, where, on_event)
        session.records = records
        if resume is not None:
            session.before = float(run.summary().get("elapsed_s") or 0.0)
    except BaseException:
        lock.release()
        raise
    return session, lock


def _optimizer(spec: SceneModelSpec, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    recipe = spec.training_recipe()
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=recipe.weight_decay)
    return torch.optim.AdamW(params, lr=lr, weight_decay=recipe.weight_decay)


def _summary(s: _Session, state: str, **fields: Any) -> None:
    s.run.update_summary(
        state=state,
        error=None,
        epochs=s.epochs,
        epochs_done=s.where.epochs_done,
        partial_steps=s.where.partial_steps,
        steps_per_epoch=s.steps_per_epoch,
        kept=kept_sentence(s.where.epochs_done, s.where.partial_steps, s.steps_per_epoch, s.epochs),
        headline=HEADLINE[s.spec.task],
        **fields,
    )


def _train_epochs(s: _Session, should_stop: Callable[[], bool]) -> None:
    _summary(s, "running")
    s.emit("start")
    recipe = s.spec.training_recipe()
    batch_size, seed = int(s.settings.batch_size or 1), s.settings.seed
    for epoch in range(s.where.epochs_done, s.epochs):
        plan = epoch_plan(len(s.train), batch_size, seed, epoch, recipe.flip)
        s.model.train()
        losses: list[float] = []
        for step in range(s.where.partial_steps, plan.steps):
            if should_stop():
                _stop(s)
                return
            loss, lr = _step(s, plan.batch(step), recipe.warmup)
            losses.append(loss)
            s.where = Position(epoch, step + 1, s.where.step + 1)
            s.emit("step", loss=loss, lr=lr)
        s.where = Position(epoch + 1, 0, s.where.step)
        _end_epoch(s, epoch + 1, losses)
    _finish(s)


def _step(s: _Session, items: list[tuple[int, bool]], warmup: float) -> tuple[float, float]:
    """One optimizer step; its loss and learning rate."""
    lr = lr_at(s.where.step, s.total_steps, float(s.settings.lr or 0), warmup)
    for group in s.optimizer.param_groups:
        group["lr"] = lr
    loss = batch_loss(s.model, s.spec.task, s.train, items, s.device)
    value = float(loss.detach())
    if not math.isfinite(value):
        raise ModelError(
            f"Training diverged: the loss is not finite at step {s.where.step + 1}; try a lower learning rate than {lr:g}."
        )
    s.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(s.model.parameters(), 10.0)  # from scratch, the first RPN steps can spike
    s.optimizer.step()
    step = s.where.step + 1
    if step % run_files.STEP_RECORD_EVERY == 0:
        s.records.append({"kind": "step", "epoch": s.where.epochs_done + 1, "step": step, "loss": value, "lr": lr})
    return value, lr


def _end_epoch(s: _Session, epoch: int, losses: list[float]) -> None:
    s.model.eval()
    metrics = evaluate_scene_model(s.bundle(), s.val)
    mean = sum(losses) / len(losses) if losses else None
    s.records.append({"kind": "epoch", "epoch": epoch, "step": s.where.step, "train_loss": mean, "val": metrics})
    run_files.save_epoch(s.run, s.model, epoch)
    run_files.save_progress(s.run, s.model, s.optimizer, s.where)
    s.run.write_metrics(s.records)
    _summary(s, "running", val_metrics=metrics, elapsed_s=s.elapsed_s())
    s.emit("epoch", loss=mean, metrics=metrics)


def _stop(s: _Session) -> None:
    s.model.eval()
    run_files.save_progress(s.run, s.model, s.optimizer, s.where)
    s.run.write_metrics(s.records)
    _summary(s, "stopped", elapsed_s=s.elapsed_s())
    s.emit("end", state="stopped", message=f"stopped: {s.run.summary().get('kept')}")


def _finish(s: _Session) -> None:
    s.model.eval()
    test = load_scene_set(s.settings.dataset, "test", s.settings.eval_limit)
    metrics = evaluate_scene_model(s.bundle(), test)
    s.records.append({"kind": "test", "epoch": s.epochs, "step": s.where.step, "test": metrics})
    s.run.write_metrics(s.records)
    _summary(s, "completed", test_metrics=metrics, elapsed_s=s.elapsed_s())
    s.emit("end", state="completed", metrics=metrics)
