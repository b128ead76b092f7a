"""Deletion and insertion of prompt features in attribution order (Petsiuk et al. 2018's curves, as
`explainers/metrics/deletion.py` draws them for images), read on the explained output's log-probability.

Features are ranked by attribution, highest first (ties: prompt order). Deletion replaces the top k features with
the baseline token (`query.baseline_id`, what the perturbation methods hide a feature with) for k = 0 .. n features;
insertion starts from the prompt with every feature hidden and shows the top k. The area under each curve over the
fraction of features moved (trapezoid rule, fractions 0 to 1) is the score, in the output's unit (nats): a low
deletion AUC and a high insertion AUC mean the order found the features the output depends on. A random order,
averaged over a few seeds, is scored beside the methods, so a reader can tell a good order from chance.

Every curve point of every method (and of the random orders) is one row of token ids, and all of them go through
`scoring.score_rows` together (shared batched passes, the prompt's key-value cache reused, identical rows scored
once: the first point of deletion and the last of insertion are the same prompt for every order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.explainers.language.api import PromptExplanation
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.scoring import explained, masked_rows, score_rows
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel

RANDOM = "random"  # the key of the random-order baseline in `deletion_insertion`'s answer
RANDOM_SEEDS = 5
UNITS = "log-probability of the explained output (nats)"
DELETION_DIRECTION = "lower is better: deleting the top-ranked features first should drop the output fastest"
INSERTION_DIRECTION = "higher is better: inserting the top-ranked features first should restore the output fastest"


@dataclass
class FaithfulnessScore:
    """One order's curves. fractions / counts (points,): the share and number of features moved at each point;
    deletion / insertion (points,): the explained output after deleting / inserting them; the AUCs over fractions.
    order: the features, first moved first (for the random baseline: its first seed's). For the random baseline the
    curves and AUCs are the means over `seeds` orders and the *_auc_std their spread."""

    method: str
    fractions: np.ndarray
    counts: np.ndarray
    deletion: np.ndarray
    insertion: np.ndarray
    deletion_auc: float
    insertion_auc: float
    order: list[int]
    seeds: int = 0
    deletion_auc_std: float = 0.0
    insertion_auc_std: float = 0.0
    units: str = UNITS
    directions: dict[str, str] = field(
        default_factory=lambda: {"deletion": DELETION_DIRECTION, "insertion": INSERTION_DIRECTION}
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "fractions": self.fractions.tolist(),
            "counts": self.counts.tolist(),
            "deletion": self.deletion.tolist(),
            "insertion": self.insertion.tolist(),
            "deletion_auc": self.deletion_auc,
            "insertion_auc": self.insertion_auc,
            "deletion_auc_std": self.deletion_auc_std,
            "insertion_auc_std": self.insertion_auc_std,
            "order": self.order,
            "seeds": self.seeds,
            "units": self.units,
            "directions": dict(self.directions),
        }


def ranked(values: np.ndarray) -> np.ndarray:
    """Feature indices by value, highest first; ties keep prompt order."""
    return np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")


def curve_counts(n_features: int, steps: int | None) -> np.ndarray:
    """Features moved at each point: every count 0..n (steps None), or `steps` + 1 evenly spread fractions."""
    if steps is None or steps >= n_features:
        return np.arange(n_features + 1)
    if steps < 1:
        raise ExplainError(f"steps={steps}: a curve needs at least 1 step.")
    return np.round(np.linspace(0.0, 1.0, int(steps) + 1) * n_features).astype(int)


def _masks(order: np.ndarray, counts: np.ndarray, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(deletion, insertion) keep-masks (points, n): deletion hides the first `count` features of `order`,
    insertion shows only them."""
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    moved = torch.from_numpy(rank[None, :] < counts[:, None])
    return ~moved, moved


def _auc(curves: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    return np.trapezoid(curves, fractions, axis=-1)


def deletion_insertion(
    lm: LanguageModel,
    query: PromptQuery,
    explanations: Mapping[str, PromptExplanation],
    steps: int | None = None,
    seeds: int = RANDOM_SEEDS,
) -> dict[str, FaithfulnessScore]:
    """Deletion and insertion curves of each explanation's order against the query's explained output, and the
    random baseline under `RANDOM` (its curves averaged over `seeds` random orders drawn from `query.seed`).
    `steps`: points per curve minus one (default: one point per feature)."""
    n = query.n_features
    if n == 0:
        raise ExplainError("The prompt has no features to delete or insert.")
    for name, e in explanations.items():
        if np.asarray(e.attributions).reshape(-1).shape[0] != n:
            raise ExplainError(f"{name} has {np.asarray(e.attributions).size} values for the query's {n} features.")
    counts = curve_counts(n, steps)
    fractions = counts / n
    rng = np.random.default_rng(query.seed)
    orders = {name: ranked(np.asarray(e.attributions).reshape(-1)) for name, e in explanations.items()}
    random_orders = [rng.permutation(n) for _ in range(max(1, int(seeds)))]
    every = [*orders.values(), *random_orders]
    masks = [m for order in every for m in _masks(order, counts, n)]
    scores, _ = score_rows(lm, query, masked_rows(lm, query, torch.cat(masks)))
    values = explained(query, scores).double().cpu().numpy().reshape(len(every), 2, len(counts))
    out: dict[str, FaithfulnessScore] = {}
    for k, (name, order) in enumerate(orders.items()):
        out[name] = _score(name, fractions, counts, values[k], order)
    chance = values[len(orders) :]
    aucs = _auc(chance, fractions)  # (seeds, 2)
    out[RANDOM] = FaithfulnessScore(
        method=RANDOM,
        fractions=fractions,
        counts=counts,
        deletion=chance[:, 0].mean(0),
        insertion=chance[:, 1].mean(0),
        deletion_auc=float(aucs[:, 0].mean()),
        insertion_auc=float(aucs[:, 1].mean()),
        order=[int(i) for i in random_orders[0]],
        seeds=len(random_orders),
        deletion_auc_std=float(aucs[:, 0].std()),
        insertion_auc_std=float(aucs[:, 1].std()),
    )
    return out


def beats_random(score: FaithfulnessScore, chance: FaithfulnessScore) -> tuple[bool, bool]:
    """(deletion, insertion): whether an order's curve beats the random orders beyond their spread: a deletion AUC
    below their mean by more than their standard deviation, an insertion AUC above it by more (a difference the
    random orders make among themselves is no evidence)."""
    return (
        score.deletion_auc < chance.deletion_auc - chance.deletion_auc_std,
        score.insertion_auc > chance.insertion_auc + chance.insertion_auc_std,
    )


def chance_verdict(scores: Mapping[str, FaithfulnessScore]) -> str:
    """One plain sentence when no method's order beats the random one on both deletion and insertion (the maps are
    then no more faithful than chance for this target), with what to try; '' when one does."""
    chance = scores.get(RANDOM)
    methods = [s for name, s in scores.items() if name != RANDOM]
    if chance is None or not methods:
        return ""
    wins = [beats_random(s, chance) for s in methods]
    if any(d and i for d, i in wins):
        return ""
    which = (
        "on neither deletion nor insertion"
        if not any(d or i for d, i in wins)
        else "on deletion and insertion together (each on one curve at most)"
    )
    return (
        f"No map here beats the random orders by more than their own spread {which}: for this target these maps "
        "are not more faithful than chance. Try another target token (a content word of the answer), or more steps "
        "or samples in the method settings."
    )


def _score(
    name: str, fractions: np.ndarray, counts: np.ndarray, curves: np.ndarray, order: np.ndarray
) -> FaithfulnessScore:
    aucs = _auc(curves, fractions)
    return FaithfulnessScore(
        method=name,
        fractions=fractions,
        counts=counts,
        deletion=curves[0],
        insertion=curves[1],
        deletion_auc=float(aucs[0]),
        insertion_auc=float(aucs[1]),
        order=[int(i) for i in order],
    )
