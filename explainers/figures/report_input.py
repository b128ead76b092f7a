"""One input of an explain report: its name, true class or value, the input itself (an image, a text, a row's values,
a series' channels), its top predictions per run and its out-of-distribution hint (explainers/figures/report.py)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.figures.png import input_png
from xaidash.explainers.figures.predictions import Prediction, label_from_json, label_json
from xaidash.explainers.figures.render import image_hwc
from xaidash.explainers.inspection.ood import OODScore


@dataclass
class ReportInput:
    """One input: name, true class (None when unknown), the input (an image (H, W, 3) in [0, 1], the text, or a row's
    raw `values` with `text` in words and `cells` 'column = value'), top predictions per run, the OOD hint."""

    name: str
    label: int | float | None = None  # the true class, or the true value of a number to predict
    image: np.ndarray | None = None
    text: str | None = None
    predictions: dict[str, list[Prediction]] = field(default_factory=dict)
    ood: OODScore | None = None
    values: list[float] | None = None
    cells: tuple[str, ...] = ()
    series: list[list[float]] | None = None  # a series' values, one list per channel (channels x steps)
    future: list[float] | None = None  # a forecast's true values of the steps ahead (t+1 first), when known

    @classmethod
    def of(
        cls,
        name: str,
        raw: Any,
        label: int | float | None = None,
        predictions: Mapping[str, list[Prediction]] | None = None,
        ood: OODScore | None = None,
        words: str | None = None,
        cells: Sequence[str] | None = None,
        future: Sequence[float] | None = None,
    ) -> ReportInput:
        """From a raw input as the pages take it: an image (C, H, W) in [0, 1], a text, or a row (1-D), else (a graph)
        its `words`; `future`: a forecast's true values of the steps ahead."""
        if future is not None:
            made = cls.of(name, raw, label, predictions, ood, words, cells)
            made.future = [float(v) for v in future]
            return made
        if isinstance(raw, str):
            return cls(name, label, None, raw, dict(predictions or {}), ood)
        if words is not None and not isinstance(raw, (list, tuple)) and not hasattr(raw, "__array__"):
            # neither a picture, a text nor values (a graph and its node): kept as its adapter's words
            return cls(name, label, None, words, dict(predictions or {}), ood)
        if np.ndim(raw) == 2:  # a series (channels, steps): kept as its values, drawn as lines
            rows = [[float(v) for v in row] for row in np.asarray(raw, dtype=np.float64)]
            text = f"{len(rows[0])} steps" + (f", {len(rows)} channels" if len(rows) > 1 else "")
            return cls(name, label, None, words or text, dict(predictions or {}), ood, series=rows)
        if np.ndim(raw) == 1:
            values = [float(v) for v in np.asarray(raw, dtype=np.float64)]
            text = words or ", ".join(f"{v:.4g}" for v in values)
            return cls(name, label, None, text, dict(predictions or {}), ood, values, tuple(cells or ()))
        return cls(name, label, image_hwc(raw), None, dict(predictions or {}), ood)

    def raw(self, channels: int = 3) -> np.ndarray | str | None:
        """The inverse of `of`: the text, a row's values, a series (C, T), or the image (C, H, W) float32 with
        `channels` channels."""
        if self.series is not None:
            return np.asarray(self.series, np.float32)
        if self.values is not None:
            return np.asarray(self.values, np.float32)
        if self.text is not None:
            return self.text
        if self.image is None:
            return None
        return np.ascontiguousarray(np.asarray(self.image, np.float32).transpose(2, 0, 1)[:channels])

    def png(self) -> bytes | None:
        """The input image as the model saw it (its own size), PNG."""
        return None if self.image is None else input_png(self.image)

    def to_json(
        self, file: str | None, classes: Sequence[str], target: RegressionTarget | None = None
    ) -> dict[str, Any]:
        """The input as the report lists it: `file` is its image's name among the report's files, `classes` the
        run's class names (the true class is written with its name; a true value, `target`, with its text)."""
        return {
            "name": self.name,
            "label": label_json(self.label, classes, target),
            "file": file,
            "text": self.text,
            **({"values": self.values, "cells": list(self.cells)} if self.values is not None else {}),
            **({"series": self.series} if self.series is not None else {}),
            **({"future": self.future} if self.future is not None else {}),
            "predictions": {k: [p.to_json() for p in v] for k, v in self.predictions.items()},
            "out_of_distribution": None if self.ood is None else self.ood.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], files: Mapping[str, bytes]) -> ReportInput:
        """An input read back from `to_json`, its image from `files` when they hold it."""
        image = None
        if d.get("file") and d["file"] in files:
            pixels = np.asarray(Image.open(io.BytesIO(files[d["file"]])).convert("RGB"), dtype=np.float32)
            image = pixels / 255.0
        ood = d.get("out_of_distribution")
        return cls(
            str(d["name"]),
            label_from_json(d.get("label")),
            image,
            d.get("text"),
            {str(k): [Prediction.from_json(p) for p in v] for k, v in (d.get("predictions") or {}).items()},
            None if ood is None else OODScore.from_json(ood),
            None if d.get("values") is None else [float(v) for v in d["values"]],
            tuple(str(c) for c in d.get("cells") or ()),
            None if d.get("series") is None else [[float(v) for v in row] for row in d["series"]],
            None if d.get("future") is None else [float(v) for v in d["future"]],
        )
