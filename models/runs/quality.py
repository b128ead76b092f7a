"""Is a run's model good enough to explain? A map of a model that learned nothing explains nothing, and one of
a model whose training failed or whose weights hold NaN is noise (`runstore.weights_problem`).

`accuracy_warning` reads a run's config and summary: a finished run whose test accuracy is near
chance (the majority class's share when the test labels are known, else 1/classes), or far below
what its recipe reached where it was tested, gets a sentence saying so; every page that shows
explanations of the run shows that sentence. A run that predicts a number is judged by its R² the same way
(chance: R² 0, predicting the mean; its recipe's `expected_r2`).

`quality_label` is the verdict in a few words for the runs tables (the dashboard's and `xaidash runs`): every run
gets one, a good run too (`✓ good`: a blank cell read as "not known"), a run still training once it ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xaidash.data.formatting import percent, r2_text
from xaidash.models.runs.store import Run, run_liveness, weights_problem

# How far above chance a model must be (as a share of the way from chance to 100%) not to count as untrained.
ABOVE_CHANCE = 0.25
# How far below its recipe's measured accuracy a run may land before it is flagged (also R², for a number to predict).
BELOW_RECIPE = 0.10
# A regression model's chance level is R² 0 (predicting the mean); below this share of the target's variance
# explained, it has learned next to nothing. Lower than the classifiers' margin: a weak but real signal in a user's
# table often explains only a fifth of the spread.
R2_NEAR_CHANCE = 0.10
# The quality cell of the runs tables (`quality_label`).
GOOD = "✓ good"
POOR = "⚠ poor"
PENDING = "when it ends"  # a run still training: its first epochs are near chance by nature
UNMEASURED = "not measured"  # no accuracy: a model imported or a language model, or a run stopped before any
QUALITY_HELP = (
    f"{GOOD}: well above chance and not far below what its recipe reached; {POOR}: near chance or far below its "
    "recipe (its explanations show an untrained model); ⚠ training failed or ⚠ NaN/inf weights: its maps are noise; "
    f"'{PENDING}': judged when its training ends; '{UNMEASURED}': no accuracy recorded (imported models)"
)


def measured_accuracy(summary: dict[str, Any]) -> float | None:
    """The accuracy a run is judged by: its test accuracy, else (not tested: interrupted, or stopped before its
    test) its last validation accuracy; for a number to predict, its test R² (else validation R²)."""
    r2 = measured_r2(summary)
    if r2 is not None:
        return r2
    acc = summary.get("test_acc")
    return summary.get("val_acc") if acc is None else acc


def measured_r2(summary: dict[str, Any]) -> float | None:
    """A regression run's R²: on the test rows, else (not tested) on the validation share; None for a classifier."""
    r2 = summary.get("test_r2")
    return summary.get("val_r2") if r2 is None else r2


def r2_warning(config: dict[str, Any], r2: float) -> str | None:
    """`accuracy_warning` for a number to predict: R² near 0 (what predicting the mean scores) or far below the
    recipe's measured R²."""
    if r2 < R2_NEAR_CHANCE:
        return (
            f"This model's {r2_text(r2)} is near chance (R² 0: always predicting the mean): it has not learned the "
            "task, and its explanations show what an untrained model does. Train it longer or with its recipe."
        )
    expected = (config.get("recipe") or {}).get("expected_r2")
    if expected is not None and r2 < expected - BELOW_RECIPE:
        return (
            f"This model's {r2_text(r2)} is far below what its recipe reached when tested ({r2_text(expected)}): its "
            "explanations may show an under-trained model."
        )
    return None


def forecast_warning(summary: dict[str, Any]) -> str | None:
    """`accuracy_warning` for a forecast: its test MAE no better than the naive forecast's (the last value repeated)
    on the same windows. R² over a short tail's own spread says little: Lynx's forecasts beat the naive one at R² < 0."""
    mae, naive = summary.get("test_mae"), summary["test_naive_mae"]
    if mae is None or float(mae) < float(naive):
        return None
    return (
        f"This forecaster's test MAE ({float(mae):.4g}) is no better than repeating the window's last value "
        f"({float(naive):.4g}): it has not learned the series, and its explanations show what such a model does."
    )


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
    if summary.get("test_naive_mae") is not None:  # a forecast: judged against the naive forecasts, not R² 0
        return forecast_warning(summary)
    r2 = measured_r2(summary)
    if r2 is not None:
        return r2_warning(config, r2)
    acc = measured_accuracy(summary)
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


def problem_badge(run: Run, summary: dict[str, Any] | None = None) -> str | None:
    """A few words for a run whose maps are noise ('training failed', 'NaN/inf weights'), shown above every map and
    in the runs tables; the full sentence is `weights_problem`."""
    s = run.summary() if summary is None else summary
    if s.get("state") == "failed":
        return "training failed"
    return "NaN/inf weights" if weights_problem(run, s) else None


def quality_label(run: Run, summary: dict[str, Any] | None = None) -> str:
    """The quality cell of a run: '⚠ training failed' or '⚠ NaN/inf weights' (`problem_badge`), else 'when it ends'
    while it trains, 'not measured' without an accuracy, '⚠ poor' (`accuracy_warning`) or '✓ good'."""
    s = run.summary() if summary is None else summary
    badge = problem_badge(run, s)
    if badge:
        return f"⚠ {badge}"
    if run_liveness(run, s).state == "running":
        return PENDING
    if measured_accuracy(s) is None:
        if headline_metric(s) is not None:  # a detector's or segmenter's run: its headline mAP@50 or mIoU
            return POOR if headline_warning(s) else GOOD
        return UNMEASURED
    return POOR if accuracy_warning(run.config(), s, run.confusion(s)) else GOOD


# A scene model's headline (a detector's test mAP@50, a segmenter's mIoU with the background) below which it has not
# learned its task: at mAP@50 0.5 half the objects are missed or boxed badly; at mIoU 0.5 the objects are mostly not
# outlined. Its summary names its headline metric (models/scenes/train.py).
HEADLINE_POOR_BELOW = {"map_50": 0.5, "miou": 0.5}
HEADLINE_WORDS = {"map_50": "finds few of the objects", "miou": "outlines few of the objects"}


def headline_metric(summary: dict[str, Any]) -> tuple[str, float] | None:
    """(name, value) of a run's declared headline metric (test, else the last validation); None for a run that
    declares none (classifiers) or before any evaluation."""
    name = str(summary.get("headline") or "")
    for key in ("test_metrics", "val_metrics"):
        value = (summary.get(key) or {}).get(name)
        if isinstance(value, (int, float)):
            return name, float(value)
    return None


def headline_warning(summary: dict[str, Any]) -> str | None:
    """One sentence when a run's headline metric is below what a model that learned its task reaches; else None."""
    found = headline_metric(summary)
    if found is None or found[0] not in HEADLINE_POOR_BELOW or found[1] >= HEADLINE_POOR_BELOW[found[0]]:
        return None
    name, value = found
    where = "test" if (summary.get("test_metrics") or {}).get(name) is not None else "validation"
    return (
        f"This model's {name} of {value:.2f} on the {where} split is low: it {HEADLINE_WORDS[name]}, and its "
        "explanations show a model that has not learned the task. Train it longer or with its recipe."
    )
