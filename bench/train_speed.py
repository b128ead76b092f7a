"""Training speed: the seeds' MNIST loop against the xaidash engine, same device, one run.

The seeds' loop: torchvision MNIST with ToTensor + Normalize, random 48k/12k split, DataLoader
(batch 64, shuffled), SimpleCNN, Adam 1e-3, one .to(device) per batch. The engine: the same
SimpleCNN on device-resident tensors, one-cycle Adam, bf16 on CUDA, in one or more variants:

- engine:    batch 256, learning rate 1e-2 (what earlier figures measured);
- batch512:  batch 512, the learning rate scaled from 256 as the engine scales a recipe's (square root for Adam);
- compile:   batch 512 with --compile on (torch.compile, inductor);
- graphs:    batch 512 with --compile graphs (inductor's reduce-overhead: CUDA graphs on a GPU).

Why 512: over the same 3 epochs, batch 512 at the scaled rate kept the accuracy (98.10% on this project's CPU,
2026-11-24) while batch 1024 fell to 97.1-97.6% and 2048 to 97.0%: too few steps for 3 epochs.

    python bench/train_speed.py --epochs 3 [--device cuda] [--variants engine,batch512,compile,graphs]

Default variants: engine and batch512 on a CPU (compiling costs more than a short CPU run gains), all four on a
GPU. Each variant's epoch time includes its validation pass and checkpoint writes; the speed-up compares the
steady-state epochs (the first, which pays compilation and warm-up, is left out when there are several). Prints
per-epoch times, test accuracies and, as the last line per variant:

    VARIANT: seeds' loop S s/epoch, engine S s/epoch, per-image speed-up R x, accuracy +D points
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, random_split
from torchvision import datasets, transforms

from xaidash.models.device import device_name, pick_device, synchronize
from xaidash.models.training.recipes import scale_lr

BASE_BATCH, BASE_LR = 256, 1e-2
VARIANTS: dict[str, dict[str, Any]] = {
    "engine": {"batch_size": BASE_BATCH, "compile": "off"},
    "batch512": {"batch_size": 512, "compile": "off"},
    "compile": {"batch_size": 512, "compile": "on"},
    "graphs": {"batch_size": 512, "compile": "graphs"},
}
MNIST_TRAIN = 60_000


@dataclass
class Timing:
    label: str
    epochs: list[float]  # seconds per epoch
    images: int  # training images per epoch
    batch: int
    acc: float
    note: str = ""

    @property
    def steady(self) -> float:
        """Seconds per epoch past the first (compilation, warm-up), or the only one."""
        rest = self.epochs[1:] or self.epochs
        return sum(rest) / len(rest)

    @property
    def per_image(self) -> float:
        return self.steady / self.images

    def line(self) -> str:
        times = ", ".join(f"{t:.2f}" for t in self.epochs)
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.label:<11}: {times} s/epoch ({self.images:,} images, batch {self.batch}), "
            f"test acc {100 * self.acc:.2f}%{note}"
        )


def mirror_mnist(shared: Path) -> Path:
    """A writable data root linking ../shared/data's MNIST .gz files (torchvision extracts beside them)."""
    root = Path(tempfile.mkdtemp(prefix="xaidash-bench-"))
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in (shared / "MNIST" / "raw").glob("*.gz"):
        (raw / gz.name).symlink_to(gz.resolve())
    return root


def seeds_loop(root: Path, device: torch.device, epochs: int, images: int) -> Timing:
    from xaidash.models.zoo.simple_cnn import SimpleCNN

    torch.manual_seed(0)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    full = datasets.MNIST(str(root), train=True, download=True, transform=tf)
    test = datasets.MNIST(str(root), train=False, download=True, transform=tf)
    train_set, _ = random_split(full, [images, len(full) - images], generator=torch.Generator().manual_seed(0))
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    model = SimpleCNN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for _ in range(epochs):
        model.train()
        synchronize(device)
        t = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        synchronize(device)
        times.append(time.perf_counter() - t)
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(test, batch_size=1000):
            correct += int((model(x.to(device)).argmax(1).cpu() == y).sum())
    return Timing("seeds loop", times, images, 64, correct / len(test))


def engine_loop(variant: str, device: str, epochs: int, images: int) -> Timing:
    from xaidash.models.training.config import TrainConfig
    from xaidash.models.training.engine import train

    settings = VARIANTS[variant]
    batch = settings["batch_size"]
    marks: list[float] = []
    result = train(
        TrainConfig(  # every setting given: the comparison does not move when the recipe does
            dataset="mnist",
            model="simple_cnn",
            epochs=epochs,
            batch_size=batch,
            lr=scale_lr(BASE_LR, BASE_BATCH, batch, "adam"),
            optimizer="adam",
            weight_decay=0.0,
            schedule="onecycle",
            augment="none",
            label_smoothing=0.0,
            max_train_samples=0 if images == 48_000 else round(images / 0.8),
            val_fraction=0.2,
            device=device,
            compile=settings["compile"],
        ),
        callbacks=[lambda e: marks.append(time.perf_counter()) if e.kind in ("start", "epoch") else None],
    )
    if result.test_acc is None:
        raise SystemExit(f"the engine's run {result.run.id} {result.state}: {result.error}")
    summary = result.run.summary()
    return Timing(
        variant,
        [b - a for a, b in itertools.pairwise(marks)],
        result.run.config()["train_samples"],
        batch,
        result.test_acc,
        summary.get("compiled", ""),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared-data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--variants", default=None, help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--images", type=int, default=48_000, help="training images per epoch (a quick run: fewer)")
    args = ap.parse_args()

    device = pick_device(args.device)
    chosen = (args.variants or ("engine,batch512" if device.type == "cpu" else ",".join(VARIANTS))).split(",")
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not 1_000 <= args.images <= 48_000:
        ap.error(f"unknown variants {unknown} or --images outside 1000..48000")
    root = mirror_mnist(Path(args.shared_data))
    runs = Path(tempfile.mkdtemp(prefix="xaidash-bench-runs-"))
    os.environ["XAIDASH_DATA"], os.environ["XAIDASH_RUNS"] = str(root), str(runs)
    try:
        print(
            f"device: {device_name(device)} ({torch.get_num_threads()} CPU threads), torch {torch.__version__}, "
            f"{args.epochs} epochs, load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        seeds = seeds_loop(root, device, args.epochs, args.images)
        print(seeds.line(), flush=True)
        results = []
        for variant in chosen:
            timing = engine_loop(variant, str(device), args.epochs, args.images)
            print(timing.line(), flush=True)
            results.append(timing)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        for t in results:
            print(
                f"{t.label}: seeds' loop {seeds.steady:.2f} s/epoch, engine {t.steady:.2f} s/epoch, "
                f"per-image speed-up {seeds.per_image / t.per_image:.1f} x, "
                f"accuracy {100 * (t.acc - seeds.acc):+.2f} points"
            )
        if device.type == "cuda":
            print("goal on a GPU: >= 10x per image at equal or better accuracy (stretch 30x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(runs, ignore_errors=True)


if __name__ == "__main__":
    main()
