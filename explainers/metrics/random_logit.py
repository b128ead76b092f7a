"""The random-logit test (Sixt et al. 2020): explain the same input for a random other class and measure how
similar the two maps are. A map that answers "why this class?" should change with the class (low similarity); a
map that mostly draws the input's edges looks the same whatever class is asked for (high similarity).

Similarity: as the modality's adapter compares two maps (`map_similarity`): SSIM of |map| / max |map| on images (as
the sanity check measures it, `_common.map_ssim`), Spearman rank correlation on texts (word maps are too short for
SSIM). One batched `explain()` call for all inputs. Quantus's RandomLogit calls the explanation once per input; its
SSIM is the same skimage function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.metrics.maps import metric_maps
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


def other_classes(targets: Sequence[int] | np.ndarray, classes: int, seed: int = 0) -> np.ndarray:
    """For each target a class drawn uniformly from the other `classes` - 1 (seeded)."""
    if classes < 2:
        raise ExplainError("The random-logit test needs a model with at least two classes.")
    t = np.asarray(targets, dtype=np.int64)
    shift = np.random.default_rng(seed).integers(1, classes, size=t.shape)
    return (t + shift) % classes


def map_similarity(a: np.ndarray, b: np.ndarray, modality: str) -> float:
    """How alike two maps of `modality` are, as its adapter compares them (SSIM of |a| and |b|, each scaled by its
    max, for image maps; Spearman for word maps); NaN when undefined."""
    return adapter_of(modality).map_similarity(a, b)


def random_logit(
    bundle: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    explanation: Explanation,
    *,
    params: dict[str, Any] | None = None,
    background: torch.Tensor | None = None,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Per input, the similarity of `explanation`'s map to the same method's map for a random other class."""
    others = other_classes(explanation.targets, bundle.info.num_classes, seed)
    params = params if params is not None else dict(explanation.params or {})
    other = explain(
        bundle,
        raw,
        others.tolist(),
        explanation.method,
        batch_size=batch_size,
        background=background,
        seed=seed,
        **params,
    )
    adapter = adapter_of(bundle.modality)
    mine, theirs = metric_maps(explanation), metric_maps(other)
    return np.array([adapter.map_similarity(a, b) for a, b in zip(mine, theirs, strict=True)])
