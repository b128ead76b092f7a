"""A run's data, ready to train on: the seeded train/validation split, the labels trained with (after seeded label
noise, if asked for), the tokenizer (a text model's word vocabulary is built here), and each split as device tensors
or a streaming DataLoader. `training_samples(run)` gives back exactly which samples a run trained on, with which labels."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.data.atomic import atomic_write_json
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, DatasetSource, ImageSplit, Split, TextSplit, get_source
from xaidash.data.tokenizer import Tokenizer, WordVocab
from xaidash.models.registry import ModelError, ModelSpec, get_spec
from xaidash.models.runs.store import VOCAB, Run
from xaidash.models.training.batches import LoaderData, TensorData, prepared_tensors
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


LABEL_NOISE = "label_noise.json"  # the flipped training samples of a run trained with label noise


def flip_labels(labels: torch.Tensor, num_classes: int, fraction: float, seed: int) -> torch.Tensor:
    """`labels` (of the training samples, in training order) with round(fraction * n) of them, drawn by `seed`, moved
    to another class (each to a uniformly drawn other one). Pure: training and `training_samples` call it alike."""
    out = labels.clone().long()
    k = round(fraction * len(out))
    if k == 0 or num_classes < 2:
        return out
    generator = torch.Generator().manual_seed(seed + 2)  # split_indices draws with seed + 1
    where = torch.randperm(len(out), generator=generator)[:k]
    shift = torch.randint(1, num_classes, (k,), generator=generator)
    out[where] = (out[where] + shift) % num_classes
    return out


@dataclass(frozen=True)
class TrainingSamples:
    """The samples a run trained on: indices into the data set's train split (validation excluded, the training-sample
    cap applied), in the order the engine holds them, with the labels it trained with and the data set's own."""

    indices: torch.Tensor
    labels: torch.Tensor
    dataset_labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def flipped(self) -> torch.Tensor:
        """Bool per sample: trained with a label other than the data set's (label noise)."""
        return self.labels != self.dataset_labels


def _noisy(split: Split, idx: torch.Tensor, info: DatasetInfo, cfg_noise: float, seed: int) -> TrainingSamples:
    given = split.labels[idx] if info.regression is not None else split.labels[idx].long()  # a number stays one
    used = flip_labels(given, info.num_classes, cfg_noise, seed) if cfg_noise > 0 else given
    return TrainingSamples(indices=idx, labels=used, dataset_labels=given)


def training_samples(run: Run, split: Split | None = None) -> TrainingSamples:
    """Exactly the training samples `run` trained on and their labels as trained (after label noise), from its
    config.json: the same seeded split and flips as `prepare_data`. `split`: the data set's train split when the
    caller has it loaded already. ModelError for a run not trained here (an imported model has no training split)."""
    config = run.config()
    train = config.get("train")
    if run.kind != "trained" or not isinstance(train, dict) or not config.get("dataset"):
        raise ModelError(f"Run {run.id} was not trained here (imported): its training samples are not known.")
    source = get_source(str(config["dataset"]))
    split = split if split is not None else source.load("train")
    cap = train.get("max_train_samples")
    if cap is None:  # an older run that left it to its recipe
        cap = (config.get("recipe") or {}).get("max_train_samples") or 0
    seed = int(train.get("seed", 0))
    idx, _ = split_indices(len(split), seed, int(cap), float(train.get("val_fraction", 0.1)))
    return _noisy(split, idx, source.info, float(train.get("label_noise", 0.0)), seed)


class _Relabelled(torch.utils.data.Dataset):
    """A lazily read data set with some labels replaced (label noise for LoaderData): index -> label."""

    def __init__(self, base: torch.utils.data.Dataset, labels: dict[int, int]):
        self.base, self.labels = base, labels

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> Any:
        x, y = self.base[i]
        return x, self.labels.get(i, y)


def _apply_noise(
    samples: TrainingSamples, train: TensorData | LoaderData, run: Run, seed: int, dist: DistContext
) -> None:
    """Train on the noisy labels, and record which samples were flipped (rank 0) in the run's label_noise.json."""
    flipped = samples.flipped.nonzero().flatten().tolist()
    if isinstance(train, TensorData):
        train.y = samples.labels.to(train.y.device)
    else:
        labels = {int(samples.indices[i]): int(samples.labels[i]) for i in flipped}
        train.dataset = _Relabelled(train.dataset, labels)
    if dist.main:
        rows = [
            {
                "index": int(samples.indices[i]),
                "dataset_label": int(samples.dataset_labels[i]),
                "label": int(samples.labels[i]),
            }
            for i in flipped
        ]
        atomic_write_json(run.file(LABEL_NOISE), {"seed": seed, "train_samples": len(samples), "flipped": rows})


def run_tokenizer(
    spec: ModelSpec, train_split: Split, train_idx: torch.Tensor, run: Run | None, resume_vocab: bool, save: bool
) -> Tokenizer | None:
    """A text model's tokenizer: its own, the run's saved vocabulary when resuming, or one built from the training
    texts (saved into `run` when `save`); None for inputs read without one."""
    if not isinstance(train_split, TextSplit):
        return None
    if spec.tokenizer is not None:
        return spec.tokenizer()
    if resume_vocab and run is not None and run.file(VOCAB).exists():
        return run.vocab()  # checked: a damaged vocab.json is named, not a traceback
    vocab = WordVocab.build([train_split.texts[i] for i in train_idx.tolist()])  # alike on every rank
    if save and run is not None:
        vocab.save(run.file(VOCAB))
    return vocab


def split_data(
    split: Split, idx: torch.Tensor | None, info: DatasetInfo, tokenizer: Any, device: torch.device, workers: int
) -> TensorData | LoaderData:
    """Samples `idx` of a split (all when None) as the training loop reads them: device tensors, or a DataLoader
    for image folders too large to hold."""
    if isinstance(split, ImageSplit) and not split.in_memory:  # a folder too large to hold: read as it trains
        return LoaderData(split, info, device, list(range(len(split))) if idx is None else idx.tolist(), workers)
    return prepared_tensors(modality_of(info.modality), split, info, tokenizer, device, idx)


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

    tokenizer = run_tokenizer(spec, train_split, train_idx, run, resume_vocab, save=dist.main)

    def make(split: Split, idx: torch.Tensor | None) -> TensorData | LoaderData:
        return split_data(split, idx, info, tokenizer, device, cfg.workers)

    train = make(train_split, train_idx)
    if cfg.label_noise > 0 and info.regression is not None:
        raise ModelError(
            f"Label noise swaps a share of the training labels for other classes; {info.name} has a number to predict "
            f"({info.regression.name}), not classes: train without --label-noise."
        )
    if cfg.label_noise > 0:
        _apply_noise(_noisy(train_split, train_idx, info, cfg.label_noise, cfg.seed), train, run, cfg.seed, dist)
    return Prepared(
        info=info,
        train=train,
        val=make(train_split, val_idx) if n_val else None,
        test=make(test_split, None),
        tokenizer=tokenizer,
        test_labels=test_split.labels,
    )
