"""Several methods on one sample of inputs, compared: what the dashboard's Compare page shows.

A plain function (no Streamlit) that explains the sample with every method, scores each
explanation per input (`scoring.input_metrics`), averages the scores into a table, measures how
much the methods agree and runs the sanity check, reporting progress through a callback.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.metrics.deletion import CURVE_STEPS
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method
from xaidash.explainers.samples import Sample
from xaidash.explainers.scoring import METRICS, input_metrics
from xaidash.models.bundle import ModelBundle

Progress = Callable[[float, str], None]


@dataclass
class Comparison:
    """methods x metrics (means over the inputs), the per-input values, the agreement matrix and the sanity check."""

    methods: list[str]
    explanations: dict[str, Explanation]
    per_input: dict[str, dict[str, list[float]]]
    metrics: pd.DataFrame
    agreement: pd.DataFrame | None
    sanity: Any  # explainers.metrics.SanityResult or None
    errors: dict[str, str]
    sample: Sample
    seconds: float = 0.0


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def compare_methods(
    bundle: ModelBundle,
    sample: Sample,
    methods: Sequence[str],
    *,
    params: dict[str, dict[str, Any]] | None = None,
    background: torch.Tensor | None = None,
    steps: int = CURVE_STEPS,
    sanity: bool = True,
    sanity_inputs: int = 2,
    sanity_steps: int = 3,
    batch_size: int = 256,
    seed: int = 0,
    progress: Progress | None = None,
) -> Comparison:
    """Explain `sample` with every method (targets: the predicted classes), score each explanation, measure
    how much the methods agree, and (optionally) run the cascading randomisation test on the first inputs.

    A method that fails is reported in `errors` and left out of the tables; the others go on.
    """
    from xaidash.explainers import metrics as M

    if not methods:
        raise ExplainError("Pick at least one method to compare.")
    for m in methods:
        get_method(m, bundle.modality).check(bundle)
    params = params or {}
    report = progress or (lambda fraction, message: None)
    t0 = time.perf_counter()
    units = 2 * len(methods) + (len(methods) if sanity else 0) + 1
    done = 0

    def tick(message: str) -> None:
        nonlocal done
        done += 1
        report(min(1.0, done / units), message)

    explanations: dict[str, Explanation] = {}
    per_input: dict[str, dict[str, list[float]]] = {}
    errors: dict[str, str] = {}
    rationales = sample.rationales
    for m in methods:
        report(done / units, f"Explaining with {m}…")
        try:
            e = explain(
                bundle,
                sample.raw,
                None,
                m,
                batch_size=batch_size,
                background=background,
                seed=seed,
                **params.get(m, {}),
            )
        except Exception as err:  # noqa: BLE001 - one method failing must not stop the others
            errors[m] = f"{type(err).__name__}: {err}"
            done += 2
            continue
        explanations[m] = e
        tick(f"Scoring {m}…")
        values, metric_errors = input_metrics(
            bundle,
            sample.raw,
            e,
            masks=sample.masks,
            rationales=rationales,
            background=background,
            steps=steps,
            seed=seed,
        )
        values["seconds"] = [e.seconds] * len(e)
        per_input[m] = values
        for name, msg in metric_errors.items():
            errors[f"{m}: {name}"] = msg
        tick(f"Scored {m}")

    columns = [c for c in METRICS if any(c in v for v in per_input.values())]
    rows = {
        m: {c: (_mean(v[c]) if c != "seconds" else float(v[c][0])) if c in v else float("nan") for c in columns}
        for m, v in per_input.items()
    }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "method"

    agreement = M.agreement_matrix(explanations) if len(explanations) >= 2 else None
    tick("Agreement computed")

    sanity_result = None
    if sanity and explanations:
        k = max(1, min(sanity_inputs, len(sample)))
        subset = sample.raw[:k]
        report(done / units, "Sanity check: randomising the model's layers…")
        sanity_result = M.cascading_randomization(
            bundle,
            subset,
            list(explanations),
            params={m: params.get(m, {}) for m in explanations},
            max_steps=sanity_steps,
            batch_size=batch_size,
            seed=seed,
        )
        for m, msg in sanity_result.errors.items():
            errors[f"{m}: sanity check"] = msg
        done += len(methods) - 1
        tick("Sanity check done")
    report(1.0, "Done")
    return Comparison(
        list(methods),
        explanations,
        per_input,
        table,
        agreement,
        sanity_result,
        errors,
        sample,
        seconds=time.perf_counter() - t0,
    )
