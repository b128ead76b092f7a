"""Inputs to explain and references to explain them against, drawn from a model's data set.

- `pick_test_sample`: a seeded sample (or chosen indices) of the test split with its ground truth;
- `background_samples`: a seeded pick of prepared training images, what SHAP's gradient/deep
  explainers and the 'mean' baseline compare against;
- `default_background`: the 50 of them `explain` uses when a method needs a background and none
  is given, loaded once per bundle, so the Python API, the CLI and the dashboard agree.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

DEFAULT_BACKGROUND = 50  # training images; no more than any method's default background_size
BACKGROUND_SEED = 0  # the same images whatever seed the method samples with


@dataclass
class Sample:
    """Inputs with what is known about them: images (N, C, H, W) in [0, 1] or texts, true labels,
    their indices in the test split, and object masks (N, H, W) or rationale word indices when the data set has them."""

    raw: torch.Tensor | list[str]
    labels: list[int | float | None]  # true classes, or true values of a number to predict
    indices: list[int] = field(default_factory=list)
    masks: np.ndarray | None = None
    rationales: list[list[int] | None] | None = None

    def __len__(self) -> int:
        return len(self.labels)


def background_samples(
    bundle: ModelBundle, n: int = DEFAULT_BACKGROUND, seed: int = BACKGROUND_SEED
) -> torch.Tensor | None:
    """Up to `n` prepared training samples (a seeded pick) for SHAP and the 'mean' baseline, as the model's modality
    adapter reads them; None where it has none (texts), for imported models with no data set, or when the training
    split cannot be loaded (the methods then use their own stand-in)."""
    return adapter_of(bundle.modality).background(bundle, n, seed)


# id(bundle) -> (a weak reference to it, its default background). Bundles are mutable dataclasses
# (unhashable), so they are keyed by identity; the entry goes when the bundle does.
_DEFAULTS: dict[int, tuple[weakref.ref[ModelBundle], torch.Tensor | None]] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_background(bundle: ModelBundle) -> torch.Tensor | None:
    """`background_samples(bundle)` with its defaults, loaded once per bundle."""
    key = id(bundle)
    with _DEFAULTS_LOCK:
        entry = _DEFAULTS.get(key)
        if entry is not None and entry[0]() is bundle:
            return entry[1]
    background = background_samples(bundle)
    with _DEFAULTS_LOCK:
        _DEFAULTS[key] = (weakref.ref(bundle), background)
        weakref.finalize(bundle, _DEFAULTS.pop, key, None)
    return background


def resolve_background(bundle: ModelBundle, needs_background: bool, given: torch.Tensor | None) -> torch.Tensor | None:
    """The background a method compares against: the one given, else the default set when it needs one."""
    if given is not None or not needs_background:
        return given
    return default_background(bundle)


def pick_test_sample(bundle: ModelBundle, n: int = 8, seed: int = 0, indices: Sequence[int] | None = None) -> Sample:
    """`n` test samples picked at random (seeded), or the given test indices, with their ground truth."""
    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import load_split

    reason = bundle.no_dataset_reason("a test sample")
    if reason:
        raise ExplainError(reason)
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
    # a number to predict: each sample's true value (classes: its class index)
    as_label = float if bundle.info.regression is not None else int
    labels: list[int | float | None] = [as_label(split.labels[i]) for i in indices]
    adapter = adapter_of(bundle.modality)
    truth = adapter.ground_truth(split, indices)
    return Sample(adapter.items(split, indices), labels, indices, masks=truth.masks, rationales=truth.rationales)
