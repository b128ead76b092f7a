"""Model zoo, training engine and run store."""
import data as _data  # noqa: F401  (data sets registered before models refer to them)
from models import zoo as _zoo  # noqa: F401  (registers every zoo model)
from models.bundle import ModelBundle
from models.registry import ModelError, ModelSpec, build_model, get_spec, list_models, models_for

__all__ = ["ModelBundle", "ModelError", "ModelSpec", "build_model", "get_spec", "list_models", "models_for"]
