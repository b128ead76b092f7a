"""Training an SAE with SAELens: harvest (harvest.py), then SAELens's SAETrainer stepped by xaidash's loop so each
step reports an event, Stop ends between two steps with a resumable state, and resuming continues to the planned
step. The loop is SAETrainer.fit's own, step for step (norm estimate, sparsity windows, `step`, folding the
activation scale into the weights at the end), less its tqdm bar and wandb logging."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from xaidash.data.atomic import atomic_write_json
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae import store
from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.harvest import HarvestProgress, harvest, read_plan
from xaidash.models.language.sae.lens import sae_lens
from xaidash.models.language.sae.trainer_state import clear_state, load_state, save_state
from xaidash.models.language.sites import d_model
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run, resolve_run

NORM_BATCHES = 32  # batches that estimate the mean activation norm (SAELens's n_batches_for_norm_estimate)
WARMUP_FRACTION = 0.02
DECAY_FRACTION = 0.2  # linear decay to 0 over the last fifth of the steps, as SAELens's docs advise

# Per architecture, the SAELens training-config fields xaidash sets from SaeConfig (SAELens's registry gives the
# classes).
ARCH_FIELDS: dict[str, Callable[[SaeConfig], dict[str, Any]]] = {
    "topk": lambda c: {"k": c.k},
    "jumprelu": lambda c: {"l0_coefficient": c.sparsity},
    "standard": lambda c: {"l1_coefficient": c.sparsity},
}


@dataclass(frozen=True)
class SaeEvent:
    """Progress of an SAE job. phase: "harvest" (tokens_seen of tokens_total harvested), "train" (one step),
    "evaluate", "done" or "stopped". mse, loss, l0, explained_variance and dead are the step's (SAELens's train
    log: explained variance against the batch mean, dead = not fired within the dead-feature window)."""

    phase: str
    step: int
    total_steps: int
    tokens_seen: int
    tokens_total: int
    elapsed: float
    loss: float | None = None
    mse: float | None = None
    l0: float | None = None
    explained_variance: float | None = None
    dead: int | None = None
    lr: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def training_batches(folder: Path, batch: int, seed: int, skip: int = 0) -> Iterator[torch.Tensor]:
    """Endless (batch, d_in) float32 batches of the harvested training activations: each epoch visits the chunks
    in a seeded random order, each chunk shuffled; the first `skip` batches are passed over (a resumed run sees the
    batches it would have seen)."""
    files = store.chunk_files(folder, "train")
    if not files:
        raise ModelError(f"SAE {folder.name} has no harvested training activations.")
    epoch = 0
    sum_rows = 0
    rest: torch.Tensor | None = None
    while True:
        if epoch == 1 and rest is not None and rest.shape[0] == sum_rows:
            raise ModelError(f"SAE {folder.name}: {sum_rows:,} harvested tokens are fewer than one batch of {batch:,}.")
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        for i in torch.randperm(len(files), generator=g).tolist():
            acts, _ = store.read_chunk(files[i])
            sum_rows += acts.shape[0] if epoch == 0 else 0
            acts = acts[torch.randperm(acts.shape[0], generator=g)]
            if rest is not None:
                acts = torch.cat([rest, acts])
            n = acts.shape[0] // batch
            for b in range(n):
                if skip > 0:
                    skip -= 1
                    continue
                yield acts[b * batch : (b + 1) * batch]
            rest = acts[n * batch :]
        epoch += 1


def build_trainer(config: SaeConfig, d_in: int, device: str, folder: Path, skip: int = 0) -> Any:
    """SAELens's training SAE of `config`'s architecture and an SAETrainer for it over the harvested batches."""
    lens = sae_lens()
    torch.manual_seed(config.seed)
    sae_cls, cfg_cls = sae_lens("registry").get_sae_training_class(config.architecture)
    sae_cfg = cfg_cls(
        d_in=d_in,
        d_sae=config.width,
        device=device,
        normalize_activations="expected_average_only_in",
        **ARCH_FIELDS[config.architecture](config),
    )
    steps = config.total_steps
    window = max(10, min(1000, steps // 5))  # steps a feature may go without firing before it counts as dead
    trainer_cfg = sae_lens("config").SAETrainerConfig(
        total_training_samples=steps * config.batch_tokens,
        train_batch_size_samples=config.batch_tokens,
        lr=config.lr,
        lr_end=config.lr,  # the constant schedule's level, from which the decay starts (SAELens's runner sets it)
        lr_warm_up_steps=int(steps * WARMUP_FRACTION),
        lr_decay_steps=int(steps * DECAY_FRACTION),
        device=device,
        dead_feature_window=window,
        feature_sampling_window=window,
        n_checkpoints=0,
        logger=lens.LoggingConfig(log_to_wandb=False),
    )
    provider = training_batches(folder, config.batch_tokens, config.seed, skip)
    return lens.SAETrainer(cfg=trainer_cfg, sae=sae_cls(sae_cfg).to(device), data_provider=provider)


def inference_weights(trainer: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The inference SAE's state dict and config of the trainer's SAE as it is now, with the activation scale
    folded in (what SAETrainer.fit does at its end, then TrainingSAE.save_inference_model), the trainer's own
    SAE left as it was."""
    sae = copy.deepcopy(trainer.sae)
    if trainer.activation_scaler.scaling_factor is not None:
        sae.fold_activation_norm_scaling_factor(trainer.activation_scaler.scaling_factor)
    state = sae.state_dict()
    sae.process_state_dict_for_saving_inference(state)
    return state, sae.cfg.get_inference_sae_cfg_dict()


