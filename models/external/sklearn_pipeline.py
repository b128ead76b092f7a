"""A scikit-learn classifier or regressor (a pipeline or a bare estimator) saved with skops, read without pickle, and
wrapped as a torch module so it stands beside a network on the same table rows: for side-by-side comparison only.

Loading: `skops.io.load` with an explicit list of trusted types: skops trusts scikit-learn's estimators and plain
containers itself; TRUSTED adds the few internal types common pipelines hold (numpy's dtype, the fitted trees of
decision trees, random forests and histogram gradient boosting). Any other type in the file is refused in one line,
naming it: a .skops file cannot run code that way, and we never widen the list to whatever a file asks for.

The wrapper reads what every table model reads, the prepared vector (numeric columns standardised, categorical
one-hot: data/modalities/table.py), turns it back into the table's raw values (x * std + mean; the one-hot's
category by name, "(missing)" as a missing value; categories that read as numbers as numbers, as pandas reads them,
as their text, or as their codes, whichever the pipeline was fitted on: `settle_categories` asks it) and returns the
pipeline's `predict_proba` as log-probabilities in the data set's class order, so softmax gives the probabilities
back; for a data set with a number to predict (DatasetInfo.regression) the regressor's `predict` as the one output
(N, 1), the value in the target's units, as every regression model answers. No gradient flows through scikit-learn:
the source declares it, and gradient and CAM methods are refused.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.data.modalities.table import column_slices
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelError

TRUSTED = (
    "numpy.dtype",
    "sklearn.tree._tree.Tree",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
)
MISSING_CATEGORY = "(missing)"  # data/sets/csv_table.py's category for a missing value: NaN to the pipeline
SKOPS_REQUIREMENT = "skops>=0.16,<0.17"
# How categorical values reach the pipeline: number-like categories as numbers (pandas' read_csv default), every
# category as its text (read with dtype=str), or as the category's code (fitted on a split's raw rows).
CATEGORY_MODES = ("numbers", "text", "codes")


def _skops_io() -> Any:
    try:
        import skops.io as sio
    except ImportError:
        raise ModelError(
            f"skops: needs the skops package to read .skops files without pickle: pip install '{SKOPS_REQUIREMENT}'."
        ) from None
    return sio


def read_pipeline(path: Path, info: DatasetInfo) -> Any:
    """The classifier (or, for a data set with a number to predict, the regressor) in a .skops file, loaded with the
    trusted types only; ModelError in one line otherwise."""
    if not path.is_file():
        raise ModelError(f"skops file {path} does not exist.")
    sio = _skops_io()
    try:
        found = list(sio.get_untrusted_types(file=path))
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file: whatever skops raises, say so in one line
        raise ModelError(f"{path.name} is not a readable skops file ({plain_message(e)}).") from None
    refused = sorted(set(found) - set(TRUSTED))
    if refused:
        raise ModelError(
            f"{path.name} holds types that are not trusted: {', '.join(refused[:6])}"
            f"{' ...' if len(refused) > 6 else ''}; only scikit-learn's own estimators and {', '.join(TRUSTED)} "
            "are loaded."
        )
    try:
        pipeline = sio.load(path, trusted=found)
    except Exception as e:  # noqa: BLE001 - as above
        raise ModelError(f"{path.name} cannot be loaded by skops ({plain_message(e)}).") from None
    _check_task(pipeline, info, path.name)
    return pipeline


def _check_task(pipeline: Any, info: DatasetInfo, where: str) -> None:
    """A classifier for classes, a regressor for a number to predict: the other way round is one line."""
    classifier = callable(getattr(pipeline, "predict_proba", None)) and hasattr(pipeline, "classes_")
    kind = type(pipeline).__name__
    if info.regression is not None:
        if hasattr(pipeline, "classes_"):
            raise ModelError(
                f"{where} holds a classifier ({kind}, classes {', '.join(map(str, pipeline.classes_[:6]))}) but data "
                f"set {info.name} predicts a number ({info.regression.name}): save a fitted regressor."
            )
        if not callable(getattr(pipeline, "predict", None)):
            raise ModelError(f"{where} holds a {kind} without predict: save a fitted regressor.")
        return
    if not classifier:
        what = "a regressor" if callable(getattr(pipeline, "predict", None)) else "a"
        raise ModelError(
            f"{where} holds {what} {kind} without predict_proba and classes_, but data set {info.name} has classes: "
            "save a fitted classifier that gives probabilities (an SVC needs probability=True), or link a data set "
            "with a number to predict (csv:...?target=<column>&task=regression)."
        )


def _key(value: Any) -> str:
    """A class name as compared: numbers by value (1, 1.0 and '1' are one class), anything else as text."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return repr(number) if math.isfinite(number) else text


def class_order(pipeline: Any, info: DatasetInfo, where: str) -> list[int]:
    """For each of the data set's classes, its column in the pipeline's predict_proba: matched by name (numbers by
    value), or by code when the pipeline was fitted on the codes 0..K-1 (a split's labels); refused otherwise.
    A regressor's one output is its prediction: [0]."""
    if info.regression is not None:
        return [0]
    theirs = [_key(c) for c in pipeline.classes_]
    ours = [_key(c) for c in info.classes]
    if sorted(theirs) != sorted(ours) and theirs == [_key(i) for i in range(len(ours))]:
        return list(range(len(ours)))  # fitted on the data set's label codes (load_split's labels): code i is class i
    if sorted(theirs) != sorted(ours):
        raise ModelError(
            f"{where} predicts classes {', '.join(map(str, pipeline.classes_))} but data set {info.name} has "
            f"{', '.join(info.classes)}: link the table it was trained on."
        )
    return [theirs.index(k) for k in ours]


