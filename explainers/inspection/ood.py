"""Is an input far from the training data? A hint so people do not over-read an explanation.

The model's penultimate-layer features of a seeded sample of the training split are the reference.
An input's distance to its k-th nearest training neighbour (Euclidean, on unit-length features:
Sun et al. 2022, "Out-of-distribution detection with deep nearest neighbors") is compared with the
same distance of each reference sample to the others: an input farther than `PERCENTILE` % of the
training samples are from theirs is flagged. The predictive entropy is reported beside it (against
the training samples' entropies) but does not flag by itself: a confident prediction can be far from
the data (a red circle on noise called "cross" at 98%), and an uncertain one can be in distribution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import (
    PENULTIMATE,
    compute_activations,
    input_activation,
    load_samples,
    raw_batch,
)

REFERENCE_SIZE = 1000  # training samples the input is compared with
K = 5  # the k-th nearest neighbour's distance
PERCENTILE = 99.0  # flag beyond this percentile of the training samples' own k-NN distances


@dataclass(frozen=True)
class OODReference:
    """Unit-length penultimate features (M, D) of M training samples, each one's distance to its k-th
    nearest other sample (M,), and their predictive entropies in nats (M,)."""

    features: np.ndarray
    knn_distances: np.ndarray
    entropies: np.ndarray
    k: int
    split: str
    num_classes: int

    @property
    def threshold(self) -> float:
        """The k-NN distance beyond which an input is flagged."""
        return float(np.percentile(self.knn_distances, PERCENTILE))


@dataclass(frozen=True)
class OODScore:
    """One input against the reference.

    distance: to its k-th nearest training sample; percentile: the share of training samples (%) whose
    own k-NN distance is smaller; entropy (nats) and entropy_percentile likewise; flagged: beyond
    the threshold distance."""

    distance: float
    threshold: float
    percentile: float
    entropy: float
    entropy_percentile: float
    max_entropy: float
    flagged: bool
    k: int

    def summary(self) -> str:
        """One sentence with the figures the verdict rests on, worded by what the percentile says: the share of
        training samples that lie nearer to the training data than this input does (`distance_phrase`)."""
        ratio = self.distance / self.threshold if self.threshold > 0 else math.inf
        entropy = (  # a model with one output (a number to predict) has no predictive entropy
            f"; predictive entropy {self.entropy:.2f} of at most {self.max_entropy:.2f} nats, "
            f"higher than for {_share(self.entropy_percentile)} of training samples"
            if self.max_entropy > 0
            else ""
        )
        return (
            f"{distance_phrase(self.percentile, self.flagged)} (distance to the {_ordinal(self.k)} nearest training "
            f"sample {self.distance:.3f}, {ratio:.1f}x the {PERCENTILE:g}th-percentile threshold {self.threshold:.3f}"
            f"{entropy})."
        )

    def to_json(self) -> dict[str, Any]:
        """The score as a report keeps it (docs/report-format.md `out_of_distribution`), with its sentence."""
        return {
            "flagged": self.flagged,
            "distance": self.distance,
            "threshold": self.threshold,
            "percentile": self.percentile,
            "entropy": self.entropy,
            "entropy_percentile": self.entropy_percentile,
            "max_entropy": self.max_entropy,
            "k": self.k,
            "summary": self.summary(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OODScore:
        """A score read back from `to_json` (its sentence is made again from the figures)."""
        return cls(
            float(d["distance"]),
            float(d["threshold"]),
            float(d["percentile"]),
            float(d["entropy"]),
            float(d["entropy_percentile"]),
            float(d["max_entropy"]),
            bool(d["flagged"]),
            int(d["k"]),
        )


CLOSE_BELOW = 50.0  # percentiles below this: nearer than most training samples are to theirs
EDGE_FROM = 90.0  # from this percentile up to the threshold: farther than nearly all of them


def _share(percent: float) -> str:
    """A share of training samples in %: whole numbers, one decimal near 0 and 100 (so 99.6 does not read 100)."""
    p = min(max(float(percent), 0.0), 100.0)
    return f"{p:.1f}%" if 0 < p < 1 or 99 < p < 100 else f"{p:.0f}%"


def distance_phrase(percentile: float, flagged: bool) -> str:
    """The verdict on an input's distance to the training data, from `percentile` (the share of training samples
    whose own k-NN distance is smaller) and the flag: each wording states what that share means, so the words
    never contradict the number (96 reads 'farther than 96% ...', never 'close')."""
    p = float(percentile)
    if flagged:
        return f"Looks out of distribution: farther from the training data than {_share(p)} of training samples are"
    if p < CLOSE_BELOW:
        return f"Close to the training data: nearer to it than {_share(100 - p)} of training samples are"
    if p < EDGE_FROM:
        return (
            f"Within the training data's usual range: farther from it than {_share(p)} of training samples are, "
            f"nearer than the other {_share(100 - p)}"
        )
    return (
        f"At the edge of the training data: farther from it than {_share(p)} of training samples are, still "
        f"within the {PERCENTILE:g}th-percentile threshold"
    )


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _unit(features: np.ndarray) -> np.ndarray:
    f = np.asarray(features, dtype=np.float64).reshape(len(features), -1)
    return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances (len(a), len(b)) between unit-length rows."""
    return np.sqrt(np.clip(2.0 - 2.0 * a @ b.T, 0.0, None))


def _entropy_of(bundle: ModelBundle, scores: np.ndarray) -> np.ndarray:
    """Each input's predictive entropy; zeros for a model that predicts a number (its scores are values)."""
    return np.zeros(len(scores)) if bundle.regression is not None else _entropy(scores)


def _entropy(probs: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)
    return -(p * np.log(p)).sum(axis=1)


def reference(bundle: ModelBundle, n: int = REFERENCE_SIZE, k: int = K, split: str = "train") -> OODReference:
    """The reference of `n` seeded samples of the run's `split` (features cached on disk with the run's
    other activations). Raises ModelError when the split cannot be loaded."""
    samples = load_samples(bundle, split)
    acts = compute_activations(bundle, PENULTIMATE, n=n, split=split, samples=samples)
    feats = _unit(acts.features)
    if len(feats) <= k:
        raise ValueError(f"The reference needs more than k={k} samples, got {len(feats)}.")
    d = _distances(feats, feats)
    np.fill_diagonal(d, np.inf)
    knn = np.sort(d, axis=1)[:, k - 1]
    probs = bundle.predict_proba(raw_batch(bundle, samples, acts.indices)).numpy()
    return OODReference(feats, knn, _entropy_of(bundle, probs), k, split, probs.shape[1])


@torch.no_grad()
def score(bundle: ModelBundle, ref: OODReference, raw: Any) -> list[OODScore]:
    """One `OODScore` per input of `raw` (images (N, C, H, W) / (C, H, W) in [0, 1], or texts)."""
    texts = [raw] if isinstance(raw, str) else raw
    feats = _unit(input_activation(bundle, texts))
    d = np.sort(_distances(feats, ref.features), axis=1)[:, ref.k - 1]
    ent = _entropy_of(bundle, bundle.predict_proba(texts).numpy())
    threshold = ref.threshold
    return [
        OODScore(
            distance=float(di),
            threshold=threshold,
            percentile=float(100.0 * np.mean(ref.knn_distances < di)),
            entropy=float(ei),
            entropy_percentile=float(100.0 * np.mean(ref.entropies < ei)),
            max_entropy=math.log(ref.num_classes),
            flagged=bool(di > threshold),
            k=ref.k,
        )
        for di, ei in zip(d, ent, strict=True)
    ]