def _step_event(trainer: Any, output: Any, config: SaeConfig, elapsed: float) -> SaeEvent:
    log = trainer.build_train_step_log_dict(output=output, n_training_samples=trainer.n_training_samples)
    return SaeEvent(
        phase="train",
        step=trainer.n_training_steps,
        total_steps=config.total_steps,
        tokens_seen=trainer.n_training_samples,
        tokens_total=config.total_steps * config.batch_tokens,
        elapsed=elapsed,
        loss=float(log["losses/overall_loss"]),
        mse=float(log.get("losses/mse_loss", log["losses/overall_loss"])),
        l0=float(log["metrics/l0"]),
        explained_variance=float(log["metrics/explained_variance"]),
        dead=int(log["sparsity/dead_features"]),
        lr=float(log["details/current_learning_rate"]),
    )


@torch.no_grad()
def init_decoder_bias(trainer: Any, batches: Iterator[torch.Tensor], n: int) -> None:
    """b_dec := the mean of the (scaled) activations, before the first step. By hand: SAELens 6 starts b_dec at
    zero, and a residual stream has a large mean (SmolLM2 layer 15: most of each token's norm) that then decides
    every token's top k alike, so most features never fire and die (72% of 2,304 in 300 steps). OpenAI's TopK
    recipe starts b_pre at the geometric median; the mean is the cheap stand-in."""
    total = torch.zeros(int(trainer.sae.cfg.d_in), dtype=torch.float64)
    count = 0
    for _ in range(n):
        batch = next(batches)
        total += batch.double().sum(0)
        count += batch.shape[0]
    mean = trainer.activation_scaler.scale((total / max(count, 1)).float())
    trainer.sae.b_dec.data.copy_(mean.to(trainer.sae.b_dec.device))


def prepare_trainer(trainer: Any, config: SaeConfig, folder: Path) -> None:
    """Before the first step (not again on resuming): SAELens's activation scale (fit's norm estimate) and the
    decoder bias (init_decoder_bias)."""
    if trainer.activation_scaler.scaling_factor is not None:
        return
    # on batches of another seed, so the estimate does not consume the training stream
    estimate = training_batches(folder, config.batch_tokens, config.seed + 1)
    n = min(NORM_BATCHES, config.total_steps)
    with contextlib.redirect_stderr(io.StringIO()):  # its tqdm bar: progress goes through events here
        trainer.activation_scaler.estimate_scaling_factor(int(trainer.sae.cfg.d_in), estimate, n)
    init_decoder_bias(trainer, training_batches(folder, config.batch_tokens, config.seed + 1), n)


def run_steps(
    trainer: Any, config: SaeConfig, folder: Path, emit: Callable[[SaeEvent], None], stop: threading.Event
) -> bool:
    """SAETrainer.fit's loop from where the trainer is to the planned step; False when `stop` ended it first."""
    prepare_trainer(trainer, config, folder)
    provider = trainer.data_provider
    start = time.monotonic()
    while trainer.n_training_steps < config.total_steps:
        if stop.is_set():
            return False
        trainer.maybe_reset_sparsity()
        output = trainer.step(next(provider))
        trainer.n_training_steps += 1
        emit(_step_event(trainer, output, config, time.monotonic() - start))
    trainer.set_final_sae_metadata()
    return True


# ---- the job -----------------------------------------------------------------------------------------------------


def new_sae_id(run: Run, config: SaeConfig) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{stamp}-L{config.layer}-{config.site}-{config.architecture}-{config.width}"
    sae_id, n = base, 1
    while store.sae_folder(run, sae_id).exists():
        n += 1
        sae_id = f"{base}-{n}"
    return sae_id


def _events_writer(folder: Path, on_event: Callable[[SaeEvent], None]) -> Callable[[SaeEvent], None]:
    def emit(event: SaeEvent) -> None:
        if event.phase == "train":
            with (folder / store.EVENTS).open("a", encoding="utf-8") as f:
                f.write(json.dumps(event.to_json()) + "\n")
        on_event(event)

    return emit


def _open_job(run: Run, config: SaeConfig | None, resume: str | None, lm: LanguageModel) -> tuple[Path, SaeConfig]:
    """The SAE's folder and settings: a new one (checked first: a refusal leaves nothing behind), or the stopped
    one `resume` names."""
    if resume is None:
        if config is None:
            raise ModelError("Give the SAE's settings, or the id of a stopped SAE to resume.")
        config.check(lm)
        folder = store.sae_folder(run, new_sae_id(run, config))
        folder.mkdir(parents=True)
        created = datetime.now().isoformat(timespec="seconds")
        store.write_config(folder, config, d_model(lm), "running", pid=os.getpid(), created=created, error="")
        return folder, config
    record = store.read_record(run, resume)
    if record.status in ("finished", "running"):
        raise ModelError(f"SAE {resume} is {record.status}: only a stopped SAE can be resumed.")
    store.update_config(record.folder, status="running", pid=os.getpid(), error="")
    return record.folder, record.config


