"""Training speed on tables: the engine's `tabular_mlp` runs against a plain PyTorch loop, same rows, same batch.

For each table (`--datasets`, default every built-in one) the engine trains with the model's recipe (epochs, batch,
learning rate) on `--device`; its epoch time, taken from its progress events, includes the validation pass and the
checkpoint it writes every epoch. The reference is what one writes first: the prepared rows (standardised and one-hot,
as the engine's) in a `TensorDataset` read through a shuffled `DataLoader`, Adam at the recipe's rate, the same
number of rows per epoch, no validation and no checkpoints. Goal (issue 30): a table of about 1,600 rows trains at
about a second per few epochs on a CPU, so the engine's overhead per epoch must stay small.

    python bench/table_train_speed.py [--datasets planted,breast_cancer] [--device cpu] [--threads 1]

Prints one line per table:

    TABLE: R rows, batch B, E epochs; engine S s/epoch (test acc A%), plain loop S s/epoch, engine/plain R x
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time

import torch
from torch import nn

from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_info, list_datasets, load_split
from xaidash.models.device import pick_device, synchronize
from xaidash.models.registry import build_model, get_spec


def engine_epochs(dataset: str, device: str) -> tuple[list[float], float, int, int]:
    """(seconds per epoch, test accuracy, training rows, batch) of a run with the recipe."""
    from xaidash.models.training.config import TrainConfig
    from xaidash.models.training.engine import train

    marks: list[float] = []
    result = train(
        TrainConfig(dataset=dataset, model="tabular_mlp", device=device),
        callbacks=[lambda e: marks.append(time.perf_counter()) if e.kind in ("start", "epoch") else None],
    )
    if result.test_acc is None:
        raise SystemExit(f"the engine's run {result.run.id} {result.state}: {result.error}")
    config = result.run.config()
    return (
        [b - a for a, b in itertools.pairwise(marks)],
        result.test_acc,
        config["train_samples"],
        config["train"]["batch_size"],
    )


def plain_epochs(dataset: str, device: torch.device, rows: int, batch: int, epochs: int, lr: float) -> list[float]:
    """Seconds per epoch of a DataLoader loop over `rows` prepared training rows."""
    info = get_info(dataset)
    split = load_split(dataset, "train")
    adapter = modality_of(info.modality)
    x = adapter.prepare(adapter.items(split, range(rows)), info, None, torch.device("cpu"))
    data = torch.utils.data.TensorDataset(x, split.labels[:rows])
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True)
    torch.manual_seed(0)
    model = build_model("tabular_mlp", info).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for _ in range(epochs):
        model.train()
        synchronize(device)
        start = time.perf_counter()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    tables = [i.name for i in list_datasets() if i.columns and i.builtin]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(tables), help="comma-separated table data sets")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    os.environ["XAIDASH_RUNS"] = tempfile.mkdtemp(prefix="table_train_speed_")  # runs go nowhere lasting
    print(f"device: {device}, {torch.get_num_threads()} threads")
    for dataset in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        recipe = get_spec("tabular_mlp").recipe(get_info(dataset))[1]
        engine, acc, rows, batch = engine_epochs(dataset, args.device)
        plain = plain_epochs(dataset, device, rows, batch, recipe.epochs, recipe.lr)
        e, p = statistics.median(engine), statistics.median(plain)
        print(
            f"{dataset}: {rows:,} rows, batch {batch}, {len(engine)} epochs; engine {e:.3f} s/epoch (test acc "
            f"{100 * acc:.1f}%), plain loop {p:.3f} s/epoch, engine/plain {e / p:.2f} x",
            flush=True,
        )


if __name__ == "__main__":
    main()
