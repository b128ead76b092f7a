"""LIME for table rows: lime's own `LimeTabularExplainer` (the training rows, the category columns, the column names,
discretize_continuous and every other setting at lime's defaults), one weight per column for the target probability;
for a model that predicts a number (`bundle.regression`), lime's regression mode on the predicted value itself (no
softmax), so a weight is in the target's units.

lime calls its `classifier_fn` once per row explained, with the whole matrix of perturbed rows: here that matrix goes
to the model's device at once and through it in batched passes (`ctx.batch_size` rows, halved on out-of-memory),
one call per row. Same seed, same samples: the weights are lime's own (a test checks them against a plain
`explain_instance` with `bundle.predict_proba`). lime's own sampling (quartile bins, truncated normals) runs on the
CPU and is most of the time on a small model (bench/table_explain_speed.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaidash.explainers.batching import batched_rows, rows_per_pass, run_halving
from xaidash.explainers.modalities.table_values import raw_rows, training_rows
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

TRAINING_ROWS = 2000  # lime's training data: at most this many training rows (a seeded pick)
TRAINING_SEED = 0


def lime_explainer(bundle: ModelBundle, training: np.ndarray, seed: int) -> Any:
    """lime's `LimeTabularExplainer` for this table: its defaults, the category columns declared with their names."""
    from lime.lime_tabular import LimeTabularExplainer

    columns = bundle.info.columns
    categorical = [j for j, c in enumerate(columns) if c.categorical]
    return LimeTabularExplainer(
        training,
        mode="classification" if bundle.regression is None else "regression",
        feature_names=[c.name for c in columns],
        categorical_features=categorical,
        categorical_names={j: list(columns[j].categories) for j in categorical},
        class_names=list(bundle.info.classes),
        random_state=seed,
    )


def lime_training(ctx: MethodContext) -> np.ndarray:
    """The rows lime learns its statistics from: the training split's (up to TRAINING_ROWS), else the background."""
    rows = training_rows(ctx.bundle, TRAINING_ROWS, TRAINING_SEED)
    if rows is None and ctx.background is not None and len(ctx.background):
        rows = raw_rows(ctx.background, ctx.bundle.info)
    if rows is None:
        raise ExplainError("LIME needs training rows to sample from, and this model has no training split.")
    return rows.double().cpu().numpy()


def _label(bundle: ModelBundle, target: int) -> int:
    """Where lime keeps the weights: the class's own entry, or 1 in regression mode (lime stores the weights of the
    predicted value under 1 and their negation under 0)."""
    return int(target) if bundle.regression is None else 1


def _weights(exp: Any, label: int, f: int) -> np.ndarray:
    out = np.zeros(f, dtype=np.float32)
    for feature, weight in exp.local_exp[label]:
        out[int(feature)] = weight
    return out


def _probabilities(ctx: MethodContext, matrix: np.ndarray) -> np.ndarray:
    """Softmax probabilities (R, K) of raw rows (a regression model's predicted values (R, 1): `bundle.scores`), in
    shared batched passes on the device (halved on out-of-memory)."""
    rows = torch.as_tensor(matrix, dtype=torch.float32, device=ctx.x.device)

    @torch.no_grad()
    def run(size: int) -> torch.Tensor:
        return batched_rows(
            len(rows),
            size,
            lambda index: ctx.bundle.scores(ctx.model(ctx.bundle.prepare(rows[index])).float()),
            device=ctx.x.device,
        )

    probs, _ = run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what="LIME")
    return probs.double().cpu().numpy()


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    training, samples = lime_training(ctx), int(params["samples"])
    rows = torch.as_tensor(ctx.raw, dtype=torch.float64).cpu().numpy()
    n, f = rows.shape
    targets = [int(t) for t in ctx.targets.cpu()]
    weights, scores = [], []
    for i in range(n):
        # a fresh explainer per row, seeded alike: a row's weights do not depend on the others in the call
        exp = lime_explainer(ctx.bundle, training, ctx.seed).explain_instance(
            rows[i], lambda m: _probabilities(ctx, m), labels=(targets[i],), num_features=f, num_samples=samples
        )
        weights.append(_weights(exp, _label(ctx.bundle, targets[i]), f))
        scores.append(float(exp.score))
    return MethodOutput(
        torch.from_numpy(np.stack(weights)),
        {"surrogate_r2": scores, "batch_size": [float(rows_per_pass(ctx.batch_size, ctx.x.device))] * n},
    )


def lime_table_reference(
    bundle: ModelBundle, row: torch.Tensor, target: int, samples: int, training: np.ndarray, *, seed: int = 0
) -> np.ndarray:
    """lime's `LimeTabularExplainer.explain_instance` on one raw row as its documentation shows it, the model's
    `predict_proba` as the classifier_fn (a regression model's: its predicted values, lime in regression mode): one
    weight per column (the reference the batched path is tested against)."""
    f = len(bundle.info.columns)
    exp = lime_explainer(bundle, training, seed).explain_instance(
        torch.as_tensor(row, dtype=torch.float64).numpy(),
        lambda m: bundle.predict_proba(torch.as_tensor(m, dtype=torch.float32)).double().numpy(),
        labels=(int(target),),
        num_features=f,
        num_samples=samples,
    )
    return _weights(exp, _label(bundle, target), f)


register(
    MethodSpec(
        id="lime",
        label="LIME",
        modalities=("table",),
        compute=_compute,
        params=(Param("samples", "int", 1000, "Perturbed rows lime samples around the row.", min=10, max=20000),),
        description="LIME as lime's LimeTabularExplainer: rows sampled from the training data's statistics (numeric "
        "columns by quartile bins), a weighted linear surrogate of the target probability (a model that predicts a "
        "number: its predicted value, lime's regression mode) fitted on them; one "
        "weight per column. surrogate_r2: the surrogate's fit on those samples.",
        signed=True,
        family="perturbation",
        output="probability",
        featured=5,
    )
)
