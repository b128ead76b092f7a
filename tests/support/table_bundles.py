"""Table models for the tests: `tabular_mlp` trained on `planted` with plain torch (one thread, about two seconds),
cached per process, and an untrained one for contracts. Trained here rather than through the engine so the explainers'
tests do not depend on run folders."""

from __future__ import annotations

import functools

import torch

import xaidash.data.sets  # noqa: F401  (registers the data sets)
from xaidash.data.registry import TableSplit, get_info, load_split
from xaidash.models import ModelBundle, build_model, get_spec
from xaidash.models.task import loss_function

EPOCHS = 60


def split(name: str = "planted", which: str = "test") -> TableSplit:
    s = load_split(name, which)  # type: ignore[arg-type]
    assert isinstance(s, TableSplit)
    return s


def untrained_bundle(dataset: str = "planted", seed: int = 0) -> ModelBundle:
    torch.manual_seed(seed)
    info = get_info(dataset)
    model = build_model("tabular_mlp", info).eval()
    return ModelBundle(model, get_spec("tabular_mlp"), info, torch.device("cpu"))


@functools.cache
def trained_bundle(dataset: str = "planted") -> ModelBundle:
    """`tabular_mlp` trained on the data set's training split (Adam, 60 epochs; planted: about 97% test accuracy;
    diabetes, a number to predict, overfits a little: test R² about 0.3)."""
    bundle = untrained_bundle(dataset)
    model, train = bundle.model, split(dataset, "train")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        x, y = bundle.prepare(train.rows), train.labels
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
        loss_fn = loss_function(bundle.info)  # cross-entropy, or the standardised squared error (diabetes)
        model.train()
        for _ in range(EPOCHS):
            perm = torch.randperm(len(x), generator=gen)
            for s in range(0, len(x), 64):
                i = perm[s : s + 64]
                loss = loss_fn(model(x[i]), y[i])
                opt.zero_grad()
                loss.backward()
                opt.step()
    finally:
        model.eval()
        torch.set_num_threads(threads)
    return bundle
