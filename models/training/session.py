"""Setting a run up: the settings resolved from the recipe, the run folder created (or reopened) and locked, data,
model, optimizer and schedule built, a resumed run's checkpoint restored, and config.json written. They make the
`TrainingSession` every later step of `train` works with."""

from __future__ import annotations

import platform
import shutil
import time
import warnings
from contextlib import suppress
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.data.registry import DatasetSource, get_source
from xaidash.models.device import device_name
from xaidash.models.registry import ModelError, ModelSpec, get_spec
from xaidash.models.runs import schema as run_schema
from xaidash.models.runs.checkpoint import load_training_state, load_weights
from xaidash.models.runs.lock import RunLock
from xaidash.models.runs.store import CONFIG, STATE, WEIGHTS, Run, info_to_json, kept_sentence, resolve_run
from xaidash.models.training.batches import Shard, steps_per_epoch
from xaidash.models.training.compiled import CompiledSteps, uses_channels_last
from xaidash.models.training.config import TrainConfig, TrainEvent
from xaidash.models.training.data import Prepared, prepare_data, seed_everything
from xaidash.models.training.distributed import SINGLE, DistContext, check_batch
from xaidash.models.training.evaluation import Interval
from xaidash.models.training.finite_guard import FiniteGuard
from xaidash.models.training.optimizer import make_optimizer, make_schedule
from xaidash.models.training.recipes import Recipe, TrainSettings


def library_versions() -> dict[str, str]:
    """Python's version and those of the libraries a run's results depend on, for config.json."""
    out = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "captum", "shap", "lime", "transformers", "safetensors", "xaidash"):
        with suppress(importlib_metadata.PackageNotFoundError):
            out[name] = importlib_metadata.version(name)
    return out


@dataclass
class TrainingSession:
    """Everything one call of `train` works with: settings, run folder, data, model, optimizer, progress."""

    cfg: TrainConfig  # resolved: no setting left None
    settings: TrainSettings  # the same settings, typed
    recipe: tuple[str, Recipe]  # (key, recipe) the open settings came from
    run: Run
    device: torch.device
    data: Prepared
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
    interval: Interval = field(default_factory=lambda: Interval())  # training metrics since the last step record
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
        if "train" not in config:  # the schema types it when present; listing a run needs it not, resuming does
            raise ModelError(f"{resumed.id}/config.json is damaged: train is missing (the settings to resume with).")
        own = _own_settings(config)
        known = {f.name for f in dataclass_fields(TrainConfig)}  # a key of a newer version is not ours to pass
        own = {k: v for k, v in own.items() if k in known}
        cfg = TrainConfig(
            **{**own, "epochs": cfg.epochs or own.get("epochs"), "device": cfg.device, "nproc": cfg.nproc}
        )
    if resumed is not None and config.get("recipe"):
        try:
            recipe = _recorded_recipe(config)
        except (KeyError, TypeError, ValueError) as e:  # hand-edited: no key, or fields Recipe cannot take
            raise ModelError(f"{resumed.id}/config.json is damaged: recipe: {plain_message(e)}.") from None
    else:
        recipe = cfg.recipe()
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
        if resumed is None and dist.main and not run.file(CONFIG).exists():
            # A new run that failed before its config.json (a model that cannot be built, unreadable data) holds
            # nothing to look at or resume: no folder is left behind for the refusal.
            shutil.rmtree(run.path, ignore_errors=True)
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
    data = prepare_data(cfg, settings, source, device, run, resume_vocab=resumed is not None, dist=dist)
    options = build_options(cfg, spec, data.tokenizer)
    model = spec.build(data.info, **options).to(device)
    channels_last = cfg.channels_last and uses_channels_last(model, data.info.modality)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(settings, cfg.momentum, params, device)
    epoch_steps = steps_per_epoch(len(data.train), settings.batch_size, dist.world_size)
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
        schedule=make_schedule(settings, optimizer, epoch_steps * settings.epochs),
        lr=settings.lr,
        options=options,
        steps_per_epoch=epoch_steps,
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


def build_options(cfg: TrainConfig, spec: ModelSpec, tokenizer: Any) -> dict[str, Any]:
    """The model's build options: the config's, plus the vocabulary a tokenizer built here gives a text model."""
    options = dict(cfg.model_options)
    if tokenizer is not None and spec.tokenizer is None:
        options.update(vocab_size=len(tokenizer), pad_id=tokenizer.pad_id)
    return options


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
    # A stopped epoch's record is replaced by the whole epoch's; an extended run's old test record by its new one.
    session.records = [
        r
        for r in session.records
        if not (r.get("kind") == "epoch" and r.get("partial_steps")) and r.get("kind") != "test"
    ]
    session.step = session.start_epoch * session.steps_per_epoch + session.skip_steps
    session.generator = torch.Generator().manual_seed(cfg.seed + session.start_epoch)
    # The restored optimizer state holds the learning rate the run stopped at; cosine's recursive form would
    # scale that again at each fast-forwarded step (a resumed run went on at a fraction of its rate, an extended
    # one at the floor). From the schedule's start value, the fast-forward lands where the schedule, planned over
    # this session's total (the old epochs plus any added), has it.
    for group in session.optimizer.param_groups:
        group["lr"] = group.get("initial_lr", session.settings.lr)
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
        "recipe": {
            "key": key,
            **recipe.settings(),
            "expected_acc": recipe.expected_acc,
            **({"expected_r2": recipe.expected_r2} if recipe.expected_r2 is not None else {}),  # a number to predict
        },
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
