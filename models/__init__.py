"""Model zoo, training engine and run store."""

import xaidash.data as _data  # noqa: F401  (data sets registered before models refer to them)
from xaidash.models import zoo as _zoo  # noqa: F401  (registers every zoo model)
from xaidash.models.bundle import ModelBundle
from xaidash.models.external import loading as _loading  # noqa: F401  (the run store's loader of imported models)
from xaidash.models.language import loading as _language  # noqa: F401  (the run store's answer for language models)
from xaidash.models.registry import ModelError, ModelSpec, build_model, get_spec, list_models, models_for

__all__ = ["ModelBundle", "ModelError", "ModelSpec", "build_model", "get_spec", "list_models", "models_for"]
