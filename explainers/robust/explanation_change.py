"""How explanation maps move under an attack: each chosen method explains the original and the perturbed image
for the same class, through `scoring.explain_and_score` (the Explain page's and the CLI's one path), and the two
maps are compared by Spearman rank correlation (scipy) and the overlap of their top-k features.

A map that barely changes while the prediction flips, or one that changes completely under a perturbation too
small to see, says something about the explanation method; neither proves the model right or wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from xaidash.data.errors import error_text
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.registry import get_method
from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.scoring import explain_and_score
from xaidash.models.bundle import ModelBundle

TOP_SHARE = 0.05  # top-k compares the 5% most important features (by |value|), at least one


def rank_correlation(a: Any, b: Any) -> float:
    """Spearman rank correlation of two maps of one input (flattened); NaN when either is constant (no ranking)."""
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"maps of different sizes: {x.shape} and {y.shape}")
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def top_k(share: float, size: int) -> int:
    return max(1, round(share * size))


def top_k_overlap(a: Any, b: Any, k: int | None = None) -> float:
    """Share of the k features with the largest |value| in map `a` that are also among the k largest in `b`
    (1: the same most important features; by default k is TOP_SHARE of the features)."""
    x, y = np.abs(np.asarray(a, np.float64).ravel()), np.abs(np.asarray(b, np.float64).ravel())
    k = top_k(TOP_SHARE, x.size) if k is None else max(1, min(int(k), x.size))
    top_a = set(np.argsort(-x, kind="stable")[:k].tolist())
    top_b = set(np.argsort(-y, kind="stable")[:k].tolist())
    return len(top_a & top_b) / k


@dataclass(frozen=True)
class MapChange:
    """One method's map of the original and of the perturbed input (same class), and how much it moved."""

    method: str
    label: str
    target: int
    before: Explanation | None = None
    after: Explanation | None = None
    spearman: float = math.nan
    top_k: float = math.nan
    k: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "method": self.method,
            "label": self.label,
            "target": self.target,
            "spearman": num(self.spearman),
            "top_k_overlap": num(self.top_k),
            "k": self.k,
            "error": self.error,
        }


def explanation_change(
    bundle: ModelBundle,
    result: AttackResult,
    methods: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    target: int | None = None,
    *,
    before: Mapping[str, Explanation] | None = None,
    seed: int = 0,
) -> list[MapChange]:
    """Each method's map before and after the attack in `result`, for `target` (default: the class predicted
    before the attack, so both maps answer the same question). `before`: maps of the original already computed
    (the Explain page's), reused. A method that fails is reported in its `MapChange.error`; the others go on."""
    k_class = result.pred_before if target is None else int(target)
    out: list[MapChange] = []
    for m in methods:
        spec = get_method(m, bundle.modality)
        try:
            p = dict((params or {}).get(m, {}))
            e0 = (before or {}).get(m)
            if e0 is None:
                e0 = explain_and_score(
                    bundle, torch.from_numpy(result.original[None]), m, p, k_class, with_metrics=False, seed=seed
                ).explanation
            e1 = explain_and_score(
                bundle, torch.from_numpy(result.perturbed[None]), m, p, k_class, with_metrics=False, seed=seed
            ).explanation
            a, b = e0.item(0), e1.item(0)
            k = top_k(TOP_SHARE, a.size)
            out.append(MapChange(m, spec.label, k_class, e0, e1, rank_correlation(a, b), top_k_overlap(a, b, k), k))
        except Exception as err:  # noqa: BLE001 - one method failing must not hide the others
            out.append(
                MapChange(m, spec.label, k_class, error=error_text(err, spec.label, then="the other methods went on"))
            )
    return out
