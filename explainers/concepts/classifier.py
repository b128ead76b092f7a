"""The linear classifier that turns activations into a CAV, in captum's `Classifier` interface.

captum's `DefaultClassifier` is sklearn's SGDClassifier(alpha=0.01, max_iter=1000, tol=1e-3) behind an
unseeded shuffle and split (python's `random`, numpy's global state), so the same concept gives a different
CAV on every call and no cache could be trusted. This is the same sklearn model and settings, seeded, with the
same 1/3 held-out split; tests/explainers/concepts/test_tcav.py checks that both classifiers' CAVs point the
same way and give the same scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from captum.concept._utils.classifier import Classifier
from torch.utils.data import DataLoader

TEST_SPLIT = 0.33  # captum's default held-out share


class SeededLinearClassifier(Classifier):
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._coef: np.ndarray | None = None
        self._classes: np.ndarray | None = None

    def train_and_eval(self, dataloader: DataLoader, **kwargs: Any) -> dict[str, Any]:
        from sklearn.linear_model import SGDClassifier

        xs, ys = zip(*dataloader, strict=True)
        x = torch.cat(list(xs)).detach().cpu().float().numpy()
        y = torch.cat(list(ys)).detach().cpu().numpy()
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(len(y))
        n_test = int(TEST_SPLIT * len(y))
        test, train = order[:n_test], order[n_test:]
        model = SGDClassifier(alpha=0.01, max_iter=1000, tol=1e-3, random_state=self.seed)
        model.fit(x[train], y[train])
        self._coef, self._classes = model.coef_, model.classes_
        accuracy = float((model.predict(x[test]) == y[test]).mean()) if n_test else float("nan")
        return {"accs": torch.tensor(accuracy)}

    def weights(self) -> torch.Tensor:
        assert self._coef is not None, "train_and_eval first"
        w = torch.as_tensor(self._coef, dtype=torch.float32)
        # Two classes give one row (towards classes_[1]); captum's convention is one row per class.
        return torch.stack([-w[0], w[0]]) if w.shape[0] == 1 else w

    def classes(self) -> list[int]:
        assert self._classes is not None, "train_and_eval first"
        return [int(c) for c in self._classes]
