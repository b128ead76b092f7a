"""What a model predicted for one input, as every report, page and command lists it: a classifier's top-k classes
with their probabilities, or a regression model's one value in the target's units (`DatasetInfo.regression`: no
class, no probability, never a percentage), with the true value and the error when the input's truth is known."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xaidash.data.registry import RegressionTarget

TOP_K = 5


@dataclass(frozen=True)
class Prediction:
    """One predicted class with its probability, or (a number to predict) the predicted `value` in the target's
    units, with `probability` None and `cls` 0 (the model's one output)."""

    cls: int
    name: str
    probability: float | None
    value: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.cls, "name": self.name, "probability": self.probability}
        return out if self.value is None else {**out, "value": self.value}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Prediction:
        p, v = d.get("probability"), d.get("value")
        return cls(int(d["class"]), str(d["name"]), None if p is None else float(p), None if v is None else float(v))


def top_predictions(
    probs: Any, classes: Sequence[str], k: int = TOP_K, target: RegressionTarget | None = None
) -> list[Prediction]:
    """The k most probable classes of one input, most probable first (ties in class order): the one top-k
    every page, the CLI and the reports list. `target` (a number to predict): `probs` is the predicted value, and
    the list holds that one value."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if target is not None:  # its value; a forecast's, one per step ahead in order (t+1 first)
        if len(p) == 1:
            return [Prediction(0, target.name, None, float(p[0]))]
        return [Prediction(h, str(classes[h]), None, float(v)) for h, v in enumerate(p)]
    order = np.argsort(-p, kind="stable")[: max(0, min(int(k), len(p)))]
    return [Prediction(int(i), str(classes[int(i)]), float(p[int(i)])) for i in order]


def target_json(target: RegressionTarget | None) -> dict[str, Any] | None:
    """A number to predict as a report writes it (its name, unit, training mean, spread and range)."""
    if target is None:
        return None
    return {
        "name": target.name,
        "unit": target.unit,
        "mean": target.mean,
        "std": target.std,
        "low": target.low,
        "high": target.high,
    }


def target_from_json(d: Mapping[str, Any] | None) -> RegressionTarget | None:
    if not d:
        return None
    return RegressionTarget(
        str(d["name"]),
        str(d.get("unit", "")),
        float(d.get("mean", 0.0)),
        float(d.get("std", 1.0)),
        float(d.get("low", 0.0)),
        float(d.get("high", 0.0)),
    )


def error_text(value: float, truth: float, target: RegressionTarget) -> str:
    """'error +1.3' (predicted - true, in the target's units)."""
    err = value - truth
    return f"error {'+' if err >= 0 else '−'}{target.value_text(abs(err))}"


def prediction_text(top: Prediction, target: RegressionTarget | None, digits: int = 0) -> str:
    """'disease progression: 152.3' for a number to predict; 'cat (97%)' for a class."""
    if target is not None and top.value is not None:
        return f"{target.name}: {target.value_text(top.value)}"
    p = top.probability
    return top.name if p is None or not math.isfinite(p) else f"{top.name} ({p:.{digits}%})"


def truth_text(label: float | None, classes: Sequence[str], target: RegressionTarget | None) -> str:
    """The input's truth in words: the true value in units, or the true class's name ('' when unknown)."""
    if label is None:
        return ""
    if target is not None:
        return target.value_text(float(label))
    i = int(label)
    return classes[i] if 0 <= i < len(classes) else "?"


def verdict_text(top: Prediction, label: float | None, target: RegressionTarget | None) -> str:
    """After the prediction: ' ✓' / ' ✗' for a class, ' (error +1.3)' for a number; '' when the truth is unknown."""
    if label is None:
        return ""
    if target is not None:
        return "" if top.value is None else f" ({error_text(top.value, float(label), target)})"
    return " ✓" if int(label) == top.cls else " ✗"


def label_json(label: float | None, classes: Sequence[str], target: RegressionTarget | None) -> dict | None:
    """An input's truth as a report writes it: the true class with its name, or the true value with its text."""
    if label is None:
        return None
    if target is not None:  # a number to predict: its true value, in the target's units
        return {"value": float(label), "text": target.value_text(float(label))}
    return {"class": int(label), "name": classes[int(label)]}


def label_from_json(d: Mapping[str, Any] | None) -> int | float | None:
    if d is None:
        return None
    return float(d["value"]) if "value" in d else int(d["class"])
