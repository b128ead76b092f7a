"""Is a run's model good enough to explain? A map of a model that learned nothing explains nothing, and one of
a model whose training failed or whose weights hold NaN is noise (`runstore.weights_problem`).

`accuracy_warning` reads a run's config and summary: a finished run whose test accuracy is near
chance (the majority class's share when the test labels are known, else 1/classes), or far below
what its recipe reached where it was tested, gets a sentence saying so; every page that shows
explanations of the run shows that sentence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xaidash.data.formatting import percent
from xaidash.models.runs.store import Run, weights_problem

# How far above chance a model must be (as a share of the way from chance to 100%) not to count as untrained.
ABOVE_CHANCE = 0.25
# How far below its recipe's measured accuracy a run may land before it is flagged.
BELOW_RECIPE = 0.10


def chance_accuracy(summary: dict[str, Any], num_classes: int, confusion: np.ndarray | None = None) -> float:
    """The accuracy of always predicting the most common test class (from the confusion matrix when known: the
    summary's, or `confusion` as `Run.confusion()` reads it from its own file)."""
    matrix = summary.get("confusion") if confusion is None else confusion
    if matrix is not None and len(matrix):
        totals = np.asarray(matrix).sum(axis=1)
        if totals.sum():
            return float(totals.max() / totals.sum())
    return 1.0 / max(1, num_classes)


def accuracy_warning(
    config: dict[str, Any], summary: dict[str, Any], confusion: np.ndarray | None = None
) -> str | None:
    """One sentence when the run's model is too poor to explain meaningfully, else None."""
    acc = summary.get("test_acc", summary.get("val_acc"))
    if acc is None:
        return None
    chance = chance_accuracy(summary, len(config.get("classes", [])) or 2, confusion)
    if acc < chance + ABOVE_CHANCE * (1.0 - chance):
        return (
            f"This model's accuracy ({percent(acc)}) is near chance ({percent(chance)}): it has not learned the "
            "task, and its explanations show what an untrained model does. Train it longer or with its recipe."
        )
    expected = (config.get("recipe") or {}).get("expected_acc")
    if expected is not None and acc < expected - BELOW_RECIPE:
        return (
            f"This model's accuracy ({percent(acc)}) is far below what its recipe reached when tested "
            f"({percent(expected)}): its explanations may show an under-trained model."
        )
    return None


def run_warning(run: Run) -> str | None:
    """Why a run's model should not be explained as if it were fine: its training failed or its weights hold NaN
    (`weights_problem`), else `accuracy_warning` (None when its files cannot be read: pages report that
    themselves)."""
    try:
        summary = run.summary()
        problem = weights_problem(run, summary)
        if problem:
            return problem
        return accuracy_warning(run.config(), summary, run.confusion(summary))
    except Exception:  # noqa: BLE001 - a damaged run is reported elsewhere; no warning is better than a crash here
        return None
