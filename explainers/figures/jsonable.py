"""The one JSON cleaner of the reports: what a report holds (NumPy numbers and arrays, dataclasses, objects that
say their own dict) as plain JSON values, so `json.dumps(..., allow_nan=False)` always succeeds."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """Plain JSON: mappings with text keys, lists, numbers, text, booleans and null. NumPy scalars and arrays
    become numbers and lists, NaN and inf become null, an object with `to_dict` (e.g. a faithfulness score) or a
    dataclass becomes its fields; anything else its text."""
    if callable(getattr(value, "to_dict", None)):  # explainers/language/faithfulness.FaithfulnessScore
        return jsonable(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)
