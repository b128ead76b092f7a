"""A run's data, ready to train on: the seeded train/validation split, the tokenizer (a text model's word
vocabulary is built here), and each split as device tensors or a streaming DataLoader."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, DatasetSource, Split, TextSplit
from xaidash.data.tokenizer import Tokenizer, WordVocab
from xaidash.models.registry import ModelError, get_spec
from xaidash.models.runs.store import VOCAB, Run
from xaidash.models.training.batches import LoaderData, TensorData, image_tensors, text_tensors
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.distributed import SINGLE, DistContext
from xaidash.models.training.recipes import TrainSettings


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and torch's random numbers; a CPU generator seeded alike."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


@dataclass
class Prepared:
    """A run's data set: its train, validation (none when val_fraction is 0) and test splits, and the tokenizer."""

    info: DatasetInfo
    train: TensorData | LoaderData
    val: TensorData | LoaderData | None
    test: TensorData | LoaderData
    tokenizer: Any
    test_labels: torch.Tensor


def used_and_held_out(n: int, max_train_samples: int, val_fraction: float) -> tuple[int, int]:
    """(samples used, of them held out for validation) of a training split of n samples: capped at
    max_train_samples (0: no cap), val_fraction of those held out."""
    used = min(n, max(2, max_train_samples)) if max_train_samples else n
    return used, int(used * val_fraction)


def split_indices(n: int, seed: int, max_train_samples: int, val_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices into a training split of n samples: a seeded shuffle, capped at
    max_train_samples (0: no cap), the first val_fraction of it held out for validation."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    used, n_val = used_and_held_out(n, max_train_samples, val_fraction)
    order = order[:used]
    return order[n_val:], order[:n_val]


def prepare_data(
    cfg: TrainConfig,
    settings: TrainSettings,
    source: DatasetSource,
    device: torch.device,
    run: Run,
    resume_vocab: bool,
    dist: DistContext = SINGLE,
) -> Prepared:
    """The data of run `run`: the training split less the validation share (capped at max_train_samples), the test
    split, and a text model's tokenizer (its own, the run's saved vocabulary when resuming, or one built from the
    training texts and saved by rank 0)."""
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
            tokenizer = run.vocab()  # checked: a damaged vocab.json is named, not a traceback
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

    return Prepared(
        info=info,
        train=make(train_split, train_idx),
        val=make(train_split, val_idx) if n_val else None,
        test=make(test_split, None),
        tokenizer=tokenizer,
        test_labels=test_split.labels,
    )
