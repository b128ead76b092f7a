"""Is a scene model good enough to explain? A map of a model that learned nothing explains nothing: a detector that
finds few objects or a segmenter that outlines none gets a sentence saying so, for the pages and the command line to
show beside its explanations (as models/runs/quality.py does for classifiers)."""

from __future__ import annotations

from typing import Any

from xaidash.models.runs.store import Run, weights_problem
from xaidash.models.scenes.evaluate import HEADLINE

# Below these (test, else last validation) a model has not learned its task: at map_50 0.5 half the objects are
# missed or boxed badly; at mIoU 0.5 (background included) the objects are mostly not outlined.
POOR_BELOW = {"map_50": 0.5, "miou": 0.5}
WORDS = {"map_50": "finds few of the objects", "miou": "outlines few of the objects"}


def scene_run_warning(run: Run, summary: dict[str, Any] | None = None) -> str | None:
    """One sentence when the run's model should not be explained as if it were fine (failed, NaN weights, or its
    headline metric low); None for a good run or one not evaluated yet."""
    s = run.summary() if summary is None else summary
    problem = weights_problem(run, s)
    if problem is not None:
        return problem
    headline = str(s.get("headline") or "")
    if headline not in POOR_BELOW:
        return None
    where, metrics = ("test", s.get("test_metrics")) if s.get("test_metrics") else ("validation", s.get("val_metrics"))
    value = (metrics or {}).get(headline)
    if not isinstance(value, (int, float)) or value >= POOR_BELOW[headline]:
        return None
    return (
        f"This model's {headline} of {value:.2f} on the {where} split is low: it {WORDS[headline]}, and its "
        "explanations show a model that has not learned the task. Train it longer or with its recipe."
    )


def headline_metric(summary: dict[str, Any]) -> tuple[str, float] | None:
    """(name, value) of the run's headline metric (test, else the last validation), None before any evaluation."""
    name = str(summary.get("headline") or "")
    for key in ("test_metrics", "val_metrics"):
        value = (summary.get(key) or {}).get(name)
        if isinstance(value, (int, float)):
            return name, float(value)
    return None


__all__ = ["HEADLINE", "headline_metric", "scene_run_warning"]
