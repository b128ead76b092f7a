"""What a run will cost before it trains: its steps and the seconds one of them takes with its own model, measured
here on a probe batch.

Why measured: the quick start's queue was priced at the running model's speed, and its three models differ several
times over per step (a small ResNet, a ViT, a text transformer on different data), so the time left read 18 minutes
for a queue that took 10. A probe builds the run's model as the engine would (its recipe's batch size, optimizer,
tokenizer and build options), times a few training steps on one batch of its data, and keeps the answer per process
(model, data, batch, optimizer, device, threads). The pages then scale the probes by what the running job measures
(the machine's load, the validation passes), so the queue's remaining runs are priced by their own models.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import torch
from torch import nn

from xaidash.data.registry import get_source
from xaidash.models.device import autocast, pick_device
from xaidash.models.registry import get_spec
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.data import run_tokenizer, split_data, split_indices
from xaidash.models.training.demo import planned_steps
from xaidash.models.training.optimizer import make_optimizer
from xaidash.models.training.session import build_options

PROBE_STEPS = 5  # timed steps after one untimed (the first pays for allocations and lazy initialisation)
_cache: dict[tuple[object, ...], float] = {}
_loads: dict[str, float] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class RunPlan:
    """A run before it trains: its optimizer steps, one step's seconds on a probe batch (None: not measured) and
    the seconds loading its data set took here (a new training process loads it again; 0 when unknown)."""

    steps: int
    step_s: float | None = None
    load_s: float = 0.0

    @property
    def seconds(self) -> float | None:
        """The probe's price of the whole run's steps, before any scaling to what a running job measures."""
        return self.steps * self.step_s if self.step_s is not None else None


def plan_run(cfg: TrainConfig) -> RunPlan:
    """`cfg`'s steps, its model's seconds per step here and its data's loading time (the dashboard's queue plans
    each run with it)."""
    load_s = load_seconds(cfg.dataset)
    return RunPlan(planned_steps(cfg), step_seconds(cfg), load_s)


def load_seconds(dataset: str) -> float:
    """Seconds the first load of `dataset`'s train and test splits took in this process (remembered; about 0 when
    something here had loaded them before: built-in sets are cached per process, so that is all it can tell)."""
    with _lock:
        if dataset in _loads:
            return _loads[dataset]
    source = get_source(dataset)
    start = time.perf_counter()
    source.load("train")
    source.load("test")
    seconds = time.perf_counter() - start
    with _lock:
        return _loads.setdefault(dataset, seconds)


def step_seconds(cfg: TrainConfig) -> float:
    """Seconds one training step of `cfg`'s model takes on this machine, measured on a batch of its data (once per
    process and setting: the fastest of PROBE_STEPS steps, i.e. the machine's pace rather than a moment's load)."""
    cfg = cfg.with_recipe()
    settings = cfg.settings()
    device = pick_device(cfg.device)
    options = json.dumps(cfg.model_options, sort_keys=True, default=str)
    threads = torch.get_num_threads()
    key = (cfg.model, cfg.dataset, settings.batch_size, settings.optimizer, cfg.amp, options, str(device), threads)
    with _lock:
        if key in _cache:
            return _cache[key]
    seconds = _measure(cfg, device)
    with _lock:
        _cache[key] = seconds
    return seconds


def _measure(cfg: TrainConfig, device: torch.device) -> float:
    """Time training steps of a freshly built model on the first batch of the training split (never written
    anywhere; the caller's random state is left as it was)."""
    settings = cfg.settings()
    spec, source = get_spec(cfg.model), get_source(cfg.dataset)
    split = source.load("train")
    used, _ = split_indices(len(split), cfg.seed, settings.max_train_samples, cfg.val_fraction)
    batch = used[: settings.batch_size]
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(cfg.seed)
        tokenizer = run_tokenizer(spec, split, used, None, resume_vocab=False, save=False)  # the vocabulary's size
        x, y = next(iter(split_data(split, batch, source.info, tokenizer, device, 0).batches(len(batch), False)))
        model = spec.build(source.info, **build_options(cfg, spec, tokenizer)).to(device)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(settings, cfg.momentum, params, device)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=settings.label_smoothing)
        model.train()
        times = []
        for _ in range(1 + PROBE_STEPS):
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            with autocast(device, cfg.amp):
                loss = loss_fn(model(x).float(), y)
            loss.backward()
            optimizer.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
    return min(times[1:])
