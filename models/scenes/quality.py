"""Is a scene model good enough to explain? A map of a model that learned nothing explains nothing: a detector that
finds few objects or a segmenter that outlines none gets a sentence saying so, for the pages and the command line to
show beside its explanations. The rule on the headline metric lives with the classifiers' in models/runs/quality.py,
so the runs tables (`xaidash runs` too) judge scene runs by it."""

from __future__ import annotations

from typing import Any

from xaidash.models.runs.quality import HEADLINE_POOR_BELOW, headline_metric, headline_warning
from xaidash.models.runs.store import Run, weights_problem
from xaidash.models.scenes.evaluate import HEADLINE

POOR_BELOW = HEADLINE_POOR_BELOW


def scene_run_warning(run: Run, summary: dict[str, Any] | None = None) -> str | None:
    """One sentence when the run's model should not be explained as if it were fine (failed, NaN weights, or its
    headline metric low); None for a good run or one not evaluated yet."""
    s = run.summary() if summary is None else summary
    return weights_problem(run, s) or headline_warning(s)


__all__ = ["HEADLINE", "POOR_BELOW", "headline_metric", "scene_run_warning"]
