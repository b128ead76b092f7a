"""Several methods on several inputs, scored: what the dashboard's Explain and Compare pages show.

Plain functions (no Streamlit): a sample of the test split with its ground truth, background
images for SHAP and the 'mean' baseline, per-input quality metrics of one explanation, and a
full comparison (metrics table, agreement matrix, sanity check) with a progress callback.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method
from xaidash.models.bundle import ModelBundle

Progress = Callable[[float, str], None]

# Metric column -> (title, which way is better); the order is the table's.
METRICS: dict[str, tuple[str, str]] = {
    "deletion_auc": ("Deletion AUC", "lower is better"),
    "insertion_auc": ("Insertion AUC", "higher is better"),
    "pointing_game": ("Pointing game", "higher is better"),
    "energy_in_mask": ("Energy in mask", "higher is better"),
    "rationale_pointing": ("Rationale pointing", "higher is better"),
    "rationale_energy": ("Rationale energy", "higher is better"),
    "completeness_gap": ("Completeness gap", "lower is better"),
    "seconds": ("Runtime (s)", "lower is better"),
}


@dataclass
class Sample:
    """Inputs with what is known about them: images (N, C, H, W) in [0, 1] or texts, true labels,
    their indices in the test split, and object masks (N, H, W) or rationale word indices when the data set has them."""

    raw: torch.Tensor | list[str]
    labels: list[int | None]
    indices: list[int] = field(default_factory=list)
    masks: np.ndarray | None = None
    rationales: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.labels)


def background_samples(bundle: ModelBundle, n: int = 50, seed: int = 0) -> torch.Tensor | None:
    """Up to `n` prepared training images (a seeded pick) for SHAP and the 'mean' baseline; None for text
    models or when the training split cannot be loaded (the methods then use their own stand-in)."""
    if bundle.modality != "image" or n <= 0:
        return None
    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import load_split

    try:
        split = load_split(bundle.info.name, "train")
    except DatasetError:
        return None
    pick = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    return bundle.prepare(split.batch(pick))


def pick_test_sample(bundle: ModelBundle, n: int = 8, seed: int = 0, indices: Sequence[int] | None = None) -> Sample:
    """`n` test samples picked at random (seeded), or the given test indices, with their ground truth."""
    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import ImageSplit, load_split

    try:
        split = load_split(bundle.info.name, "test")
    except DatasetError as e:
        raise ExplainError(f"Cannot load the test split of {bundle.info.name}: {e}") from None
    if len(split) == 0:
        raise ExplainError(f"The test split of {bundle.info.name} is empty.")
    if indices is None:
        if n < 1:
            raise ExplainError("Pick at least one input.")
        indices = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))[
            : min(n, len(split))
        ].tolist()
    indices = [int(i) for i in indices]
    bad = [i for i in indices if not 0 <= i < len(split)]
    if bad:
        raise ExplainError(
            f"Test indices {bad} are out of range: the test split has {len(split)} samples (0..{len(split) - 1})."
        )
    if not indices:
        raise ExplainError("Pick at least one input.")
    labels = [int(split.labels[i]) for i in indices]
    if isinstance(split, ImageSplit):
        masks = split.masks[torch.as_tensor(indices)].cpu().numpy().astype(bool) if split.masks is not None else None
        return Sample(split.batch(indices).float(), labels, indices, masks=masks)
    rationales = [list(split.rationales[i]) for i in indices] if split.rationales else None
    return Sample([split.texts[i] for i in indices], labels, indices, rationales=rationales)


def _completeness_applies(e: Explanation, background: torch.Tensor | None) -> bool:
    """Path methods sum to f(x) - f(baseline), SHAP's gradient/deep explainers to f(x) - E f(background)."""
    return "baseline" in e.params or (e.method in ("shap_gradient", "shap_deep") and background is not None)


def input_metrics(
    bundle: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    explanation: Explanation,
    *,
    masks: np.ndarray | None = None,
    rationales: Sequence[Sequence[int] | None] | None = None,
    background: torch.Tensor | None = None,
    steps: int = 16,
    seed: int = 0,
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per-input quality metrics of one explanation of `raw` ({metric: one value per input}) and
    {metric: error} for those that could not be computed; a metric that does not apply is left out."""
    from xaidash.explainers import metrics as M

    n = len(explanation)
    jobs: dict[str, Callable[[], Any]] = {}
    if bundle.modality == "image":
        jobs["deletion_auc"] = lambda: M.deletion_auc(bundle, raw, explanation, steps=steps).aucs
        jobs["insertion_auc"] = lambda: M.insertion_auc(bundle, raw, explanation, steps=steps).aucs
        if masks is not None:
            jobs["pointing_game"] = lambda: M.pointing_game(explanation, masks)
            jobs["energy_in_mask"] = lambda: M.energy_in_mask(explanation, masks)
        if _completeness_applies(explanation, background):
            jobs["completeness_gap"] = lambda: M.completeness_gap(
                bundle, raw, explanation, background=background, seed=seed
            )
    else:
        text_steps = max(1, min(steps, 10))
        jobs["deletion_auc"] = lambda: (
            M.text_perturbation_curve(bundle, raw, explanation, mode="deletion", steps=text_steps).aucs
        )
        jobs["insertion_auc"] = lambda: (
            M.text_perturbation_curve(bundle, raw, explanation, mode="insertion", steps=text_steps).aucs
        )
        if rationales is not None and any(r for r in rationales):
            given = [list(r or []) for r in rationales]
            jobs["rationale_pointing"] = lambda: M.rationale_pointing(explanation, given)
            jobs["rationale_energy"] = lambda: M.rationale_energy(explanation, given)
    values: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    for name, job in jobs.items():
        try:
            values[name] = [float(v) for v in np.asarray(job(), dtype=np.float64).reshape(-1)][:n]
        except Exception as err:  # noqa: BLE001 - one metric failing must not hide the others
            errors[name] = f"{type(err).__name__}: {err}"
    return values, errors


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
    steps: int = 16,
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
