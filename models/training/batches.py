"""Feeding training batches: device-resident tensors for small data, a DataLoader otherwise."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from xaidash.data.modalities import Modality
from xaidash.data.registry import DatasetInfo, ImageSplit, Split
from xaidash.data.transforms import normalize
from xaidash.models.registry import ModelError


def steps_per_epoch(n_train: int, batch_size: int, world_size: int = 1) -> int:
    """Optimizer steps in one epoch of n_train samples: with several processes each takes ceil(n / world)
    samples (padded shares) in batches of batch_size / world."""
    share = math.ceil(n_train / world_size)
    return math.ceil(share / max(1, batch_size // world_size))


# Above this many bytes an in-memory split is still streamed from the CPU in batches.
DEVICE_BYTES_LIMIT = 2 * 1024**3


# Texts are batched with others of similar length, drawn from pools of this many batches: random phrases
# padded to the longest in their batch cost about 3x the compute (SST-2 at batch 64).
LENGTH_POOL_BATCHES = 50


@dataclass(frozen=True)
class Shard:
    """This process's part of every epoch when several train one run (models/training/distributed.py).

    Training (`pad`): every rank draws the same permutation (seeded by seed + epoch, like torch's
    DistributedSampler), pads it by repeating its first samples to a multiple of the world size, and takes
    every world-th sample from its rank on: equal shares, so all ranks take the same number of steps.
    Evaluation: every world-th sample in order, unpadded (each sample counted once in the summed metrics)."""

    rank: int
    world: int
    epoch: int = 0
    seed: int = 0
    pad: bool = True

    def take(self, order: torch.Tensor) -> torch.Tensor:
        """This rank's part of `order` (indices)."""
        if self.pad and len(order) % self.world:
            extra = self.world - len(order) % self.world
            order = torch.cat([order, order.repeat(extra // max(len(order), 1) + 1)[:extra]])
        return order[self.rank :: self.world]

    def permutation(self, n: int) -> torch.Tensor:
        return torch.randperm(n, generator=torch.Generator().manual_seed(self.seed + self.epoch))


@dataclass
class TensorData:
    """Inputs as the model reads them (normalised images, token ids, prepared table rows) and labels, on the training
    device."""

    x: Any  # a tensor; a PyG Batch for graphs (`select` picks its inputs)
    y: torch.Tensor
    select: Callable[[Any, Any], Any] | None = None  # the adapter's: how inputs are picked out of `x`

    def __len__(self) -> int:
        return len(self.y)

    def batches(
        self,
        batch_size: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
        shard: Shard | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches in a random order (shuffle) or in a fixed one, of this process's `shard` when several train
        (the tensors stay where they are; only indices are sharded). Token ids come in batches of similar
        length, each cut to its longest text: random pools of texts, sorted by length within a pool, the batches
        shuffled (training); sorted by length (evaluation, whose sums do not depend on the order)."""
        if isinstance(self.x, torch.Tensor) and self.x.dtype == torch.long:
            yield from self._text_batches(batch_size, shuffle, generator, shard)
            return
        n = len(self.y)
        if shard is None:
            order = torch.randperm(n, generator=generator).to(self.y.device) if shuffle else None
        else:
            order = shard.take(shard.permutation(n) if shuffle else torch.arange(n)).to(self.y.device)
            n = len(order)
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size] if order is not None else slice(i, i + batch_size)
            yield (self.x[idx] if self.select is None else self.select(self.x, idx)), self.y[idx]

    def _text_batches(
        self, batch_size: int, shuffle: bool, generator: torch.Generator | None, shard: Shard | None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        lengths = (self.x != 0).sum(1).cpu()  # padding id 0 (prepared_tensors checks)
        if shuffle:
            if shard is None:
                order = torch.randperm(len(lengths), generator=generator)
            else:
                order = shard.take(shard.permutation(len(lengths)))
            pool = batch_size * LENGTH_POOL_BATCHES
            chunks = [c[torch.argsort(lengths[c], stable=True)] for c in order.split(pool)]
            batches = [b for c in chunks for b in c.split(batch_size)]
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        else:
            mine = shard.take(torch.arange(len(lengths))) if shard is not None else torch.arange(len(lengths))
            batches = list(mine[torch.argsort(lengths[mine], stable=True)].split(batch_size))
        # Texts are left-aligned: columns past a batch's longest text are padding. The indices go to the device
        # in one copy per epoch, not one per batch (each copy from the host waits for the GPU's queue).
        used = [max(1, int(lengths[idx].max())) for idx in batches]
        on_device = torch.cat(batches).to(self.y.device).split([len(b) for b in batches]) if batches else ()
        for idx, width in zip(on_device, used, strict=True):
            yield self.x[idx, :width], self.y[idx]


class LoaderData:
    """A lazily read image split (image folders) through a DataLoader, normalised on the device."""

    def __init__(
        self, split: ImageSplit, info: DatasetInfo, device: torch.device, indices: list[int], workers: int = 0
    ):
        if split.dataset is None:
            raise ModelError("LoaderData reads a lazily loaded split (ImageSplit.dataset); this one is in memory.")
        self.dataset: torch.utils.data.Dataset = split.dataset
        self.info, self.device, self.indices, self.workers = info, device, indices, workers

    def __len__(self) -> int:
        return len(self.indices)

    def batches(
        self,
        batch_size: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
        shard: Shard | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches through a DataLoader; this process's `shard` when several train: torch's DistributedSampler
        for training (its epoch set, so each epoch is shuffled anew and alike on every rank), every world-th
        sample for evaluation (DistributedSampler would pad it with repeats, counted twice)."""
        indices = self.indices
        sampler: torch.utils.data.Sampler[int] | None = None
        if shard is not None and shard.pad:
            sampler = torch.utils.data.DistributedSampler(
                torch.utils.data.Subset(self.dataset, indices),
                num_replicas=shard.world,
                rank=shard.rank,
                shuffle=shuffle,
                seed=shard.seed,
            )
            sampler.set_epoch(shard.epoch)
        elif shard is not None:
            indices = shard.take(torch.as_tensor(indices, dtype=torch.long)).tolist()
        subset = torch.utils.data.Subset(self.dataset, indices)
        loader = torch.utils.data.DataLoader(
            subset,
            batch_size=batch_size,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            generator=generator if sampler is None else None,
            num_workers=self.workers,
            pin_memory=self.device.type == "cuda",
        )
        for x, y in loader:
            x = normalize(x.to(self.device, non_blocking=True).float(), self.info)
            yield x, torch.as_tensor(y).to(self.device, non_blocking=True)


def prepared_tensors(
    adapter: Modality,
    split: Split,
    info: DatasetInfo,
    tokenizer: Any,
    device: torch.device,
    indices: torch.Tensor | None = None,
) -> TensorData:
    """Samples `indices` of an in-memory split (all when None) as the model reads them, prepared once by the
    modality's adapter (normalised images, token ids, standardised and one-hot table rows) and held on the device
    (on the CPU above DEVICE_BYTES_LIMIT, streamed from there batch by batch)."""
    if adapter.tokenized and tokenizer.pad_id != 0:  # TensorData trims padding columns by looking for id 0
        raise ModelError(f"Tokenizers used for training must pad with id 0 (this one pads with {tokenizer.pad_id}).")
    index = list(range(len(split))) if indices is None else indices.tolist()
    labels = split.labels if indices is None else split.labels[indices]
    cpu = torch.device("cpu")
    if index:
        x = adapter.prepare(adapter.items(split, index), info, tokenizer, cpu)
    else:  # an empty split keeps the prepared shape (and dtype) of one sample
        x = adapter.select(adapter.prepare(adapter.example(info, tokenizer, 1), info, tokenizer, cpu), slice(0, 0))
    labels = labels.float() if labels.is_floating_point() else labels.long()
    if not isinstance(x, torch.Tensor):  # a PyG Batch of graphs: on the device, inputs picked by the adapter
        return TensorData(x.to(device), labels.to(device), adapter.select)
    keep_on_cpu = x.numel() * x.element_size() > DEVICE_BYTES_LIMIT
    # class codes as int64; a number to predict keeps its float32 values (.long() would cut 12.7 to 12)
    return TensorData(x if keep_on_cpu else x.to(device), labels.to(device))


def augment_images(x: torch.Tensor, shift: int, flip: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random per-sample translation by up to `shift` pixels (zero padding) and horizontal flips, on the device.

    Hand-written and batched: torchvision's v2 transforms apply one random draw per call, not per sample.
    """
    n, c, h, w = x.shape
    # Drawn where the generator lives: a CUDA generator on a GPU, so no per-step copy from the host (a copy from
    # pageable memory waits for the GPU's queue); a CPU generator keeps CPU runs as they were.
    dev = generator.device if generator is not None else x.device
    if shift > 0:
        dy = torch.randint(0, 2 * shift + 1, (n,), generator=generator, device=dev).to(x.device)
        dx = torch.randint(0, 2 * shift + 1, (n,), generator=generator, device=dev).to(x.device)
        padded = F.pad(x, (shift, shift, shift, shift))
        rows = (torch.arange(h, device=x.device)[None, :] + dy[:, None])[:, None, :, None]
        cols = (torch.arange(w, device=x.device)[None, :] + dx[:, None])[:, None, None, :]
        batch = torch.arange(n, device=x.device)[:, None, None, None]
        chans = torch.arange(c, device=x.device)[None, :, None, None]
        x = padded[batch, chans, rows, cols]
    if flip:
        mask = (torch.rand(n, generator=generator, device=dev) < 0.5).to(x.device)[:, None, None, None]
        x = torch.where(mask, x.flip(-1), x)
    return x
