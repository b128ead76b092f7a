"""The TCAV paper's significance test (Kim et al. 2018, section 3.2), and what one (concept, layer) result holds.

A concept's TCAV scores, one per random counter-example set, are compared with the scores random sets get
against each other (random-vs-random) by a two-sided t-test (scipy.stats.ttest_ind); with several concepts or
layers the p-value is Bonferroni-corrected over all of them. A result that is not significant is no finding, nor is
one that carries a flag (flags.py: a concept made of the tested class, a CAV near chance), whatever its p-value.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

ALPHA = 0.05


@dataclass(frozen=True)
class ConceptResult:
    """One concept at one layer for the tested class. scores: its TCAV score (share of the class's inputs whose
    class logit grows along the CAV) against each random set; random_scores: random-vs-random scores."""

    concept: str
    layer: str
    scores: tuple[float, ...]
    random_scores: tuple[float, ...]
    p_value: float  # two-sided t-test, uncorrected
    p_adjusted: float  # Bonferroni over every (concept, layer) tested together
    significant: bool
    cav_accuracy: float  # mean held-out accuracy of the concept's CAV classifiers (0.5: no better than chance)
    alpha: float = ALPHA
    flags: tuple[str, ...] = ()  # plain sentences on why the result is no finding whatever the test (flags.py)

    @property
    def finding(self) -> bool:
        """Significant and not flagged: the only results that say something about the concept."""
        return self.significant and not self.flags

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        return float(np.std(self.scores))

    @property
    def random_mean(self) -> float:
        return float(np.mean(self.random_scores))

    @property
    def random_std(self) -> float:
        return float(np.std(self.random_scores))

    @property
    def verdict(self) -> str:
        if self.flags:
            return "flagged: no finding"
        if not self.significant:
            return "not significant: no finding"
        return "significant: the class uses this concept" if self.mean > self.random_mean else "significant: against"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            scores=list(self.scores),
            flags=list(self.flags),
            finding=self.finding,
            random_scores=list(self.random_scores),
            mean=self.mean,
            std=self.std,
            min=min(self.scores),
            max=max(self.scores),
            random_mean=self.random_mean,
            random_std=self.random_std,
            verdict=self.verdict,
        )
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def t_test(scores: list[float], random_scores: list[float]) -> float:
    """Two-sided p-value of the TCAV paper's test; 1.0 when it is undefined (identical constant scores)."""
    import warnings

    from scipy.stats import ttest_ind

    if len(scores) < 2 or len(random_scores) < 2:
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scores that are all equal: scipy warns, p is nan or 0/1
        p = float(ttest_ind(scores, random_scores).pvalue)
    return 1.0 if math.isnan(p) else p


def bonferroni(p: float, tests: int) -> float:
    return min(1.0, p * max(1, tests))


def judge(
    concept: str,
    layer: str,
    scores: list[float],
    random_scores: list[float],
    tests: int,
    cav_accuracy: float,
    alpha: float = ALPHA,
    flags: tuple[str, ...] = (),
) -> ConceptResult:
    p = t_test(scores, random_scores)
    adjusted = bonferroni(p, tests)
    return ConceptResult(
        concept, layer, tuple(scores), tuple(random_scores), p, adjusted, adjusted < alpha, cav_accuracy, alpha, flags
    )
