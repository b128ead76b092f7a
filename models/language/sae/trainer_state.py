"""A stopped SAE training kept so that it resumes where it stopped: SAELens's SAETrainer state (the training SAE,
Adam's moments, the learning-rate and coefficient schedules, the firing counters, the activation scale) written as
safetensors plus JSON.

By hand rather than SAETrainer.save_trainer_state: that one pickles through torch.save, which xaidash does not load
back; the fields are the same (sae_lens/training/sae_trainer.py: save_trainer_state / load_trainer_state)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from xaidash.data.atomic import atomic_write, atomic_write_json

STATE = "state"


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    sd = optimizer.state_dict()
    tensors = {}
    scalars: dict[str, Any] = {}
    for i, entry in sd["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{i}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{i}.{name}"] = value
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def save_state(folder: Path, trainer: Any) -> None:
    """Write `folder/state/` for `trainer` (a sae_lens SAETrainer) between two steps."""
    target = folder / STATE
    target.mkdir(parents=True, exist_ok=True)
    tensors = {f"sae.{k}": v.detach().cpu().contiguous() for k, v in trainer.sae.state_dict().items()}
    opt_tensors, opt_json = _optimizer_tensors(trainer.optimizer)
    tensors.update(opt_tensors)
    tensors["act_freq_scores"] = trainer.act_freq_scores.detach().cpu().contiguous()
    tensors["n_forward_passes_since_fired"] = trainer.n_forward_passes_since_fired.detach().cpu().contiguous()
    atomic_write(target / "tensors.safetensors", lambda p: save_file(tensors, str(p)))
    doc = {
        "n_training_samples": trainer.n_training_samples,
        "n_training_steps": trainer.n_training_steps,
        "n_frac_active_samples": trainer.n_frac_active_samples,
        "started_fine_tuning": trainer.started_fine_tuning,
        "scaling_factor": trainer.activation_scaler.scaling_factor,
        "lr_scheduler": trainer.lr_scheduler.state_dict(),
        "coefficient_schedulers": {k: s.state_dict() for k, s in trainer.coefficient_schedulers.items()},
        "optimizer": opt_json,
    }
    atomic_write_json(target / "state.json", doc)  # written last: its presence marks a complete state


def load_state(folder: Path, trainer: Any) -> None:
    """Restore what save_state wrote into a freshly built trainer of the same settings."""
    target = folder / STATE
    doc = json.loads((target / "state.json").read_text(encoding="utf-8"))
    tensors = load_file(str(target / "tensors.safetensors"))
    device = trainer.cfg.device
    trainer.sae.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("sae.")})
    trainer.sae.to(device)
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, i, name = key.split(".", 2)
            state.setdefault(int(i), {})[name] = value.to(device)
    for key, value in doc["optimizer"]["scalars"].items():
        i, name = key.split(".", 1)
        state.setdefault(int(i), {})[name] = value
    trainer.optimizer.load_state_dict({"state": state, "param_groups": doc["optimizer"]["param_groups"]})
    trainer.lr_scheduler.load_state_dict(doc["lr_scheduler"])
    for name, sd in doc["coefficient_schedulers"].items():
        trainer.coefficient_schedulers[name].load_state_dict(sd)
    trainer.act_freq_scores = tensors["act_freq_scores"].to(device)
    trainer.n_forward_passes_since_fired = tensors["n_forward_passes_since_fired"].to(device)
    trainer.n_training_samples = int(doc["n_training_samples"])
    trainer.n_training_steps = int(doc["n_training_steps"])
    trainer.n_frac_active_samples = int(doc["n_frac_active_samples"])
    trainer.started_fine_tuning = bool(doc["started_fine_tuning"])
    trainer.activation_scaler.scaling_factor = doc["scaling_factor"]


def clear_state(folder: Path) -> None:
    shutil.rmtree(folder / STATE, ignore_errors=True)
