"""What a scene model's run folder holds and how training writes and reads it (models/runs/store.py's layout):

config.json               model, dataset, created, device, and `scene_model` (task, model, dataset, classes,
                          image_size, settings, recipe): what the store calls a `scene_model` run
summary.json              state (running, completed, stopped, failed, interrupted), epochs_done, epochs,
                          partial_steps, steps_per_epoch, kept, error, val_metrics, test_metrics, headline
metrics.jsonl             {"kind": "step", ...} every few steps, {"kind": "epoch", ..., "val": {...}} per epoch,
                          {"kind": "test", "test": {...}} at the end
model.safetensors         the latest weights (after the last epoch, or at a stop)
checkpoints/epoch_NNN.safetensors   the weights after each epoch
train_state.safetensors   the optimizer's tensors, its param groups and where training stands (JSON metadata)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import load_training_state, load_weights, save_training_state, save_weights
from xaidash.models.runs.files import STATE, WEIGHTS
from xaidash.models.runs.store import SCENE_MARK, Run

STEP_RECORD_EVERY = 10  # steps between two step records in metrics.jsonl


@dataclass(frozen=True)
class Position:
    """Where a run's training stands: complete epochs, steps done inside the next one, steps done in all."""

    epochs_done: int = 0
    partial_steps: int = 0
    step: int = 0


def scene_facts(run: Run) -> dict[str, Any]:
    """config.json's `scene_model` (checked by the store's schema); ModelError when the run is not a scene model's."""
    config = run.config()
    facts = config.get(SCENE_MARK)
    if not isinstance(facts, dict):
        raise ModelError(
            f"Run {run.id} is not a detection or segmentation model's run (no {SCENE_MARK} in config.json)."
        )
    return facts


def write_config(run: Run, facts: dict[str, Any], device: str, created: float | None = None) -> None:
    """config.json; `created` kept from the first write when a run is resumed."""
    run.write_config(
        {
            "model": facts["model"],
            "dataset": facts["dataset"],
            "classes": list(facts["classes"]),
            "created": time.time() if created is None else created,
            "device": device,
            SCENE_MARK: facts,
        }
    )


def save_progress(run: Run, model: nn.Module, optimizer: torch.optim.Optimizer, where: Position) -> None:
    """The latest weights, then the optimizer and position: a stop or an epoch's end leaves a resumable run."""
    save_weights(model, run.file(WEIGHTS))
    extra = {"epoch": where.epochs_done, "partial_steps": where.partial_steps, "step": where.step}
    save_training_state(run.file(STATE), optimizer, extra)


def save_epoch(run: Run, model: nn.Module, epoch: int) -> None:
    run.checkpoint_path(epoch).parent.mkdir(parents=True, exist_ok=True)
    save_weights(model, run.checkpoint_path(epoch))


def restore(run: Run, model: nn.Module, optimizer: torch.optim.Optimizer) -> Position:
    """The weights and optimizer state a stopped or interrupted run kept, and where it stood; ModelError when it
    kept none."""
    if not run.file(WEIGHTS).is_file() or not run.file(STATE).is_file():
        raise ModelError(f"Run {run.id} kept no training state to resume from: train it again instead.")
    load_weights(model, run.file(WEIGHTS))
    extra = load_training_state(run.file(STATE), optimizer)
    try:
        return Position(int(extra["epoch"]), int(extra.get("partial_steps", 0)), int(extra["step"]))
    except (KeyError, TypeError, ValueError):
        raise ModelError(f"{run.id}/{STATE} is damaged: it does not say where training stood.") from None
