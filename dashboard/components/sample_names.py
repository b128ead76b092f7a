"""How the input pickers name a test sample: its class by name, and a sample in a line of a picker's options
('#12 cat→dog'; with the adapter's short name where its index does not say which input it is: '#12 node 412:
base→house top')."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xaidash.data.modalities import Modality
from xaidash.data.registry import DatasetInfo, Split


def class_name(info: DatasetInfo, label: int | None) -> str:
    return info.classes[label] if label is not None and 0 <= label < info.num_classes else "?"


def class_describer(
    info: DatasetInfo, split: Split, labels: np.ndarray, preds: np.ndarray, adapter: Modality
) -> Callable[[int], str]:
    """Sample i of `split` as '#i true→predicted', its short name (the adapter's) before the classes."""

    def describe(i: int) -> str:
        short = adapter.short_name(adapter.item(split, i))
        named = f" {short}:" if short else ""
        return f"#{i}{named} {class_name(info, int(labels[i]))}→{class_name(info, int(preds[i]))}"

    return describe
