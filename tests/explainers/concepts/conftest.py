from __future__ import annotations

from pathlib import Path

import pytest
import torch
from concept_runs import trained_colour_run

from xaidash.data.registry import get_info
from xaidash.models import ModelBundle, build_model, get_spec


@pytest.fixture(scope="session")
def colour_run(tmp_path_factory: pytest.TempPathFactory):
    return trained_colour_run(tmp_path_factory)


@pytest.fixture
def bundle(tmp_path: Path) -> ModelBundle:
    """An untrained resnet_small on shapes_colour: TCAV's mechanics and flags, fast (no training)."""
    info = get_info("shapes_colour")
    torch.manual_seed(0)
    model = build_model("resnet_small", info).eval()
    run = tmp_path / "run"
    run.mkdir()
    return ModelBundle(model, get_spec("resnet_small"), info, torch.device("cpu"), run_dir=run)
