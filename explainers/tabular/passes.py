"""The model passes of the global view: a table model as a function of raw rows on its device, and that function
applied in passes of a bounded number of rows."""

from __future__ import annotations

from collections.abc import Callable

import torch

from xaidash.models.bundle import ModelBundle

# raw rows (M, F) -> class probabilities (M, K), or a regression model's predicted values (M, 1); same device
Predict = Callable[[torch.Tensor], torch.Tensor]
BATCH_ROWS = 65_536  # rows per model pass on an accelerator: large enough that a small MLP's pass is not launch-bound
CPU_BATCH_ROWS = 4_096  # on a CPU the arithmetic dominates: passes whose activations stay in cache are faster


def default_batch_rows(device: torch.device | str) -> int:
    """Rows per pass on `device`: a few large passes on an accelerator, cache-sized ones on a CPU (measured on this
    project's 2-core CPU: 4,096-row passes about 1.6x faster than 65,536-row ones for a tabular_mlp)."""
    return CPU_BATCH_ROWS if torch.device(device).type == "cpu" else BATCH_ROWS


def probabilities(predict: Predict, rows: torch.Tensor, batch_rows: int = BATCH_ROWS) -> torch.Tensor:
    """`predict(rows)` in passes of at most `batch_rows` rows; (M, K) on the rows' device."""
    step = max(1, int(batch_rows))
    out = [predict(rows[i : i + step]) for i in range(0, len(rows), step)]
    return torch.cat(out) if out else torch.empty(0, 0, device=rows.device)


def scored(predict: Predict, rows: torch.Tensor, target: int, batch_rows: int = BATCH_ROWS) -> torch.Tensor:
    """`predict(rows)[:, target]` in passes of at most `batch_rows` rows; (M,) on the rows' device."""
    step = max(1, int(batch_rows))
    out = [predict(rows[i : i + step])[:, target] for i in range(0, len(rows), step)]
    return torch.cat(out) if out else torch.empty(0, device=rows.device)


def bundle_predict(bundle: ModelBundle) -> Predict:
    """The bundle's class probabilities for raw rows (a regression model's predicted values in the target's units:
    `bundle.scores`), computed and left on the model's device (no copy to the CPU per pass, unlike
    `ModelBundle.predict_proba`). Call it inside `explainers.guard.guarded` (eval mode)."""

    @torch.no_grad()
    def predict(rows: torch.Tensor) -> torch.Tensor:
        x = bundle.prepare(rows.to(bundle.device))
        return bundle.scores(bundle.logits(x, batch_size=max(1, len(x))))

    return predict