def train_sae(
    lm_run: Run | str | Path,
    config: SaeConfig | None,
    on_event: Callable[[SaeEvent], None],
    stop: threading.Event,
    resume: str | None = None,
    *,
    device: str | None = "auto",
    lm: LanguageModel | None = None,
    on_folder: Callable[[str], None] | None = None,
) -> store.SaeRecord:
    """Train (or, with `resume`, continue) an SAE on `lm_run`'s language model; `config` is ignored when resuming
    (the stored settings hold). Returns the record: finished (with metrics) or stopped (resumable). Settings that
    cannot work raise one ModelError line before anything is written; a failure later marks the SAE failed.
    `on_folder` hears the SAE's id once its folder exists (a page shows which SAE is training)."""
    run = lm_run if isinstance(lm_run, Run) else resolve_run(lm_run)
    if lm is None:
        from xaidash.models.language.loading import load_language_model

        lm = load_language_model(run, device)
    folder, config = _open_job(run, config, resume, lm)
    if on_folder is not None:
        on_folder(folder.name)
    try:
        return _run_job(run, lm, config, folder, _events_writer(folder, on_event), stop)
    except BaseException as e:
        message = str(e) if isinstance(e, ModelError) else f"{type(e).__name__}: {e}"
        store.update_config(folder, status="stopped" if store.has_state(folder) else "failed", error=message)
        raise


def _rates(
    config: SaeConfig, d_in: int, folder: Path, harvest_s: float | None, train_s: float | None
) -> dict[str, float]:
    """Throughputs this training measured (config.Rates), over the work it did whole: decoder-layer tokens per
    second of the harvest, SAE-training MACs per second."""
    rates: dict[str, float] = {}
    plan = read_plan(folder) or {}
    harvested = (len(plan.get("train", [])) + len(plan.get("heldout", []))) * (config.context - 1)
    if harvest_s and harvested:
        rates["layer_tokens_s"] = harvested * (config.layer + 1) / harvest_s
    if train_s:
        rates["train_macs_s"] = 3.0 * d_in * config.width * config.total_steps * config.batch_tokens / train_s
    return rates


def _harvest_event(config: SaeConfig, p: HarvestProgress) -> SaeEvent:
    return SaeEvent("harvest", 0, config.total_steps, p.tokens_done, p.tokens_total, p.elapsed)


def _run_job(
    run: Run,
    lm: LanguageModel,
    config: SaeConfig,
    folder: Path,
    emit: Callable[[SaeEvent], None],
    stop: threading.Event,
) -> store.SaeRecord:
    from xaidash.models.language.sae.evaluate import evaluate_folder

    t0 = time.monotonic()
    fresh = read_plan(folder) is None  # harvested whole in this call: its time is a measured rate
    if not harvest(lm, config, folder, stop, lambda p: emit(_harvest_event(config, p))):
        store.update_config(folder, status="stopped", pid=None)
        emit(SaeEvent("stopped", 0, config.total_steps, 0, 0, time.monotonic() - t0))
        return store.read_record(run, folder.name)
    harvest_s = time.monotonic() - t0 if fresh else None
    device = str(lm.device)
    resuming = store.has_state(folder)
    skip = 0
    if resuming:
        skip = int(json.loads((folder / "state" / "state.json").read_text())["n_training_steps"])
    trainer = build_trainer(config, d_model(lm), device, folder, skip)
    if resuming:
        load_state(folder, trainer)
    t1 = time.monotonic()
    done = run_steps(trainer, config, folder, emit, stop)
    weights, saelens_cfg = inference_weights(trainer)
    store.write_weights(folder, weights, saelens_cfg)
    if not done:
        save_state(folder, trainer)
        store.update_config(folder, status="stopped", pid=None)
        emit(SaeEvent("stopped", trainer.n_training_steps, config.total_steps, trainer.n_training_samples, 0, 0.0))
        return store.read_record(run, folder.name)
    train_s = time.monotonic() - t1
    emit(SaeEvent("evaluate", config.total_steps, config.total_steps, trainer.n_training_samples, 0, train_s))
    metrics = evaluate_folder(lm, run, folder.name)
    metrics["dead_in_training"] = int(trainer.dead_neurons.sum().item())
    atomic_write_json(folder / store.METRICS, metrics)
    clear_state(folder)
    rates = _rates(config, d_model(lm), folder, harvest_s, None if resuming else train_s)
    store.update_config(folder, status="finished", pid=None, rates=rates)
    emit(SaeEvent("done", config.total_steps, config.total_steps, trainer.n_training_samples, 0, time.monotonic() - t0))
    return store.read_record(run, folder.name)
