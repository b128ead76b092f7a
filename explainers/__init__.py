"""Explanation methods behind one API, their metrics and their rendering."""

import xaidash.models as _models  # noqa: F401  (zoo registered before methods refer to it)
from xaidash.explainers import methods as _methods  # noqa: F401  (registers every method)
from xaidash.explainers.api import explain, predicted_targets
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import (
    MethodContext,
    MethodOutput,
    MethodSpec,
    featured_methods,
    get_method,
    list_methods,
    methods_for,
)

__all__ = [
    "ExplainError",
    "Explanation",
    "MethodContext",
    "MethodOutput",
    "MethodSpec",
    "Param",
    "explain",
    "featured_methods",
    "get_method",
    "list_methods",
    "methods_for",
    "predicted_targets",
]
