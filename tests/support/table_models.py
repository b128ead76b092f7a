"""A small torch network over raw table rows and the same network as a fitted scikit-learn classifier, so the global
view's functions can be checked against scikit-learn's on identical predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from sklearn.base import BaseEstimator, ClassifierMixin


def mlp(features: int, classes: int, seed: int = 0) -> torch.nn.Module:
    """A seeded float64 MLP (features -> 16 -> classes) with a steep enough first layer to give curved dependence."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(features, 16), torch.nn.Tanh(), torch.nn.Linear(16, classes)).double()
    with torch.no_grad():
        net[0].weight.mul_(2.0)
    return net.eval()


def softmax_of(net: torch.nn.Module):
    """raw rows -> class probabilities, as the global view's `Predict`."""

    @torch.no_grad()
    def predict(rows: torch.Tensor) -> torch.Tensor:
        return torch.softmax(net(rows.double()), dim=1)

    return predict


class TorchClassifier(ClassifierMixin, BaseEstimator):
    """A fitted scikit-learn classifier whose probabilities are the torch network's."""

    def __init__(self, net: torch.nn.Module | None = None, classes: int = 2) -> None:
        self.net = net
        self.classes = classes

    def fit(self, x: np.ndarray, y: np.ndarray | None = None) -> TorchClassifier:
        self.classes_ = np.arange(self.classes)
        self.n_features_in_ = np.asarray(x).shape[1]
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return softmax_of(self.net)(torch.as_tensor(np.asarray(x, dtype=np.float64))).numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.predict_proba(x).argmax(1)


def mixed_rows(n: int = 150, seed: int = 0) -> np.ndarray:
    """(n, 4): three numeric columns on different scales and a categorical column of codes 0..2 (the last)."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(0, 1, n), rng.normal(5, 2, n), rng.uniform(-1, 1, n), rng.integers(0, 3, n)])
    return x.astype(np.float64)


# A module of your own that reads a table's prepared rows (`xaidash import module:tnet.py:TableNet`).
NET = """
import torch
from torch import nn


class TableNet(nn.Module):
    def __init__(self, inputs: int, classes: int = 2):
        super().__init__()
        self.fc1 = nn.Linear(inputs, 16)
        self.act = nn.ReLU()
        self.out = nn.Linear(16, classes)

    def forward(self, x):
        return self.out(self.act(self.fc1(x)))
"""


def table_module(folder: Path, inputs: int, classes: int = 2) -> tuple[Path, Path, torch.nn.Module]:
    """The module file, its weights, and the same network built here (the reference)."""
    source = folder / "tnet.py"
    source.write_text(NET)
    namespace: dict = {}
    exec(compile(NET, str(source), "exec"), namespace)  # the same class, to compute the expected logits
    torch.manual_seed(0)
    net = namespace["TableNet"](inputs, classes).eval()
    weights = folder / "w.safetensors"
    save_file(net.state_dict(), str(weights))
    return source, weights, net