def input_names(pipeline: Any, info: DatasetInfo, where: str) -> list[str] | None:
    """The columns the pipeline reads by name (fitted on a DataFrame), all of them the data set's; None when it was
    fitted on an array (then it must read exactly the data set's columns, in order)."""
    names = [c.name for c in info.columns]
    wanted = getattr(pipeline, "feature_names_in_", None)
    if wanted is None:
        count = getattr(pipeline, "n_features_in_", len(names))
        if count != len(names):
            raise ModelError(f"{where} reads {count} columns but data set {info.name} has {len(names)}.")
        return None
    missing = [str(n) for n in wanted if str(n) not in names]
    if missing:
        raise ModelError(
            f"{where} reads column(s) {', '.join(missing[:8])} that data set {info.name} does not have; its columns "
            f"are: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}."
        )
    return [str(n) for n in wanted]


class PipelineModule(nn.Module):
    """forward(prepared rows (N, D)) -> the pipeline's log-probabilities (N, classes) in the data set's class order, or
    a regressor's predictions (N, 1) in the target's units. It holds no parameters: its weights file is empty, the
    pipeline stays in its .skops file."""

    def __init__(
        self, pipeline: Any, info: DatasetInfo, order: list[int], names: list[str] | None, categories: str = "numbers"
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.columns = info.columns
        self.slices = column_slices(info)
        self.order = order
        self.names = names
        self.categories = categories  # how categorical values reach the pipeline: one of CATEGORY_MODES
        self.regression = info.regression is not None  # predict (the value), not predict_proba

    def raw_values(self, x: torch.Tensor) -> dict[str, np.ndarray]:
        """The prepared vector back in the table's own values, column by column."""
        values = x.detach().to("cpu", torch.float64).numpy()
        out: dict[str, np.ndarray] = {}
        for column, where in zip(self.columns, self.slices, strict=True):
            if not column.categorical:
                # Raw rows are float32: rounding back to float32 undoes the standardisation's rounding error (42 came
                # back as 41.9999996, across a tree's threshold), and whole-number columns back to whole numbers.
                value = (values[:, where.start] * column.std + column.mean).astype(np.float32).astype(np.float64)
                out[column.name] = np.round(value) if column.integer else value
                continue
            names = [None if c == MISSING_CATEGORY else c for c in column.categories]
            numbers = [_as_number(c) for c in names if c is not None]
            pick = np.asarray(values[:, where].argmax(axis=1))
            if self.categories == "codes":
                out[column.name] = pick.astype(np.float64)
            elif self.categories == "numbers" and all(n is not None for n in numbers):
                as_float = np.array([np.nan if c is None else _as_number(c) for c in names], dtype=np.float64)
                out[column.name] = as_float[pick]
            else:
                out[column.name] = np.array([names[i] if names[i] is not None else np.nan for i in pick], dtype=object)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import pandas as pd  # imported on use, like every table reader

        raw = self.raw_values(x)
        frame = pd.DataFrame(raw)
        table: Any = frame[self.names] if self.names is not None else frame.to_numpy()
        if self.regression:
            values = np.asarray(self.pipeline.predict(table), dtype=np.float64).reshape(len(frame), -1)
            return torch.from_numpy(values).to(x.device, torch.float32)
        proba = np.asarray(self.pipeline.predict_proba(table), dtype=np.float64)[:, self.order]
        return torch.from_numpy(np.log(np.clip(proba, 1e-12, None))).to(x.device, torch.float32)


def _as_number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _score(model: PipelineModule, x: torch.Tensor, labels: torch.Tensor) -> float:
    """How well the model predicts the rows' labels: the accuracy, or minus the squared error of a number."""
    out = model(x).cpu()
    if model.regression:
        return -float(((out[:, 0].double() - labels.double()) ** 2).mean())
    return float((out.argmax(dim=1) == labels).float().mean())


def settle_categories(model: PipelineModule, x: torch.Tensor, labels: torch.Tensor, where: str) -> str:
    """How the pipeline takes categorical values (CATEGORY_MODES): of the ways it runs on, the one that predicts
    the rows `x` (prepared) best (accuracy, or squared error), the earlier on a tie (an encoder that ignores unknown
    categories runs on all of them, and only its score tells them apart); ModelError with the first failure when it
    runs on none."""
    errors, scores = [], {}
    for mode in CATEGORY_MODES:
        model.categories = mode
        try:
            scores[mode] = _score(model, x, labels)
        except Exception as e:  # noqa: BLE001 - the pipeline's own error, reported below
            errors.append(plain_message(e, first_line=True))
            continue
    if not scores:
        raise ModelError(f"{where} does not run on the table's rows: {errors[0]}")
    model.categories = max(CATEGORY_MODES, key=lambda m: (scores.get(m, -math.inf), -CATEGORY_MODES.index(m)))
    return model.categories
