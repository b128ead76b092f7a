"""Helpers shared by the data set modules: deterministic splits and channel statistics.

This module registers nothing; the package imports it like any other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xaidash.data.errors import DatasetError
from xaidash.data.registry import DatasetSource

TEST_FRACTION = 0.2
SPLIT_SEED = 0


def stratified_indices(labels: Sequence[int] | np.ndarray, split: str, seed: int = SPLIT_SEED) -> np.ndarray:
    """Indices of one side of a deterministic, stratified 80/20 train/test split."""
    from sklearn.model_selection import train_test_split  # imported on use: keeps `import data.sets` light

    labels = np.asarray(labels)
    counts = np.bincount(labels) if labels.size else np.array([], dtype=int)
    if labels.size and counts[counts > 0].min() < 2:
        raise DatasetError(
            "Each class needs at least 2 samples to be split 80/20 into train and test; "
            f"the smallest class has {int(counts[counts > 0].min())}."
        )
    classes = int((counts > 0).sum())
    n_test = math.ceil(labels.size * TEST_FRACTION)  # how scikit-learn rounds a fractional test size
    if labels.size and (n_test < classes or labels.size - n_test < classes):
        need = math.ceil(classes / TEST_FRACTION)
        raise DatasetError(
            f"{labels.size} samples in {classes} classes are too few to split 80/20 with every class on both "
            f"sides: give at least {need} samples ({math.ceil(need / classes)} per class on average, at least 2 "
            "in each class)."
        )
    train_idx, test_idx = train_test_split(
        np.arange(labels.size), test_size=TEST_FRACTION, random_state=seed, stratify=labels
    )
    return np.asarray(train_idx if split == "train" else test_idx, dtype=np.int64)


def regression_indices(values: Sequence[float] | np.ndarray, split: str, seed: int = SPLIT_SEED) -> np.ndarray:
    """The 80/20 split of rows with a number to predict, stratified on the number's quintiles, so both sides span
    its whole range (a plain random split of a few hundred rows can leave the test side without the extremes)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 10:
        raise DatasetError(f"{values.size} rows are too few to split 80/20 into train and test: give at least 10.")
    edges = np.quantile(values, [0.2, 0.4, 0.6, 0.8])
    return stratified_indices(np.searchsorted(edges, values, side="right"), split, seed)


def channel_stats(images: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of images (N, C, H, W), rounded for use as constants."""
    x = np.asarray(images, dtype=np.float64)
    mean = x.mean(axis=(0, 2, 3))
    std = x.std(axis=(0, 2, 3))
    return tuple(round(float(m), 4) for m in mean), tuple(round(float(s), 4) for s in std)


@dataclass
class NotedDatasetSource(DatasetSource):
    """A source for user data that also carries notes for the user (skipped files, encoding used)."""

    notes: tuple[str, ...] = ()
