"""Training speed: the seeds' MNIST loop against the xaidash engine, same device, one run.

The seeds' loop: torchvision MNIST with ToTensor + Normalize, random 48k/12k split, DataLoader
(batch 64, shuffled), SimpleCNN, Adam 1e-3, one .to(device) per batch. The engine: the same
SimpleCNN on device-resident tensors, larger batches, one-cycle schedule, bf16 on CUDA.

    python bench/train_speed.py --data-root ../shared/data-copy --epochs 3 [--device cuda]

Prints per-epoch times, the ratio, and both test accuracies.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, random_split
from torchvision import datasets, transforms

from xaidash.models.device import device_name, pick_device, synchronize


def mirror_mnist(shared: Path) -> Path:
    """A writable data root linking ../shared/data's MNIST .gz files (torchvision extracts beside them)."""
    root = Path(tempfile.mkdtemp(prefix="xaidash-bench-"))
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in (shared / "MNIST" / "raw").glob("*.gz"):
        (raw / gz.name).symlink_to(gz.resolve())
    return root


def seeds_loop(root: Path, device: torch.device, epochs: int) -> tuple[list[float], float]:
    from xaidash.models.zoo.simple_cnn import SimpleCNN

    torch.manual_seed(0)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    full = datasets.MNIST(str(root), train=True, download=True, transform=tf)
    test = datasets.MNIST(str(root), train=False, download=True, transform=tf)
    train_set, _ = random_split(full, [48000, 12000], generator=torch.Generator().manual_seed(0))
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
    return times, correct / len(test)


def engine_loop(device: str, epochs: int, batch_size: int, lr: float) -> tuple[list[float], float, int]:
    from xaidash.models.engine import TrainConfig, train

    marks: list[float] = []
    result = train(
        TrainConfig(  # every setting given: the comparison does not move when the recipe does
            dataset="mnist",
            model="simple_cnn",
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            optimizer="adam",
            weight_decay=0.0,
            schedule="onecycle",
            augment="none",
            label_smoothing=0.0,
            max_train_samples=0,
            val_fraction=0.2,
            device=device,
        ),
        callbacks=[lambda e: marks.append(time.perf_counter()) if e.kind in ("start", "epoch") else None],
    )
    if result.test_acc is None:
        raise SystemExit(f"the engine's run {result.run.id} {result.state}: {result.error}")
    # epoch time includes the engine's per-epoch validation and checkpoint writes
    times = [b - a for a, b in itertools.pairwise(marks)]
    return times, result.test_acc, result.run.config()["train_samples"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared-data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()

    device = pick_device(args.device)
    root = mirror_mnist(Path(args.shared_data))
    runs = Path(tempfile.mkdtemp(prefix="xaidash-bench-runs-"))
    os.environ["XAIDASH_DATA"], os.environ["XAIDASH_RUNS"] = str(root), str(runs)
    try:
        print(
            f"device: {device_name(device)} ({torch.get_num_threads()} CPU threads), torch {torch.__version__}, "
            f"{args.epochs} epochs"
        )
        seeds_times, seeds_acc = seeds_loop(root, device, args.epochs)
        eng_times, eng_acc, n_train = engine_loop(str(device), args.epochs, args.batch_size, args.lr)
        seeds_epoch = sum(seeds_times[1:] or seeds_times) / len(seeds_times[1:] or seeds_times)
        eng_epoch = sum(eng_times[1:] or eng_times) / len(eng_times[1:] or eng_times)
        print(
            f"seeds loop : {', '.join(f'{t:.2f}' for t in seeds_times)} s/epoch (48,000 images, batch 64), "
            f"test acc {100 * seeds_acc:.2f}%"
        )
        print(
            f"engine     : {', '.join(f'{t:.2f}' for t in eng_times)} s/epoch ({n_train:,} images, batch {args.batch_size}), "
            f"test acc {100 * eng_acc:.2f}%"
        )
        print(
            f"per-image speed-up (steady-state epochs): {(seeds_epoch / 48000) / (eng_epoch / n_train):.1f}x; "
            f"accuracy difference {100 * (eng_acc - seeds_acc):+.2f} points"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(runs, ignore_errors=True)


if __name__ == "__main__":
    main()
