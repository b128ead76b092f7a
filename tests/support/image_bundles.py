"""Small untrained image bundles for method tests: each zoo model on the cheapest input shape it fits."""

from __future__ import annotations

import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers data sets, models and methods)
from xaidash.data.registry import DatasetInfo
from xaidash.models import ModelBundle, ModelError, build_model, get_spec, list_models

RGB16 = DatasetInfo("rgb16", "image", ("a", "b", "c"), (3, 16, 16), (0.5, 0.4, 0.3), (0.2, 0.25, 0.3))
GREY28 = DatasetInfo("grey28", "image", tuple("0123456789"), (1, 28, 28), (0.2,), (0.3,))
RGB32 = DatasetInfo("rgb32", "image", ("a", "b"), (3, 32, 32), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
CANDIDATE_INFOS = (RGB16, GREY28, RGB32)  # cheapest first: each model gets the first it fits

IMAGE_MODELS = [s.name for s in list_models() if s.modality == "image"]


def fresh_bundle(name: str, info: DatasetInfo | None = None, seed: int = 0) -> ModelBundle:
    """A seeded, untrained `name` in eval mode on CPU (skips the test when no small shape fits it)."""
    spec = get_spec(name)
    info = info or next((i for i in CANDIDATE_INFOS if not spec.fits(i)), None)
    if info is None:
        pytest.skip(f"{name} fits none of the small test image shapes")
    torch.manual_seed(seed)
    try:
        model = build_model(name, info)
    except ModelError as err:
        pytest.skip(f"{name} cannot be built here: {err}")
    model.eval()
    return ModelBundle(model, spec, info, torch.device("cpu"))
