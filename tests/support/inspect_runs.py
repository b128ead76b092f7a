"""Run folders for the tests of the pages that inspect a model (attention, receptive fields, embeddings,
model), written directly in the run-store layout (config, per-epoch safetensors checkpoints, epoch
metrics) from freshly built models: the pages only read runs, and training them would take minutes
on a small CPU."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import torch

import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.data.registry import get_info, load_split
from xaidash.data.tokenizer import WordVocab
from xaidash.models.registry import get_spec
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.store import VOCAB, WEIGHTS, Run, info_to_json
from xaidash.models.training.config import TrainConfig


def make_run(root: Path, dataset: str, model: str, epochs: int = 2) -> Run:
    """A run folder as the engine writes it: weights after every epoch, epoch records with val_acc."""
    info, spec = get_info(dataset), get_spec(model)
    run = Run.create(dataset, model, root)
    options: dict = {}
    if info.modality == "text" and spec.tokenizer is None:
        vocab = WordVocab.build(load_split(dataset, "train").texts[:400])
        vocab.save(run.file(VOCAB))
        options = {"vocab_size": len(vocab), "pad_id": vocab.pad_id}
    torch.manual_seed(0)
    net = spec.build(info, **options)
    records = []
    for epoch in range(1, epochs + 1):
        with torch.no_grad():  # stand-in for an epoch of training: the weights move
            for p in net.parameters():
                if p.requires_grad:
                    p.add_(0.05 * torch.randn_like(p))
        save_weights(net, run.checkpoint_path(epoch), {"epoch": str(epoch)})
        records.append({"kind": "epoch", "epoch": epoch, "step": epoch, "val_acc": 0.4 + 0.1 * epoch, "val_loss": 1.0})
    save_weights(net, run.file(WEIGHTS), {"epoch": str(epochs)})
    run.write_config(
        {
            "model": model,
            "dataset": dataset,
            "modality": info.modality,
            "classes": list(info.classes),
            "dataset_info": info_to_json(info),
            "model_options": options,
            "created": time.time(),
            "train": asdict(TrainConfig(dataset=dataset, model=model, epochs=epochs)),
        }
    )
    run.write_metrics(records)
    run.update_summary(state="completed", epochs_done=epochs, test_acc=0.5)
    return run
